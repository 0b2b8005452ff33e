"""Checks of the estimate's options shared by `plan`, `advise` and `report --predict`/`--plan`.

One rule per option, so the three commands accept the same values and say the same thing.
"""

from __future__ import annotations

import math

from overlap.errors import UsageError


def check_host_bandwidth(flag: str, gbps: float | None) -> None:
    """A real host link moves 0.01-100000 GB/s; 1e-300 would make every copy time infinite."""
    if gbps is not None and not (1e-2 <= gbps <= 1e5):
        raise UsageError(f"{flag} must be a number of GB/s between 0.01 and 100000, got {gbps:g}")


def check_kernel_floor(us: float | None) -> None:
    """A per-kernel floor is a few microseconds; a negative or huge one is a typo."""
    if us is not None and not (math.isfinite(us) and 0 <= us <= 1e6):
        raise UsageError("--kernel-floor-us must be between 0 and 1000000 microseconds, "
                         f"got {us:g}")
