"""Renderers: the analysis result (and check outcome) as terminal text, JSON, JUnit XML and
GitHub step-summary Markdown.

Every renderer takes the dict from `overlap.analysis.overlap.analyze` (and, for the gate, the dict
from `overlap.report.gate.run_checks`) and computes nothing new: unit conversion from integer
picoseconds happens here and only here. Results from SYNTHETIC traces say so in every format.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, islice, repeat, starmap
from operator import is_, itemgetter
from typing import Any

from overlap.analysis.overlap import DIRECTIONS, format_ps, vendor_names
from overlap.analysis.step_rows import STEP_KEYS, StepRows
from overlap.analysis.units import format_ps_column
from overlap.report import causes_text

SYNTHETIC_BANNER = "SYNTHETIC trace (written by overlap.trace.synthetic, not a real capture)"


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r * 100:.1f}%"


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _bytes_cell(r: dict) -> str:
    """A group's bytes; `+N?` when N of its transfers have no recorded size."""
    k = r.get("unknown_bytes") or 0
    return _bytes(r["bytes"]) + (f" +{k}?" if k else "")


def vendor_line(result: dict[str, Any]) -> str | None:
    """`vendor: AMD` (every vendor of the result's devices), and whether the reader's rules
    covered every device event (`transfer_status`)."""
    names = vendor_names(result.get("vendors") or {})
    ts = result.get("transfer_status") or {}
    if not names and ts.get("status") != "cannot_tell":
        return None
    line = f"vendor: {', '.join(names) or 'unknown'}"
    if ts.get("status") == "cannot_tell":
        unknown = ts.get("unknown") or []
        line += (f"; CANNOT TELL: {len(unknown)} device shape(s) outside the rules: "
                 + "; ".join((f"{u.get('device')}: " if u.get("device") else "")
                             + str(u.get("reason")) for u in unknown[:3])
                 + (f" (+{len(unknown) - 3} more)" if len(unknown) > 3 else ""))
    return line


def _bw(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e9:.1f} GB/s"


