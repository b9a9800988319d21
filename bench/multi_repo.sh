#!/usr/bin/env bash
# Cost of capturing a workspace folder of repositories (issue 29): `baton save --no-brief`
# of (a) a non-git folder with 1 directory, (b) a non-git folder of 2,400 directories and
# no repository (the search's worst case: it stops at 2,000), (c) a folder of 16 small
# repositories (each with a commit, a modified and an untracked file), (d) one of those
# repositories by itself (the single-repository path, which never searches); median of
# BENCH_RUNS wall-clock milliseconds each, alternating.
#
# Usage: bash bench/multi_repo.sh   (BENCH_RUNS=11, BATON=target/release/baton; build it
#        first, or point BATON at another build)
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${BENCH_RUNS:-11}
BATON=${BATON:-$ROOT/target/release/baton}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export HOME=$WORK/home GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@example.com GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@example.com
mkdir -p "$HOME" "$WORK/one/d" "$WORK/wide" "$WORK/repos"
for i in $(seq 1 40); do for j in $(seq 1 59); do mkdir -p "$WORK/wide/d$i/e$j"; done; done
for i in $(seq -w 1 16); do
    r=$WORK/repos/r$i
    git init -q "$r"
    for f in $(seq 1 20); do echo "line $f" > "$r/f$f.txt"; done
    git -C "$r" add -A && git -C "$r" commit -qm base
    echo changed >> "$r/f1.txt"
    echo new > "$r/untracked.txt"
done
for d in one wide repos repos/r01; do (cd "$WORK/$d" && "$BATON" init >/dev/null); done

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A times
for _ in $(seq 1 "$RUNS"); do
    for d in one wide repos repos/r01; do
        start=$(date +%s%N)
        (cd "$WORK/$d" && "$BATON" save --no-brief >/dev/null 2>&1)
        end=$(date +%s%N)
        times[$d]+="$(( (end - start) / 1000000 )) "
    done
done
echo "| workspace | median ms ($RUNS runs) |"
echo "| --- | --- |"
for d in one wide repos repos/r01; do
    echo "| $d | $(echo "${times[$d]}" | tr ' ' '\n' | grep . | median) |"
done
