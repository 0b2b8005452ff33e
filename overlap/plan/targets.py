"""Targets a plan compiles for: the hardware facts the compiler and the overlap estimate use.

Each target names the accelerator, how to get a compile-only device for it, and the numbers the
roofline estimate needs. Every number is from the vendor's public data sheet for that part
(dense, no sparsity), rounded as the sheet gives it, except the host link of the H100 and
H200: `host_link_Bps` there is the one-way rate measured on those machines (54.7 and 55.3 GB/s
of the sheet's 64, `nominal_link_Bps`), and `duplex_share` the share of it each direction
keeps while both move (measured 0.81 and 0.89: PCIe is not full duplex at full rate). Other
targets carry the nominal one-way bandwidth of the link the sheet names, which real
pinned-memory copies reach only in part: pass `--host-bandwidth` (or `--calibrate RUN`) to
use a measured figure. `command_buffers_default`: XLA:GPU runs with command buffers on unless
`--xla_gpu_enable_command_buffer=` turns them off, and then host copies share the compute
stream (`overlap.plan.estimate.command_buffers_from_flags`).

GPU targets carry a `stream_executor.GpuTargetConfigProto` in text format, written here from
the same data sheets (SM count, clocks, memory size and bandwidth, L2, per-SM limits of the
architecture); XLA:GPU uses it in place of a live device (its autotuner does not run, so
kernel choices are XLA's defaults for that compute capability).

TPU targets name a topology that libtpu's compile-only client accepts (`v5e:2x2` and friends:
single-chip topologies are refused by libtpu 0.0.42 because they do not divide its default
host bounds 2x2x1). A plan compiles for one chip of it; sharding over the others is the
user's step's business.

Memory: `device_memory_bytes` is the capacity the device reports (GPUs: `nvidia-smi`'s total,
e.g. 81559 MiB = 79.6 GiB on an H100 80GB, not the data sheet's decimal "80 GB"; TPUs: HBM per
chip, stated in GiB by the Cloud TPU docs). What a JAX program may use is less:
:func:`memory_budget` applies JAX's GPU preallocation fraction (75% unless
`XLA_PYTHON_CLIENT_MEM_FRACTION` says otherwise) and names where the number comes from.

Kernel floor: on GPUs every kernel takes at least `kernel_floor_s` (launch + tail); the number
is XLA's own GPU cost model's per-kernel launch overhead (`kKernelLaunchOverhead`, 1 us, in
openxla/xla `xla/service/gpu/model/gpu_performance_model_base.h`). TPU targets use 0: XLA:TPU
runs a program as one stream of fused ops without per-kernel host launches.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from overlap.errors import UsageError


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    platform: str            # "cuda" | "tpu"
    description: str
    topology: str            # default topology ("1x1x1" for one GPU; libtpu topology name)
    device_memory_bytes: int
    hbm_Bps: float           # device memory bandwidth, bytes/s
    peak_flops_bf16: float   # dense matmul FLOP/s at bf16
    peak_flops_f32: float    # dense matmul FLOP/s at f32 (TF32 tensor cores on NVIDIA)
    host_link_Bps: float     # nominal one-way host link bandwidth, bytes/s
    host_link: str           # what that link is
    source: str              # where the numbers come from
    gpu_spec: str = ""       # GpuTargetConfigProto text (GPU targets)
    memory_source: str = ""  # where device_memory_bytes comes from
    kernel_floor_s: float = 0.0  # least time of one kernel (launch + tail)
    kernel_floor_source: str = ""
    full_duplex: bool = True     # D2H and H2D at once (PCIe is full duplex)
    # Each direction's rate while both move, as a share of its rate alone (1 = full rate both
    # ways; measured on H100 PCIe: 44.5 of 54.7 GB/s).
    duplex_share: float = 1.0
    nominal_link_Bps: float = 0.0  # the data sheet's one-way rate, where host_link_Bps is measured
    # XLA:GPU's default: command buffers on (`--xla_gpu_enable_command_buffer` unset), which
    # puts host copies on the compute stream; TPUs have no command buffers.
    command_buffers_default: bool = False

    def model(self) -> dict:
        """The numbers the estimate uses, as printed next to every estimate."""
        return {"target": self.name, "hbm_Bps": self.hbm_Bps,
                "peak_flops_bf16": self.peak_flops_bf16, "peak_flops_f32": self.peak_flops_f32,
                "host_link_Bps": self.host_link_Bps, "host_link": self.host_link,
                "device_memory_bytes": self.device_memory_bytes, "source": self.source,
                "kernel_floor_ps": int(round(self.kernel_floor_s * 1e12)),
                "kernel_floor_source": self.kernel_floor_source,
                "full_duplex": self.full_duplex, "duplex_share": self.duplex_share,
                "nominal_link_Bps": self.nominal_link_Bps or self.host_link_Bps}


def _gpu_spec(*, major: int, minor: int, sms: int, fp32_per_sm: int, clock_ghz: float,
              mem_bytes: int, mem_Bps: int, l2_bytes: int, smem_per_sm: int,
              smem_optin: int, name: str) -> str:
    # Per-SM limits shared by Hopper and Blackwell data-center parts: 2048 threads, 64K
    # registers, 48 KiB static shared memory per block.
    return f"""gpu_device_info {{
  cuda_compute_capability {{ major: {major} minor: {minor} }}
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_block_optin: {smem_optin}
  shared_memory_per_core: {smem_per_sm}
  threads_per_core_limit: 2048
  core_count: {sms}
  fpus_per_core: {fp32_per_sm}
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: {mem_Bps}
  l2_cache_size: {l2_bytes}
  clock_rate_ghz: {clock_ghz}
  device_memory_size: {mem_bytes}
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}}
platform_name: "CUDA"
dnn_version_info {{ major: 9 minor: 8 patch: 0 }}
device_description_str: "{name}"
"""


_GiB = 1 << 30
_MiB = 1 << 20
_PCIE5 = 64e9  # PCIe Gen5 x16, one direction
_PCIE4 = 32e9  # PCIe Gen4 x16, one direction
_XLA_FLOOR = 1e-6
# The host link measured on the machines of the real GPU captures (shared/captures/SOURCES.md,
# bw.json beside them: torch pinned copies timed with CUDA events, 16 MiB-4 GiB): H100 one way
# 54.0-55.0 GB/s (medians), both ways at once 43.3-45.5 GB/s each; H200 54.3-55.4 one way,
# 46.3-50.8 both. The copies in the captures themselves ran at 47-55 GB/s.
_H100_LINK, _H100_SHARE = 54.7e9, 44.5 / 54.7
_H200_LINK, _H200_SHARE = 55.3e9, 49.0 / 55.3
_H100_LINK_SOURCE = ("PCIe Gen5 x16, measured on an H100 80GB HBM3: 54.7 GB/s one way, 44.5 GB/s "
                     "each way with both at once (torch pinned copies; the sheet's 64 GB/s is "
                     "not reached)")
_H200_LINK_SOURCE = ("PCIe Gen5 x16, measured on an H200: 55.3 GB/s one way, 49 GB/s each way "
                     "with both at once (torch pinned copies; the sheet's 64 GB/s is not "
                     "reached)")
_XLA_FLOOR_SOURCE = ("XLA's GPU cost model, kKernelLaunchOverhead = 1 us "
                     "(openxla/xla xla/service/gpu/model/gpu_performance_model_base.h)")
_SCALING_BOOK = "jax-ml/scaling-book, tpus.md"

TARGETS: dict[str, Target] = {}


def _add(t: Target) -> None:
    TARGETS[t.name] = t


_add(Target(
    "h100", "cuda", "NVIDIA H100 SXM5 80GB HBM3", "1x1x1",
    device_memory_bytes=81559 * _MiB, hbm_Bps=3.35e12, peak_flops_bf16=989e12,
    peak_flops_f32=494e12, host_link_Bps=_H100_LINK, host_link=_H100_LINK_SOURCE,
    nominal_link_Bps=_PCIE5, duplex_share=_H100_SHARE, command_buffers_default=True,
    source="NVIDIA H100 Tensor Core GPU data sheet (SXM5: 132 SMs, 1.98 GHz boost, 3.35 TB/s)",
    memory_source="nvidia-smi total of a real H100 80GB HBM3: 81559 MiB (NVIDIA/nccl#1264, "
                  "modal-labs/modal-client#2797)",
    kernel_floor_s=_XLA_FLOOR, kernel_floor_source=_XLA_FLOOR_SOURCE,
    gpu_spec=_gpu_spec(major=9, minor=0, sms=132, fp32_per_sm=128, clock_ghz=1.98,
                       mem_bytes=81559 * _MiB, mem_Bps=3_350_000_000_000, l2_bytes=50 << 20,
                       smem_per_sm=228 << 10, smem_optin=227 << 10,
                       name="NVIDIA H100 80GB HBM3")))
_add(Target(
    "h200", "cuda", "NVIDIA H200 SXM 141GB HBM3e", "1x1x1",
    device_memory_bytes=143771 * _MiB, hbm_Bps=4.8e12, peak_flops_bf16=989e12,
    peak_flops_f32=494e12, host_link_Bps=_H200_LINK, host_link=_H200_LINK_SOURCE,
    nominal_link_Bps=_PCIE5, duplex_share=_H200_SHARE, command_buffers_default=True,
    source="NVIDIA H200 Tensor Core GPU data sheet (GH100 as H100 SXM; 141 GB at 4.8 TB/s)",
    memory_source="nvidia-smi total of a real H200: 143771 MiB",
    kernel_floor_s=_XLA_FLOOR, kernel_floor_source=_XLA_FLOOR_SOURCE,
    gpu_spec=_gpu_spec(major=9, minor=0, sms=132, fp32_per_sm=128, clock_ghz=1.98,
                       mem_bytes=143771 * _MiB, mem_Bps=4_800_000_000_000, l2_bytes=50 << 20,
                       smem_per_sm=228 << 10, smem_optin=227 << 10,
                       name="NVIDIA H200")))
_add(Target(
    "b200", "cuda", "NVIDIA B200 180GB HBM3e (HGX B200)", "1x1x1",
    device_memory_bytes=183359 * _MiB, hbm_Bps=7.7e12, peak_flops_bf16=2.25e15,
    peak_flops_f32=1.1e15, host_link_Bps=_PCIE5, host_link="PCIe Gen5 x16 (HGX B200 host link; "
    "data sheet rate, not measured)", command_buffers_default=True,
    source="NVIDIA HGX B200 data sheet, per GPU (dense BF16 2.25 PFLOP/s, 180 GB, 7.7 TB/s); "
           "148 SMs, compute capability 10.0",
    memory_source="nvidia-smi total of a real B200: 183359 MiB",
    kernel_floor_s=_XLA_FLOOR, kernel_floor_source=_XLA_FLOOR_SOURCE,
    gpu_spec=_gpu_spec(major=10, minor=0, sms=148, fp32_per_sm=128, clock_ghz=1.965,
                       mem_bytes=183359 * _MiB, mem_Bps=7_700_000_000_000, l2_bytes=126 << 20,
                       smem_per_sm=228 << 10, smem_optin=227 << 10,
                       name="NVIDIA B200")))
_add(Target(
    "v4", "tpu", "TPU v4 (32 GiB HBM2)", "v4:2x2x1",
    device_memory_bytes=32 * _GiB, hbm_Bps=1.2e12, peak_flops_bf16=275e12,
    peak_flops_f32=275e12 / 4, host_link_Bps=16e9,
    host_link=f"PCIe, {_SCALING_BOOK}",
    source="Google Cloud TPU v4 documentation (275 TFLOP/s bf16, 1.2 TB/s, 32 GiB)",
    memory_source="Cloud TPU v4 docs: 32 GiB HBM per chip"))
_add(Target(
    "v5e", "tpu", "TPU v5e (16 GiB HBM2)", "v5e:2x2",
    device_memory_bytes=16 * _GiB, hbm_Bps=819e9, peak_flops_bf16=197e12,
    peak_flops_f32=197e12 / 4, host_link_Bps=15e9,
    host_link=f"PCIe, {_SCALING_BOOK}: ~1.5e10 B/s per v5e/v5p chip",
    source="Google Cloud TPU v5e documentation (197 TFLOP/s bf16, 819 GB/s, 16 GiB)",
    memory_source="Cloud TPU v5e docs: 16 GiB HBM per chip"))
_add(Target(
    "v5p", "tpu", "TPU v5p (95 GiB HBM2e)", "v5p:2x2x1",
    device_memory_bytes=95 * _GiB, hbm_Bps=2.765e12, peak_flops_bf16=459e12,
    peak_flops_f32=459e12 / 4, host_link_Bps=15e9,
    host_link=f"PCIe, {_SCALING_BOOK}: ~1.5e10 B/s per v5e/v5p chip",
    source="Google Cloud TPU v5p documentation (459 TFLOP/s bf16, 2.765 TB/s, 95 GiB)",
    memory_source="Cloud TPU v5p docs: 95 GiB HBM per chip"))
_add(Target(
    "v6e", "tpu", "TPU v6e Trillium (32 GiB HBM)", "v6e:2x2",
    device_memory_bytes=32 * _GiB, hbm_Bps=1.64e12, peak_flops_bf16=918e12,
    peak_flops_f32=918e12 / 4, host_link_Bps=32e9,
    host_link=f"PCIe, {_SCALING_BOOK}: about 2x v5",
    source="Google Cloud TPU v6e documentation (918 TFLOP/s bf16, 1.64 TB/s, 32 GiB)",
    memory_source="Cloud TPU v6e docs: 32 GiB HBM per chip"))

_add(Target(
    "tpu7x", "tpu", "TPU7x Ironwood, one TensorCore (96 GiB of the chip's 192 GiB HBM3e)",
    "tpu7x:2x2x1",
    # libtpu exposes each of an Ironwood chip's two TensorCores as its own device (the
    # compile-only topology tpu7x:2x2x1 has 8 devices for 4 chips, device kind "TPU7x") and
    # gives each half the chip's HBM: a compile asking for more than 94.75G is refused with
    # "exceeds available HBM (94.75G)" (libtpu 0.0.42). A plan compiles for one device, so
    # every number here is half the chip's.
    device_memory_bytes=96 * _GiB, hbm_Bps=7.38e12 / 2, peak_flops_bf16=2307e12 / 2,
    peak_flops_f32=2307e12 / 8, host_link_Bps=_PCIE5, host_link="PCIe Gen5 x16 (assumed)",
    source="Google Cloud TPU7x (Ironwood) documentation, per chip: 2307 TFLOP/s bf16, "
           "192 GiB HBM, 7380 GB/s; halved per TensorCore device (libtpu's device split)",
    memory_source="Cloud TPU7x docs: 192 GiB HBM per chip; libtpu gives each of its two "
                  "devices half (94.75G available to a program)"))
_add(Target(
    "b300", "cuda", "NVIDIA B300 (Blackwell Ultra) 288GB HBM3e (HGX B300)", "1x1x1",
    device_memory_bytes=288 * 10**9, hbm_Bps=8e12, peak_flops_bf16=2.25e15,
    peak_flops_f32=1.125e15, host_link_Bps=128e9,
    host_link="PCIe Gen6 x16 (B300's host interface; a Gen5 host halves it; data sheet rate, "
              "not measured)", command_buffers_default=True,
    source="NVIDIA HGX B300 data sheet, per GPU of 8 (dense = half the sparse figures: "
           "BF16 2.25 PFLOP/s, TF32 1.125 PFLOP/s; 288 GB HBM3e at 8 TB/s); compute "
           "capability 10.3; SM count 160 and clock as B200 are assumptions (not on the sheet)",
    gpu_spec=_gpu_spec(major=10, minor=3, sms=160, fp32_per_sm=128, clock_ghz=1.965,
                       mem_bytes=288 * 10**9, mem_Bps=8_000_000_000_000, l2_bytes=126 << 20,
                       smem_per_sm=228 << 10, smem_optin=227 << 10,
                       name="NVIDIA B300"),
    memory_source="HGX B300 data sheet: 288 GB (decimal; no nvidia-smi total of a B300 seen)",
    kernel_floor_s=_XLA_FLOOR, kernel_floor_source=_XLA_FLOOR_SOURCE))


# JAX on GPU preallocates this fraction of device memory for its allocator unless
# XLA_PYTHON_CLIENT_MEM_FRACTION says otherwise (JAX docs, "GPU memory allocation").
JAX_GPU_MEM_FRACTION = 0.75


@dataclasses.dataclass(frozen=True)
class MemoryBudget:
    """The device memory a plan must fit in, and where that number comes from."""

    bytes: int
    capacity_bytes: int
    fraction: float | None   # of capacity; None when the user gave bytes
    source: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def memory_budget(target: Target, *, budget_gib: float | None = None,
                  fraction: float | None = None,
                  env: Mapping[str, str] | None = None) -> MemoryBudget:
    """The usable device memory of one `target` device for a JAX program.

    In order: `budget_gib` (the user's number, GiB); `fraction` of the device's capacity;
    on GPUs, `XLA_PYTHON_CLIENT_ALLOCATOR=platform` in `env` (no preallocated pool: the whole
    device) or `XLA_CLIENT_MEM_FRACTION` / `XLA_PYTHON_CLIENT_MEM_FRACTION` in `env` (in that
    order, as jaxlib reads them), else JAX's default 75%; on TPUs the
    whole HBM (JAX applies no fraction there). `env` defaults to this process's environment,
    read only for those variables. Bad values raise UsageError (exit 2)."""
    cap = target.device_memory_bytes
    what = f"{target.name} capacity {cap / _GiB:.1f} GiB ({target.memory_source or target.source})"
    if budget_gib is not None:
        if not (budget_gib > 0 and budget_gib < 1 << 20):
            raise UsageError(f"--memory-budget must be a positive number of GiB, got {budget_gib}")
        return MemoryBudget(int(budget_gib * _GiB), cap, None, "given with --memory-budget")
    if fraction is not None:
        if not (0 < fraction <= 1):
            raise UsageError(f"--memory-fraction must be in (0, 1], got {fraction}")
        return MemoryBudget(int(cap * fraction), cap, fraction,
                            f"{fraction:g} of {what}, given with --memory-fraction")
    if target.platform != "cuda":
        return MemoryBudget(cap, cap, 1.0, f"all of {what}; JAX preallocates no fraction on TPU")
    env = os.environ if env is None else env
    if env.get("XLA_PYTHON_CLIENT_ALLOCATOR", "").lower() == "platform":
        return MemoryBudget(cap, cap, 1.0, f"all of {what}: XLA_PYTHON_CLIENT_ALLOCATOR=platform "
                            "in this environment")
    # jaxlib reads XLA_CLIENT_MEM_FRACTION, and the deprecated XLA_PYTHON_CLIENT_MEM_FRACTION
    # only where that is unset; both set is an error there (jaxlib/xla_client.py,
    # generate_pjrt_gpu_plugin_options), so it is one here too.
    if env.get("XLA_CLIENT_MEM_FRACTION") and env.get("XLA_PYTHON_CLIENT_MEM_FRACTION"):
        raise UsageError("XLA_CLIENT_MEM_FRACTION and XLA_PYTHON_CLIENT_MEM_FRACTION are both "
                         "set; jaxlib refuses that (remove the deprecated second one)")
    var = next((v for v in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")
                if env.get(v)), "XLA_PYTHON_CLIENT_MEM_FRACTION")
    raw = env.get(var)
    if raw:
        try:
            f = float(raw)
        except ValueError:
            f = -1.0
        if not 0 < f <= 1:
            raise UsageError(f"{var}={raw!r} is not a fraction in (0, 1]")
        return MemoryBudget(int(cap * f), cap, f, f"{f:g} of {what}: {var} in this environment")
    return MemoryBudget(int(cap * JAX_GPU_MEM_FRACTION), cap, JAX_GPU_MEM_FRACTION,
                        f"JAX's default GPU preallocation, {JAX_GPU_MEM_FRACTION:g} of {what}")



# Device kinds as captures name them (XPlane device name, jax `device_kind`) -> target. Order
# matters: "TPU v5 lite" (v5e) before "TPU v5" (v5p).
_DEVICE_KINDS = (
    ("tpu7x", ("tpu7x", "tpu 7x", "ironwood")),
    ("v6e", ("tpu v6 lite", "tpu v6e", "trillium")),
    ("v5e", ("tpu v5 lite", "tpu v5e", "v5litepod")),
    ("v5p", ("tpu v5p", "tpu v5")),
    ("v4", ("tpu v4",)),
    ("b300", ("b300",)), ("b200", ("b200",)), ("h200", ("h200",)), ("h100", ("h100",)),
)


def target_for_device_kind(kind: str | None) -> str | None:
    """The target whose hardware a capture's device kind names ("TPU v6 Lite" -> "v6e"), or
    None when no target matches."""
    k = (kind or "").lower()
    for name, needles in _DEVICE_KINDS:
        if name in TARGETS and any(n in k for n in needles):
            return name
    return None


def target_mismatch(target: str, device_kinds: list[str]) -> str | None:
    """One sentence when a capture's devices (`device_kinds`, as the trace names them) are not
    the hardware of `target` (e.g. `--predict --target h100` on a TPU capture); None when one
    of them is, or when no kind is known."""
    kinds = [k for k in device_kinds if k]
    named = {target_for_device_kind(k) for k in kinds}
    if not kinds or target.lower() in named:
        return None
    return (f"--target {target} does not match the capture's device kind "
            f"{', '.join(repr(k) for k in kinds[:3])}"
            + (f" (target {', '.join(sorted(n for n in named if n))})"
               if any(named) else "") + ": the prediction models other hardware than ran")


def get_target(name: str) -> Target:
    try:
        return TARGETS[name.lower()]
    except (KeyError, AttributeError):
        raise UsageError(f"unknown target {name!r}; targets: {', '.join(TARGETS)}") from None


def list_targets_text() -> str:
    rows = [f"{'target':<7}{'platform':<9}{'topology':<13}{'memory':>9}{'HBM':>11}"
            f"{'bf16 peak':>13}{'host link':>11}  description"]
    for t in TARGETS.values():
        rows.append(f"{t.name:<7}{t.platform:<9}{t.topology:<13}"
                    f"{t.device_memory_bytes / _GiB:>7.1f}Gi{t.hbm_Bps / 1e12:>8.2f}TB/s"
                    f"{t.peak_flops_bf16 / 1e12:>8.0f}TFLOP/s{t.host_link_Bps / 1e9:>7.0f}GB/s"
                    f"  {t.description}")
    return "\n".join(rows)
