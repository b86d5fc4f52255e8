#!/usr/bin/env bash
# Wall time of `scaffold generate_fractals` on configs/benchmark_default.yml (5 categories,
# scale 7), from scratch, in a temporary directory: median of REPS runs (default 3), for 1
# thread and for all threads. Also times a no-op rerun (everything reused).
# Usage: bench/bench_generate_fractals.sh [build-dir]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/src/scaffold"
REPS=${REPS:-3}
CFG="$ROOT/configs/benchmark_default.yml"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run_once() {  # threads -> seconds
  rm -rf "$WORK/lib"
  local t0 t1
  t0=$(date +%s.%N)
  "$BIN" generate_fractals -c "$CFG" --fract-base-dir "$WORK/lib" --threads "$1" 2>/dev/null
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}'
}
echo "generate_fractals, configs/benchmark_default.yml (5 categories x 145 instances, scale 7), median of $REPS"
for threads in 1 "$(nproc)"; do
  times=$(for _ in $(seq "$REPS"); do run_once "$threads"; done | median)
  printf "  from scratch, %d thread(s): %.2f s\n" "$threads" "$times"
done
t0=$(date +%s.%N)
"$BIN" generate_fractals -c "$CFG" --fract-base-dir "$WORK/lib" 2>/dev/null
t1=$(date +%s.%N)
printf "  rerun, everything reused:   %.2f s\n" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')"
du -sh "$WORK/lib" | awk '{print "  library size: " $1}'
