#!/usr/bin/env bash
# Personal-data scan measurement (issue 29): findings by kind on real text that holds no
# personal data to speak of (this repository's docs and sources, the real sessions of
# fixtures/transcripts/real/, a Python standard library), and recall on a generated set
# (bench/pii_corpus.py). Prints what docs/reliability.md ("Personal data") reports.
#
# Usage: bash bench/pii.sh [--list] [CORPUS...]
#
# CORPUS defaults to: this repository (README.md, docs, store-format, src without the
# scan's own files, whose tests plant samples), fixtures/transcripts/real, and the
# Python library found on this machine, once without and once with its site-packages.
# Every text file of at most 16 MiB is scanned by examples/pii_scan.rs (`pii::find`, as
# a handoff does; binary files are skipped). A finding is not necessarily a false
# positive: the Python library credits its authors by email and its tests use phone
# numbers; --list prints every finding (kind, file, text) to check them by hand.
#
# Environment:
#   BENCH_DIR  work directory (default bench/work, git-ignored)
#   CARGO      the cargo to build with (default cargo; bcargo on the shared machine)
#   PYLIB      the Python library (default: the newest /root/.pyenv or /usr/lib python3.*)
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${BENCH_DIR:-$ROOT/bench/work}/pii
mkdir -p "$WORK"
list=()
if [[ ${1:-} == --list ]]; then
  list=(--list all)
  shift
fi

(cd "$ROOT" && ${CARGO:-cargo} build --release --quiet --example pii_scan)
SCAN=$ROOT/target/release/examples/pii_scan

scan() {
  local name=$1
  shift
  echo "== $name"
  "$SCAN" "${list[@]}" "$@"
}

if [[ $# -gt 0 ]]; then
  scan "given" "$@"
else
  # The repository, without the files that plant samples on purpose.
  mkdir -p "$WORK/repo"
  rm -rf "$WORK/repo"/*
  (cd "$ROOT" && git ls-files README.md docs store-format src |
    grep -v -e '^crates/baton-handoff/src/pii' |
    tar -cf - -T - | tar -xf - -C "$WORK/repo")
  scan "this repository (README, docs, store-format, src)" "$WORK/repo"
  scan "real sessions (fixtures/transcripts/real)" "$ROOT/fixtures/transcripts/real"
  pylib=${PYLIB:-}
  if [[ -z $pylib ]]; then
    # The newest version found.
    pylib=$(for d in /usr/lib/python3.* /root/.pyenv/versions/*/lib/python3.*; do
      [[ -d $d ]] && printf '%s\t%s\n' "${d##*/}" "$d"
    done | sort -V | tail -n 1 | cut -f 2)
  fi
  if [[ -n $pylib ]]; then
    mapfile -t stdlib < <(find "$pylib" -mindepth 1 -maxdepth 1 ! -name site-packages)
    scan "Python standard library ($pylib, without site-packages)" "${stdlib[@]}"
    if [[ -d $pylib/site-packages ]]; then
      scan "Python site-packages ($pylib/site-packages)" "$pylib/site-packages"
    fi
  fi
fi

python3 "$ROOT/bench/pii_corpus.py" "$WORK/recall.tsv"
echo "== recall (bench/pii_corpus.py: set, caught / total)"
"$SCAN" --recall "$WORK/recall.tsv" | grep -v '^miss ' || true
