"""Human units for the numbers views print (one formatter per quantity, used everywhere)."""

from __future__ import annotations


def format_bytes(n: float | int | None) -> str:
    """Binary units scaled to the value: 512 B, 1.5 KiB, 26.7 MiB, 3.20 GiB; '-' for None."""
    if n is None:
        return "-"
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{sign}{v:.2f} {unit}" if v < 10 else f"{sign}{v:.1f} {unit}"
    return f"{sign}{int(n)} B"


def format_ps(ps: float | int | None) -> str:
    """Picoseconds as s/ms/us/ns: the analysis' own formatter (one definition)."""
    from overlap.analysis.overlap import format_ps as _fmt

    return _fmt(ps)


def format_rate(bps: float | None) -> str:
    """Bytes per second as GB/s (decimal, as link bandwidths are quoted); '-' for None."""
    if bps is None:
        return "-"
    v = bps / 1e9
    return f"{v:.0f} GB/s" if v >= 100 else f"{v:.3g} GB/s"


def byte_unit(largest: float | int | None) -> tuple[str, int]:
    """(unit, scale) for an axis or column whose largest value is `largest` bytes."""
    v = abs(float(largest or 0))
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= scale:
            return unit, scale
    return "B", 1
