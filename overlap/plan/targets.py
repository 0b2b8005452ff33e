"""Targets a plan compiles for: the hardware facts the compiler and the overlap estimate use.

Each target names the accelerator, how to get a compile-only device for it, and the numbers the
roofline estimate needs. Every number is from the vendor's public data sheet for that part
(dense, no sparsity), rounded as the sheet gives it; `host_link_Bps` is the nominal one-way
bandwidth of the host link the sheet names (PCIe), which real pinned-memory copies reach only
in part (typically 70-85% on PCIe Gen5): pass `--host-bandwidth` to use a measured figure.

GPU targets carry a `stream_executor.GpuTargetConfigProto` in text format, written here from
the same data sheets (SM count, clocks, memory size and bandwidth, L2, per-SM limits of the
architecture); XLA:GPU uses it in place of a live device (its autotuner does not run, so
kernel choices are XLA's defaults for that compute capability).

TPU targets name a topology that libtpu's compile-only client accepts (`v5e:2x2` and friends:
single-chip topologies are refused by libtpu 0.0.42 because they do not divide its default
host bounds 2x2x1). A plan compiles for one chip of it; sharding over the others is the
user's step's business.
"""

from __future__ import annotations

import dataclasses

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

    def model(self) -> dict:
        """The numbers the estimate uses, as printed next to every estimate."""
        return {"target": self.name, "hbm_Bps": self.hbm_Bps,
                "peak_flops_bf16": self.peak_flops_bf16, "peak_flops_f32": self.peak_flops_f32,
                "host_link_Bps": self.host_link_Bps, "host_link": self.host_link,
                "device_memory_bytes": self.device_memory_bytes, "source": self.source}


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
_PCIE5 = 64e9  # PCIe Gen5 x16, one direction
_PCIE4 = 32e9  # PCIe Gen4 x16, one direction

TARGETS: dict[str, Target] = {}


def _add(t: Target) -> None:
    TARGETS[t.name] = t


_add(Target(
    "h100", "cuda", "NVIDIA H100 SXM5 80GB HBM3", "1x1x1",
    device_memory_bytes=80 * 10**9, hbm_Bps=3.35e12, peak_flops_bf16=989e12,
    peak_flops_f32=494e12, host_link_Bps=_PCIE5, host_link="PCIe Gen5 x16",
    source="NVIDIA H100 Tensor Core GPU data sheet (SXM5: 132 SMs, 1.98 GHz boost, 3.35 TB/s)",
    gpu_spec=_gpu_spec(major=9, minor=0, sms=132, fp32_per_sm=128, clock_ghz=1.98,
                       mem_bytes=80 * 10**9, mem_Bps=3_350_000_000_000, l2_bytes=50 << 20,
                       smem_per_sm=228 << 10, smem_optin=227 << 10,
                       name="NVIDIA H100 80GB HBM3")))
_add(Target(
    "h200", "cuda", "NVIDIA H200 SXM 141GB HBM3e", "1x1x1",
    device_memory_bytes=141 * 10**9, hbm_Bps=4.8e12, peak_flops_bf16=989e12,
    peak_flops_f32=494e12, host_link_Bps=_PCIE5, host_link="PCIe Gen5 x16",
    source="NVIDIA H200 Tensor Core GPU data sheet (GH100 as H100 SXM; 141 GB at 4.8 TB/s)",
    gpu_spec=_gpu_spec(major=9, minor=0, sms=132, fp32_per_sm=128, clock_ghz=1.98,
                       mem_bytes=141 * 10**9, mem_Bps=4_800_000_000_000, l2_bytes=50 << 20,
                       smem_per_sm=228 << 10, smem_optin=227 << 10,
                       name="NVIDIA H200")))
_add(Target(
    "b200", "cuda", "NVIDIA B200 180GB HBM3e (HGX B200)", "1x1x1",
    device_memory_bytes=180 * 10**9, hbm_Bps=7.7e12, peak_flops_bf16=2.25e15,
    peak_flops_f32=1.1e15, host_link_Bps=_PCIE5, host_link="PCIe Gen5 x16 (HGX B200 host link)",
    source="NVIDIA HGX B200 data sheet, per GPU (dense BF16 2.25 PFLOP/s, 180 GB, 7.7 TB/s); "
           "148 SMs, compute capability 10.0",
    gpu_spec=_gpu_spec(major=10, minor=0, sms=148, fp32_per_sm=128, clock_ghz=1.965,
                       mem_bytes=180 * 10**9, mem_Bps=7_700_000_000_000, l2_bytes=126 << 20,
                       smem_per_sm=228 << 10, smem_optin=227 << 10,
                       name="NVIDIA B200")))
_add(Target(
    "v4", "tpu", "TPU v4 (32 GiB HBM2)", "v4:2x2x1",
    device_memory_bytes=32 * _GiB, hbm_Bps=1.2e12, peak_flops_bf16=275e12,
    peak_flops_f32=275e12 / 4, host_link_Bps=_PCIE4, host_link="PCIe Gen4 x16 (assumed)",
    source="Google Cloud TPU v4 documentation (275 TFLOP/s bf16, 1.2 TB/s, 32 GiB)"))
_add(Target(
    "v5e", "tpu", "TPU v5e (16 GiB HBM2)", "v5e:2x2",
    device_memory_bytes=16 * _GiB, hbm_Bps=819e9, peak_flops_bf16=197e12,
    peak_flops_f32=197e12 / 4, host_link_Bps=_PCIE4, host_link="PCIe Gen4 x16 (assumed)",
    source="Google Cloud TPU v5e documentation (197 TFLOP/s bf16, 819 GB/s, 16 GiB)"))
_add(Target(
    "v5p", "tpu", "TPU v5p (95 GiB HBM2e)", "v5p:2x2x1",
    device_memory_bytes=95 * _GiB, hbm_Bps=2.765e12, peak_flops_bf16=459e12,
    peak_flops_f32=459e12 / 4, host_link_Bps=_PCIE4, host_link="PCIe Gen4 x16 (assumed)",
    source="Google Cloud TPU v5p documentation (459 TFLOP/s bf16, 2.765 TB/s, 95 GiB)"))
_add(Target(
    "v6e", "tpu", "TPU v6e Trillium (32 GiB HBM)", "v6e:2x2",
    device_memory_bytes=32 * _GiB, hbm_Bps=1.64e12, peak_flops_bf16=918e12,
    peak_flops_f32=918e12 / 4, host_link_Bps=_PCIE4, host_link="PCIe Gen4 x16 (assumed)",
    source="Google Cloud TPU v6e documentation (918 TFLOP/s bf16, 1.64 TB/s, 32 GiB)"))


def get_target(name: str) -> Target:
    try:
        return TARGETS[name.lower()]
    except (KeyError, AttributeError):
        raise UsageError(f"unknown target {name!r}; targets: {', '.join(TARGETS)}") from None


def list_targets_text() -> str:
    rows = [f"{'target':<7}{'platform':<9}{'topology':<11}{'memory':>9}{'HBM':>11}"
            f"{'bf16 peak':>13}{'host link':>11}  description"]
    for t in TARGETS.values():
        rows.append(f"{t.name:<7}{t.platform:<9}{t.topology:<11}"
                    f"{t.device_memory_bytes / _GiB:>7.1f}Gi{t.hbm_Bps / 1e12:>8.2f}TB/s"
                    f"{t.peak_flops_bf16 / 1e12:>8.0f}TFLOP/s{t.host_link_Bps / 1e9:>7.0f}GB/s"
                    f"  {t.description}")
    return "\n".join(rows)
