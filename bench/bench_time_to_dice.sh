#!/usr/bin/env bash
# Time to Dice >= target_dice on ScaFFold's recipe (configs/benchmark_default.yml: base 64, batch 1)
# at one problem scale, the issue-17 comparison: `scaffold benchmark` with the native CPU kernels
# (the auto keys) against the same binary on LibTorch's kernels (conv, upconv, pool and loss
# `libtorch`: PyTorch eager's kernels, whose step bench_train_step.sh pairs within 3 % of PyTorch's),
# alternating per round, for each precision; then PyTorch eager's own step
# (bench/train_step.py, both layouts, the faster) at the same shape times each run's step count,
# an estimate of a whole PyTorch run's training time. The fractal library and dataset are
# generated once into WORK and reused (they are not part of the time to solution, which is the
# sum of the epoch durations, validation included, as ScaFFold's figure of merit).
# Usage: bench/bench_time_to_dice.sh [build-dir]
# Env: SCALE=5, PRECISIONS="fp32 bf16", ROUNDS=1, EPOCHS=20 (the cap; runs stop at the target),
#      THREADS=2, SEED=42, WORK=<temporary folder, removed at the end unless set>,
#      PYTORCH=1 (0: skip the PyTorch eager steps).
# Prints one Markdown table; each run's output is kept in WORK/logs when WORK is set.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
BIN="$BUILD/src/scaffold"
PY=/usr/bin/python3
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
SCALE=${SCALE:-5}
PRECISIONS=${PRECISIONS:-"fp32 bf16"}
ROUNDS=${ROUNDS:-1}
EPOCHS=${EPOCHS:-20}
THREADS=${THREADS:-2}
SEED=${SEED:-42}
PYTORCH=${PYTORCH:-1}

if [[ ! -x "$BIN" ]]; then
  echo "error: $BIN not found or not executable (build first: cmake --build $BUILD)" >&2
  exit 2
fi
for p in $PRECISIONS; do
  if [[ "$p" != fp32 && "$p" != bf16 ]]; then
    echo "error: PRECISIONS takes fp32 and bf16, got '$p'" >&2
    exit 2
  fi
done
if [[ -n "${WORK:-}" ]]; then
  mkdir -p "$WORK"
else
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK/logs" "$WORK/runs"

LIBTORCH_KEYS=(--conv-kernel libtorch --upconv-kernel libtorch --pool-kernel libtorch
               --loss-kernel libtorch)

# One run: precision, kernel set (native | libtorch), round. Prints "key=value ..." of its result.
run_one() {
  local precision=$1 kernels=$2 round=$3
  local tag="$precision-$kernels-$round" amp=0 extra=()
  [[ "$precision" == bf16 ]] && amp=1
  [[ "$kernels" == libtorch ]] && extra=("${LIBTORCH_KEYS[@]}")
  local runs="$WORK/runs/$tag"
  rm -rf "$runs"
  mkdir -p "$runs"
  /usr/bin/time -f "peak_rss_kib=%M" -o "$WORK/logs/$tag.time" \
    "$BIN" benchmark -c "$ROOT/configs/benchmark_default.yml" --problem-scale "$SCALE" \
    --local-batch-size 1 --epochs "$EPOCHS" --threads "$THREADS" --torch-amp "$amp" \
    --seed "$SEED" --base-run-dir "$runs" --dataset-dir "$WORK/data" \
    --fract-base-dir "$WORK/fractals" "${extra[@]}" >"$WORK/logs/$tag.log" 2>&1 || {
    echo "error: the $tag run failed; its output:" >&2
    tail -20 "$WORK/logs/$tag.log" >&2
    exit 1
  }
  local dir
  dir="$(find "$runs" -mindepth 1 -maxdepth 1 -type d | head -1)"
  "$PY" - "$dir" "$WORK/logs/$tag.time" <<'EOF'
import csv, json, sys
run, timing = sys.argv[1], sys.argv[2]
summary = json.load(open(f"{run}/summary.json"))
counters = {c["name"]: c["value"] for c in summary["counters"]}
rows = list(csv.DictReader(open(f"{run}/train_stats.csv")))
durations = [float(r["epoch_duration"]) for r in rows]
rss_kib = [l.split("=")[1] for l in open(timing) if l.startswith("peak_rss_kib=")]
dice = "/".join("%.3f" % float(r["val_dice"]) for r in rows)
kernels = ",".join(json.load(open(f"{run}/system.json")).get("kernels", []))
print(" ".join([
    f"status={summary['status']}",
    f"epochs={len(rows)}",
    f"steps={rows[-1]['total_optimizer_steps'] if rows else 0}",
    f"tts={counters.get('time_to_solution_s', 0):.1f}",
    f"epoch_s={min(durations):.1f}-{max(durations):.1f}" if durations else "epoch_s=-",
    f"step_ms={counters.get('median_step_s', 0) * 1e3:.1f}",
    f"dice={dice}",
    f"rss_mib={int(rss_kib[0]) / 1024:.0f}" if rss_kib else "rss_mib=-",
    f"kernels={kernels}",
]))
EOF
}

