#!/usr/bin/env bash
# One GPT training step, C++ (build/bench/bench_gpt_step, the llm_training task's step) against
# PyTorch eager (bench/gpt_step.py under Debian's /usr/bin/python3), same dimensions, batch,
# precision, threads and allocator (tcmalloc, preloaded for Python, linked into the C++ bench),
# runs alternating C++, Python per round; each run is its own process and reports the median of
# its timed steps. The table gives medians over rounds, the paired C++/Python ratio, tokens/s and
# the C++ step's shares (attention, MLP, embedding + logits + loss, optimizer). Then tensor
# parallelism: 2 ranks x 1 thread (--tp 2) against 1 process with 1 and with 2 threads, and the
# share of the step in the tensor-parallel all-reduces. Builds and installs nothing.
# Usage: bench/bench_gpt_step.sh [build-dir]
# Env: CONFIGS="4:256:8:256:4" (layers:hidden:heads:seq:batch), PRECISIONS="fp32 bf16", ROUNDS=3,
#      STEPS=5, WARMUP=2, THREADS=<all CPUs>, VOCAB=50304, TP=1 (0: skip the tensor-parallel part),
#      OPTIMIZER=fused (the C++ side's AdamW kernel: fused or libtorch), GEMM=probe (its linear
#      layers' products: probe, onednn or libtorch), GELU=native (its MLP's tanh GELU: native or
#      libtorch), ATTENTION=auto (its attention: auto = native here, native, plain or fused; the
#      Python side runs the plain one), LOG=<file keeping every run's output>. The
#      C++ MFU column is its model FLOP/s over the fastest product at the model's GEMM shapes
#      (at::mm, and unless GEMM=libtorch oneDNN's and in float32 our own), timed in the same
#      process in the step's dtype.
#      The floor column (fp32): the step's dense products at the float32 multiply-add peak the C++
#      process measured, over the Python step: the lowest C++/Python any float32 step could reach.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/bench/bench_gpt_step"
PY=/usr/bin/python3
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
CONFIGS=${CONFIGS:-"4:256:8:256:4"}
PRECISIONS=${PRECISIONS:-"fp32 bf16"}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-2}
THREADS=${THREADS:-$(nproc)}
VOCAB=${VOCAB:-50304}
TP=${TP:-1}
OPTIMIZER=${OPTIMIZER:-fused}
GEMM=${GEMM:-probe}
GELU=${GELU:-native}
ATTENTION=${ATTENTION:-auto}
LOG=${LOG:-$(mktemp)}

if [[ ! -x "$BIN" ]]; then
  echo "error: $BIN not found; build it first:" >&2
  echo "  cmake -S $ROOT -B build && cmake --build build -j2 --target bench_gpt_step" >&2
  exit 1
fi
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "error: $PY cannot import torch; install Debian's PyTorch: apt-get install python3-torch" >&2
  exit 1
fi
if [[ ! -r "$TCMALLOC" ]]; then
  echo "error: $TCMALLOC not found (apt-get install libtcmalloc-minimal4); without it the two" >&2
  echo "  sides would run different allocators" >&2
  exit 1
fi

results=$(mktemp)
trap 'rm -f "$results"' EXIT
args_of() {  # layers:hidden:heads:seq:batch precision
  IFS=: read -r l h a s b <<<"$1"
  echo "--layers $l --hidden $h --heads $a --seq $s --batch $b --vocab $VOCAB --precision $2 --warmup $WARMUP --steps $STEPS"
}
run_cpp() {
  OMP_NUM_THREADS="$THREADS" "$BIN" --threads "$THREADS" --optimizer-kernel "$OPTIMIZER" --gemm-kernel "$GEMM" --gelu-kernel "$GELU" --attention "$ATTENTION" "$@" |
    tee -a "$LOG" | grep '^result '
}
run_py() {
  LD_PRELOAD="$TCMALLOC" OMP_NUM_THREADS="$THREADS" "$PY" "$ROOT/bench/gpt_step.py" --threads "$THREADS" "$@" |
    tee -a "$LOG" | grep '^result '
}

echo "bench_gpt_step: configs '$CONFIGS', precisions '$PRECISIONS', $ROUNDS rounds, $STEPS timed steps after" \
  "$WARMUP, $THREADS threads, vocabulary $VOCAB, C++ optimizer $OPTIMIZER; full output in $LOG"
echo "uptime before: $(uptime)"
for cfg in $CONFIGS; do
  for prec in $PRECISIONS; do
    for ((r = 1; r <= ROUNDS; ++r)); do
      # shellcheck disable=SC2046
      run_cpp $(args_of "$cfg" "$prec") >>"$results"
      # shellcheck disable=SC2046
      run_py $(args_of "$cfg" "$prec") >>"$results"
    done
  done
done

