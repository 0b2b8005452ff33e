#!/bin/bash
# Pairs of whole processes, each command in turn (farm-bench), for issue 32's goals:
# `overlap report --json` of the AFTER tree against a bare upb decode of the same file, and
# AFTER against BEFORE for `report --json` (and `check` on the small captures).
#   benchmarks/bench_pairs.sh BEFORE_TREE AFTER_TREE OUT [SMALL_CAPTURE...]
# Trees are copies of the repository with bytecode compiled and the scanner built (run from /tmp,
# so no work tree shadows them). Summary: awk over OUT (benchmarks/README.md, round 7).
set -u
BEFORE=$1 AFTER=$2 OUT=$3; shift 3
PY=$(command -v python)
C=$(cd "$(dirname "$0")" && pwd)/.cache
cd /tmp
: > "$OUT"
dec() { echo "from overlap.trace.protos import XSpace; XSpace.FromString(open('$1','rb').read())"; }
pair() {  # title, A (after), B (baseline)
  echo "=== $1" >> "$OUT"
  farm-bench -n 9 --timeout 300 --vs "$3" -- $2 >> "$OUT" 2>&1
}
for f in $C/tpu_1M.upb.xplane.pb $C/gpu_compact_1M.upb.xplane.pb $C/gpu_1M.upb.xplane.pb \
         $C/many_ops_tpu.xplane.pb $C/many_ops_tpu_clock.xplane.pb "$@"; do
  [ -f "$f" ] || continue
  pair "$f report(after) vs decode" "env PYTHONPATH=$AFTER $PY -m overlap report --json $f" \
       "env PYTHONPATH=$AFTER $PY -c \"$(dec "$f")\""
  pair "$f report after vs before" "env PYTHONPATH=$AFTER $PY -m overlap report --json $f" \
       "env PYTHONPATH=$BEFORE $PY -m overlap report --json $f"
  pair "$f check after vs before" "env PYTHONPATH=$AFTER $PY -m overlap check $f" \
       "env PYTHONPATH=$BEFORE $PY -m overlap check $f"
done
awk '/^===/{t=$0; sub("=== ","",t)} /^A cpu s/{a=$5} /^B cpu s/{b=$5} /^A peak MiB/{p=$5}
     /^A\/B cpu/{printf "%s: A %s B %s CPU s, ratio %s (%s-%s), peak A %s MiB\n", t, a, b, $4, $3, $5, p}' "$OUT"
