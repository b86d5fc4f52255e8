#!/usr/bin/env bash
# One U-Net training step, C++ (build/bench/bench_train_step) against PyTorch eager
# (bench/train_step.py under Debian's /usr/bin/python3), same threads, same allocator (tcmalloc,
# preloaded for Python, linked into the C++ bench), runs alternating per round: C++ (its native CPU
# kernels, issue 17), Python contiguous, Python ChannelsLast3d (ScaFFold's layout), and C++ with
# LibTorch's kernels; each run is its own process and reports the median of its timed steps. The
# table gives the median over rounds, and C++ against the faster of the two Python layouts paired
# within each round. Builds and installs nothing.
# Usage: bench/bench_train_step.sh [build-dir]
# Env: CONFIGS="5:16 6:16 5:64" (scale:base), ROUNDS=3, STEPS=5, WARMUP=2, BATCH=2,
#      THREADS=<all CPUs>, GEMM_N=4096, CHANNELS_LAST=1 (0: skip the Python ChannelsLast3d runs),
#      LIBTORCH_KERNELS=1 (0: skip the C++ runs on LibTorch's kernels),
#      EXTRA_ARGS="" (passed to both, e.g. --bf16), LOG=<file keeping every run's output>.
# The environment reaches both sides unchanged: OPENBLAS_CORETYPE, when set, fixes the kernels of
# at::mm (the BLAS GEMM) and so one of the two ceilings; the header line names it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/bench/bench_train_step"
PY=/usr/bin/python3
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
CONFIGS=${CONFIGS:-"5:16 6:16 5:64"}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-2}
BATCH=${BATCH:-2}
THREADS=${THREADS:-$(nproc)}
GEMM_N=${GEMM_N:-4096}
CHANNELS_LAST=${CHANNELS_LAST:-1}
LIBTORCH_KERNELS=${LIBTORCH_KERNELS:-1}
EXTRA_ARGS=${EXTRA_ARGS:-}
LOG=${LOG:-$(mktemp)}

if [[ ! -x "$BIN" ]]; then
  echo "error: $BIN not found; build it first:" >&2
  echo "  cmake -S $ROOT -B build && cmake --build build -j2 --target bench_train_step" >&2
  exit 1
fi
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "error: $PY cannot import torch; install Debian's PyTorch: apt-get install python3-torch" >&2
  echo "  (the python3 first on PATH may be another interpreter; this script uses $PY)" >&2
  exit 1
fi
if [[ ! -r "$TCMALLOC" ]]; then
  echo "error: $TCMALLOC not found (apt-get install libtcmalloc-minimal4); without it the two" >&2
  echo "  sides would run different allocators" >&2
  exit 1
fi

