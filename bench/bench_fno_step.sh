#!/usr/bin/env bash
# One FNO training step, C++ (build/bench/bench_fno_step) against PyTorch eager
# (bench/fno_step.py under Debian's /usr/bin/python3, tcmalloc preloaded as the C++ side links
# it), same sizes, same threads. PAIRS pairs of runs, the order alternating (C++ first in odd
# pairs, Python first in even ones) so slow drift cancels; each run is its own process and reports
# the median of its timed steps; the ratio of a pair is C++ / Python (below 1: C++ faster). The
# two sides must agree on the parameter count and the first step's loss (both set every
# parameter and the data from one closed-form pattern), else the script fails. Builds nothing.
# Usage: bench/bench_fno_step.sh [build-dir]
# Env: GRID="128 32" CHANNELS=4 MODES=12 WIDTH=32 LAYERS=4 BATCH=4 PAIRS=5 STEPS=5 WARMUP=2
#      THREADS=<all CPUs> LOG=<file keeping every run's output>
#      MIXING=real|complex (the C++ side's spectral mode mixing; default real, as scaffold fno),
#      TRANSFORM=probe|dft|fft (the C++ side's Fourier transforms; default probe, as scaffold fno).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/bench/bench_fno_step"
PY=/usr/bin/python3
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
PAIRS=${PAIRS:-5}
THREADS=${THREADS:-$(nproc)}
LOG=${LOG:-$(mktemp)}
if [[ ! -x "$BIN" ]]; then
  echo "error: $BIN not found; build it first: cmake --build build -j2 --target bench_fno_step" >&2
  exit 1
fi
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "error: $PY cannot import torch; install Debian's python3-torch" >&2
  exit 1
fi
[[ -r "$TCMALLOC" ]] || { echo "error: $TCMALLOC not found (apt-get install libtcmalloc-minimal4)" >&2; exit 1; }
opts=(--grid ${GRID:-128 32} --channels "${CHANNELS:-4}" --modes "${MODES:-12}" --width "${WIDTH:-32}"
  --layers "${LAYERS:-4}" --batch "${BATCH:-4}" --threads "$THREADS" --steps "${STEPS:-5}" --warmup "${WARMUP:-2}")
run_side() {
  if [[ "$1" == cpp ]]; then
    OMP_NUM_THREADS="$THREADS" "$BIN" "${opts[@]}" --mixing "${MIXING:-real}" --transform "${TRANSFORM:-probe}"
  else
    LD_PRELOAD="$TCMALLOC" OMP_NUM_THREADS="$THREADS" "$PY" "$ROOT/bench/fno_step.py" "${opts[@]}"
  fi | tee -a "$LOG" | grep '^result '
}
echo "bench_fno_step: ${opts[*]}, $PAIRS pairs; load average $(cut -d' ' -f1-3 /proc/loadavg); full output in $LOG"
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((p = 1; p <= PAIRS; ++p)); do
  order=(cpp py)
  ((p % 2 == 0)) && order=(py cpp)
  for side in "${order[@]}"; do echo "pair=$p $(run_side "$side")" >>"$results"; done
  echo "  pair $p: $(grep "^pair=$p " "$results" | sed -n 's/.*impl=\([a-z]*\).* step_ms=\([0-9.]*\) .*/\1 \2 ms/p' | paste -sd' ')"
done
awk '
function med(list,   a, n, i, j, t) {
  n = split(list, a, " ")
  for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
  delete f
  for (i = 1; i <= NF; ++i) if (split($i, kv, "=") == 2) f[kv[1]] = kv[2]
  s = f["impl"]; ms[s] = ms[s] " " f["step_ms"]; step[f["pair"], s] = f["step_ms"]; n = f["pair"]
  params[s] = f["params"]; loss[s] = f["loss0"]; batch = f["batch"]; cfg = f["grid"] " modes " f["modes"] " width " f["width"] " layers " f["layers"] " batch " f["batch"] " threads " f["threads"]
}
END {
  for (p = 1; p <= n; ++p) { r = step[p, "cpp"] / step[p, "py"]; ratios = ratios " " sprintf("%.3f", r); lo = (p == 1 || r < lo) ? r : lo; hi = (p == 1 || r > hi) ? r : hi }
  mc = med(ms["cpp"]); mp = med(ms["py"])
  printf "\n| FNO step | C++ ms | PyTorch ms | C++/PyTorch paired: median [min, max] | C++ timesteps/s | PyTorch timesteps/s |\n| --- | --- | --- | --- | --- | --- |\n"
  printf "| %s | %.1f | %.1f | **%.3f** [%.3f, %.3f] | %.2f | %.2f |\n", cfg, mc, mp, med(ratios), lo, hi, batch / mc * 1e3, batch / mp * 1e3
  printf "ratios:%s\nparameters %s (C++) / %s (PyTorch); first-step loss %s (C++) / %s (PyTorch)\n", ratios, params["cpp"], params["py"], loss["cpp"], loss["py"]
  d = loss["cpp"] - loss["py"]; if (d < 0) d = -d
  if (params["cpp"] != params["py"] || d > 1e-5 * loss["py"]) { print "error: the two sides are not the same model" > "/dev/stderr"; exit 1 }
}' "$results"
