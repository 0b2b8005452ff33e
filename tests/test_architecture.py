"""The package's shape: imports point one way, down the pipeline, and never in a circle.

    cli -> (capture | plan | report | dashboard) -> analysis -> (runs | hlo) -> trace -> errors

Each package has a rank; a module may import its own package or one of lower rank. Two named
exceptions: `plan` sits above `capture` (it compiles the same workloads and policies), and the
`cli` may start the dashboard (`overlap.dashboard`, the Dash app), which nothing else in
`overlap/` may import. The walk reads every `import` statement with `ast`, including those
inside functions (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Lower rank = closer to the data. Modules directly under overlap/ are listed by stem.
RANK = {
    "errors": 0, "env": 0, "arrays": 0, "__init__": 99, "__main__": 99,
    "trace": 1,
    "hlo": 2, "runs": 2,
    "cache": 2,  # overlap/cache.py: the on-disk cache (reads side files through trace.paths)
    "analysis": 3,
    "report": 4, "capture": 4,
    "plan": 5,
    "dashboard": 6,
    "cli": 7,
}


def _unit(module: str) -> str | None:
    """`overlap.trace.reader` -> `trace`; `overlap.dashboard.app` -> `dashboard`; others -> None."""
    parts = module.split(".")
    if parts[0] != "overlap":
        return None
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = _module_name(path)
    pkg = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            # `from overlap import capture` names a subpackage, not an attribute
            if mod == "overlap":
                out += [(node.lineno, f"overlap.{a.name}") for a in node.names if a.name in RANK]
    return out


def violations() -> list[str]:
    bad = []
    files = sorted((REPO / "overlap").rglob("*.py"))
    for f in files:
        src_unit = _unit(_module_name(f))
        if src_unit in ("__init__", "__main__"):
            continue  # the package root re-exports the public API lazily
        for line, mod in _imports(f):
            dst_unit = _unit(mod)
            if dst_unit is None or dst_unit == src_unit or dst_unit in ("__init__",):
                continue
            if dst_unit not in RANK or src_unit not in RANK:
                bad.append(f"{f.relative_to(REPO)}:{line}: unranked package in {mod}")
                continue
            if dst_unit == "dashboard" and src_unit != "cli":
                bad.append(f"{f.relative_to(REPO)}:{line}: imports the dashboard ({mod})")
            elif RANK[dst_unit] >= RANK[src_unit]:
                bad.append(f"{f.relative_to(REPO)}:{line}: {src_unit} imports {mod} "
                           f"(rank {RANK[src_unit]} -> {RANK[dst_unit]}: upward or sideways)")
    return bad


def test_imports_point_down_the_pipeline():
    assert violations() == []


def test_every_package_is_ranked_and_documented():
    for d in sorted((REPO / "overlap").iterdir()):
        if d.is_dir() and (d / "__init__.py").exists():
            assert d.name in RANK, f"new package overlap/{d.name}: give it a rank here"
            doc = ast.get_docstring(ast.parse((d / "__init__.py").read_text()))
            assert doc and len(doc) > 40, f"overlap/{d.name}/__init__.py needs a docstring"


def test_the_check_catches_an_upward_import(tmp_path, monkeypatch):
    """The walker itself must fail on a violation (a test that cannot fail proves nothing)."""
    fake = tmp_path / "overlap" / "trace"
    fake.mkdir(parents=True)
    (tmp_path / "overlap" / "__init__.py").write_text("")
    (fake / "__init__.py").write_text('"""x"""')
    (fake / "bad.py").write_text("def f():\n    from overlap.report import text\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["REPO"]), "REPO", tmp_path)
    found = violations()
    assert len(found) == 1 and "trace imports overlap.report" in found[0]


def test_wire_decoder_knows_no_xspace_semantics():
    """wire.py decodes bytes; the names that carry meaning live in reader.py only."""
    src = (REPO / "overlap" / "trace" / "wire.py").read_text()
    for word in ("MemcpyD2H", "memcpy_details", "XLA Ops", "/device:", "S(5)", "kernel_details"):
        assert word not in src, word


MAX_LINES = 1000


def _module_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the overlap modules it imports (lazily or not; packages' `__init__` excluded:
    they re-export)."""
    mods = {_module_name(f): f for f in sorted((root / "overlap").rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        for _, dst in _imports(f):
            d = dst
            while d and d not in mods:  # `from overlap.x.y import name`: the module x.y
                d = d.rpartition(".")[0]
            if d and d != m and mods[d].name != "__init__.py":
                graph[m].add(d)
    return graph


def import_cycles() -> list[list[str]]:
    """Groups of modules that import each other, directly or around a loop (Tarjan)."""
    graph = _module_graph(REPO)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_two_modules_import_each_other():
    """A lazy import is still a dependency: two modules that need each other are one module
    split in the wrong place (the host map sits above the reader, the straggler view below
    the result it reads)."""
    assert import_cycles() == []


def test_the_cycle_check_catches_a_lazy_cycle(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__, fromlist=["REPO"]), "REPO", tmp_path)
    pkg = tmp_path / "overlap" / "trace"
    pkg.mkdir(parents=True)
    (tmp_path / "overlap" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text('"""x"""')
    (pkg / "a.py").write_text("from overlap.trace.b import g\n")
    (pkg / "b.py").write_text("def g():\n    from overlap.trace.a import f\n")
    assert import_cycles() == [["overlap.trace.a", "overlap.trace.b"]]


def test_no_module_over_a_thousand_lines():
    long = {str(f.relative_to(REPO)): n for f in sorted((REPO / "overlap").rglob("*.py"))
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
