#!/usr/bin/env bash
# Real H200 captures of many programs (issue 32): bucketed offloading train steps and eager
# dispatch with explicit pinned-host transfers (benchmarks/device/programs_capture.py says what
# each holds). Run on the lent machine from the repository root (the package travels as files):
#     bash benchmarks/device/programs_captures.sh     # writes $OUT/*.tar.xz, $OUT/env.txt
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
B=/tmp/progs
OUT=${OUT:-/tmp/progs-out}
mkdir -p "$B" "$OUT"
{ date -u; nvidia-smi -L; python3 -c 'import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())'; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
# the scanner is built there: this machine's Python is not that one's
(time python3 setup.py build_ext --inplace) > "$OUT/build.log" 2>&1; tail -3 "$OUT/build.log"
run() {  # NAME TIMEOUT ARGS...
    local n=$1 t=$2; shift 2
    echo "== $n: programs_capture.py $*" | tee -a "$OUT/env.txt"
    /usr/bin/time -v timeout "$t" python3 benchmarks/device/programs_capture.py "$@" \
        > "$OUT/$n.stdout" 2> "$OUT/$n.stderr"
    echo "rc=$? $(tail -1 "$OUT/$n.stdout")" | tee -a "$OUT/env.txt"
    grep -E 'Elapsed|Maximum resident' "$OUT/$n.stderr" | tee -a "$OUT/env.txt"
}
run buckets_offload_32 200 buckets "$B/buckets_offload_32" 32 gpu
run eager_transfers_300 200 eager "$B/eager_transfers_300" 300 gpu
# jax.profiler's own trace.json.gz is a second copy of the same events; the xplane is what we read.
find "$B" -name '*.trace.json.gz' -delete
find "$B" -type f -printf '%s %p\n' | tee -a "$OUT/env.txt"
for d in "$B"/*/; do
    n=$(basename "$d")
    f=$(find "$d" -name '*.xplane.pb' | head -1)
    [ -n "$f" ] && for s in 1 0; do
        echo "-- $n OVERLAP_SCANNER=$s" >> "$OUT/env.txt"
        OVERLAP_SCANNER=$s timeout 120 python3 -m overlap report --json "$f" > "$OUT/$n.s$s.json" 2>> "$OUT/env.txt"
        echo "rc=$?" >> "$OUT/env.txt"
    done
    tar -C "$B" -cf - "$n" | xz -T16 -7 > "$OUT/$n.tar.xz"
done
for e in "$OUT"/*.stderr; do echo "-- $e"; grep -v "^I0000\|^W0000\|^WARNING" "$e" | tail -5; done >> "$OUT/env.txt"
rm -f "$OUT"/*.stdout "$OUT"/*.stderr
ls -la "$OUT"
