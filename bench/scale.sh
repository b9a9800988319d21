#!/usr/bin/env bash
# Scale benchmark (issue: "a store with 10,000 bundles and 1,000,000 objects"): how the
# time and the system calls of everyday commands grow with the store. Generates stores at
# three sizes with examples/scale_gen.rs (baton's own pack and ref writers), then times
# `log -n 20`, `log`, `log --audit -n 20`, `show current`, `show OLD`, `verify OLD`, `verify current`,
# `verify current --history`, a `save` of a small change, `push` of
# one new bundle to a local-path remote that holds everything else, a no-op `push`
# (nothing new), and full `verify`;
# counts each command's system calls with `strace -f -c`. Prints a markdown table and
# writes it to $BENCH_DIR/scale.md.
#
# Usage: bash bench/scale.sh
#
# Environment:
#   BENCH_DIR       work directory (default: a fresh mktemp -d, removed afterwards)
#   BENCH_SIZES     space-separated BUNDLES:OBJECTS (default "100:10000 1000:100000 10000:1000000")
#   BENCH_PER_PACK  bundles per pack, K (default 10: as if pulled in batches of 10)
#   BENCH_REPACK    auto = packs merged after each pack as a pull merges them (default);
#                   none = every pack kept (the layout before packs were merged). Kept
#                   stores (BENCH_KEEP) are reused as they are: remove them to change it
#   BENCH_RUNS      timed runs per command, median reported (default 3; 1 for the
#                   commands that read the whole history)
#   BENCH_STRACE    1 = count system calls (default 1; needs strace)
#   BENCH_HEAVY_STRACE_MAX  count the system calls of `verify current` and full
#                   `verify` only up to this many bundles (default: always; under
#                   strace they take minutes at 10,000 bundles)
#   BATON_BIN       baton binary to measure (default: target/release/baton, built here)
#   BENCH_LABEL     label for the table heading (default "after")
#   BENCH_KEEP      1 = keep generated stores (they are reused by the next run)
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIZES=${BENCH_SIZES:-"100:10000 1000:100000 10000:1000000"}
K=${BENCH_PER_PACK:-10}
REPACK=${BENCH_REPACK:-auto}
RUNS=${BENCH_RUNS:-3}
STRACE=${BENCH_STRACE:-1}
LABEL=${BENCH_LABEL:-after}
if [[ -n ${BENCH_DIR:-} ]]; then
  WORK=$BENCH_DIR
  mkdir -p "$WORK"
  OWN_WORK=0
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-scale.XXXXXX")
  OWN_WORK=1
fi

log() { printf '==> %s\n' "$*" >&2; }