awk '
function med(list,   a, n, i, j, t) {
  n = split(list, a, " ")
  for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
  delete f
  for (i = 2; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
  key = f["layers"] ":" f["hidden"] ":" f["heads"] ":" f["seq"] ":" f["batch"] " " f["dtype"]
  if (!(key in seen)) { seen[key] = 1; order[++n] = key; tokens[key] = f["batch"] * f["seq"] }
  side = f["impl"]
  ms[key, side] = ms[key, side] " " f["step_ms"]
  if (side == "cpp") {
    last_cpp[key] = f["step_ms"]
    share[key, "attn"] = share[key, "attn"] " " 100 * f["attention_ms"] / f["step_ms"]
    share[key, "mlp"] = share[key, "mlp"] " " 100 * f["mlp_ms"] / f["step_ms"]
    share[key, "emb"] = share[key, "emb"] " " 100 * f["embed_loss_ms"] / f["step_ms"]
    share[key, "opt"] = share[key, "opt"] " " 100 * f["optimizer_ms"] / f["step_ms"]
    mfu[key] = mfu[key] " " f["mfu"]
    if (f["fma_gflops"] + 0 > 0) floor_ms[key] = floor_ms[key] " " 1e3 * f["dense_gflop"] / f["fma_gflops"]
  }
  if (side == "py" && (key in last_cpp)) paired[key] = paired[key] " " last_cpp[key] / f["step_ms"]
  # The GEMM probe of the C++ side may pick other kernels in another process (docs/llm.md): the same
  # loss within float32 rounding, not to the last digit.
  if ((key, side) in loss) { d = loss[key, side] - f["loss0"]; if (d < 0) d = -d
    if (d > 1e-6 * f["loss0"]) bad = bad "\n  " key ": " side " loss0 changed between runs" }
  loss[key, side] = f["loss0"]; wsum[key, side] = f["weights_sum"]
  if (f["peak_rss_mib"] + 0 > rss[key, side] + 0) rss[key, side] = f["peak_rss_mib"]
}
END {
  printf "\n| layers:hidden:heads:seq:batch | precision | C++ ms/step | Python ms/step | C++/Python (paired) | floor | C++ tokens/s | Python tokens/s | C++ MFU | attention | MLP | embedding+loss | optimizer | peak RSS C++ / Python MiB |\n"
  printf "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
  for (k = 1; k <= n; ++k) {
    key = order[k]; split(key, kp, " ")
    c = med(ms[key, "cpp"]); p = med(ms[key, "py"])
    fl = (key in floor_ms) ? sprintf("%.3f", med(floor_ms[key]) / p) : "-"
    printf "| %s | %s | %.1f | %.1f | %.3f | %s | %.0f | %.0f | %.2f | %.0f%% | %.0f%% | %.0f%% | %.0f%% | %s / %s |\n", kp[1], kp[2], c, p, \
      med(paired[key]), fl, tokens[key] / (c / 1e3), tokens[key] / (p / 1e3), med(mfu[key]), med(share[key, "attn"]), \
      med(share[key, "mlp"]), med(share[key, "emb"]), med(share[key, "opt"]), rss[key, "cpp"], rss[key, "py"]
    if (wsum[key, "cpp"] != wsum[key, "py"]) bad = bad "\n  " key ": initial weights differ"
    d = loss[key, "cpp"] - loss[key, "py"]; if (d < 0) d = -d
    if (d > 1e-4 * loss[key, "py"]) bad = bad "\n  " key ": first-step losses differ, C++ " loss[key, "cpp"] ", Python " loss[key, "py"]
    else same = same sprintf("\n  %s: first-step loss %s (C++) = %s (Python), |weights| %s", key, loss[key, "cpp"], loss[key, "py"], wsum[key, "cpp"])
  }
  printf "\nTargets: C++/Python <= 1.0 (issue 12), <= 0.7 (issue 29; MFU >= 0.6 at 124M, 8 x 128). Shares are of the C++ step, each part timed alone (forward + backward). floor (fp32): the step'"'"'s dense products (linear layers, logits) at the float32 multiply-add peak the C++ side measured, over the Python step: no float32 step of this model on this CPU has a lower C++/Python.\nSame model on both sides:%s\n", same
  if (bad != "") { printf "error: the C++ and Python runs are not the same model:%s\n", bad > "/dev/stderr"; exit 1 }
}' "$results"

if [[ "$TP" != 0 ]]; then
  MPIEXEC=${MPIEXEC:-mpiexec}
  first=${CONFIGS%% *}
  echo
  echo "Tensor parallelism, $first fp32, median step over $ROUNDS rounds:"
  echo "| run | ms/step | tokens/s | TP all-reduce ms | share of the step |"
  echo "| --- | --- | --- | --- | --- |"
  for run in "1 process, 1 thread" "1 process, 2 threads" "TP 2: 2 ranks x 1 thread"; do
    list=""; comm=""
    for ((r = 1; r <= ROUNDS; ++r)); do
      # shellcheck disable=SC2046
      case "$run" in
        "1 process, 1 thread") line=$(OMP_NUM_THREADS=1 "$BIN" --threads 1 --breakdown 0 $(args_of "$first" fp32) | tee -a "$LOG" | grep '^result ');;
        "1 process, 2 threads") line=$(OMP_NUM_THREADS=2 "$BIN" --threads 2 --breakdown 0 $(args_of "$first" fp32) | tee -a "$LOG" | grep '^result ');;
        *) line=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "$MPIEXEC" -n 2 --oversubscribe \
                  "$BIN" --threads 1 --tp 2 --breakdown 0 $(args_of "$first" fp32) | tee -a "$LOG" | grep '^result ');;
      esac
      list="$list $(sed 's/.* step_ms=\([^ ]*\).*/\1/' <<<"$line")"
      comm="$comm $(sed 's/.* comm_ms=\([^ ]*\).*/\1/' <<<"$line")"
    done
    tok=$(sed 's/.* batch=\([^ ]*\).*/\1/' <<<"$line"); seq=$(sed 's/.* seq=\([^ ]*\).*/\1/' <<<"$line")
    awk -v run="$run" -v l="$list" -v c="$comm" -v t=$((tok * seq)) 'function med(list, a, n, i, j, x) {
        n = split(list, a, " "); for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { x = a[i]; a[i] = a[j]; a[j] = x }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      BEGIN { s = med(l); m = med(c); printf "| %s | %.1f | %.0f | %.1f | %.1f%% |\n", run, s, t / (s / 1e3), m, 100 * m / s }'
  done
fi
echo "uptime after: $(uptime)"
