#!/usr/bin/env bash
# Local store benchmark (issue 2): baton save / verify / checkout against git, b3sum and
# tar | zstd on the same generated tree, page cache warm. Writes the
# "## Local store (issue 2)" section of docs/benchmarks.md.
#
# Usage: bash bench/store.sh
#
# Environment:
#   BENCH_SCALE  tree size in MiB (default 500; 4 files of 256 KiB per MiB)
#   BENCH_RUNS   timed runs per operation, median reported (default 3)
#   BENCH_DIR    work directory (default bench/work, git-ignored)
#   BENCH_SEED   generator seed (default 42)
#   BENCH_KEEP   1 = keep the work directory afterwards (the tree is reused next time)
#   BENCH_SMALL  small-file cases, FILES:MIB each (default "2000:20 20000:200"; "" skips):
#                save into a fresh store vs `git init && git add -A && git commit`,
#                alternating, plus the fsyncs of one save (strace, when installed);
#                printed at the end (not written to docs/benchmarks.md)
#   BENCH_DOCS   1 = write docs/benchmarks.md, 0 = only print the table
#                (default: write only at the default scale, so quick runs never
#                overwrite the published figures)
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCALE=${BENCH_SCALE:-500}
RUNS=${BENCH_RUNS:-3}
SEED=${BENCH_SEED:-42}
WORK=${BENCH_DIR:-$ROOT/bench/work}
DOCS=${BENCH_DOCS:-$([[ $SCALE == 500 ]] && echo 1 || echo 0)}

TREE=$WORK/tree        # the data set
STORE=$WORK/store      # baton store
GITDIR=$WORK/git       # git's repository, outside the tree
OUT=$WORK/checkout     # baton checkout target
RESULTS=$WORK/results.tsv
META=$WORK/meta.tsv

log() { printf '==> %s\n' "$*" >&2; }

# Remove only what this script creates, so a BENCH_DIR pointing somewhere shared is safe.
cleanup() {
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then
    log "keeping $WORK (BENCH_KEEP=1)"
    return
  fi
  rm -rf "$TREE" "$TREE.stamp" "$STORE" "$GITDIR" "$OUT" "$RESULTS" "$META" "$WORK/save.json" \
    "$WORK/small.md" "$WORK"/small-*
  rmdir "$WORK" 2>/dev/null || true
}
trap cleanup EXIT

