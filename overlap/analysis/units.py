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
