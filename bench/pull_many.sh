#!/usr/bin/env bash
# Pull of many bundles (issue 28): what the receive check of declared sizes costs. A
# store of FILES small files and one 2 MiB file is saved, pushed and cloned; then
# BUNDLES saves change one file each (pushed every 10, so the remote has many packs),
# and the clone pulls them all: timed for each binary given, page cache warm, median of
# RUNS runs (the binaries taking turns), each into a fresh copy of the clone.
#
# Usage: bash bench/pull_many.sh BATON [BATON ...]   (e.g. an older build, then this one)
#
# Environment: BENCH_BUNDLES (default 200), BENCH_FILES (default 200), BENCH_RUNS
# (default 5), BENCH_DIR (default a fresh temp directory, removed afterwards).
set -euo pipefail
export LC_ALL=C

BUNDLES=${BENCH_BUNDLES:-200}
FILES=${BENCH_FILES:-200}
RUNS=${BENCH_RUNS:-5}
WORK=${BENCH_DIR:-$(mktemp -d)}
[[ -n ${BENCH_DIR:-} ]] || trap 'rm -rf "$WORK"' EXIT
(($# > 0)) || { echo "usage: $0 BATON [BATON ...]" >&2; exit 2; }
MAKER=$1
export HOME=$WORK/home BATON_FROM=bench
mkdir -p "$HOME" "$WORK/tree"

for i in $(seq 1 "$FILES"); do
  printf "file $i line %s\n" $(seq 1 100) >"$WORK/tree/f$i.txt"
done
head -c $((2 << 20)) /dev/urandom >"$WORK/tree/big.bin"
"$MAKER" --store "$WORK/a" -q init
"$MAKER" --store "$WORK/a" -q save "$WORK/tree" >/dev/null
"$MAKER" --store "$WORK/a" -q target add r "$WORK/remote"
"$MAKER" --store "$WORK/a" -q push
"$MAKER" --store "$WORK/clone" -q clone "$WORK/remote" >/dev/null
for i in $(seq 1 "$BUNDLES"); do
  printf 'change %d\n' "$i" >>"$WORK/tree/f$(((i % FILES) + 1)).txt"
  "$MAKER" --store "$WORK/a" -q save "$WORK/tree" >/dev/null
  ((i % 10 == 0 || i == BUNDLES)) && "$MAKER" --store "$WORK/a" -q push
done
packs=$(ls "$WORK/remote/packs" | wc -l)
echo "remote: $BUNDLES new bundles of $((FILES + 1)) files in $packs packs"

# The binaries take turns, run after run, so that load from elsewhere falls on both.
declare -A times
for _ in $(seq 1 "$RUNS"); do
  for baton in "$@"; do
    rm -rf "$WORK/b"
    cp -a "$WORK/clone" "$WORK/b"
    start=$(date +%s%N)
    "$baton" --store "$WORK/b" -q pull origin >/dev/null
    end=$(date +%s%N)
    times[$baton]+="$(((end - start) / 1000000)) "
    "$baton" --store "$WORK/b" -q verify >/dev/null
  done
done
for baton in "$@"; do
  sorted=$(printf '%s\n' ${times[$baton]} | sort -n | tr '\n' ' ')
  median=$(printf '%s\n' ${times[$baton]} | sort -n | sed -n "$(((RUNS + 1) / 2))p")
  echo "$baton: median ${median} ms (runs: $sorted)"
done
