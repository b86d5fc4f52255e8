#!/bin/sh
# smoke.sh PATTERN COMMAND [ARGS...]: runs one benchmark binary at a tiny size and passes when it
# exits 0, prints a line matching the extended regex PATTERN (its result line or table row), and
# prints no nan or inf anywhere, a ratio's "nanx" included (a broken timer or kernel shows up as one).
pattern=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne 0 ]; then
  echo "smoke: $1 exited $rc"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq "$pattern"; then
  echo "smoke: no line of $1 matches '$pattern'"
  exit 1
fi
if printf '%s\n' "$out" | grep -Eiq '(^|[^a-z])-?(nan|inf)x?([^a-z]|$)'; then
  echo "smoke: $1 printed a nan or inf"
  exit 1
fi