cleanup() {
  rm -rf "$WORK/new" "$WORK/strace.out"
  for size in $SIZES; do
    rm -rf "$WORK/remote-${size%%:*}" "$WORK/local-${size%%:*}"
    [[ ${BENCH_KEEP:-0} == 1 ]] || rm -rf "$WORK/store-${size%%:*}"
  done
  if [[ $OWN_WORK == 1 && ${BENCH_KEEP:-0} != 1 ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

log "building baton and scale_gen (release)"
(cd "$ROOT" && cargo build --release --quiet --bin baton --example scale_gen)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/release
BATON=${BATON_BIN:-$TARGET/baton}
GEN=$TARGET/examples/scale_gen

now_ns() { date +%s%N; }

# Median wall time in milliseconds of RUNS runs of a command.
time_ms() {
  local runs=$1
  shift
  local times=()
  for ((r = 0; r < runs; r++)); do
    local t0 t1
    t0=$(now_ns)
    "$@" >/dev/null
    t1=$(now_ns)
    times+=($(((t1 - t0) / 1000)))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}

# System calls of one run: "total openat getdents64 pread64+read statx+stat".
syscalls() {
  if [[ $STRACE != 1 ]]; then
    echo "- - - - -"
    return
  fi
  strace -f -c -o "$WORK/strace.out" "$@" >/dev/null 2>&1 || true
  awk '
    $NF == "total" { total = $4 }
    $NF == "openat" { open = $4 }
    $NF == "getdents64" { dents = $4 }
    $NF == "pread64" || $NF == "read" { reads += $4 }
    $NF ~ /^(statx|newfstatat|fstat|stat|lstat)$/ { stats += $4 }
    END { printf "%d %d %d %d %d", total, open, dents, reads, stats }
  ' "$WORK/strace.out"
}

# The same, for the commands that read the whole store, unless the store is too big.
heavy_syscalls() {
  local bundles=$1
  shift
  if ((bundles > ${BENCH_HEAVY_STRACE_MAX:-1000000000})); then
    echo "- - - - -"
    return
  fi
  syscalls "$@"
}

# A new small workspace (one bundle's worth of files) for each push.
new_workspace() {
  rm -rf "$WORK/new"
  mkdir -p "$WORK/new/notes"
  printf '# Handoff %s\n\nNext: keep going.\n' "$1" >"$WORK/new/handoff.md"
  for i in 1 2 3 4 5; do printf 'note %s of %s\n' "$i" "$1" >"$WORK/new/notes/n$i.txt"; done
}

RESULTS=$WORK/results.tsv
: >"$RESULTS"
row() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$RESULTS"; }

for size in $SIZES; do
  bundles=${size%%:*}
  objects=${size##*:}
  store=$WORK/store-$bundles
  local=$WORK/local-$bundles
  remote=$WORK/remote-$bundles
  if [[ ! -f $store/config ]]; then
    log "generating $bundles bundles / ~$objects objects, $K bundles per pack"
    rm -rf "$store"
    "$GEN" "$store" "$bundles" "$objects" "$K" "$REPACK" >"$WORK/gen-$bundles.json"
  fi
  packs=$(find "$store/packs" -name '*.pack' | wc -l)
  log "size $bundles bundles: $packs packs"
  old=$(sed -n 's/.*"new":"\([0-9a-f]*\)".*/\1/p' "$store/refs/current/00000000000000000010")
  B=("$BATON" --store "$store")
  label="$bundles b / $objects o / $packs packs"

  log "  log -n 20"
  row "$label" "log -n 20" "$(time_ms "$RUNS" "${B[@]}" log -n 20)" "$(syscalls "${B[@]}" log -n 20)" ""
  log "  log (all history)"
  row "$label" "log (all)" "$(time_ms 1 "${B[@]}" log)" "$(syscalls "${B[@]}" log)" ""
  log "  log --audit -n 20"
  row "$label" "log --audit -n 20" "$(time_ms "$RUNS" "${B[@]}" log --audit -n 20)" "$(syscalls "${B[@]}" log --audit -n 20)" ""
  log "  show current"
  row "$label" "show current" "$(time_ms "$RUNS" "${B[@]}" show current)" "$(syscalls "${B[@]}" show current)" ""
  log "  show OLD"
  row "$label" "show OLD (10th bundle, full id)" "$(time_ms "$RUNS" "${B[@]}" show "$old")" "$(syscalls "${B[@]}" show "$old")" ""
  log "  verify OLD"
  row "$label" "verify OLD (one bundle)" "$(time_ms "$RUNS" "${B[@]}" verify "$old")" "$(syscalls "${B[@]}" verify "$old")" ""
  log "  push one new bundle (from a copy of the store to a copy that holds everything)"
  # The generated store stays pristine: pushes save new bundles in a copy of it.
  rm -rf "$remote" "$local"
  cp -a "$store" "$remote"
  cp -a "$store" "$local"
  B=("$BATON" --store "$local")
  "${B[@]}" -q target add scale "$remote" >/dev/null
  median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  push_times=()
  save_times=()
  for ((r = 0; r < RUNS; r++)); do
    new_workspace "$bundles-$r"
    save_times+=("$(time_ms 1 "${B[@]}" -q save "$WORK/new" --no-brief --summary "bench $r")")
    push_times+=("$(time_ms 1 "${B[@]}" push scale)")
  done
  new_workspace "$bundles-strace"
  row "$label" "save (small change)" "$(median "${save_times[@]}")" "$(syscalls "${B[@]}" -q save "$WORK/new" --no-brief --summary "bench strace")" ""
  row "$label" "push (1 new bundle)" "$(median "${push_times[@]}")" "$(syscalls "${B[@]}" push scale)" ""
  log "  push with nothing new"
  row "$label" "push (nothing new)" "$(time_ms "$RUNS" "${B[@]}" push scale)" "$(syscalls "${B[@]}" push scale)" ""
  rm -rf "$remote" "$local"
  B=("$BATON" --store "$store")
  log "  verify current (one bundle)"
  row "$label" "verify current (one bundle)" "$(time_ms "$RUNS" "${B[@]}" verify current)" "$(syscalls "${B[@]}" verify current)" ""
  log "  verify current --history (the whole history)"
  row "$label" "verify current --history" "$(time_ms 1 "${B[@]}" verify current --history)" "$(heavy_syscalls "$bundles" "${B[@]}" verify current --history)" ""
  log "  full verify"
  row "$label" "verify (full store)" "$(time_ms 1 "${B[@]}" verify)" "$(heavy_syscalls "$bundles" "${B[@]}" verify)" ""
done

# Markdown: one row per command, columns per size: ms and total syscalls; then ratios.
python3 - "$RESULTS" "$LABEL" "$K" >"$WORK/scale.md" <<'PY'
import sys
from collections import OrderedDict
path, label, k = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [l.rstrip("\n").split("\t") for l in open(path) if l.strip()]
sizes = list(OrderedDict.fromkeys(r[0] for r in rows))
cmds = list(OrderedDict.fromkeys(r[1] for r in rows))
data = {(r[0], r[1]): (r[2], r[3].split()) for r in rows}
print(f"#### {label} (K = {k} bundles per pack written; packs as found when measured)\n")
head = "| command | " + " | ".join(f"{s}: ms / syscalls (open, getdents, read, stat)" for s in sizes)
if len(sizes) > 1:
    head += f" | growth {sizes[-1].split(' /')[0]} vs {sizes[0].split(' /')[0]}: time, syscalls"
print(head + " |")
print("|" + "---|" * (len(sizes) + 1 + (len(sizes) > 1)))
for c in cmds:
    cells = []
    for s in sizes:
        ms, sc = data.get((s, c), ("-", []))
        if len(sc) == 5 and sc[0] != "-":
            cells.append(f"{ms} / {sc[0]} ({sc[1]}, {sc[2]}, {sc[3]}, {sc[4]})")
        else:
            cells.append(f"{ms} / -")
    line = f"| `{c}` | " + " | ".join(cells)
    if len(sizes) > 1:
        a, b = data.get((sizes[0], c)), data.get((sizes[-1], c))
        try:
            tr = float(b[0]) / max(float(a[0]), 0.1)
            sr = float(b[1][0]) / max(float(a[1][0]), 1)
            line += f" | {tr:.1f}x, {sr:.1f}x"
        except (TypeError, ValueError, IndexError):
            line += " | -"
    print(line + " |")
PY
cat "$WORK/scale.md"
