#!/usr/bin/env bash
# Multi-rank training steps on one machine: `scaffold benchmark` for a fixed number of epochs as
#   A  1 rank  x T threads, local batch B            (the single-process reference)
#   S  2 ranks x T/2 threads, dc_num_shards [2,1,1]  (one sample split along D; global batch B)
#   D  2 ranks x T/2 threads, local batch B/2        (two data-parallel replicas; global batch B)
# alternating A, S, D per round, each its own process. Reports the median training step of every
# run (scaffold's own "median step" line) and the shares of step time rank 0 spent in halo
# exchange and waiting for the gradient all-reduce. Data is generated once, outside the timings.
# Usage: bench/bench_distributed.sh [build-dir]
# Env: SCALES="5 6" (problem_scale values), BASE=16, BATCH=2, EPOCHS=2, ROUNDS=3,
#      THREADS=<all CPUs>, GROUPNORM=global, WORK=<temp dir>, LOG=<file keeping every run's output>.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/src/scaffold"
SCALES=${SCALES:-"5 6"}
BASE=${BASE:-16}
BATCH=${BATCH:-2}
EPOCHS=${EPOCHS:-2}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-$(nproc)}
GROUPNORM=${GROUPNORM:-global}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
LOG=${LOG:-$WORK/runs.log}
[[ -x "$BIN" ]] || { echo "error: $BIN not found; build first (scripts/build)" >&2; exit 1; }
(( THREADS % 2 == 0 )) || { echo "error: THREADS=$THREADS must be even (2 ranks share them)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
HALF=$(( THREADS / 2 ))
# Each rank gets HALF cores of its own (Open MPI binds ranks to cores by default for np <= 2).
MPI="mpiexec -n 2 --map-by slot:PE=$HALF --bind-to core"

cat > "$WORK/bench.yml" <<YML
unet_bottleneck_dim: 3
unet_base_channels: $BASE
n_categories: 2
n_instances_used_per_fractal: 24
starting_learning_rate: 0.01
min_learning_rate: 0.001
warmup_batches: 2
target_dice: 1.0
epochs: $EPOCHS
base_run_dir: $WORK/runs
fract_base_dir: $WORK/fractals
dataset_dir: $WORK/datasets
YML

median_ms() { sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p' | tail -1; }
share() { sed -n "s/.*$1 [0-9.]* s (\([0-9.]*\)%.*/\1/p" | tail -1; }

run() {  # label, command...
  local label=$1; shift
  local out; out=$("$@" 2>&1) || { echo "$out" >> "$LOG"; echo "error: $label failed; see $LOG" >&2; exit 1; }
  echo "=== $label: $*" >> "$LOG"; echo "$out" >> "$LOG"
  printf '%s %s %s %s\n' "$label" "$(median_ms <<<"$out")" "$(share 'halo exchange' <<<"$out")" \
    "$(share 'gradient all-reduce' <<<"$out")"
}

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, threads $THREADS, base $BASE, global batch $BATCH, $EPOCHS epochs per run, GroupNorm $GROUPNORM"
echo "# scale run median_step_ms halo_% allreduce_wait_%"
for scale in $SCALES; do
  # Fractals and both datasets (unsharded, [2,1,1]) once, untimed.
  "$BIN" generate_dataset -c "$WORK/bench.yml" --problem-scale "$scale" --threads "$THREADS" >> "$LOG" 2>&1
  "$BIN" generate_dataset -c "$WORK/bench.yml" --problem-scale "$scale" --threads "$THREADS" --dc-num-shards 2 1 1 >> "$LOG" 2>&1
  for ((r = 1; r <= ROUNDS; ++r)); do
    run "$scale A_1x$THREADS" "$BIN" benchmark -c "$WORK/bench.yml" --problem-scale "$scale" --threads "$THREADS" \
        --local-batch-size "$BATCH"
    run "$scale S_2x${HALF}_spatial" $MPI "$BIN" benchmark -c "$WORK/bench.yml" --problem-scale "$scale" \
        --threads "$HALF" --local-batch-size "$BATCH" --dc-num-shards 2 1 1 --dc-groupnorm "$GROUPNORM"
    run "$scale D_2x${HALF}_data" $MPI "$BIN" benchmark -c "$WORK/bench.yml" --problem-scale "$scale" \
        --threads "$HALF" --local-batch-size $(( BATCH / 2 ))
  done
done
echo "# every run's output: $LOG"
