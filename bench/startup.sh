#!/usr/bin/env bash
# Start-up cost of a baton build: `BIN --version` of each binary given, alternating, median
# and quartiles of BENCH_RUNS runs each, timed by bash's own clock ($EPOCHREALTIME). Made
# for issue 30's question, what linking libcrypto as a shared library costs each process
# (vendor/libssh2-sys/BATON-PATCH.md, "Second change"): build once by default and once
# with OPENSSL_STATIC=1, copy each binary aside, and give both.
#
# Usage: bash bench/startup.sh BIN [BIN...]      (BENCH_RUNS=200 by default)
set -euo pipefail
export LC_ALL=C
RUNS=${BENCH_RUNS:-200}
[ $# -ge 1 ] || {
  echo "usage: bash bench/startup.sh BIN [BIN...]" >&2
  exit 2
}
for bin in "$@"; do
  [ -x "$bin" ] || {
    echo "startup: $bin is not an executable" >&2
    exit 2
  }
  "$bin" --version >/dev/null # warm the page cache
done

declare -A times
for ((i = 0; i < RUNS; i++)); do
  for bin in "$@"; do
    t0=$EPOCHREALTIME
    "$bin" --version >/dev/null
    t1=$EPOCHREALTIME
    times[$bin]+="$(((${t1/./} - ${t0/./}))) "
  done
done

for bin in "$@"; do
  # shellcheck disable=SC2086 # one number a word
  printf '%s\n' ${times[$bin]} | sort -n | awk -v bin="$bin" '
    { v[NR] = $1 }
    END { printf "%-40s median %.2f ms (quartiles %.2f-%.2f), %d runs\n", bin,
          v[int(NR/2)+1]/1000, v[int(NR/4)+1]/1000, v[int(3*NR/4)+1]/1000, NR }'
done
ldd_line() { ldd "$1" | awk '{print $1}' | grep -Eo 'lib(ssl|crypto)\.so[.0-9]*' | tr '\n' ' ' || true; }
for bin in "$@"; do echo "$bin links: $(ldd_line "$bin")"; done
