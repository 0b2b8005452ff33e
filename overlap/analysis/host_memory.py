"""Host compute and pinned host memory of a step's compiled program (issue 33, items 3 and 4).

**Host compute** (`host_compute_ops`): instructions of the compiled HLO that run on the host.
XLA converts device ops on host-memory buffers into host compute ("Found an instruction ...
which does device compute in host memory space. Converting into host compute"), which is slow
and found late. An instruction is listed when

* it starts a host call: XLA:GPU's optimized HLO runs host computations through
  ``custom-call-start(...), async_execution_thread="host", custom_call_target="HostExecute"``
  (seen in a deviceless H100 compile of ``compute_on("device_host")``, jax 0.10.2); one entry per
  call, naming the computation it runs; or
* it carries the frontend attribute `_xla_compute_type="host"` (what `compute_on("device_host")`
  and XLA's conversion put on host computations before optimization), or
* its result or an inline operand shape lies in host memory space S(5) and its opcode is not one
  that only moves or plumbs data (parameters, tuples, copies, (async) dynamic-(update-)slices,
  fusion-start/done, custom-calls that allocate or annotate, loops, calls): device compute in
  host memory space, which XLA then converts.

Blind spot: host ops a runtime runs outside the compiled program are not in its HLO.

**A captured program is screened first** (`lists_no_host_compute`): a capture's program comes as
an HloProto, and listing its host compute means printing it with XLA's printer (in a child
process: `overlap.hlo.proto_print`) and parsing the text, 0.05-0.2 s of a report on the real
H100 captures, jaxlib's import included. The printed text holds only what the proto holds, so
where the proto has no instruction that any rule above could list, the count is 0 without
printing: no bytes `HostExecute`, `_xla_compute_type`, `async_execution_thread` or a string
that is exactly `host` anywhere in it (the only sources of the first two rules' text), and no
instruction outside the plumbing opcodes whose result or operand shape lies in S(5), judged
as the printer prints it. XLA's printer (async syntax sugar, on in the `HloPrintOptions`
that `as_hlo_text` prints with) leaves out an async computation made of parameters and one
root, and prints each async-start, -update or -done wrapping it as the root's opcode with
`-start`, `-update` or `-done` (`fusion-start`, `custom-call-start`): such an async op is
plumbing when that printed opcode is, and the left-out computation's instructions are not
judged (they are not in the text; seen with jaxlib 0.10.2's printer). Any other async op is
judged by its shapes, as before (a printer without the sugar prints the wrapped root as an
instruction of its own), and any other computation as before. Any other proto is printed
and parsed as before. Every executed program the real captures carry passes the screen:
the 3 of the 38 H100/H200 captures that carry one (the `params` one's S(5) instructions are
parameters, copy-starts, copy-dones and a tuple), and the H200 `transformer:control
qkv_proj_offloaded` run with command buffers (tests/data/gpu-large), whose host copies are
async-starts of one-fusion computations (`fusion-start` in the text: printing and parsing
it was 0.13 s of its 0.35 s report). A screened program is not printed at all, so one
that passes our own checks (`proto_print.proto_problem`) but that XLA's printer would still
refuse is counted 0 from its instructions, where the printed path said "no HLO text"
(count None).

**Pinned host memory** (`pinned_host_peak`): the peak of the heap simulation of the buffers in
host memory space (buffer-assignment color 5, `overlap.hlo.program.memory_peak`): the
pinned host bytes one step holds at once, program order. Against **the cap in force**
(`cap_in_force`): XLA's GPU runtime caps its pinned host pool at
`XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB` (64 GB when unset); the value comes from run.json's
recorded environment when it has one, else it is the default, and `cap_source` says which. Other
backends have no such cap (cap None). `fraction` = peak / cap, in [0, inf): above 1 the step
cannot get its pinned buffers.

**Where they come from** (`capture_host_section`, `report --json` key ``host``; `plan --json`
key ``host`` via `host_facts`): a plan has its own compiled HLO text and proto. A capture has
them only when it carries the HloProto of the program that ran
(`overlap.analysis.memory.executed_program`); otherwise both are "not available", said with the
reason, never guessed from run.json's ``heap_simulator.module`` (in the H100/H200 sweeps every
run's names the same compile, so it cannot tell the program that ran). The cap is said either
way, from run.json ``env`` (recorded by `overlap capture` since issue 33; older runs: "not
recorded: assumed unset").

**Host XLA ops in the trace** (``host.trace_host_ops``): not read. XLA:CPU ops are host-plane
events carrying an ``hlo_op`` stat (on a CPU capture that is every op: nothing is "moved" to
the host there); on a GPU/TPU capture the reader drops such events from the compute table (they
are host work, not device compute: `overlap.trace.reader`), so a count would need the reader to
keep them. Whether XLA:GPU's converted host compute shows up that way at all is not known here:
no capture with host compute exists (all 38 H100/H200 captures' programs have none).
"""

