#!/usr/bin/env bash
# A real H200 capture of an unrolled model (issue 32): the `control` transformer's layers
# written out one after another (as MaxText's scan_layers=False), qkv_proj_offloaded, through
# `overlap capture` (a run directory: its compiled program's text in hlo/, several MB: the
# reader's HLO-text path, until now timed on a SYNTHETIC run directory only). Run on the lent
# machine from the repository root (the package travels as files, no install):
#     bash benchmarks/device/unrolled_capture.sh      # writes $OUT/*.tar.xz, $OUT/env.txt
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
B=/tmp/unrolled
OUT=${OUT:-/tmp/unrolled-out}
LAYERS=${LAYERS:-16}
mkdir -p "$B" "$OUT"
{ date -u; nvidia-smi -L; python3 -c 'import jax; print(jax.__version__, jax.devices())'; } \
    > "$OUT/env.txt" 2>&1
/usr/bin/time -v timeout 190 python3 -m overlap capture \
    --workload "benchmarks.unrolled:make_unrolled:$LAYERS-control" --policy qkv_proj_offloaded \
    --label "unrolled_control_${LAYERS}_qkv" --steps 3 --warmup 1 --out "$B" \
    > "$OUT/capture.log" 2>&1
echo "rc=$?" >> "$OUT/env.txt"
grep -E 'Elapsed|Maximum resident' "$OUT/capture.log" >> "$OUT/env.txt"
grep -v '^I0000\|^W0000\|^WARNING\|^\s' "$OUT/capture.log" | tail -5 >> "$OUT/env.txt"
find "$B" -name '*.trace.json.gz' -delete
find "$B" -type f -printf '%s %p\n' >> "$OUT/env.txt"
for d in "$B"/*/; do
    n=$(basename "$d")
    tar -C "$B" -cf - "$n" | xz -T16 -7 > "$OUT/$n.tar.xz"
done
rm -f "$OUT/capture.log"
cat "$OUT/env.txt"
