"""plan: compile a step for a target (H100, TPU) without the hardware.

In: a step function or a named workload, a target, policies. Out: plan run directories with
the compiled HLO, memory analysis and offload inventory, labelled "compiled, not run".

`overlap.plan.plan_step(...)` compiles a user's step under given policies;
`overlap.plan.advise(...)` compiles it under every policy that applies and ranks them
(`overlap.plan.advisor`). Both import jax only when called.
"""

from __future__ import annotations

from typing import Any


def plan_step(*args: Any, **kwargs: Any) -> Any:
    """See `overlap.plan.compile.plan_step`."""
    from overlap.plan.compile import plan_step as _plan_step

    return _plan_step(*args, **kwargs)


def advise(*args: Any, **kwargs: Any) -> Any:
    """See `overlap.plan.advisor.advise`."""
    from overlap.plan.advisor import advise as _advise

    return _advise(*args, **kwargs)
