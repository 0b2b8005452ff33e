"""plan: compile a step for a target (H100, TPU) without the hardware.

In: a step function or a named workload, a target, policies. Out: plan run directories with
the compiled HLO, memory analysis and offload inventory, labelled "compiled, not run".
"""