# --- 1. build ---------------------------------------------------------------------------
log "building baton (release)"
(cd "$ROOT" && cargo build --release --quiet)
BATON=${CARGO_TARGET_DIR:-$ROOT/target}/release/baton
[[ $BATON == /* ]] || BATON=$ROOT/$BATON

# --- 3. peers ---------------------------------------------------------------------------
export PATH=$HOME/.cargo/bin:$PATH
if ! command -v b3sum >/dev/null; then
  log "installing b3sum"
  cargo install b3sum --locked --quiet
fi
if ! command -v zstd >/dev/null; then
  log "installing zstd"
  apt-get install -y -qq zstd >/dev/null
fi
for tool in git tar python3 b3sum zstd; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
done

# --- 2. data set ------------------------------------------------------------------------
mkdir -p "$WORK"
rm -rf "$STORE" "$GITDIR" "$OUT"
: >"$RESULTS"
STAMP="scale=$SCALE seed=$SEED gen=$(cksum <"$ROOT/bench/gen_tree.py")"
if [[ -d $TREE && -f $TREE.stamp && $(cat "$TREE.stamp") == "$STAMP" ]]; then
  log "reusing the $SCALE MiB tree in $TREE"
else
  log "generating a $SCALE MiB tree in $TREE (seed $SEED)"
  rm -rf "$TREE" "$TREE.stamp"
  python3 "$ROOT/bench/gen_tree.py" "$TREE" "$SCALE" "$SEED"
  echo "$STAMP" >"$TREE.stamp"
fi

log "warming the page cache"
find "$TREE" -type f -print0 | xargs -0 cat >/dev/null
sync

# --- 4. the operations ------------------------------------------------------------------
# Each operation is a pair of functions: reset_X (untimed, before every run) and run_X.
g() {
  GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git --git-dir="$GITDIR" --work-tree="$TREE" "$@"
}
reset_git() { rm -rf "$GITDIR"; }
run_git() {
  g init -q
  g config user.name bench
  g config user.email bench@example.invalid
  g add -A
  g commit -qm x
}

reset_save() { rm -rf "$STORE"; }
run_save() {
  "$BATON" --store "$STORE" -q init
  "$BATON" --store "$STORE" --json save --secrets allow "$TREE" >"$WORK/save.json"
}

reset_none() { :; }
run_resave() { "$BATON" --store "$STORE" -q save --secrets allow "$TREE" >/dev/null; }
# The peer of a re-save: git finding nothing to add or report in its existing repository.
run_gitstatus() { g add -A && g status --porcelain >/dev/null; }

run_b3sum() { find "$TREE" -type f -print0 | xargs -0 b3sum >/dev/null; }

run_verify() { "$BATON" --store "$STORE" -q verify; }

run_tarzstd() { (cd "$TREE" && tar cf - . | zstd -q -3 -T0 >/dev/null); }

reset_checkout() { rm -rf "$OUT"; }
run_checkout() { "$BATON" --store "$STORE" -q checkout current "$OUT"; }

# bench KEY LABEL RESET RUN: RUNS timed runs, one results line "KEY<tab>LABEL<tab>secs...".
# Dirty pages from earlier steps are flushed (sync) before each run, outside the timing.
bench() {
  local key=$1 label=$2 reset=$3 run=$4 times=() i t0 t1
  for ((i = 1; i <= RUNS; i++)); do
    "$reset"
    sync
    t0=$EPOCHREALTIME
    "$run"
    t1=$EPOCHREALTIME
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
  done
  printf '%s\t%s\t%s\n' "$key" "$label" "${times[*]}" >>"$RESULTS"
  log "$(printf '%-40s %s s' "$label" "${times[*]}")"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "timing, $RUNS runs each"
bench git      "git init + add -A + commit"            reset_git      run_git
bench save     "baton init + save (empty store)"       reset_save     run_save
bench resave   "baton save again (no changes)"         reset_none     run_resave
bench gitstatus "git add -A + status (no changes)"     reset_none     run_gitstatus
bench b3sum    "b3sum over all files"                  reset_none     run_b3sum
bench verify   "baton verify (whole store)"            reset_none     run_verify
bench tarzstd  "tar cf - . | zstd -3 -T0"              reset_none     run_tarzstd
bench checkout "baton checkout current OUT"            reset_checkout run_checkout
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# --- small files (issue 14): many small files, where fsyncs per object dominated --------
SMALL=${BENCH_SMALL-"2000:20 20000:200"}
SMALL_MD=$WORK/small.md
gen_small() { # DIR FILES MIB: FILES files of MIB/FILES bytes on average, half text
  python3 - "$@" <<'PY'
import os, random, sys
root, files, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(files)
avg = mib * 1048576 // files
for i in range(files):
    d = os.path.join(root, f"d{i % 40:02d}", f"s{i % 7}")
    os.makedirs(d, exist_ok=True)
    n = rng.randint(avg // 2, avg * 3 // 2)
    data = rng.randbytes(n) if i % 2 else (f"line {i} " * (n // 8 + 1)).encode()[:n]
    with open(os.path.join(d, f"f{i:05d}"), "wb") as f:
        f.write(data)
PY
}
if [[ -n $SMALL ]]; then
  {
    echo "| files / MiB | git add -A + commit (s, median) | baton save (s, median) | ratio | baton fsyncs | load before, after |"
    echo "|---|--:|--:|--:|--:|---|"
  } >"$SMALL_MD"
  for case in $SMALL; do
    n=${case%%:*} mib=${case##*:}
    stree=$WORK/small-$n
    rm -rf "$stree" "$WORK/small-store" "$WORK/small-git"
    log "small files: generating $n files / $mib MiB"
    gen_small "$stree" "$n" "$mib"
    find "$stree" -type f -print0 | xargs -0 cat >/dev/null
    sload=$(cut -d' ' -f1-3 /proc/loadavg)
    gt=() bt=()
    for ((i = 1; i <= RUNS; i++)); do
      rm -rf "$WORK/small-git"; sync
      t0=$EPOCHREALTIME
      GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git --git-dir="$WORK/small-git" --work-tree="$stree" init -q
      GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git --git-dir="$WORK/small-git" --work-tree="$stree" add -A
      GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git --git-dir="$WORK/small-git" --work-tree="$stree" \
        -c user.name=bench -c user.email=bench@example.invalid commit -qm x
      t1=$EPOCHREALTIME
      gt+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
      rm -rf "$WORK/small-store"; sync
      t0=$EPOCHREALTIME
      "$BATON" --store "$WORK/small-store" -q init
      "$BATON" --store "$WORK/small-store" -q save --secrets allow "$stree" >/dev/null
      t1=$EPOCHREALTIME
      bt+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
    done
    fsyncs=n/a
    if command -v strace >/dev/null; then
      rm -rf "$WORK/small-store"
      "$BATON" --store "$WORK/small-store" -q init
      fsyncs=$(strace -f -qq -o /dev/stdout -e trace=fsync,fdatasync \
        "$BATON" --store "$WORK/small-store" -q save --secrets allow "$stree" | grep -c 'sync(' || true)
    fi
    med() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
    gm=$(med "${gt[@]}") bm=$(med "${bt[@]}")
    printf '| %s / %s | %s | %s | %s | %s | %s; %s |\n' "$n" "$mib" "$gm" "$bm" \
      "$(awk -v a="$bm" -v b="$gm" 'BEGIN { printf "%.2f", a / b }')" "$fsyncs" \
      "$sload" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$SMALL_MD"
    log "small files $n / $mib MiB: git ${gt[*]} s, baton ${bt[*]} s, $fsyncs fsyncs"
    rm -rf "$stree" "$WORK/small-store" "$WORK/small-git"
  done
fi

# --- sizes and environment --------------------------------------------------------------
du_bytes() { du -s --block-size=1 "$1" | cut -f1; }
first_line() { "$@" 2>&1 | head -n1; }
{
  printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
  printf 'scale_mib\t%s\n' "$SCALE"
  printf 'files\t%s\n' "$(find "$TREE" -type f | wc -l)"
  printf 'dirs\t%s\n' "$(find "$TREE" -mindepth 1 -type d | wc -l)"
  printf 'seed\t%s\n' "$SEED"
  printf 'runs\t%s\n' "$RUNS"
  printf 'tree_bytes\t%s\n' "$(du_bytes "$TREE")"
  printf 'store_bytes\t%s\n' "$(du_bytes "$STORE")"
  printf 'git_bytes\t%s\n' "$(du_bytes "$GITDIR")"
  printf 'save_json\t%s\n' "$(tr -d '\n' <"$WORK/save.json")"
  printf 'nproc\t%s\n' "$(nproc)"
  printf 'cpu\t%s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  printf 'mem\t%s\n' "$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  printf 'kernel\t%s\n' "$(uname -r)"
  printf 'fs\t%s\n' "$(df -T "$WORK" | awk 'NR == 2 { print $2 }')"
  printf 'load\t%s before, %s after\n' "$LOAD_BEFORE" "$LOAD_AFTER"
  printf 'baton\t%s (commit %s%s)\n' "$("$BATON" --version)" \
    "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(GIT_OPTIONAL_LOCKS=0 git -C "$ROOT" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null | grep -q . && echo ', src modified' || true)"
  printf 'git\t%s\n' "$(first_line git --version)"
  printf 'b3sum\t%s\n' "$(first_line b3sum --version)"
  printf 'zstd\t%s\n' "zstd $(zstd --version | grep -o 'v[0-9.]*' | head -n1)"
  printf 'tar\t%s\n' "$(first_line tar --version)"
} >"$META"

# --- 5./6. report -----------------------------------------------------------------------
if [[ $DOCS == 1 ]]; then
  python3 "$ROOT/bench/report.py" "$RESULTS" "$META" "$ROOT/docs/benchmarks.md"
  log "wrote docs/benchmarks.md"
else
  python3 "$ROOT/bench/report.py" "$RESULTS" "$META" -
  log "docs/benchmarks.md left alone (BENCH_SCALE=$SCALE; set BENCH_DOCS=1 to write it)"
fi
if [[ -n $SMALL ]]; then
  echo
  echo "Small files (alternating, $RUNS runs each):"
  cat "$SMALL_MD"
fi