common=(--batch "$BATCH" --warmup "$WARMUP" --steps "$STEPS" --threads "$THREADS")
run_cpp() {
  OMP_NUM_THREADS="$THREADS" "$BIN" "${common[@]}" "$@" $EXTRA_ARGS | tee -a "$LOG" | grep '^result '
}
run_py() {
  LD_PRELOAD="$TCMALLOC" OMP_NUM_THREADS="$THREADS" "$PY" "$ROOT/bench/train_step.py" \
    "${common[@]}" "$@" $EXTRA_ARGS | tee -a "$LOG" | grep '^result '
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "bench_train_step: configs '$CONFIGS', $ROUNDS rounds, $STEPS timed steps after $WARMUP," \
  "batch $BATCH, $THREADS threads ${EXTRA_ARGS:+($EXTRA_ARGS) }; full output in $LOG"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg);" \
  "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset: OpenBLAS detects the CPU)} (at::mm's kernels)"
for cfg in $CONFIGS; do
  scale=${cfg%%:*}
  base=${cfg##*:}
  for ((r = 1; r <= ROUNDS; ++r)); do
    run_cpp --scale "$scale" --base "$base" --gemm-n "$GEMM_N" --kernels native >>"$results"
    run_py --scale "$scale" --base "$base" >>"$results"
    if [[ "$CHANNELS_LAST" == 1 ]]; then
      run_py --scale "$scale" --base "$base" --channels-last >>"$results"
    fi
    if [[ "$LIBTORCH_KERNELS" == 1 ]]; then
      run_cpp --scale "$scale" --base "$base" --gemm-n 0 --kernels libtorch >>"$results"
    fi
  done
done

# One row per scale:base; medians over rounds of each run's median step, and the median over rounds
# of C++/Python from each round's pair of runs. Fails if the two sides
# disagree on the parameter count or on the first step's loss (same seed: same weights and data).
awk -v cl_runs="$CHANNELS_LAST" '
function med(list,   a, n, i, j, t) {
  n = split(list, a, " ")
  for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function max_of(list,   a, n, i, m) {
  n = split(list, a, " "); m = a[1]
  for (i = 2; i <= n; ++i) if (a[i] + 0 > m + 0) m = a[i]
  return m
}
{
  delete f
  for (i = 2; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
  key = f["scale"] ":" f["base"]
  if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key; batch[key] = f["batch"]; gflop[key] = f["step_gflop"] }
  side = f["impl"] (f["layout"] == "cl3d" ? "_cl" : "") (f["kernels"] == "libtorch" ? "_lt" : "")
  ms[key, side] = ms[key, side] " " f["step_ms"]
  # The Python runs of a round are paired with the C++ run that opened it (alternation cancels
  # slow drift): C++ / the faster Python layout of that round.
  if (side == "cpp") { last_cpp[key] = f["step_ms"]; best_py[key] = "" }
  if ((side == "py" || side == "py_cl") && (key in last_cpp)) {
    if (best_py[key] == "" || f["step_ms"] + 0 < best_py[key] + 0) best_py[key] = f["step_ms"]
    round_ratio[key] = last_cpp[key] / best_py[key]
    if (side == "py_cl" || !cl_runs) paired[key] = paired[key] " " round_ratio[key]
  }
  rss[key, side] = rss[key, side] " " f["peak_rss_delta_mib"]
  if (!((key, side) in best) || f["step_ms_min"] + 0 < best[key, side] + 0) best[key, side] = f["step_ms_min"]
  if (f["impl"] == "cpp" && f["gemm_n"] > 0) {
    gemm_blas[key] = gemm_blas[key] " " f["gemm_blas_gflop_per_s"]
    gemm_dnnl[key] = gemm_dnnl[key] " " f["gemm_onednn_gflop_per_s"]
  }
  if ((key, f["impl"]) in params && params[key, f["impl"]] != f["params"]) bad = bad "\n  " key ": " f["impl"] " parameter count changed"
  params[key, f["impl"]] = f["params"]
  loss[key, side] = f["loss0"]
}
END {
  printf "\n| scale | base | batch | C++ ms/step | Python ms/step | Python CL3d ms/step | C++/faster Python (paired) | C++ GFLOP/s | GEMM GFLOP/s at::mm / oneDNN | C++/GEMM | C++ on LibTorch kernels ms/step | peak RSS of a step C++ / Python MiB |\n"
  printf "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
  for (k = 1; k <= nkeys; ++k) {
    key = order[k]; split(key, sb, ":")
    gb = med(gemm_blas[key]); gd = med(gemm_dnnl[key]); g = gb > gd ? gb : gd; gmax[key] = g
    c = med(ms[key, "cpp"]); p = med(ms[key, "py"])
    rate = gflop[key] / (c / 1e3)
    pcl = ms[key, "py_cl"] == "" ? "-" : sprintf("%.1f", med(ms[key, "py_cl"]))
    lt = ms[key, "cpp_lt"] == "" ? "-" : sprintf("%.1f", med(ms[key, "cpp_lt"]))
    gemm_cell = g > 0 ? sprintf("%.0f / %.0f", gb, gd) : "-"
    ratio_cell = g > 0 ? sprintf("%.3f", rate / g) : "-"
    printf "| %d (%d^3) | %d | %d | %.1f | %.1f | %s | %.3f | %.1f | %s | %s | %s | %.0f / %.0f |\n", \
      sb[1], 2 ^ sb[1], sb[2], batch[key], c, p, pcl, med(paired[key]), rate, gemm_cell, ratio_cell, lt, \
      max_of(rss[key, "cpp"]), max_of(rss[key, "py"])
    if (params[key, "cpp"] != params[key, "py"])
      bad = bad "\n  " key ": parameter counts differ, C++ " params[key, "cpp"] ", Python " params[key, "py"]
    d = loss[key, "cpp"] - loss[key, "py"]; if (d < 0) d = -d
    if (d > 1e-4 * (loss[key, "py"] < 0 ? -loss[key, "py"] : loss[key, "py"]) + 1e-6)
      bad = bad "\n  " key ": first-step losses differ, C++ " loss[key, "cpp"] ", Python " loss[key, "py"]
    else
      same = same sprintf("\n  %s: %d parameters on both sides; first-step loss %s (C++) = %s (Python)", \
                          key, params[key, "cpp"], loss[key, "cpp"], loss[key, "py"])
  }
  printf "\nFastest single step over all runs (less sensitive to other load on the machine):\n"
  printf "| scale | base | C++ ms | Python ms | C++/Python | C++ GFLOP/s | C++/GEMM |\n| --- | --- | --- | --- | --- | --- | --- |\n"
  for (k = 1; k <= nkeys; ++k) {
    key = order[k]; split(key, sb, ":"); g = gmax[key]; c = best[key, "cpp"]; rate = gflop[key] / (c / 1e3)
    printf "| %d | %d | %.1f | %.1f | %.3f | %.1f | %s |\n", sb[1], sb[2], c, best[key, "py"], c / best[key, "py"], rate, \
      (g > 0 ? sprintf("%.3f", rate / g) : "-")
  }
  printf "\nC++/GEMM is against the faster of the two GEMMs. Targets (issue 17, fp32, 2 threads): C++/faster Python <= 0.6 at batch 1, <= 0.85 at batch 2; C++/GEMM >= 0.8.\nIdentical models (same seed):%s\n", same
  if (bad != "") { printf "error: the C++ and Python models are not identical:%s\n", bad > "/dev/stderr"; exit 1 }
}' "$results"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
