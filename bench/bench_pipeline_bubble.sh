#!/usr/bin/env bash
# The pipeline bubble as measured: `scaffold llm_training` with P pipeline stages (one rank each,
# DP 1, TP 1) and m micro-batches of 1 sequence per iteration (global batch = m), for P = 2 and 4
# and several m, and with v model chunks per rank (the interleaved schedule, where m is a multiple
# of P), alternating the configurations per round. Each run's summary.json holds every stage's
# idle share (its waits for the other stages / its timed training time, validation excluded) and
# the ideal (P - 1) / (v m + P - 1); reported: the mean over the stages, the first and the last
# stage, medians over the rounds, and the steady tokens/s.
# With fewer cores than P x THREADS the stages share cores: the receive of an idle stage yields
# its core (mpi_yield_when_idle), yet the figures then include that sharing.
# Usage: bench/bench_pipeline_bubble.sh [build-dir]
# Env: LAYERS=8 HIDDEN=256 HEADS=4 SEQ=128 ITERS=12 ROUNDS=2 STAGES="2 4" MICRO_BATCHES="1 2 4 8 16"
#      CHUNKS="1 2" (model chunks per rank; LAYERS must divide into P x v)
#      THREADS=1 (per rank) WORK=<temp dir> LOG=<file keeping every run's output>.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/src/scaffold"
LAYERS=${LAYERS:-8}
HIDDEN=${HIDDEN:-256}
HEADS=${HEADS:-4}
SEQ=${SEQ:-128}
ITERS=${ITERS:-12}
ROUNDS=${ROUNDS:-2}
STAGES=${STAGES:-"2 4"}
MICRO_BATCHES=${MICRO_BATCHES:-"1 2 4 8 16"}
CHUNKS=${CHUNKS:-"1 2"}
THREADS=${THREADS:-1}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
LOG=${LOG:-$WORK/runs.log}
[[ -x "$BIN" ]] || { echo "error: $BIN not found; build first (scripts/build)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cat > "$WORK/bench.yml" <<YML
model_size: tiny
num_layers: $LAYERS
hidden_size: $HIDDEN
num_attention_heads: $HEADS
ffn_hidden_size: $(( 4 * HIDDEN ))
seq_length: $SEQ
vocab_size: 1000
micro_batch_size: 1
train_iters: $ITERS
exit_duration_in_mins: 0
log_interval: 2
timing_warmup_iters: 4
eval_interval: $ITERS
eval_iters: 1
save_interval: 0
precision: fp32
recompute_granularity: none
lr_warmup_samples: 8
base_run_dir: $WORK/runs
YML

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores," \
     "$THREADS thread(s) per rank"
echo "# GPT $LAYERS layers, hidden $HIDDEN, $HEADS heads, sequence $SEQ, micro-batch 1, fp32," \
     "$ITERS iterations (4 warm-up), $ROUNDS rounds"
: > "$WORK/results.txt"
for round in $(seq 1 "$ROUNDS"); do
  for p in $STAGES; do
    for v in $CHUNKS; do
      for m in $MICRO_BATCHES; do
        (( v == 1 || m % p == 0 )) || continue  # interleaving needs m a multiple of P
        job="r${round}_p${p}_v${v}_m${m}"
        interleave=""
        (( v == 1 )) || interleave="--num-layers-per-virtual-pipeline-stage $(( LAYERS / (p * v) ))"
        # shellcheck disable=SC2086
        mpiexec -n "$p" --oversubscribe --mca mpi_yield_when_idle 1 "$BIN" llm_training \
          --threads "$THREADS" -c "$WORK/bench.yml" --job-name "$job" \
          --pipeline-model-parallel-size "$p" --global-batch-size "$m" $interleave >>"$LOG" 2>&1 ||
          { echo "error: P $p, v $v, m $m failed (see $LOG)" >&2; exit 1; }
        runs=("$WORK/runs/${job}_"*)
        python3 - "$p" "$v" "$m" "${runs[0]}/summary.json" >>"$WORK/results.txt" <<'PY'
import json, sys
p, v, m, path = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
c = {x["name"]: x["value"] for x in json.load(open(path))["counters"]}
stages = [c[f"pipeline_idle_share_stage{k}"] for k in range(int(p))]
print(p, v, m, c["pipeline_bubble_ideal"], sum(stages) / len(stages), stages[0], stages[-1],
      c["steady_tokens_per_s"])
PY
      done
    done
  done
done

python3 - "$WORK/results.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
keys = sorted({(int(r[0]), int(r[1]), int(r[2])) for r in rows})
print("{:>2} {:>2} {:>3} {:>7} {:>9} {:>12} {:>11} {:>9}".format(
    "P", "v", "m", "ideal", "measured", "first stage", "last stage", "tokens/s"))
for p, v, m in keys:
    sel = [r for r in rows if (int(r[0]), int(r[1]), int(r[2])) == (p, v, m)]
    med = lambda i: statistics.median(float(r[i]) for r in sel)
    print("{:>2} {:>2} {:>3} {:>6.1f}% {:>8.1f}% {:>11.1f}% {:>10.1f}% {:>9.0f}".format(
        p, v, m, 100 * med(3), 100 * med(4), 100 * med(5), 100 * med(6), med(7)))
PY
