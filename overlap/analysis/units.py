"""Picoseconds for people: the one formatting of a time that every renderer and view uses."""

from __future__ import annotations


def format_ps(ps: int | float | None) -> str:
    """Human time for a picosecond count: `3.1 ms`, `420 us`, `85 ns`."""
    if ps is None:
        return "-"
    ps = float(ps)
    for unit, scale in (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)):
        if abs(ps) >= scale:
            v = ps / scale
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{ps:.0f} ps"


_UNITS = ((" s", 1e12), (" ms", 1e9), (" us", 1e6), (" ns", 1e3), (" ps", 1.0))


def format_ps_column(values: list) -> list[str]:
    """`format_ps` of every value of a column, the same texts (a text report's step table
    has thousands of rows): each value's unit and format are chosen with numpy, on the same
    float64 values and divisions, and only `format` runs per value."""
    import numpy as np

    missing = [i for i, v in enumerate(values) if v is None] if None in values else []
    x = np.array([0 if v is None else v for v in values] if missing else values, np.float64)
    big = np.abs(x)
    last = len(_UNITS) - 1
    unit = np.full(len(x), last)
    for k in range(last - 1, -1, -1):  # the largest unit the value reaches wins
        unit[big >= _UNITS[k][1]] = k
    v = x / np.array([s for _, s in _UNITS])[unit]  # picoseconds: / 1.0, the value itself
    spec = np.where((v < 100) & (unit < last), ".3g", ".0f")
    out = list(map(str.__add__, map(format, v.tolist(), spec.tolist()),
                   np.array([u for u, _ in _UNITS])[unit].tolist()))
    for i in missing:
        out[i] = "-"
    return out
