#!/usr/bin/env bash
# Unchanged re-saves (issue 32): `baton save DIR` of a tree saved before and untouched
# since, against `git add -A && git status` of the same tree committed, alternating,
# median of BENCH_RUNS, for 10,000 and 100,000 small files (BENCH_FILES); peak RSS by
# /usr/bin/time. Writes the "## Unchanged re-saves (issue 32)" section of
# docs/benchmarks.md (BENCH_DOCS=0: only print it).
#
# Usage: bash bench/resave.sh   (BENCH_FILES="10000 100000", BENCH_RUNS=9,
#        BENCH_DIR=bench/work; BATON=path uses that build instead of building release)
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${BENCH_RUNS:-9}
SIZES=${BENCH_FILES:-10000 100000}
WORK=${BENCH_DIR:-$ROOT/bench/work}/resave
rm -rf "$WORK"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
trap 'rm -rf "$WORK"' EXIT

if [[ -z ${BATON:-} ]]; then
  echo "==> building baton (release)" >&2
  (cd "$ROOT" && cargo build --release --quiet)
  BATON=${CARGO_TARGET_DIR:-$ROOT/target}/release/baton
fi
export HOME=$WORK/home GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
unset BATON_STORE BATON_TRACE BATON_NO_CACHE

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }
# timed VAR RSSVAR COMMAND...: appends the wall time (s, bash's clock around the
# /usr/bin/time that reports the peak RSS, KiB, for both sides alike).
timed() {
  local -n times=$1 rss=$2
  shift 2
  local start=$EPOCHREALTIME
  /usr/bin/time -f '%M' -o "$WORK/time.txt" "$@" >/dev/null
  local end=$EPOCHREALTIME
  times+="$(echo "$end - $start" | bc) "
  rss+="$(cat "$WORK/time.txt") "
}
rows=()
for n in $SIZES; do
  echo "==> $n files" >&2
  tree=$WORK/tree-$n
  python3 "$ROOT/bench/small_files.py" "$tree" "$n"
  store=$WORK/store-$n
  "$BATON" --store "$store" -q init
  sleep 0.2 # past the stat cache's racy window
  "$BATON" --store "$store" -q save --secrets allow "$tree" >/dev/null
  "$BATON" --store "$store" -q save --secrets allow "$tree" >/dev/null
  git -C "$tree" init -q
  git -C "$tree" add -A
  git -C "$tree" -c user.name=b -c user.email=b@example.com commit -qm base
  T_b="" T_g="" M_b="" M_g=""
  for r in $(seq "$RUNS"); do
    timed T_b M_b "$BATON" --store "$store" -q save --secrets allow "$tree"
    timed T_g M_g sh -c 'git -C "$1" add -A && git -C "$1" status' sh "$tree"
  done
  cached=$("$BATON" --store "$store" --json save --secrets allow "$tree" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["files_cached"])')
  b=$(echo "$T_b" | median) g=$(echo "$T_g" | median)
  mb=$(echo "$M_b" | median) mg=$(echo "$M_g" | median)
  rows+=("| $n files ($cached taken from the stat cache) | $(printf '%.3f' "$b") s, $((mb / 1024)) MiB | $(printf '%.3f' "$g") s, $((mg / 1024)) MiB | $(ratio "$b" "$g") | $(ratio "$mb" "$mg") |")
  rm -rf "$tree" "$store"
done

{
  echo "## Unchanged re-saves (issue 32)"
  echo
  echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC with \`bash bench/resave.sh\` (commit $(git -C "$ROOT" rev-parse --short HEAD))."
  echo
  echo "- Data: a tree of small text files in 500 directories, saved twice before (so that the stat cache holds every file) and committed to git, untouched since; in the page cache."
  echo "- Method: \`baton save --secrets allow DIR\` against \`git add -A && git status\` in DIR, alternating, median of $RUNS; wall time by bash's \`\$EPOCHREALTIME\` around \`/usr/bin/time\`, which gives the peak RSS; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| tree | baton re-save | git add -A && git status | time ratio | RSS ratio |"
  echo "| --- | ---: | ---: | ---: | ---: |"
  printf '%s\n' "${rows[@]}"
  echo
  cat <<'TEXT'
Goal (issue 32): 1.5x git's time or less, and 2x its peak RSS or less. Since 2026-12-07: the stat cache is postcard with 32-byte ids (version 2: 7.8 MB instead of 20.6 MB of JSON at 100,000 files) and is read while the directory is listed; each listed directory is opened once and its entries stat'ed on its fd; the merged pack table is searched through an array of 8-byte prefixes; the preloaded stats are dealt out by directory instead of through a map of every path. Before (by hand, the build of c9b1779): 0.90 s at 100,000 files. What is left of the RSS: the stat cache's entries, held as a map of owned paths and again in the copy kept for the next read, the listing's paths, and the pack table; a memory-mapped cache looked up in place would remove most of it.
TEXT
} >"$WORK/section.md"
cat "$WORK/section.md"
if [[ ${BENCH_DOCS:-1} == 1 ]]; then
  python3 "$ROOT/bench/put_section.py" "$ROOT/docs/benchmarks.md" "$WORK/section.md"
fi