from __future__ import annotations

from typing import Any

from overlap.trace.hlotext import LazyPattern

HOST_COLOR = 5  # XLA's host memory space, S(5), is buffer-assignment color 5
CAP_ENV = "XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB"
DEFAULT_CAP_GB = 64
_GB = 1 << 30  # XLA reads the limit in GiB (value * 1024^3 bytes)
_HOST_ATTR = LazyPattern(r'_xla_compute_type\s*=\s*"host"')
# What XLA:GPU's optimized HLO keeps of host compute (compute_on("device_host"), jax 0.10.2,
# deviceless H100 compile): `custom-call-start(...), async_execution_thread="host",
# custom_call_target="HostExecute", called_computations={%c}` whose computation ends
# `execution_thread="host"`; the frontend attribute is gone by then.
_HOST_CALL = LazyPattern(r'custom_call_target="HostExecute"|async_execution_thread="host"')
_CALLED = LazyPattern(r"called_computations=\{%?([^,}\s]+)")
# Opcodes that move data to or from host memory, or only plumb it: never host compute.
_MOVES = frozenset({
    "parameter", "tuple", "get-tuple-element", "copy", "copy-start", "copy-done", "bitcast",
    "dynamic-slice", "dynamic-update-slice", "fusion-start", "fusion-done", "async-start",
    "async-update", "async-done", "custom-call", "while", "conditional", "call", "opt-barrier",
    "constant", "send", "send-done", "recv", "recv-done", "dynamic-slice-start",
    "dynamic-slice-done", "dynamic-update-slice-start", "dynamic-update-slice-done"})


def host_compute_ops(hlo_text: str, top: int = 50) -> dict[str, Any]:
    """`{count, ops: [{name, opcode, computation, shape, why}], source}` (module docstring)."""
    from overlap.hlo.program import _on_host, _parse_module, offload_inventory

    comps, _entry = _parse_module(hlo_text)
    try:
        moves = {o.name for o in offload_inventory(hlo_text).ops}
    except Exception:  # noqa: BLE001 - without the inventory a fusion is judged on its own
        moves = set()
    ops = []
    for comp, instrs in comps.items():
        for i in instrs:
            why = None
            call = _HOST_CALL.search(i.attrs)
            if call:
                # One entry per host call (its start): the computation it runs is on the host.
                called = _CALLED.search(i.attrs)
                why = (f"host call: {i.opcode} {call.group(0)} runs "
                       f"{called.group(1) if called else 'a computation'} on the host "
                       "(XLA:GPU host compute)")
            elif _HOST_ATTR.search(i.attrs):
                why = 'frontend attribute _xla_compute_type="host"'
            elif i.opcode not in _MOVES and i.name not in moves and (
                    _on_host(i.shape) or any(s is not None and _on_host(s)
                                             for s in i.operand_shapes)):
                why = "device compute in host memory space S(5) (XLA converts it to host compute)"
            if why:
                ops.append({"name": i.name, "opcode": i.opcode, "computation": comp,
                            "shape": str(i.shape) if not isinstance(i.shape, list)
                            else "(tuple)", "why": why})
    return {"count": len(ops), "ops": ops[:top], "source": "compiled HLO"}


# `_MOVES` less the async wrappers, which XLA's printer may name after the op they wrap
_PLUMBING = _MOVES - {"async-start", "async-update", "async-done"}
# The bytes the text rules' attributes can only be printed from (module docstring).
_MARKERS = (b"HostExecute", b"_xla_compute_type", b"async_execution_thread", b"\x04host")
NO_HOST_COMPUTE = {"count": 0, "ops": [], "source": "compiled HLO"}


