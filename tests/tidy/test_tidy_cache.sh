#!/usr/bin/env bash
# scripts/tidy-run's cache of clean files, on a two-file project of its own: a clean file is
# checked once and then skipped; a change to a header it includes, or to a comment (NOLINT lives
# in comments), has it checked again; a file with a warning fails the run and is not remembered;
# SCAFFOLD_TIDY_CACHE=0 checks everything. Usage: test_tidy_cache.sh CLANG_TIDY CXX
set -euo pipefail
TIDY=$1
CXX=$2
RUN="$(cd "$(dirname "$0")/../.." && pwd)/scripts/tidy-run"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME="$work/cache"
mkdir -p "$work/src" "$work/build"
printf 'Checks: "-*,bugprone-branch-clone"\nHeaderFilterRegex: ".*/src/.*"\n' > "$work/.clang-tidy"
printf 'inline int twice(int x) { return 2 * x; }\n' > "$work/src/h.hpp"
printf '#include "h.hpp"\nint f(int x) { return twice(x); }\n' > "$work/src/a.cpp"
printf 'int g(int x) { return x; }\n' > "$work/src/b.cpp"
python3 - "$work" "$CXX" <<'PY'
import json, sys
work, cxx = sys.argv[1], sys.argv[2]
json.dump([{"directory": f"{work}/build", "file": f"{work}/src/{n}.cpp",
            "command": f"{cxx} -std=c++17 -I{work}/src -o {n}.o -c {work}/src/{n}.cpp"}
           for n in "ab"], open(f"{work}/build/compile_commands.json", "w"))
PY
run() { "$RUN" "$TIDY" "$work/build" "$work" 2 -- "$work/src/a.cpp" "$work/src/b.cpp" 2>&1; }
expect() {  # expect TEXT OUTPUT
  if [[ "$2" != *"$1"* ]]; then
    echo "FAIL: expected '$1' in:"
    echo "$2"
    exit 1
  fi
}
expect "0 of 2 file(s) unchanged" "$(run)"
expect "2 of 2 file(s) unchanged" "$(run)"
printf 'inline int twice(int x) { return x + x; }\n' > "$work/src/h.hpp"
expect "1 of 2 file(s) unchanged" "$(run)"
printf '// a comment\nint g(int x) { return x; }\n' > "$work/src/b.cpp"
expect "1 of 2 file(s) unchanged" "$(run)"
expect "2 of 2 file(s) unchanged" "$(run)"
# A warning in the header: a.cpp fails, every time.
printf 'inline int twice(int x) { if (x) { return 1; } else { return 1; } }\n' > "$work/src/h.hpp"
for attempt in 1 2; do
  if out=$(run); then
    echo "FAIL: a warning passed (attempt $attempt):"
    echo "$out"
    exit 1
  fi
  expect "1 of 2 file(s) unchanged" "$out"
  expect "bugprone-branch-clone" "$out"
done
printf 'inline int twice(int x) { return x + x; }\n' > "$work/src/h.hpp"
out=$(SCAFFOLD_TIDY_CACHE=0 "$RUN" "$TIDY" "$work/build" "$work" 2 -- "$work/src/a.cpp" 2>&1)
if [[ "$out" == *unchanged* ]]; then
  echo "FAIL: SCAFFOLD_TIDY_CACHE=0 used the cache: $out"
  exit 1
fi
echo "tidy cache: checked, skipped and re-checked as expected"
