#!/usr/bin/env bash
# One ResNet training step, C++ (build/bench/bench_resnet_step) against PyTorch eager + torchvision
# (bench/resnet_step.py under Debian's /usr/bin/python3), same threads, same allocator (tcmalloc,
# preloaded for Python, linked into the C++ bench). Per configuration, PAIRS pairs of runs, the
# order alternating (C++ first in odd pairs, Python first in even ones) so slow drift cancels; each
# run is its own process and reports the median of its timed steps; the ratio of a pair is
# C++ / Python. Both sides measure the share of the machine's CPU that other processes took during
# their timed steps (other_cpu); a pair where either exceeds MAX_OTHER is thrown away and rerun
# (after RETRY_WAIT_S, at most RETRIES times; then kept and counted as noisy). Builds nothing.
# Usage: bench/bench_resnet_step.sh [build-dir]
# Env: CONFIGS="depth:batch:image:precision:channels_last ..." (default: one configuration from
#      DEPTH=18 BATCH=8 IMAGE=64 PRECISION=fp32 CHANNELS_LAST=0), CLASSES=1000, PAIRS=5, STEPS=5,
#      WARMUP=2, THREADS=<all CPUs>, MAX_OTHER=0.10, RETRIES=3, RETRY_WAIT_S=20,
#      LOG=<file keeping every run's output>, CONV_KERNEL=auto (the C++ side's --conv-kernel: auto,
#      probe, winograd, native_winograd or libtorch; PyTorch runs its own convolution), NORM_KERNEL=auto (the C++
#      side's --norm-kernel: auto, fused or libtorch; auto is fused in fp32 channels-last),
#      OPTIMIZER_KERNEL=fused (the C++ side's SGD: fused or libtorch).
# The environment reaches both sides unchanged (OPENBLAS_CORETYPE, DNNL_*, ...).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/bench/bench_resnet_step"
PY=/usr/bin/python3
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
CONFIGS=${CONFIGS:-"${DEPTH:-18}:${BATCH:-8}:${IMAGE:-64}:${PRECISION:-fp32}:${CHANNELS_LAST:-0}"}
CLASSES=${CLASSES:-1000}
PAIRS=${PAIRS:-5}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-2}
THREADS=${THREADS:-$(nproc)}
MAX_OTHER=${MAX_OTHER:-0.10}
RETRIES=${RETRIES:-3}
RETRY_WAIT_S=${RETRY_WAIT_S:-20}
LOG=${LOG:-$(mktemp)}
CONV_KERNEL=${CONV_KERNEL:-auto}
NORM_KERNEL=${NORM_KERNEL:-auto}
OPTIMIZER_KERNEL=${OPTIMIZER_KERNEL:-fused}

if [[ ! -x "$BIN" ]]; then
  echo "error: $BIN not found; build it first:" >&2
  echo "  cmake -S $ROOT -B build && cmake --build build -j2 --target bench_resnet_step" >&2
  exit 1
fi
if ! "$PY" -c 'import torch, torchvision' 2>/dev/null; then
  echo "error: $PY cannot import torch and torchvision; install Debian's:" >&2
  echo "  apt-get install python3-torch python3-torchvision" >&2
  echo "  (the python3 first on PATH may be another interpreter; this script uses $PY)" >&2
  exit 1
fi
if [[ ! -r "$TCMALLOC" ]]; then
  echo "error: $TCMALLOC not found (apt-get install libtcmalloc-minimal4); without it the two" >&2
  echo "  sides would run different allocators" >&2
  exit 1
fi
for cfg in $CONFIGS; do
  if [[ ! "$cfg" =~ ^[0-9]+:[0-9]+:[0-9]+:(fp32|bf16):[01]$ ]]; then
    echo "error: configuration '$cfg' is not depth:batch:image:precision:channels_last" >&2
    echo "  (e.g. 50:32:224:bf16:1; precision fp32 or bf16, channels_last 0 or 1)" >&2
    exit 2
  fi
done

run_side() {  # side (cpp|py), then the bench options
  local side=$1
  shift
  if [[ "$side" == cpp ]]; then
    OMP_NUM_THREADS="$THREADS" "$BIN" --conv-kernel "$CONV_KERNEL" --norm-kernel "$NORM_KERNEL" --optimizer-kernel "$OPTIMIZER_KERNEL" "$@"
  else
    LD_PRELOAD="$TCMALLOC" OMP_NUM_THREADS="$THREADS" "$PY" "$ROOT/bench/resnet_step.py" "$@"
  fi | tee -a "$LOG" | grep '^result '
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "bench_resnet_step: configs '$CONFIGS', $PAIRS pairs, $STEPS timed steps after $WARMUP," \
  "$CLASSES classes, $THREADS threads, C++ conv_kernel $CONV_KERNEL, norm_kernel $NORM_KERNEL, optimizer_kernel $OPTIMIZER_KERNEL, pairs rerun when other_cpu > $MAX_OTHER; full output in $LOG"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg);" \
  "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}; $(lscpu | sed -n 's/^Model name: *//p')"