def lists_no_host_compute(raw: bytes, msg: Any) -> bool:
    """True when `host_compute_ops` of the printed program could list nothing (module
    docstring): `raw` the serialized HloProto, `msg` it decoded."""
    if any(m in raw for m in _MARKERS):
        return False
    comps = computations_of(msg)
    printed_as = _async_sugar(comps)
    for c, instrs in comps:
        if c.id in printed_as.left_out:
            continue  # not in the printed text: nothing there for a rule to list
        on_host = {i.id: _shape_on_host(i.shape) for i in instrs}
        for i in instrs:
            opcode = printed_as.opcode.get(i.id, i.opcode)
            if opcode in _PLUMBING:
                continue
            if on_host[i.id] or any(on_host.get(o, False) for o in i.operand_ids[:]):
                return False
    return True


def computations_of(msg: Any) -> list[tuple[Any, list]]:
    """(computation, its instructions) of an HloProto message: each list made once (upb
    makes a wrapper per instruction each time a repeated field is walked)."""
    return [(c, c.instructions[:]) for c in msg.hlo_module.computations[:]]


class _Sugar:
    """`_async_sugar`'s answer: the ids of the computations the printer leaves out, and the
    opcode it prints for each async op (absent: its own opcode)."""

    def __init__(self) -> None:
        self.left_out: set[int] = set()
        self.opcode: dict[int, str] = {}


_ASYNC_SUFFIX = {"async-start": "-start", "async-update": "-update", "async-done": "-done"}
_CHAIN_MAX = 64  # async ops walked back from an update or done to its start, at most


def _async_sugar(comps: list[tuple[Any, list]]) -> _Sugar:
    """What XLA's async syntax sugar does to a program (`computations_of`; module
    docstring): a computation called by async-starts alone, all of whose instructions are
    parameters or its root, is left out, and each async op whose chain of operands leads to
    such a start prints as the root's opcode with its own suffix. An async-update or -done
    names no computation in the proto (jax 0.11.2): the printer finds it through its first
    operand, back to the start. An async op whose computation is printed, or whose start is
    not found, keeps its own opcode, which the screen does not count as plumbing."""
    out = _Sugar()
    callers: dict[int, set[str]] = {}
    asyncs: dict[int, Any] = {}  # the async ops by id: a chain runs through them alone
    roots: dict[int, list] = {}  # per computation, its instructions other than parameters
    for c, instrs in comps:
        roots[c.id] = rs = []
        for i in instrs:
            opcode = i.opcode
            if opcode != "parameter":
                rs.append(i)
            if opcode in _ASYNC_SUFFIX:
                asyncs[i.id] = i
            for cid in i.called_computation_ids[:]:
                callers.setdefault(cid, set()).add(opcode)
    root_op = {}
    for c, _ in comps:
        rs, by = roots[c.id], callers.get(c.id, set())
        if ("async-start" in by and by <= _ASYNC_SUFFIX.keys() and len(rs) == 1
                and rs[0].id == c.root_id):
            out.left_out.add(c.id)
            root_op[c.id] = rs[0].opcode
    if not out.left_out:
        return out
    for i in asyncs.values():
        start = i
        # (a chain is a start, its updates and its done: a few steps; bounded, so that a
        # damaged proto whose async ops name each other in a ring costs no more)
        for _ in range(_CHAIN_MAX):
            if start.opcode == "async-start" or not start.operand_ids:
                break
            nxt = asyncs.get(start.operand_ids[0])
            if nxt is None:
                break
            start = nxt
        called = start.called_computation_ids[:] if start.opcode == "async-start" else []
        if called and called[0] in root_op:
            out.opcode[i.id] = root_op[called[0]] + _ASYNC_SUFFIX[i.opcode]
    return out


def _shape_on_host(sp: Any) -> bool:
    if sp.tuple_shapes:
        return any(_shape_on_host(t) for t in sp.tuple_shapes[:])
    return sp.layout.memory_space == HOST_COLOR


