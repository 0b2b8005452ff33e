"""`names._spans_of_text` enters only the nodes on the lines that hold `checkpoint_name`
(`_checkpoint_aliases(tree, lines)`): its spans must be those of a whole `ast.walk`, in that
order, on every text. Checked against a plain `ast.walk` written here, on this repository's
modules and a sample of the standard library's with identifiers renamed to `checkpoint_name`
(calls, attribute calls, decorators, f-strings, nested calls), and on snippets of each shape
the walk treats apart (decorators above a def, f-strings, aliases, CRLF and non-ASCII texts)."""

from __future__ import annotations

import ast
import os
import random
import re
from pathlib import Path

import pytest

from overlap.analysis import names as nm


def _reference_spans(text: str):
    """The spans by the rule of the module docstring, over a whole `ast.walk`."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return ()
    aliases = {"checkpoint_name"} | {
        a.asname for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
        for a in n.names if a.name == "checkpoint_name" and a.asname}
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        f = node.func
        fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if fname not in aliases:
            continue
        name = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "name"), None)
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            continue
        a = node.args[0]
        out.append(((a.lineno, a.col_offset, a.end_lineno or a.lineno, a.end_col_offset or 0),
                    name.value))
    return tuple(out)


_SHAPES = [
    # decorators sit above their def's line: a call in one (one line, several, multi-line)
    '@checkpoint_name(x, "d1")\ndef f():\n    pass\n',
    'import functools\n\n@functools.wraps(g)\n@checkpoint_name(\n    x,\n    "d2")\n'
    'async def f():\n    return checkpoint_name(y, "d3")\n',
    'class A:\n    @property\n    @jax.ad_checkpoint.checkpoint_name(z, "d4")\n'
    '    def f(self):\n        pass\n',
    '@(checkpoint_name(x, "d5"))\nclass B:\n    pass\n',
    # f-strings: entered whole
    'x = f"""\n{checkpoint_name(a, "f1")}\n"""\n',
    'x = (f"a"\n  f"{checkpoint_name(a, \'f2\')}")\n',
    'x = f"""a\nb\nc{ {1: checkpoint_name(a, \'f3\')} }"""\n',
    # nested calls and depth: the walk's (breadth-first) order, not the text's
    'y = checkpoint_name(checkpoint_name(checkpoint_name(x, "n1"), "n2"), "n3")\n'
    'z = checkpoint_name(w, "n4")\n',
    'def f():\n    if a:\n        for i in r:\n            y = checkpoint_name(x, "deep")\n'
    'top = checkpoint_name(t, "shallow")\n',
    # an attribute call split over lines; a lambda's default; a comprehension
    'y = (jax.ad_checkpoint.\n     checkpoint_name(x, "a1"))\n',
    'f = lambda v=checkpoint_name(x, "l1"): v\n',
    'ys = [checkpoint_name(v, "c1") for v in checkpoint_name(vs, "c2")]\n',
    # aliases: their calls are on other lines (the whole walk)
    'from jax.ad_checkpoint import checkpoint_name as cn\ny = cn(x, "al1")\n'
    'z = checkpoint_name(w, "al2")\n',
    'from jax.ad_checkpoint import checkpoint_name as checkpoint_name\n'
    'y = checkpoint_name(x, "al3")\n',
    # CRLF and non-ASCII texts: the whole walk
    'y = checkpoint_name(x, "cr1")\r\nz = checkpoint_name(w,\r\n "cr2")\r\n',
    '# \u2192\nfrom jax.ad_checkpoint import checkpoint_name\ny = \uff43heckpoint_name(x, "u1")\n',
    # name by keyword; not a literal name; a call of no argument
    'y = checkpoint_name(x, name="k1")\nz = checkpoint_name(x, n)\nw = checkpoint_name()\n',
]


@pytest.mark.parametrize("text", _SHAPES)
def test_shapes_give_the_whole_walks_spans(text):
    want = _reference_spans(text)
    assert want  # every snippet names something
    assert nm._spans_of_text(text) == want


def test_decorator_lines_count():
    """A call in a decorator is found only with the decorators' lines counted (its def starts
    below it): the pruned walk without that rule misses it."""
    text = _SHAPES[0]
    tree = ast.parse(text)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef) and fn.lineno == 2
    assert nm._holds_line(fn, [1], set())
    _, calls = nm._checkpoint_aliases(tree, nm._lines_of(text, "checkpoint_name"))
    assert len(calls) == 1


_IDENT = re.compile(r"\b(len|isinstance|getattr|str|int|list|dict|append|join|format|wraps|"
                    r"self\.\w+|np\.\w+|f|g|x)\b")


def _renamed(text: str, rate: float, seed: int) -> str:
    """`text` with some identifiers renamed `checkpoint_name` (an attribute's last part too)."""
    r = random.Random(seed)
    return _IDENT.sub(lambda m: (m.group(0) if r.random() >= rate else
                                 m.group(0).rsplit(".", 1)[0] + ".checkpoint_name"
                                 if "." in m.group(0) else "checkpoint_name"), text)


def _texts():
    root = Path(__file__).resolve().parents[2]
    mine = sorted(root.glob("overlap/**/*.py"))
    stdlib = sorted(Path(os.__file__).parent.glob("*.py"))[::6]
    return [*mine, *stdlib]


def _named_calls(tree: ast.AST, calls) -> list[int]:
    """Ids of the calls of `checkpoint_name` among `calls`, in their order."""
    return [id(c) for c in calls if isinstance(c.func, (ast.Name, ast.Attribute))
            and (c.func.id if isinstance(c.func, ast.Name) else c.func.attr) == "checkpoint_name"]


def test_renamed_real_modules_give_the_whole_walks_spans():
    """The spans, and the calls of the name (whatever their arguments) in the walk's order."""
    checked = found = 0
    for i, f in enumerate(_texts()):
        text = f.read_text(encoding="utf-8", errors="replace")
        for rate in (0.05, 0.3):
            t = _renamed(text, rate, i)
            assert nm._spans_of_text(t) == _reference_spans(t), (f, rate)
            if not t.isascii() or "\r" in t:
                continue
            try:
                tree = ast.parse(t)
            except (SyntaxError, ValueError):
                continue
            want = _named_calls(tree, [n for n in ast.walk(tree)
                                       if isinstance(n, ast.Call) and n.args])
            names, calls = nm._checkpoint_aliases(tree, nm._lines_of(t, "checkpoint_name"))
            assert names == {"checkpoint_name"}
            assert _named_calls(tree, calls) == want, (f, rate)
            checked += 1
            found += len(want)
    assert checked > 100 and found > 500
