#!/usr/bin/env bash
# GPT training layouts on 2 ranks of one machine, `scaffold llm_training` on the same global batch:
#   DP      2 data-parallel replicas (the reference)
#   DP+DO   the same with the distributed optimizer (Adam's state sharded over DP)
#   TP      tensor parallelism 2
#   TP+SP   tensor parallelism 2 with sequence parallelism
#   PP      pipeline parallelism 2 (1F1B over the GLOBAL / MICRO micro-batches of an iteration)
# alternating the layouts per round, each its own process. Reports, from each run's summary.json,
# the steady tokens/s, the shares of the iteration rank 0 spent in tensor-parallel collectives
# and waiting for the gradient all-reduce, the pipeline stages' idle share (mean over the stages),
# Adam's state bytes per rank and the peak resident set per process (both measured by the run, the
# largest over the ranks); medians over the rounds.
# Usage: bench/bench_llm_layouts.sh [build-dir]
# Env: LAYERS=4 HIDDEN=512 HEADS=8 SEQ=256 MICRO=2 GLOBAL=8 ITERS=12 ROUNDS=2
#      THREADS=<all CPUs> PRECISION=fp32 WORK=<temp dir> LOG=<file keeping every run's output>.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/src/scaffold"
LAYERS=${LAYERS:-4}
HIDDEN=${HIDDEN:-512}
HEADS=${HEADS:-8}
SEQ=${SEQ:-256}
MICRO=${MICRO:-2}
GLOBAL=${GLOBAL:-8}
ITERS=${ITERS:-12}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-$(nproc)}
PRECISION=${PRECISION:-fp32}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
LOG=${LOG:-$WORK/runs.log}
[[ -x "$BIN" ]] || { echo "error: $BIN not found; build first (scripts/build)" >&2; exit 1; }
(( THREADS % 2 == 0 )) || { echo "error: THREADS=$THREADS must be even (2 ranks share them)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
HALF=$(( THREADS / 2 ))
MPI="mpiexec -n 2 --map-by slot:PE=$HALF --bind-to core"

cat > "$WORK/bench.yml" <<YML
model_size: tiny
num_layers: $LAYERS
hidden_size: $HIDDEN
num_attention_heads: $HEADS
ffn_hidden_size: $(( 4 * HIDDEN ))
seq_length: $SEQ
vocab_size: 8000
micro_batch_size: $MICRO
global_batch_size: $GLOBAL
train_iters: $ITERS
exit_duration_in_mins: 0
log_interval: 2
timing_warmup_iters: 4
eval_interval: $ITERS
eval_iters: 1
save_interval: 0
precision: $PRECISION
recompute_granularity: none
lr_warmup_samples: 8
base_run_dir: $WORK/runs
YML

declare -A FLAGS=(
  [DP]=""
  [DP+DO]="--use-distributed-optimizer 1"
  [TP]="--tensor-model-parallel-size 2"
  [TP+SP]="--tensor-model-parallel-size 2 --sequence-parallel 1"
  [PP]="--pipeline-model-parallel-size 2")
ORDER=("DP" "DP+DO" "TP" "TP+SP" "PP")

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $THREADS threads, 2 ranks"
echo "# GPT $LAYERS layers, hidden $HIDDEN, $HEADS heads, sequence $SEQ, micro-batch $MICRO," \
     "global batch $GLOBAL, $PRECISION, $ITERS iterations (4 warm-up), $ROUNDS rounds"
: > "$WORK/results.txt"
for round in $(seq 1 "$ROUNDS"); do
  for layout in "${ORDER[@]}"; do
    job="r${round}_$(echo "$layout" | tr '+' '_')"
    # shellcheck disable=SC2086
    $MPI "$BIN" llm_training --threads "$HALF" -c "$WORK/bench.yml" --job-name "$job" \
      ${FLAGS[$layout]} >>"$LOG" 2>&1 || { echo "error: $layout failed (see $LOG)" >&2; exit 1; }
    runs=("$WORK/runs/${job}_"*)
    run=${runs[0]}
    python3 - "$layout" "$run/summary.json" >>"$WORK/results.txt" <<'PY'
import json, sys
layout, path = sys.argv[1], sys.argv[2]
s = json.load(open(path))
c = {x["name"]: x["value"] for x in s["counters"]}
# The shares: TP collectives over every iteration (the CARAML mean time per iteration, warm-up
# included; the closing validation's forwards add a little), the DP wait over the timed ones.
all_s = c["time_per_iteration_s"] * c["iterations"]
timed_s = c["steady_time_per_iteration_s"] * (c["iterations"] - 4)
stages = [v for k, v in c.items() if k.startswith("pipeline_idle_share_stage")]
print(layout, c["steady_tokens_per_s"], c.get("tensor_parallel_comm_s", 0.0) / all_s,
      c.get("gradient_wait_s", 0.0) / timed_s, c["optimizer_state_bytes"], c["peak_rss_gib"],
      sum(stages) / len(stages) if stages else 0.0)
PY
  done
done

python3 - "$WORK/results.txt" "${ORDER[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("{:<7} {:>10} {:>8} {:>12} {:>10} {:>8} {:>12} {:>9}".format(
    "layout", "tokens/s", "vs DP", "TP comm (%)", "DP wait", "PP idle", "Adam state", "peak RSS"))
median = lambda k, i: statistics.median(float(r[i]) for r in rows if r[0] == k)
base = median("DP", 1)
for k in sys.argv[2:]:
    print("{:<7} {:>10.0f} {:>7.2f}x {:>12.1f} {:>9.1f}% {:>7.1f}% {:>9.1f} MB {:>7.2f} GiB".format(
        k, median(k, 1), median(k, 1) / base, 100 * median(k, 2), 100 * median(k, 3),
        100 * median(k, 6), median(k, 4) / 1e6, median(k, 5)))
PY