def _table(headers: list[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """Aligned columns; `align` has one `<` or `>` per column. One format string for every
    line (a step table has thousands: a generator per line took half of `report`'s text)."""
    cols = list(zip(*rows)) if rows else [()] * len(headers)
    widths = [max([len(h), *map(len, c)]) for h, c in zip(headers, cols)]
    fmt = "  ".join(f"{{:{a}{w}}}" for a, w in zip(align, widths))
    return [fmt.format(*headers).rstrip()] + list(map(str.rstrip, starmap(fmt.format, rows)))


def _group_rows(rows: list[dict], label) -> list[list[str]]:
    return [[label(r), str(r["count"]), _bytes_cell(r), format_ps(r["span_ps"]),
             format_ps(r["exposed_ps"]), _ratio(r["overlap_ratio"]),
             f"{r['hidden']}/{r['partial']}/{r['exposed']}", _bw(r["bandwidth_Bps"])]
            for r in rows]


GROUP_HEADERS = ["", "n", "bytes", "in flight", "exposed", "hidden", "H/P/E", "bandwidth"]


def _truncation(table: dict, what: str) -> list[str]:
    if table["truncated"]:
        return [f"  ({table['returned_records']} of {table['total_records']} {what}; "
                "--top N for more)"]
    return []


def text(result: dict[str, Any], outcome: dict[str, Any] | None = None) -> str:
    """Terminal report: verdict first, then compact aligned tables."""
    out: list[str] = []
    if result["synthetic"]:
        out.append(SYNTHETIC_BANNER)
    out.append(outcome["verdict"] if outcome else result["verdict"])
    if outcome:
        for c in outcome["checks"]:
            out.append(f"  {c['status'].upper():<4}  {c['name']}: {c['message']}")
    vl = vendor_line(result)
    if vl:
        out.append(vl)
    if result["status"] != "OK":
        return "\n".join(out)
    s = result["summary"]
    th = result["thresholds"]
    out.append("")
    out.append(f"{s['transfers']} transfers, {_bytes_cell(s)}, {format_ps(s['span_ps'])} in "
               f"flight, {format_ps(s['exposed_ps'])} exposed ({_ratio(s['overlap_ratio'])} "
               f"hidden); classes H/P/E = {s['hidden']}/{s['partial']}/{s['exposed']} "
               f"(hidden >= {th['hidden']:g}, exposed <= {th['exposed']:g})")
    out.append("")
    rows = [dict(result["by_direction"][d], label=d) for d in DIRECTIONS
            if result["by_direction"][d]["count"]]
    out += _table(["direction"] + GROUP_HEADERS[1:], _group_rows(rows, lambda r: r["label"]),
                  "<>>>>>>>")
    why = causes_text.lines(result)  # why the exposed time is exposed
    if why:
        out += [""] + why
    if len(result["by_device"]) > 1:
        out.append("")
        multi = len({r["host"] for r in result["by_device"]}) > 1
        out += _table(["device"] + GROUP_HEADERS[1:], _group_rows(
            result["by_device"],
            lambda r: f"{r['host']}/{r['device']}" if multi else r["device"]), "<>>>>>>>")
    steps = result["steps"]
    if steps:
        out.append("")

        def column(key: str) -> Iterator:
            return map(itemgetter(key), steps)  # a column of the step rows, read in C

        label: Iterable[str] = map(str, column("step"))
        if len(set(column("host"))) > 1:
            label = [f"{h}/" + s for h, s in zip(column("host"), label)]
        step_rows = list(zip(label, format_ps_column(list(column("duration_ps"))),
                             map(str, column("transfers")),
                             format_ps_column(list(column("exposed_wall_ps"))),
                             map(_ratio, column("exposed_frac")),
                             map(_ratio, column("overlap_ratio"))))
        out += _table(["step", "duration", "transfers", "exposed wall", "of step", "hidden"],
                      step_rows, "<>>>>>")
    sv = result.get("stragglers")
    if sv:
        out.append("")
        out.append(f"hosts: {sv['verdict']}")
        # per step only where the hosts have step annotations (hosts.straggler_view's per_step)
        per_step = all(r.get("per_step", True) for r in sv["hosts"])
        col = "exposed/step" if per_step else "exposed (capture)"
        out += _table(["host", col, "x median", "step", "D2H hidden", "H2D hidden"], [
            [r["host"], format_ps(r["exposed_per_step_ps"]),
             "-" if r["gap_to_median"] is None else f"{r['gap_to_median']:.2f}",
             format_ps(r["step_ps"]), _ratio(r["overlap_d2h"]), _ratio(r["overlap_h2d"])]
            for r in sorted(sv["hosts"], key=lambda r: -(r["exposed_per_step_ps"] or 0))[:16]],
            "<>>>>>")
        if len(sv["hosts"]) > 16:
            out.append(f"({len(sv['hosts']) - 16} more hosts in --json)")
    ops = result["by_hlo_op"]
    if ops["records"]:
        out.append("")
        out += _table(["hlo op", "dir"] + GROUP_HEADERS[1:], [
            [r["hlo_op"], r["direction"]] + row[1:]
            for r, row in zip(ops["records"], _group_rows(ops["records"], lambda r: ""))],
            "<<>>>>>>>")
        out += _truncation(ops, "HLO ops")
    top = result["top_exposed"]
    if top["records"] and top["records"][0]["exposed_ps"] > 0:
        out.append("")
        out.append("most exposed transfers:")
        out += _table(["hlo op", "dir", "device", "start", "in flight", "exposed", "hidden"], [
            [r["hlo_op"], r["direction"], r["device"], format_ps(r["start_ps"]),
             format_ps(r["span_ps"]), format_ps(r["exposed_ps"]), _ratio(r["ratio"])]
            for r in top["records"]], "<<<>>>>")
        out += _truncation(top, "transfers")
    if result["notes"]:
        out.append("")
        out += [f"note: {n}" for n in result["notes"]]
    return "\n".join(out)


def write_json(fp, result: dict[str, Any], outcome: dict[str, Any] | None = None) -> None:
    """The result (or `{check, analysis}`) as JSON, streamed to the text file `fp`.

    Layout: objects are indented for the first levels, and every element of a list (a step, a
    device, an op) is one compact line. Why not `json.dumps(indent=2)`: it runs the pure-Python
    encoder and joins every small chunk of the text in one list; on a pod's result (470k step
    rows) that list, not the analysis, took the parent to 2.4 GB. The C encoder is also ~3x
    faster (0.024 s vs 0.068 s on the many-ops benchmark's result).
    """
    payload = result if outcome is None else {"check": outcome, "analysis": result}
    _emit(fp, payload, "", 0)
    fp.write("\n")


def _refuse(o: Any) -> Any:
    """`json.JSONEncoder.default`: no JSON form for `o` (the same TypeError)."""
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def _c_encoder() -> tuple[Callable[[Any], str], Callable[[str], str]]:
    """`json.JSONEncoder(allow_nan=False).encode`, the same text, with one C encoder made once:
    `encode` makes a new one per call, ~3 us that were a third of encoding a 36k-row list
    (each row its own call); and how it writes a str (`encode_basestring_ascii`). Both from
    the C accelerator `_json`, which the `json` package itself uses, without importing the
    package (its decoder and scanner: ~1.5 ms of every report's start-up, and the report
    reads no JSON). Where the accelerator is missing, `json`'s own `encode`."""
    try:
        from _json import encode_basestring_ascii as ascii_
        from _json import make_encoder as make
    except ImportError:
        import json

        return json.JSONEncoder(allow_nan=False).encode, json.encoder.encode_basestring_ascii
    markers: dict = {}  # the circular-reference check, as `encode` has it
    # (default, str writer, indent, separators, sort_keys, skipkeys, allow_nan), as
    # `JSONEncoder(allow_nan=False)` hands them to the C encoder
    c = make(markers, _refuse, ascii_, None, ": ", ", ", False, False, False)

    def encode(o: Any) -> str:
        if isinstance(o, str):
            return ascii_(o)
        try:
            return "".join(c(o, 0))
        except BaseException:
            markers.clear()  # a refused value (NaN) leaves its containers marked
            raise
    return encode, ascii_


_ENCODE, _ASCII = _c_encoder()  # the C encoder (compact, no indent), and how it writes a str


def _emit(fp, v: Any, indent: str, depth: int) -> None:
    inner = indent + "  "
    if isinstance(v, dict) and v and depth == 2:
        # Its values are written compact (depth 3): a batch of entries as one piece, not
        # three writes and a call per entry (a capture of 100k devices: its vendors
        # {host: {device: vendor}}, 300k writes, ~0.5 s)
        fp.write("{\n")
        items = list(v.items())
        for lo in range(0, len(items), _BATCH):
            part = [f"{inner}{_ENCODE(str(k))}: {_ENCODE(x)}" for k, x in items[lo:lo + _BATCH]]
            fp.write(",\n".join(part) + (",\n" if lo + _BATCH < len(items) else "\n"))
        fp.write(indent + "}")
    elif isinstance(v, dict) and v and depth < 3:
        fp.write("{\n")
        for i, (k, x) in enumerate(v.items()):
            fp.write(f"{inner}{_ENCODE(str(k))}: ")
            _emit(fp, x, inner, depth + 1)
            fp.write(",\n" if i < len(v) - 1 else "\n")
        fp.write(indent + "}")
    elif isinstance(v, (list, tuple)) and v and depth < 3:
        fp.write("[\n")
        last = len(v) - 1
        steps = _step_rows_text(v, inner) if isinstance(v, StepRows) else None
        if steps is not None:  # step rows written from their columns
            for i, text in enumerate(steps):
                fp.write(",\n" + text if i else text)
            fp.write("\n" + indent + "]")
            return
        for lo in range(0, len(v), _BATCH):
            batch = v[lo:lo + _BATCH]
            cols = _rows_columns(batch) if len(batch) >= 16 else None
            if cols is not None:  # the batch's rows as one piece (`_batches`)
                fp.write(next(_batches(cols[0], cols[1], len(batch), inner))
                         + (",\n" if lo + len(batch) - 1 < last else "\n"))
                continue
            for i, x in enumerate(batch, lo):
                fp.write(inner + _ENCODE(x) + (",\n" if i < last else "\n"))
        fp.write(indent + "]")
    else:
        fp.write(_ENCODE(v))


_BATCH = 512  # list elements encoded at a time (their text is held until written: 4096
# rows of ~400 bytes raised the compact GPU file's peak by ~1 MiB)
_NONE = type(None)


def _rows_text(rows: Sequence[Any]) -> list[str] | None:
    """Each element of `rows` as `_ENCODE` writes it, where all are dicts with the same str
    keys in the same order (step rows, op and device records); else None.

    Why: the C encoder looks up and converts every key and value of every row (~10 ms of the
    many-ops result's 3,000 step rows). Here the keys are encoded once into constant text,
    each column's values are converted a column at a time (`_texts`), a column of one text
    in every row written into the constant text (a host, a name, often copy counts and
    bytes), and each row joined from those pieces (`_joined`). A value `_ENCODE` refuses
    (NaN, an object JSON has no form for) sends the rows back (None): the caller encodes them
    one by one, as before, and raises where it did."""
    cols = _rows_columns(rows)
    return None if cols is None else list(_joined(*cols, len(rows)))


def _rows_columns(rows: Sequence[Any]) -> tuple[tuple[str, ...], list] | None:
    """`_rows_text`'s test and columns: the rows' keys and each key's texts (`_texts`), where
    all rows are dicts with the same str keys in the same order and `_ENCODE` refuses no
    value; else None."""
    head = rows[0]
    if type(head) is not dict or not head:
        return None
    keys = tuple(head)
    if set(map(type, keys)) != {str} or _kinds(rows) != {dict} or not all(
            map(keys.__eq__, map(tuple, rows))):
        return None
    try:
        return keys, [_texts(col) for col in zip(*map(dict.values, rows))]
    except (TypeError, ValueError):  # refused by the encoder: the caller's path says so
        return None


def _step_rows_text(rows: StepRows, inner: str) -> Iterator[str] | None:
    """The step rows of `rows` as `_emit` writes a list's elements (each row as `_ENCODE`
    writes it, after `inner`, the rows apart by `,\\n`), in pieces of up to `_BATCH` rows,
    made from the columns `step_rows` made the rows from (`StepRows.intact_blocks`: a
    column of one value is one constant text, the others a pass over their Python values),
    not from the dicts (3,000 many-ops step rows: ~4.2 -> ~1.5 ms). None where the list no
    longer holds its blocks' dicts, or a value is one `_ENCODE` refuses: the caller writes
    the dicts, as any list. Every refusal is found before the first piece is made."""
    blocks = rows.intact_blocks()
    if blocks is None:
        return None
    try:
        made = [(b.n, [_ENCODE(b.one[k]) if k in b.one else _texts(b.vary[k])
                       for k in STEP_KEYS]) for b in blocks]
    except (TypeError, ValueError):
        return None
    return chain.from_iterable(_batches(STEP_KEYS, texts, n, inner) for n, texts in made)


def _batches(keys: Sequence[str], texts: Sequence[str | Iterable[str]], n: int,
             inner: str) -> Iterator[str]:
    """`_joined`'s `n` rows in pieces of up to `_BATCH` rows, each `inner` + its rows
    joined by `,\\n` + `inner`: one `str.join` a piece over one list that holds the values'
    texts and the constant pieces between them (the last constant of a row, the separator
    and the first of the next one piece), each column's texts put in its places by one
    slice assignment (a zip of the columns and the constants per row took 4x as long: 1.2
    of many-ops' 3,000 step rows, 0.24 ms now), not one join per row and one of the rows."""
    pieces, values = _pieces(keys, texts)
    sep = ",\n" + inner
    if not values:
        for lo in range(0, n, _BATCH):
            yield inner + sep.join(repeat(pieces[0], min(_BATCH, n - lo)))
        return
    k = len(values)
    between = pieces[1:-1] + [pieces[-1] + sep + pieces[0]]
    buf: list[str] = []
    for lo in range(0, n, _BATCH):
        m = min(_BATCH, n - lo)
        if len(buf) != 2 * k * m + 1:
            # [head, value, constant, value, constant, ...]: row r's column j at 1 + 2(rk + j)
            buf = [inner + pieces[0]] * (2 * k * m + 1)
            buf[2::2] = between * m
        for j, v in enumerate(values):
            buf[1 + 2 * j::2 * k] = islice(v, m)  # (islice: no column read past row m)
        buf[-1] = pieces[-1]  # the last row's end, no separator after it
        yield "".join(buf)


def _joined(keys: Sequence[str], texts: Sequence[str | Iterable[str]], n: int
            ) -> Iterable[str]:
    """`n` dicts' texts, from their `keys` (str, in order) and each key's texts (`_texts`:
    one str for every row, or each row's): each row one `str.join` of the constant pieces
    and its values' texts (a `%`-template parsed its ~400 characters again per row: 0.6 of
    1.8 us a step row)."""
    pieces, values = _pieces(keys, texts)
    if not values:
        return repeat(pieces[0], n)
    # per row: piece, value, piece, value, ..., piece (the constants repeated, not copied)
    return map("".join, zip(*chain.from_iterable(zip(map(repeat, pieces), values)),
                            repeat(pieces[-1])))


def _pieces(keys: Sequence[str], texts: Sequence[str | Iterable[str]]
            ) -> tuple[list[str], list[Iterator[str]]]:
    """A dict layout's constant text, the keys and the values of one text joined once:
    one piece more than there are columns of varying text, and those columns' texts (as
    iterators: read once, in order)."""
    pieces: list[str] = ["{"]  # constant text; each varying column closes one piece
    values: list[Iterator[str]] = []
    for i, (key, t) in enumerate(zip(keys, texts)):
        pieces[-1] += (", " if i else "") + _ASCII(key) + ": "
        if isinstance(t, str):
            pieces[-1] += t
        else:
            values.append(iter(t))
            pieces.append("")
    pieces[-1] += "}"
    return pieces, values


# how `_ENCODE` writes a value of each plain type (str: `_ASCII`, set below)
# (`repr`, a builtin called without an argument tuple, is `int.__repr__`/`float.__repr__`
# for the exact types it is used on; the slot wrappers built a tuple per value: ~1/8 of the
# step rows' text)
_CONVERT: dict[type, Callable[[Any], str]] = {int: repr, float: repr}


def _texts(col: Sequence[Any]) -> str | Iterable[str]:
    """The texts `_ENCODE` writes for the values of `col` (not empty): one str where every
    value has one text, else an iterable of each value's text. Raises what `_ENCODE` raises
    on a value it refuses (TypeError, ValueError).

    A column of one plain type (exact int, str, finite float), or of one and None, is
    converted in one pass: ints by `int.__repr__` (what `_ENCODE` writes), finite floats by
    `float.__repr__` (both as `repr`, for these exact types), strs by the same
    `encode_basestring_ascii`; None and empty dicts are constants; dicts by `_dicts_text`;
    any other column each value by `_ENCODE` itself. A
    plain column whose values are not all equal has its texts made row by row as the rows
    are joined (no list of them: fewer fresh pages, the same time)."""
    n = len(col)
    kinds = _kinds(col)
    if kinds == {_NONE}:
        return "null"
    if kinds == {dict} and not any(col):
        return "{}"
    one = kinds <= _PLAIN and col.count(col[0]) == n
    kind = next(iter(kinds)) if len(kinds) == 1 else None
    convert = _CONVERT.get(kind) if kind is not None else None
    if kind is float and not all(map(math.isfinite, col)):
        convert = None  # (_ENCODE refuses NaN and infinities: below, as it does)
    text: list[str]
    if convert is not None:
        # one value: one text (a zero only where every row holds the one object: -0.0 ==
        # 0.0 but prints apart; a step's exposed_frac of 0.0 in all)
        if one and (kind is not float or col[0] or all(map(is_, col, repeat(col[0])))):
            return convert(col[0])
        if not one:
            return map(convert, col)
        text = list(map(convert, col))
    elif kinds == {dict}:  # (a step's exposure causes) each layout as rows of its own
        text = _dicts_text(col) or list(map(_ENCODE, col))
    elif len(kinds) == 2 and _NONE in kinds and (kinds - {_NONE}) <= _CONVERT.keys() and \
            (float not in kinds or all(math.isfinite(x) for x in col if x is not None)):
        # a ratio, fraction or device where some rows have none: None as "null"
        (convert,) = (_CONVERT[k] for k in kinds if k is not _NONE)
        text = ["null" if x is None else convert(x) for x in col]
    else:
        text = list(map(_ENCODE, col))
    return text[0] if text.count(text[0]) == n else text


def _kinds(col: Sequence[Any]) -> set[type]:
    """The types of `col`'s values (not empty): where all are the first's, counted by
    identity in a list of them (`set(map(type, col))` hashes each: 206 -> 124 us a column
    of 512 step rows)."""
    types = list(map(type, col))
    return {types[0]} if types.count(types[0]) == len(types) else set(types)


def _dicts_text(col: Sequence[dict]) -> list[str] | None:
    """Each dict of `col` as `_ENCODE` writes it: the dicts of one key layout (keys and
    their order) written together by `_rows_text`, a few layouts in all (a step's
    `exposure_causes`: the causes with time, at most 2**5 layouts), instead of the C encoder
    per dict (~1 us each, a third of the step rows' JSON). None where `_rows_text` sends a
    layout back (the caller then encodes every dict itself, as before).

    A piece of `_DICTS` dicts at a time: the layouts and value tuples made per dict are held
    for one piece, not the column (20k step rows: ~3 MiB of tuples, the JSON's peak)."""
    out: list[str] = []
    for lo in range(0, len(col), _DICTS):
        text = _piece_text(col[lo:lo + _DICTS])
        if text is None:
            return None
        out += text
    return out


_DICTS = 2048  # dicts `_dicts_text` reads at a time


def _piece_text(col: Sequence[dict]) -> list[str] | None:
    """`_dicts_text` of a piece of its dicts."""
    layouts = list(map(tuple, col))
    n = len(col)
    if layouts.count(layouts[0]) == n:
        return _layout_text(col, layouts[0]) if layouts[0] else ["{}"] * n
    at: dict[tuple, list[int]] = {}
    for i, k in enumerate(layouts):
        at.setdefault(k, []).append(i)
    out: list[Any] = [None] * n
    for k, idx in at.items():
        text = _layout_text([col[i] for i in idx], k) if k else ["{}"] * len(idx)
        if text is None:
            return None
        for i, t in zip(idx, text):
            out[i] = t
    return out


_CONVERT[str] = _ASCII
_SAME_TEXT = frozenset((int, str, _NONE))  # types whose equal values `_ENCODE` writes alike
_PLAIN = frozenset((int, str, float))  # the types `_rows_text` writes a column of by itself


def _layout_text(col: Sequence[dict], keys: tuple) -> list[str] | None:
    """`_rows_text` of dicts of one key layout `keys`; where they hold few distinct value
    rows (a step's `exposure_causes`: a handful in thousands), each distinct row encoded
    once and its text handed to every equal row. Equal rows have equal text only where every
    value is an int, str or None (exact types: 1 == 1.0 == True, 0.0 == -0.0) and every key a
    str: anywhere else, `_rows_text` of every row. (6.5k steps of the TPU 1M file: 4.2 ->
    ~2 ms.)"""
    vals = list(map(tuple, map(dict.values, col)))
    if set(map(type, keys)) != {str} or \
            not set(map(type, chain.from_iterable(vals))) <= _SAME_TEXT:
        return _rows_text(col)
    uniq = dict.fromkeys(vals)  # (hashable: the types checked first)
    if len(uniq) * 4 > len(vals):
        return _rows_text(col)
    text = dict(zip(uniq, (_ENCODE(dict(zip(keys, u))) for u in uniq)))
    return list(map(text.__getitem__, vals))


def junit(result: dict[str, Any], outcome: dict[str, Any]) -> str:
    """JUnit XML: one testcase per check, so CI systems list each gate separately."""
    import xml.etree.ElementTree as ET  # here: every report imports this module (~8 ms)

    checks = outcome["checks"]
    suite = ET.Element("testsuite", {
        "name": "overlap check", "tests": str(len(checks)),
        "failures": str(sum(c["status"] == "fail" for c in checks)),
        "skipped": str(sum(c["status"] == "skip" for c in checks)), "errors": "0"})
    props = ET.SubElement(suite, "properties")
    for k, v in (("verdict", outcome["verdict"]), ("synthetic", str(result["synthetic"])),
                 ("sources", ", ".join(result["sources"]))):
        ET.SubElement(props, "property", {"name": k, "value": v})
    for d in ("D2H", "H2D"):  # why the exposed time is exposed (overlap.analysis.causes)
        why = causes_text.summary(result, d)
        if why:
            ET.SubElement(props, "property", {"name": f"exposure_causes.{d}", "value": why})
    for c in checks:
        case = ET.SubElement(suite, "testcase",
                             {"classname": "overlap.report.gate", "name": c["name"]})
        if c["status"] == "fail":
            ET.SubElement(case, "failure", {"message": c["message"]}).text = outcome["verdict"]
        elif c["status"] == "skip":
            ET.SubElement(case, "skipped", {"message": c["message"]})
        else:
            ET.SubElement(case, "system-out").text = c["message"]
    why_lines = causes_text.lines(result) if "by_direction" in result else []
    if why_lines:
        ET.SubElement(suite, "system-out").text = "\n".join(why_lines)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, "unicode") + "\n"


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def markdown(result: dict[str, Any], outcome: dict[str, Any] | None = None) -> str:
    """GitHub step-summary Markdown (`$GITHUB_STEP_SUMMARY`)."""
    out = ["### overlap: host-offload transfer overlap", ""]
    if result["synthetic"]:
        out += [f"> **{SYNTHETIC_BANNER}**", ""]
    if outcome:
        mark = ":white_check_mark:" if outcome["passed"] else ":x:"
        out += [f"{mark} **{_md_escape(outcome['verdict'])}**", "",
                "| check | result | detail |", "|---|---|---|"]
        out += [f"| `{c['name']}` | {c['status'].upper()} | {_md_escape(c['message'])} |"
                for c in outcome["checks"]]
    else:
        out.append(f"**{_md_escape(result['verdict'])}**")
    vl = vendor_line(result)
    if vl:
        out += ["", _md_escape(vl)]
    if result["status"] == "OK":
        out += ["", "| direction | transfers | bytes | in flight | exposed | hidden |",
                "|---|---:|---:|---:|---:|---:|"]
        for d in DIRECTIONS:
            b = result["by_direction"][d]
            if b["count"]:
                out.append(f"| {d} | {b['count']} | {_bytes_cell(b)} | "
                           f"{format_ps(b['span_ps'])} | {format_ps(b['exposed_ps'])} | "
                           f"{_ratio(b['overlap_ratio'])} |")
        ss = result["step_summary"]
        if ss["count"]:
            out += ["", f"Steps: {ss['count']}, exposed per step mean "
                    f"{format_ps(ss['mean_exposed_wall_ps'])}, worst "
                    f"{format_ps(ss['max_exposed_wall_ps'])} ({_ratio(ss['max_exposed_frac'])} "
                    "of its step)."]
        out += causes_text.markdown_lines(result, _md_escape)  # why it is exposed
    if result["notes"]:
        out += [""] + [f"- {_md_escape(n)}" for n in result["notes"]]
    return "\n".join(out) + "\n"
