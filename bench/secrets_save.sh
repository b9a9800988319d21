#!/usr/bin/env bash
# False refusals of `baton save DIR` (issue 29): saves each tree into a fresh store under
# the default `--secrets` mode (block) and prints how many files the save refused, then
# the same tree's findings by kind (examples/secret_scan.rs, the scan `save` runs, big
# files in chunks as `save` scans them). None of the trees holds a live secret.
#
# Usage: bash bench/secrets_save.sh [TREE...]
#
# TREE defaults to the trees of docs/reliability.md ("Secret scan precision"), made under
# BENCH_DIR (default bench/work, git-ignored) the first time:
#   repo     this repository at HEAD (`git archive`)
#   python   the Python standard library (python3's, or $PYLIB), site-packages left out
#   include  /usr/include
#   js       node_modules of `npm install typescript@5 webpack eslint` (the registry's
#            newest of each: the versions are printed)
#   random   1 GiB of random bytes: two 256 MiB files (scanned in chunks) and 512 files
#            of 1 MiB (made once and kept: the same bytes before and after a change)
#
# Environment:
#   BATON   the baton binary to measure (default: this tree's, built with $CARGO)
#   SCAN    the secret_scan example to list findings with (default: this tree's)
#   CARGO   the cargo to build with (default cargo; bcargo on the shared machine)
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${BENCH_DIR:-$ROOT/bench/work}/secrets_save
mkdir -p "$WORK"

if [[ -z ${BATON:-} || -z ${SCAN:-} ]]; then
  (cd "$ROOT" && ${CARGO:-cargo} build --release --quiet --bin baton --example secret_scan)
  BATON=${BATON:-$ROOT/target/release/baton}
  SCAN=${SCAN:-$ROOT/target/release/examples/secret_scan}
fi

make_trees() {
  local t=$WORK/trees
  mkdir -p "$t"
  if [[ ! -d $t/repo ]]; then
    (cd "$ROOT" && git archive --prefix=repo/ HEAD) | tar -x -C "$t"
  fi
  if [[ ! -e $t/python ]]; then
    local lib=${PYLIB:-$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')}
    mkdir -p "$t/python.tmp"
    tar -C "$lib" --exclude=./site-packages -cf - . | tar -C "$t/python.tmp" -xf -
    mv "$t/python.tmp" "$t/python"
  fi
  [[ -e $t/include ]] || ln -s /usr/include "$t/include"
  if [[ ! -d $t/js ]]; then
    mkdir -p "$t/js.tmp"
    (cd "$t/js.tmp" && npm install --silent --no-audit --no-fund --ignore-scripts \
      typescript@5 webpack eslint >/dev/null)
    mv "$t/js.tmp" "$t/js"
  fi
  (cd "$t/js" && npm ls --depth=0 2>/dev/null | tail -n +2 | sed 's/^/# js: /') || true
  if [[ ! -d $t/random ]]; then
    mkdir -p "$t/random.tmp/small"
    for i in 1 2; do head -c $((256 << 20)) /dev/urandom >"$t/random.tmp/big$i.bin"; done
    for i in $(seq -w 1 512); do head -c 1048576 /dev/urandom >"$t/random.tmp/small/r$i.bin"; done
    mv "$t/random.tmp" "$t/random"
  fi
  trees=("$t/repo" "$t/python" "$t/include/" "$t/js/node_modules" "$t/random")
}

if [[ $# -gt 0 ]]; then
  trees=("$@")
else
  make_trees
fi

printf '%-40s %8s %8s %8s\n' tree files refused seconds
for tree in "${trees[@]}"; do
  store=$(mktemp -d)
  "$BATON" init --store "$store/s" -q
  start=$(date +%s.%N)
  out=$("$BATON" save "$tree" --store "$store/s" --json 2>/dev/null || true)
  end=$(date +%s.%N)
  rm -rf "$store"
  files=$(find -L "$tree" -type f | wc -l)
  refused=$(python3 -c '
import json, re, sys
doc = json.loads(sys.stdin.read())
if doc.get("ok", True):
    print(0)
else:
    msg = doc["error"]["message"]
    m = re.search(r"refusing to save: (\d+) files? hold", msg)
    print(m.group(1) if m else ("1" if "holds secrets" in msg or "secrets (" in msg else "error: " + msg))
' <<<"$out")
  printf '%-40s %8s %8s %8.1f\n' "$tree" "$files" "$refused" "$(echo "$end - $start" | bc)"
  if [[ $refused != 0 ]]; then
    "$SCAN" --list all "$tree" | grep -E '^(flagged|kind) ' | sed 's/^/    /'
  fi
done