# PyTorch eager's step at the recipe's shape: the faster layout's median, ms.
pytorch_step_ms() {
  local precision=$1 best="" flags=()
  [[ "$precision" == bf16 ]] && flags=(--bf16)
  for layout in "" --channels-last; do
    local out
    out="$(LD_PRELOAD="$TCMALLOC" OMP_NUM_THREADS="$THREADS" "$PY" "$ROOT/bench/train_step.py" \
      --scale "$SCALE" --base 64 --batch 1 --warmup 2 --steps 5 --threads "$THREADS" \
      "${flags[@]}" $layout 2>&1 | grep -o 'step_ms=[0-9.]*' | head -1 | cut -d= -f2)"
    [[ -z "$out" ]] && continue
    if [[ -z "$best" ]] || awk -v a="$out" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$out; fi
  done
  echo "${best:--}"
}

field() { tr ' ' '\n' <<<"$1" | grep "^$2=" | cut -d= -f2-; }

echo "bench_time_to_dice: scale $SCALE, base 64, batch 1, $THREADS threads, seed $SEED, rounds $ROUNDS, cap $EPOCHS epochs; $(date -u +%FT%TZ)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| precision | kernels | round | epochs to target (val Dice per epoch) | steps | time to solution s | s per epoch | median step ms | PyTorch eager step ms x steps = s | peak RSS MiB | status |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
kernel_lines=()
for precision in $PRECISIONS; do
  py_ms=-
  [[ "$PYTORCH" == 1 ]] && py_ms="$(pytorch_step_ms "$precision")"
  for round in $(seq 1 "$ROUNDS"); do
    for kernels in native libtorch; do
      r="$(run_one "$precision" "$kernels" "$round")"
      steps="$(field "$r" steps)"
      kernel_lines+=("$precision $kernels round $round: $(field "$r" kernels)")
      est=-
      [[ "$py_ms" != - ]] && est="$(awk -v m="$py_ms" -v s="$steps" 'BEGIN { printf "%.1f x %d = %.0f", m, s, m * s / 1000 }')"
      echo "| $precision | $kernels | $round | $(field "$r" epochs) ($(field "$r" dice)) | $steps | $(field "$r" tts) | $(field "$r" epoch_s) | $(field "$r" step_ms) | $est | $(field "$r" rss_mib) | $(field "$r" status) |"
    done
  done
done
echo
echo "Kernels each run used (system.json):"
printf '  %s\n' "${kernel_lines[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "native = the auto kernel keys; libtorch = --conv-kernel/--upconv-kernel/--pool-kernel/--loss-kernel libtorch."
echo "The PyTorch estimate counts training steps only (no validation, no data loading), so it is a lower bound of a whole PyTorch run."
