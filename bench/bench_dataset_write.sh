#!/usr/bin/env bash
# Dataset generation against the page-cache write rate of the same bytes (issue 17): for each
# scale, `scaffold generate_dataset` (one process, THREADS threads, fractal library prepared
# first and not timed) alternately with BASE_BIN (an older build, optional) for ROUNDS rounds,
# and in the same rounds numpy writing the same number of bytes as .npy files of the same sizes
# into the page cache (no sync). Prints the median seconds of each and the ratios.
# Usage: [BASE_BIN=old/scaffold] [SCALES="6 7"] [ROUNDS=3] bench/bench_dataset_write.sh [build-dir]
# WORK_DIR (default: a temporary folder under /tmp) must hold two datasets of the largest scale.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/src/scaffold"
BASE_BIN=${BASE_BIN:-}
SCALES=${SCALES:-"6 7"}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
PY=${SCAFFOLD_PYTHON:-/usr/bin/python3}
WORK=${WORK_DIR:-$(mktemp -d)}
trap 'rm -rf "$WORK"' EXIT
CFG="$ROOT/configs/benchmark_default.yml"

gen_seconds() {  # BIN SCALE: wall seconds of one generate_dataset into a fresh folder
  local bin=$1 scale=$2 t0 t1
  rm -rf "$WORK/data"
  t0=$(date +%s.%N)
  "$bin" generate_dataset -c "$CFG" --problem-scale "$scale" --threads "$THREADS" \
    --fract-base-dir "$WORK/lib" --dataset-dir "$WORK/data" >/dev/null 2>&1
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}

numpy_seconds() {  # DIR: numpy rewrites every .npy of DIR (same shapes, dtypes) into the page cache
  "$PY" - "$1" "$WORK/np" <<'EOF'
import os, shutil, sys, time
import numpy as np
src, dst = sys.argv[1], sys.argv[2]
arrays = []
for d, _, files in os.walk(src):
    for f in files:
        if f.endswith(".npy"):
            a = np.load(os.path.join(d, f), mmap_mode="r")
            arrays.append((a.shape, a.dtype))
shutil.rmtree(dst, ignore_errors=True)
os.makedirs(dst)
bufs = {}
t0 = time.perf_counter()
for i, (shape, dtype) in enumerate(arrays):
    key = (shape, dtype.str)
    if key not in bufs:
        bufs[key] = np.ones(shape, dtype)
    np.save(os.path.join(dst, "%d.npy" % i), bufs[key])
print("%.3f" % (time.perf_counter() - t0))
shutil.rmtree(dst, ignore_errors=True)
EOF
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

"$BIN" generate_fractals -c "$CFG" --fract-base-dir "$WORK/lib" >/dev/null 2>&1
for scale in $SCALES; do
  new=() base=() np=()
  for ((r = 0; r < ROUNDS; r++)); do
    if [ -n "$BASE_BIN" ]; then base+=("$(gen_seconds "$BASE_BIN" "$scale")"); fi
    new+=("$(gen_seconds "$BIN" "$scale")")
    np+=("$(numpy_seconds "$WORK/data")")
  done
  bytes=$(du -sb "$WORK/data" | cut -f1)
  n=$(printf '%s\n' "${new[@]}" | median)
  p=$(printf '%s\n' "${np[@]}" | median)
  echo "scale $scale: $(awk -v b="$bytes" 'BEGIN { printf "%.2f GiB", b / 2^30 }'), $THREADS threads, $ROUNDS rounds"
  echo "  scaffold generate_dataset: median $n s (${new[*]})"
  echo "  numpy np.save, page cache: median $p s (${np[*]})"
  awk -v n="$n" -v p="$p" 'BEGIN { printf "  rate vs numpy: %.2f (target >= 0.8)\n", p / n }'
  if [ -n "$BASE_BIN" ]; then
    b=$(printf '%s\n' "${base[@]}" | median)
    echo "  base build: median $b s (${base[*]})"
    awk -v n="$n" -v b="$b" 'BEGIN { printf "  new / base time: %.2f (target <= 0.5)\n", n / b }'
  fi
done
