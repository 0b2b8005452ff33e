"""capture: run training steps under jax.profiler and write a run directory.

In: a step function and its state/batch (`profile_steps`), a loop you own (`capture`), or a
running process (`attach`); workloads and remat/offload policies (`workloads`, `policies`,
`sweep`). Out: a run directory (`overlap.runs`) with the capture and `run.json`.
"""

from overlap.capture.api import Capture, attach, capture, prepare_xla_flags, profile_steps

__all__ = ["Capture", "attach", "capture", "prepare_xla_flags", "profile_steps"]
