#!/usr/bin/env bash
# Incremental build time before and after the cargo workspace (issue 30): the time cargo
# takes to rebuild after one edit that changes a layer's interface (a new pub fn appended
# to a file), in the single crate (OLD) and in the workspace (NEW), alternating.
#
#   bash bench/incremental_build.sh [OLD_REV] [NEW_REV] [RUNS]
#
# OLD_REV defaults to 6b7f370 (the last single-crate commit), NEW_REV to HEAD, RUNS to 3.
# Each revision is checked out into its own worktree under $BENCH_DIR (default
# /tmp/baton-incr) with its own target/; BATON_SEED_TARGET=DIR copies DIR into both first
# so that only baton's own code is compiled cold. Prints one line per (edit, command,
# revision) with the median, and the ratio NEW/OLD; the load average before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
old_rev=${1:-6b7f370}
new_rev=${2:-HEAD}
runs=${3:-3}
dir=${BENCH_DIR:-/tmp/baton-incr}
cargo_cmd=${CARGO:-cargo}

# The same edit in both layouts: the file's path before and after the split.
edits=(
  "src/store/refs.rs crates/baton-store/src/refs.rs"
  "src/handoff/pii.rs crates/baton-handoff/src/pii.rs"
  "src/commands/save.rs src/commands/save.rs"
)
commands=("build" "test --all-targets --no-run")

mkdir -p "$dir"
for side in old new; do
  rev=$old_rev
  [ "$side" = new ] && rev=$new_rev
  if [ ! -d "$dir/$side" ]; then
    git -C "$repo" worktree add -q --detach "$dir/$side" "$rev"
    if [ -n "${BATON_SEED_TARGET:-}" ]; then cp -a "$BATON_SEED_TARGET" "$dir/$side/target"; fi
  fi
  git -C "$dir/$side" checkout -q --detach "$rev"
  for c in "${commands[@]}"; do
    # shellcheck disable=SC2086
    (cd "$dir/$side" && $cargo_cmd $c >/dev/null 2>&1)
  done
done

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for edit in "${edits[@]}"; do
  read -r old_file new_file <<<"$edit"
  for c in "${commands[@]}"; do
    declare -A times=()
    for _ in $(seq "$runs"); do
      for side in old new; do
        file=$old_file
        [ "$side" = new ] && file=$new_file
        wt="$dir/$side"
        printf '\npub fn bench_incremental_edit() -> usize { std::env::args().count() * 3 }\n' >>"$wt/$file"
        start=$(date +%s.%N)
        # shellcheck disable=SC2086
        (cd "$wt" && $cargo_cmd $c >/dev/null 2>&1)
        end=$(date +%s.%N)
        git -C "$wt" checkout -q -- "$file"
        # Back to the unedited state, untimed, so every timed run starts from the same place.
        # shellcheck disable=SC2086
        (cd "$wt" && $cargo_cmd $c >/dev/null 2>&1)
        times[$side]+="$(echo "$end - $start" | bc) "
      done
    done
    o=$(echo "${times[old]}" | tr ' ' '\n' | grep . | median)
    n=$(echo "${times[new]}" | tr ' ' '\n' | grep . | median)
    printf '%-34s cargo %-28s single crate %6.2f s  workspace %6.2f s  ratio %.2f\n' \
      "$new_file" "$c" "$o" "$n" "$(echo "$n / $o" | bc -l)"
    unset times
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
