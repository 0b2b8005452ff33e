"""hlo: the compiled program's view, from HloProtos and `compiled.memory_analysis()`.

In: HloProto bytes (from a capture's `/host:metadata` plane or a compile), HLO text.
Out: the offload inventory (copies to/from host memory space S(5), executions per step),
the heap-simulator live-bytes timeline over program order, memory_analysis dicts, and which
module is the step's program.
"""