def pinned_host_peak(hlo_proto: bytes | None, decoded: Any = None) -> dict[str, Any]:
    """`{bytes, largest: [[buffer, bytes]...], source}`; bytes None (source says why) without
    a buffer assignment, 0 when the program holds no host-memory buffers. `decoded`: the
    HloProto message of `hlo_proto` where the caller has it (not decoded twice; the scanner's
    read with `buffers`, `programs.hlo_message`)."""
    if not hlo_proto:
        return {"bytes": None, "largest": [], "source": "no HLO proto with a buffer assignment"}
    from overlap.hlo.program import memory_peak
    from overlap.trace.programs import hlo_message

    try:
        proto = decoded if decoded is not None else hlo_message(bytes(hlo_proto), buffers=True)
    except Exception:  # noqa: BLE001 - DecodeError: the proto is damaged
        return {"bytes": None, "largest": [], "source": "HLO proto unreadable"}
    if not any(b.color == HOST_COLOR for b in proto.buffer_assignment.logical_buffers):
        return {"bytes": 0, "largest": [], "source": "heap simulation: no host-memory buffers"}
    try:
        peak, largest = memory_peak(proto, color=HOST_COLOR, top=5)
    except ValueError as e:
        return {"bytes": None, "largest": [], "source": f"no host-memory heap trace ({e})"}
    return {"bytes": int(peak), "largest": [list(b) for b in largest],
            "source": "heap simulation of host memory space S(5) (program order)"}


def cap_in_force(platform: str | None, env: dict | None,
                 where: str = "run.json") -> dict[str, Any]:
    """`{bytes, source}`: the pinned host pool's cap (module docstring); bytes None off GPU.
    `where`: what `env` is, for the source (run.json's recorded ``env``, or a process's)."""
    if platform not in ("gpu", "cuda", "rocm"):
        return {"bytes": None, "source": f"no pinned-host cap on {platform or 'this backend'}"}
    raw = (env or {}).get(CAP_ENV)
    if raw not in (None, ""):
        try:
            return {"bytes": int(float(raw) * _GB), "source": f"{CAP_ENV}={raw} ({where})"}
        except (TypeError, ValueError):
            pass
    return {"bytes": DEFAULT_CAP_GB * _GB,
            "source": f"XLA's default {DEFAULT_CAP_GB} GB ({CAP_ENV} "
                      + (f"unset in {where})" if env is not None and CAP_ENV in env
                         else "not recorded: assumed unset)")}


def host_facts(hlo_text: str | None, hlo_proto: bytes | None, platform: str | None,
               env: dict | None, where: str = "run.json",
               host_compute: dict[str, Any] | None = None, decoded: Any = None
               ) -> dict[str, Any]:
    """`{host_compute, pinned_host}` for one compiled program (the report and plan JSON key
    `host`); `host_compute` where the caller has it (a screened capture), else read from
    `hlo_text`; `decoded`: `hlo_proto`'s message, where the caller has it."""
    hc = host_compute if host_compute is not None else host_compute_ops(hlo_text) \
        if hlo_text else {"count": None, "ops": [], "source": "no HLO text for the program"}
    peak = pinned_host_peak(hlo_proto, decoded)
    cap = cap_in_force(platform, env, where)
    frac = (peak["bytes"] / cap["bytes"] if peak["bytes"] is not None and cap["bytes"]
            else None)
    return {"host_compute": hc,
            "pinned_host": {"peak_bytes": peak["bytes"], "largest": peak["largest"],
                            "source": peak["source"], "cap_bytes": cap["bytes"],
                            "cap_source": cap["source"], "fraction_of_cap": frac,
                            "over_cap": None if frac is None else frac > 1.0}}