for cfg in $CONFIGS; do
  IFS=: read -r depth batch image precision cl <<<"$cfg"
  opts=(--depth "$depth" --batch "$batch" --image-size "$image" --classes "$CLASSES"
    --precision "$precision" --channels-last "$cl" --threads "$THREADS" --steps "$STEPS"
    --warmup "$WARMUP")
  for ((p = 1; p <= PAIRS; ++p)); do
    order=(cpp py)
    ((p % 2 == 0)) && order=(py cpp)
    for ((try = 0; ; ++try)); do
      pair=""
      for side in "${order[@]}"; do
        pair+="pair=$p try=$try load1=$(cut -d' ' -f1 /proc/loadavg) $(run_side "$side" "${opts[@]}")"$'\n'
      done
      worst=$(sed -n 's/.*other_cpu=\([0-9.]*\).*/\1/p' <<<"$pair" | sort -g | tail -1)
      if awk -v w="$worst" -v m="$MAX_OTHER" 'BEGIN { exit !(w <= m) }' || ((try >= RETRIES)); then
        printf '%s' "$pair" >>"$results"
        echo "  $cfg pair $p: $(sed -n 's/.*impl=\([a-z]*\).* step_ms=\([0-9.]*\) .*/\1 \2 ms/p' <<<"$pair" |
          paste -sd' ') (other_cpu <= $worst$( ((try > 0)) && echo ", after $try reruns"))"
        break
      fi
      echo "  $cfg pair $p: other processes took $worst of the CPU; rerun in ${RETRY_WAIT_S}s"
      sleep "$RETRY_WAIT_S"
    done
  done
done

# One row per configuration: medians over pairs of each run's median step; the median and range
# of the paired ratios C++/Python. Fails if the two sides disagree on the parameter count or on
# the first step's loss (same seed: same weights and data).
awk -v max_other="$MAX_OTHER" '
function med(list,   a, n, i, j, t) {
  n = split(list, a, " ")
  for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function lo(list,   a, n, i, m) { n = split(list, a, " "); m = a[1]; for (i = 2; i <= n; ++i) if (a[i] + 0 < m + 0) m = a[i]; return m }
function hi(list,   a, n, i, m) { n = split(list, a, " "); m = a[1]; for (i = 2; i <= n; ++i) if (a[i] + 0 > m + 0) m = a[i]; return m }
{
  delete f
  for (i = 1; i <= NF; ++i) if (split($i, kv, "=") == 2) f[kv[1]] = kv[2]
  key = "resnet" f["depth"] " " f["image"] " " f["batch"] " " f["dtype"] " " f["layout"]
  if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key; gflop[key] = f["step_gflop"]; batch[key] = f["batch"] }
  s = f["impl"]
  ms[key, s] = ms[key, s] " " f["step_ms"]
  step[key, f["pair"], s] = f["step_ms"]
  rss[key, s] = rss[key, s] " " f["peak_rss_mib"]
  drss[key, s] = drss[key, s] " " f["peak_rss_delta_mib"]
  other[key] = other[key] " " f["other_cpu"]
  if (f["other_cpu"] + 0 > max_other + 0) noisy[key]++
  if ((key, s) in params && params[key, s] != f["params"]) bad = bad "\n  " key ": " s " parameter count changed"
  params[key, s] = f["params"]
  loss[key, s] = f["loss0"]
  npair[key] = f["pair"]
}
END {
  printf "\n| model | image | batch | precision | layout | C++ ms | PyTorch ms | C++/PyTorch paired: median [min, max] | C++ img/s | PyTorch img/s | C++ GFLOP/s | peak RSS C++ / PyTorch MiB (step: +C++ / +PyTorch) | other CPU max |\n"
  printf "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
  for (k = 1; k <= nkeys; ++k) {
    key = order[k]; split(key, c, " ")
    ratios = ""; csv = ""
    for (p = 1; p <= npair[key]; ++p) {
      r = sprintf("%.3f", step[key, p, "cpp"] / step[key, p, "py"])
      ratios = ratios " " r; csv = csv (p > 1 ? "," : "") r
    }
    mc = med(ms[key, "cpp"]); mp = med(ms[key, "py"])
    printf "| %s | %s | %s | %s | %s | %.1f | %.1f | **%.3f** [%.3f, %.3f] | %.1f | %.1f | %.0f | %.0f / %.0f (+%.0f / +%.0f) | %.2f%s |\n", \
      c[1], c[2], c[3], c[4], c[5], mc, mp, med(ratios), lo(ratios), hi(ratios), \
      batch[key] / mc * 1e3, batch[key] / mp * 1e3, gflop[key] / mc * 1e3, \
      hi(rss[key, "cpp"]), hi(rss[key, "py"]), hi(drss[key, "cpp"]), hi(drss[key, "py"]), \
      hi(other[key]), (noisy[key] ? sprintf(" (%d noisy runs)", noisy[key]) : "")
    summary = summary sprintf("summary model=%s image=%s batch=%s dtype=%s layout=%s ratio_median=%.3f ratio_min=%.3f ratio_max=%.3f ratios=%s cpp_ms=%.2f py_ms=%.2f\n", \
      c[1], c[2], c[3], c[4], c[5], med(ratios), lo(ratios), hi(ratios), csv, mc, mp)
    if (params[key, "cpp"] != params[key, "py"])
      bad = bad "\n  " key ": parameter counts differ, C++ " params[key, "cpp"] ", PyTorch " params[key, "py"]
    d = loss[key, "cpp"] - loss[key, "py"]; if (d < 0) d = -d
    if (d > 1e-4 * loss[key, "py"] + 1e-6)
      bad = bad "\n  " key ": first-step losses differ, C++ " loss[key, "cpp"] ", PyTorch " loss[key, "py"]
    else
      same = same sprintf("\n  %s: %d parameters; first-step loss %s (C++) = %s (PyTorch)", key, params[key, "cpp"], loss[key, "cpp"], loss[key, "py"])
  }
  printf "\nIdentical models and data on both sides (same seed):%s\n", same
  printf "Targets: C++/PyTorch <= 1.0 (issue 11), <= 0.85 (issue 29), peak memory not above PyTorch.\n"
  printf "%s", summary
  if (bad != "") { printf "error: the C++ and PyTorch runs are not comparable:%s\n", bad > "/dev/stderr"; exit 1 }
}' "$results"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
