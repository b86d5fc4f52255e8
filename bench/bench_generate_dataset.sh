#!/usr/bin/env bash
# Dataset generation throughput against the disk: the disk's sequential write bandwidth (dd,
# fsync'ed, measured before and after in the same run) next to `scaffold generate_dataset` on
# configs/benchmark_default.yml (scale 7: 240 volumes, 6.6 GiB), fractal library prepared first
# and not timed. Usage: bench/bench_generate_dataset.sh [build-dir] [extra scaffold flags...]
# WORK_DIR (default: a temporary folder under /tmp) must have ~10 GiB free.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/src/scaffold"
shift || true
WORK=${WORK_DIR:-$(mktemp -d)}
trap 'rm -rf "$WORK"' EXIT
CFG="$ROOT/configs/benchmark_default.yml"
DD_MIB=${DD_MIB:-2048}

dd_bandwidth() {  # MiB/s of an fsync'ed sequential write of DD_MIB MiB
  local out
  out=$(dd if=/dev/zero of="$WORK/dd.bin" bs=1M count="$DD_MIB" conv=fsync 2>&1 | tail -1)
  rm -f "$WORK/dd.bin"
  awk -v mib="$DD_MIB" '{for (i = 1; i <= NF; i++) if ($i == "s,") print mib / $(i - 1)}' <<<"$out"
}

"$BIN" generate_fractals -c "$CFG" --fract-base-dir "$WORK/lib" 2>/dev/null
dd_before=$(dd_bandwidth)
log=$("$BIN" generate_dataset -c "$CFG" --fract-base-dir "$WORK/lib" --dataset-dir "$WORK/data" "$@" 2>&1)
dd_after=$(dd_bandwidth)
line=$(grep "dataset: wrote" <<<"$log")
echo "$line"
gen_mib=$(sed -E 's/.* ([0-9.]+) MiB\/s.*/\1/' <<<"$line")
awk -v a="$dd_before" -v b="$dd_after" -v g="$gen_mib" 'BEGIN {
  dd = (a + b) / 2
  printf "disk (dd, fsync): %.0f MiB/s before, %.0f MiB/s after\n", a, b
  printf "generate_dataset: %.0f MiB/s = %.2f of the disk bandwidth (target >= 0.5)\n", g, g / dd
}'
