#!/usr/bin/env bash
# The power sampler's cost: median training step of the quickstart benchmark with 100 ms power
# sampling on (the GH200 fixture tree, read through sysfs exactly as on a real node) and off,
# alternating ROUNDS times (default 3), plus the sampler's jitter from `scaffold power`.
# Usage: bench/bench_sampler_cost.sh [build-dir]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/src/scaffold"
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
FIXTURE="$ROOT/tests/fixtures/energy/gh200/hwmon"
step_ms() {  # $1 = hwmon root -> median step in ms, from the run summary
  SCAFFOLD_HWMON_ROOT=$1 SCAFFOLD_POWERCAP_ROOT=/nonexistent "$BIN" benchmark \
    -c "$ROOT/configs/quickstart.yml" --epochs 8 --threads "$(nproc)" 2>&1 |
    sed -nE 's/.*median step ([0-9.]+) ms.*/\1/p'
}
"$BIN" generate_dataset -c "$ROOT/configs/quickstart.yml" >/dev/null 2>&1
on=(); off=()
for _ in $(seq "$ROUNDS"); do
  off+=("$(step_ms /nonexistent)")
  on+=("$(step_ms "$FIXTURE")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m_on=$(median "${on[@]}"); m_off=$(median "${off[@]}")
echo "median step, sampling off: ${off[*]} ms -> $m_off ms"
echo "median step, sampling on:  ${on[*]} ms -> $m_on ms"
awk -v a="$m_on" -v b="$m_off" 'BEGIN {printf "difference: %+.2f%% (target: under 1%%)\n", 100 * (a - b) / b}'
SCAFFOLD_HWMON_ROOT="$FIXTURE" "$BIN" power --methods hwmon --hwmon-root "$FIXTURE" --interval 20 \
  --out "$WORK/power" -- sleep 2 2>&1 | grep -iE "jitter|late|samples" || true
