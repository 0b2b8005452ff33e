#!/usr/bin/env bash
# Real GPU captures large enough to time the reader on (issue 32): the corpus's 38 captures
# hold at most ~5k device events each, every 1M-event file before this was SYNTHETIC.
# Run on the lent H100/H200 machine from the repository root (the package travels as files,
# no install; the image has jax 0.11.2 with CUDA 13):
#     bash benchmarks/device/big_captures.sh        # writes $OUT/*.tar.xz, $OUT/env.txt
# Each run directory is packed on its own so that no returned file passes 16 MiB.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
B=/tmp/big
OUT=${OUT:-/tmp/big-out}
mkdir -p "$B" "$OUT"
{ date -u; nvidia-smi -L; python3 -c 'import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())'; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
# Many small steps: ~240 device events a step (kernels, D2H/H2D copies, D2D copies), command
# buffers off (the capture's default), every op its own event.
time timeout 240 python3 -m overlap capture --workload scan:small --policy offload:x \
    --label scan_small_offload_x_4000 --steps 4000 --warmup 3 --out "$B" 2>&1 | tail -3
# A transformer step with XLA's default command buffers on: one stream, cuda_graph_id on each event.
time timeout 150 python3 -m overlap capture --workload transformer:control --policy qkv_proj_offloaded \
    --label transformer_control_qkv_cb_300 --command-buffers --steps 300 --warmup 3 --out "$B" 2>&1 | tail -3
# jax.profiler's own trace.json.gz is a second copy of the same events; the xplane is what we read.
find "$B" -name '*.trace.json.gz' -delete
find "$B" -type f -printf '%s %p\n' | tee -a "$OUT/env.txt"
for d in "$B"/*/; do
    n=$(basename "$d")
    tar -C "$B" -cf - "$n" | xz -T16 -7 > "$OUT/$n.tar.xz"
done
ls -la "$OUT"