def capture_host_facts(trace, result: dict, manifest: dict | None,
                       prog: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """`host_facts` of the program a capture ran (`overlap.analysis.memory.executed_program`,
    or `prog` where the caller has it), None when the capture carries no HLO proto for it."""
    from overlap.analysis.memory import executed_program

    if prog is None:
        prog = executed_program(trace, manifest)
    if not prog.get("proto"):
        # run.json's heap_simulator.module is not used: in the H100 sweeps every run's names
        # the same compile, so it cannot tell the program that ran.
        return None
    from overlap.hlo.proto_print import print_protos, proto_problem
    from overlap.trace.programs import hlo_message

    raw = bytes(prog["proto"])
    try:
        # (the scanner's reader where it answers, as upb reads it: no protobuf import, ~20
        # ms of a small capture's report; its heap simulation too, for the pinned-host peak)
        msg = hlo_message(raw, buffers=True)
    except Exception:  # noqa: BLE001 - DecodeError: print_protos says so below
        msg = None
    text, hc = None, None
    if msg is not None and proto_problem(msg) is None and lists_no_host_compute(raw, msg):
        hc = dict(NO_HOST_COMPUTE)  # what the printed text would list: nothing (docstring)
    else:
        # Printed as --predict prints a captured program: checked first, then in a child
        # process, so a damaged proto that trips a CHECK in XLA's printer cannot abort the
        # report (`overlap.hlo.proto_print`); None where it cannot be read: the peak stands.
        text, _why = print_protos({"program": raw})["program"]
    env = ((manifest or {}).get("env") if isinstance((manifest or {}).get("env"), dict)
           else None)
    out = host_facts(text, raw, result.get("backend"), env, host_compute=hc, decoded=msg)
    out["program"] = prog.get("name")
    return out


TRACE_HOST_OPS = {"count": None, "source": (
    "not read: host-plane XLA ops of a GPU/TPU capture are dropped by the reader, and no "
    "capture with host compute has been seen to say what XLA:GPU emits for it")}


def capture_host_section(trace, result: dict, manifest: dict | None) -> dict[str, Any]:
    """`report --json`'s ``host``: `capture_host_facts` when the capture carries the executed
    program's HloProto; else each part "not available" with the reason, and the cap in force
    either way (module docstring)."""
    env = ((manifest or {}).get("env") if isinstance((manifest or {}).get("env"), dict)
           else None)
    backend = result.get("backend")
    if backend == "cpu":
        return {"available": False, "program": None,
                "host_compute": {"count": None, "ops": [], "source": "not applicable on XLA:CPU "
                                 "(every op runs on the host; none is moved there)"},
                "pinned_host": {"peak_bytes": None, "largest": [], "source": "not applicable on "
                                "XLA:CPU", **_cap_fields(backend, env), "fraction_of_cap": None,
                                "over_cap": None},
                "trace_host_ops": TRACE_HOST_OPS}
    from overlap.analysis.memory import executed_program

    # found once: its facts, or why there are none (each search reads every compute event's
    # module and program id: ~2.5 ms on a million TPU ops)
    prog = executed_program(trace, manifest)
    facts = capture_host_facts(trace, result, manifest, prog)
    if facts is not None:
        return {"available": True, **facts, "trace_host_ops": TRACE_HOST_OPS}
    why = "not available: " + prog["how"]
    return {"available": False, "program": None,
            "host_compute": {"count": None, "ops": [], "source": why},
            "pinned_host": {"peak_bytes": None, "largest": [], "source": why,
                            **_cap_fields(backend, env), "fraction_of_cap": None,
                            "over_cap": None},
            "trace_host_ops": TRACE_HOST_OPS}


def _cap_fields(platform: str | None, env: dict | None) -> dict[str, Any]:
    cap = cap_in_force(platform, env)
    return {"cap_bytes": cap["bytes"], "cap_source": cap["source"]}


def host_lines(section: dict[str, Any] | None) -> list[str]:
    """Terminal lines for a ``host`` section, only where there is something to say: host
    compute ops, or pinned host buffers held at peak."""
    if not section:
        return []
    out = []
    hc = section.get("host_compute") or {}
    if hc.get("count"):
        out.append(f"host compute: {hc['count']} op(s) XLA runs on the host ({hc['source']}): "
                   + ", ".join(f"{o['name']} ({o['opcode']})" for o in hc["ops"][:5])
                   + (" ..." if hc["count"] > 5 else ""))
    ph = section.get("pinned_host") or {}
    if ph.get("peak_bytes"):
        cap = ph.get("cap_bytes")
        out.append(f"pinned host memory at peak: {ph['peak_bytes'] / (1 << 30):.2f} GiB"
                   + (f" of a {cap / (1 << 30):.0f} GiB cap ({ph['fraction_of_cap']:.1%}; "
                      f"{ph['cap_source']})" if cap else "")
                   + (" -- OVER THE CAP" if ph.get("over_cap") else ""))
    return out
