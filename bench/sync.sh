#!/usr/bin/env bash
# Sync benchmark (issue 3): baton push / pull (clone) over SSH against git, rsync and scp,
# on plain loopback and through a proxy adding 50 ms of round trip, with a private sshd
# on 127.0.0.1. Writes the "## Sync (issue 3)" section of docs/benchmarks.md.
#
# Usage: bash bench/sync.sh
#
# Environment:
#   BENCH_RUNS         rounds, each timing every operation once; median reported (default 5)
#   BENCH_SEED         generator seed (default 42)
#   BENCH_DELAY_MS     one-way delay of the WAN proxy (default 25, i.e. 50 ms RTT)
#   BENCH_SCP_TIMEOUT  cap on one `scp -r` of the 1,000 files, seconds (default 300)
#   BENCH_SCP_WAN_RUNS runs of `scp -r` at the WAN delay (default 1: it takes minutes)
#   BENCH_DIR          work directory (default: a new mktemp -d; removed afterwards)
#   BENCH_KEEP         1 = keep the work directory (and its sshd logs) afterwards
#   BENCH_DOCS         1 = write docs/benchmarks.md, 0 = only print the section
#                      (default: write only with 3 or more rounds and the default delay)
#   BENCH_ONLY         space-separated operation keys to run (default: all), e.g.
#                      "pull git_fetch"; the 256 MiB ones run only when named. Never
#                      writes docs/benchmarks.md (a partial table).
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${BENCH_RUNS:-5}
SEED=${BENCH_SEED:-42}
DELAY_MS=${BENCH_DELAY_MS:-25}
SCP_TIMEOUT=${BENCH_SCP_TIMEOUT:-300}
SCP_WAN_RUNS=${BENCH_SCP_WAN_RUNS:-1}
ONLY=${BENCH_ONLY:-}
DOCS=${BENCH_DOCS:-$( ((RUNS >= 3)) && [[ $DELAY_MS == 25 ]] && [[ -z $ONLY ]] && echo 1 || echo 0)}
if [[ -n ${BENCH_DIR:-} ]]; then
  WORK=$BENCH_DIR
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-sync.XXXXXX")
fi
WORK=$(cd "$WORK" && pwd)

SERVER=$WORK/server      # sshd config, host key, authorized_keys, log
CLIENT_HOME=$WORK/home   # HOME for every client: .ssh/config, known_hosts, user key
DATA_A=$WORK/data/small  # 1,000 files of 12 KiB in 20 directories
DATA_A2=$WORK/data/small2 # data set (a) with 5 files changed: the bundle a pull fetches
DATA_H=$WORK/data/hist # data set (a) changed 39 times: the history a clone reads
DATA_B=$WORK/data/big    # one 256 MiB file (a directory holding it, for baton save)
DATA_C=$WORK/data/mid    # one 64 MiB file: the transfer rates at the WAN delay
DATA_T=$WORK/data/tiny   # one small file: the same transfers with (almost) nothing to move
LOCAL=$WORK/local        # baton stores and the git repository pushed from
REMOTE=$WORK/remote      # push destinations ("the server's disk")
PULLED=$WORK/pulled      # clone / download destinations
PULLSRC=$WORK/pullsrc    # the pull case: remotes (base, base + change) and puller templates
RESULTS=$WORK/results.tsv
META=$WORK/meta.tsv
TRACES=$WORK/traces

SSHD_PID=
PROXY_PID=

log() { printf '==> %s\n' "$*" >&2; }

# Stop what this script started (by pid), then remove only what it created.
cleanup() {
  local rc=$? pid
  set +e
  for pid in $PROXY_PID $SSHD_PID; do
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then
    log "keeping $WORK (BENCH_KEEP=1)"
  else
    rm -rf "$SERVER" "$CLIENT_HOME" "$WORK/data" "$LOCAL" "$REMOTE" "$PULLED" "$PULLSRC" \
      "$RESULTS" "$META" "$TRACES" "$WORK/err" "$WORK/save_small.json"
    rmdir "$WORK" 2>/dev/null || true
  fi
  return "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 1. build and tools -----------------------------------------------------------------
log "building baton (release)"
(cd "$ROOT" && cargo build --release --quiet)
BATON=${CARGO_TARGET_DIR:-$ROOT/target}/release/baton
[[ $BATON == /* ]] || BATON=$ROOT/$BATON

need=()
[[ -x /usr/sbin/sshd ]] || need+=(openssh-server)
command -v ssh >/dev/null && command -v scp >/dev/null || need+=(openssh-client)
command -v rsync >/dev/null || need+=(rsync)
if ((${#need[@]})); then
  log "installing ${need[*]}"
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
for tool in git rsync ssh scp ssh-keygen python3 timeout; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
done
mkdir -p /run/sshd 2>/dev/null || true # privilege separation directory sshd insists on

# shellcheck source=bench/sshd.sh
source "$ROOT/bench/sshd.sh"

# --- 2. sshd, client HOME, delay proxy --------------------------------------------------
mkdir -p "$TRACES" "$WORK/err"
make_keys

log "starting sshd on 127.0.0.1"
start_sshd

log "starting the delay proxy (${DELAY_MS} ms each way)"
WAN_PORT=$(free_port)
python3 "$ROOT/bench/delayproxy.py" "$WAN_PORT" "$PORT" "$DELAY_MS" </dev/null >/dev/null 2>"$SERVER/proxy.log" &
PROXY_PID=$!
for ((i = 0; ; i++)); do
  python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' \
    "$WAN_PORT" 2>/dev/null && break
  if ((i > 100)) || ! kill -0 "$PROXY_PID" 2>/dev/null; then
    echo "the delay proxy did not start:" >&2
    cat "$SERVER/proxy.log" >&2
    exit 1
  fi
  sleep 0.05
done

client_config "benchbox:$PORT" "benchwan:$WAN_PORT"

# From here on every client (baton, ssh, scp, rsync, git) sees only the temporary HOME.
export HOME=$CLIENT_HOME
unset SSH_AUTH_SOCK SSH_AGENT_PID BATON_STORE BATON_TRACE BATON_TRACE_SFTP
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.invalid
SSH_CONFIG=$HOME/.ssh/config
SSH="ssh -F $SSH_CONFIG"
export GIT_SSH_COMMAND=$SSH

for alias in benchbox benchwan; do
  $SSH "$alias" true || { echo "ssh $alias true failed; sshd log:" >&2; cat "$SERVER/sshd.log" >&2; exit 1; }
done

# --- 3. data sets -----------------------------------------------------------------------
log "generating the data sets (seed $SEED)"
python3 "$ROOT/bench/gen_sync.py" small "$DATA_A" "$SEED"
python3 "$ROOT/bench/gen_sync.py" big "$DATA_B/big.bin" "$SEED"
python3 "$ROOT/bench/gen_sync.py" mid "$DATA_C/mid.bin" "$SEED"
mkdir -p "$DATA_T"
printf 'one small file\n' >"$DATA_T/tiny.txt"
find "$WORK/data" -type f -print0 | xargs -0 cat >/dev/null # page cache warm

mkdir -p "$LOCAL" "$REMOTE" "$PULLED"
"$BATON" --store "$LOCAL/small" -q init
"$BATON" --store "$LOCAL/small" --json save --secrets allow "$DATA_A" --summary "sync bench, 1000 files" >"$WORK/save_small.json"
BUNDLE_SMALL=$("$BATON" --store "$LOCAL/small" -q log -n 1 --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["bundles"][0]["id"])')
"$BATON" --store "$LOCAL/big" -q init
BUNDLE_BIG=$("$BATON" --store "$LOCAL/big" -q save --secrets allow "$DATA_B" --summary "sync bench, 256 MiB")
"$BATON" --store "$LOCAL/mid" -q init
BUNDLE_MID=$("$BATON" --store "$LOCAL/mid" -q save --secrets allow "$DATA_C" --summary "sync bench, 64 MiB")
"$BATON" --store "$LOCAL/tiny" -q init
BUNDLE_TINY=$("$BATON" --store "$LOCAL/tiny" -q save --secrets allow "$DATA_T" --summary "sync bench, one small file")
g() { git --git-dir="$LOCAL/small.git" --work-tree="$DATA_A" "$@"; }
g init -q
g add -A
g commit -qm "sync bench, 1000 files"

# The pull of one new bundle: data set (a) with 5 files changed, saved on top of the
# first bundle (baton) or committed on top of the first commit (git). Remotes (made over
# local paths, untimed): "base" holds the first bundle/commit, "change" both; each run
# pulls (fetches) into a fresh copy of a store (repository) cloned from "base", whose
# target (remote) "chg" names "change" over the network being timed.
cp -a "$DATA_A" "$DATA_A2"
for f in $(find "$DATA_A2" -type f | sort | head -n 5); do printf 'changed for the pull bench\n' >>"$f"; done
cp -a "$LOCAL/small" "$LOCAL/small2"
BUNDLE_CHANGE=$("$BATON" --store "$LOCAL/small2" -q save --secrets allow "$DATA_A2" --summary "sync bench, 5 files changed")
mkdir -p "$PULLSRC"
"$BATON" --store "$LOCAL/small" -q target add pbase "$PULLSRC/baton-base"
"$BATON" --store "$LOCAL/small" -q push pbase
cp -a "$PULLSRC/baton-base" "$PULLSRC/baton-change"
"$BATON" --store "$LOCAL/small2" -q target add pchg "$PULLSRC/baton-change"
"$BATON" --store "$LOCAL/small2" -q push pchg
cp -a "$LOCAL/small.git" "$LOCAL/small2.git"
g2() { git --git-dir="$LOCAL/small2.git" --work-tree="$DATA_A2" "$@"; }
g2 add -A
g2 commit -qm "sync bench, 5 files changed"
GIT_CHANGE=$(g2 rev-parse HEAD)
git init -q --bare "$PULLSRC/git-base"
g push -q "$PULLSRC/git-base" HEAD:refs/heads/main
cp -a "$PULLSRC/git-base" "$PULLSRC/git-change"
g2 push -q "$PULLSRC/git-change" HEAD:refs/heads/main
for alias in benchbox benchwan; do
  "$BATON" -q clone "$PULLSRC/baton-base" "$PULLSRC/tpl-baton-$alias"
  "$BATON" --store "$PULLSRC/tpl-baton-$alias" -q target add chg "$alias:$PULLSRC/baton-change"
  git clone -q --bare "$PULLSRC/git-base" "$PULLSRC/tpl-git-$alias"
  git --git-dir="$PULLSRC/tpl-git-$alias" remote set-url origin "$alias:$PULLSRC/git-change"
  git --git-dir="$PULLSRC/tpl-git-$alias" config remote.origin.fetch '+refs/heads/*:refs/remotes/origin/*'
done

# A history (issue 14, long histories on real networks): data set (a), then 39 changes
# of one file each, pushed one by one over local paths (untimed). The baton remote holds
# 40 packs, one per push, as a team's remote does; the git remote, 40 pushes.
HIST_PUSHES=40
cp -a "$DATA_A" "$DATA_H"
"$BATON" --store "$LOCAL/hist" -q init
"$BATON" --store "$LOCAL/hist" -q target add h "$PULLSRC/baton-hist"
gh() { git --git-dir="$LOCAL/hist.git" --work-tree="$DATA_H" "$@"; }
gh init -q
git init -q --bare "$PULLSRC/git-hist"
HIST_FILE=$(find "$DATA_H" -type f | sort | sed -n 1p) # (head would end sort with SIGPIPE under pipefail)
for i in $(seq "$HIST_PUSHES"); do
  ((i == 1)) || printf 'change %s\n' "$i" >>"$HIST_FILE"
  "$BATON" --store "$LOCAL/hist" -q save --secrets allow "$DATA_H" --summary "history $i" >/dev/null
  "$BATON" --store "$LOCAL/hist" -q push h
  gh add -A
  gh commit -qm "history $i"
  gh push -q "$PULLSRC/git-hist" HEAD:refs/heads/main
done
BUNDLE_HIST=$("$BATON" --store "$LOCAL/hist" -q log -n 1 --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["bundles"][0]["id"])')

# --- 4. the operations ------------------------------------------------------------------
# Each operation is a pair of functions: reset_X (untimed, before every run; picks the
# fresh destination DEST) and run_X (timed, in a subshell with errexit on).
N=0
NET= HOST=
declare -A PREV=()
fresh() { N=$((N + 1)); DEST=$1-$N; }
# new_target STORE: a target tN of STORE naming DEST on HOST; the push goes from STORE.
new_target() { FROM=$1; TARGET=t$N; "$BATON" --store "$FROM" -q target add "$TARGET" "$HOST:$DEST"; }
# drop_prev KEY: remove KEY's previous destination (the 256 MiB copies), keep this one.
drop_prev() { [[ -z ${PREV[$1]:-} ]] || rm -rf "${PREV[$1]}"; PREV[$1]=$DEST; }
run_push() { "$BATON" --store "$FROM" -q push "$TARGET"; }

# An empty store on the server (this machine), made with `baton init`. INIT_WORKAROUND=1
# adds the refs/current directory that baton 0.1.0's init leaves out and its push needs
# (see the probe below).
server_init() {
  "$BATON" --store "$1" -q init
  if [[ $INIT_WORKAROUND == 1 ]]; then mkdir -m 700 -p "$1/refs/current"; fi
}

reset_push_init() {
  fresh "$REMOTE/$NET/baton-init"
  server_init "$DEST"
  new_target "$LOCAL/small"
  PUSHED_SMALL=$DEST PUSHED_TARGET=$TARGET
}
run_push_init() { run_push; }

reset_push_new() { fresh "$REMOTE/$NET/baton-new"; new_target "$LOCAL/small"; }
run_push_new() { run_push; }

# Pushes again what the last push_init sent: nothing is new.
reset_noop() { FROM=$LOCAL/small TARGET=$PUSHED_TARGET; }
run_noop() { run_push; }

reset_git_push() { fresh "$REMOTE/$NET/git"; git init -q --bare "$DEST"; GIT_DEST=$DEST; }
run_git_push() { g push -q "$HOST:$DEST" HEAD:refs/heads/main; }

# The push of one new bundle, as an agent makes it: a store that pushed data set (a) to
# its target before (over the network being timed, so its target hint is the real one)
# saves data set (a) with 5 files changed, then pushes; git pushes the same change on top
# of the commit it pushed before. The first push and the save are untimed.
reset_push_inc() {
  fresh "$REMOTE/$NET/baton-inc"
  rm -rf "$LOCAL/inc"
  cp -a "$LOCAL/small" "$LOCAL/inc"
  new_target "$LOCAL/inc"
  run_push
  BUNDLE_INC=$("$BATON" --store "$FROM" -q save --secrets allow "$DATA_A2" --summary "sync bench, 5 files changed")
}
run_push_inc() { run_push; }
reset_git_push_inc() { fresh "$REMOTE/$NET/git-inc"; git init -q --bare "$DEST"; g push -q "$HOST:$DEST" HEAD:refs/heads/main; }
run_git_push_inc() { g2 push -q "$HOST:$DEST" HEAD:refs/heads/main; }

# The upload and download rates at the WAN delay (issue 14): 64 MiB sent by `baton push`
# (a new store) and by `ssh HOST 'cat > FILE'`, then fetched by `baton clone` (of the
# store pushed last) and `ssh HOST cat FILE`, each also timed with (almost) nothing to
# move; the rate is 64 MiB over the difference, so connection set-up and teardown are
# left out of both.
reset_push_mid() { fresh "$REMOTE/$NET/baton-mid"; drop_prev push_mid; new_target "$LOCAL/mid"; PUSHED_MID=$DEST; }
run_push_mid() { run_push; }
reset_push_tiny() { fresh "$REMOTE/$NET/baton-tiny"; new_target "$LOCAL/tiny"; PUSHED_TINY=$DEST; }
run_push_tiny() { run_push; }
reset_cat_mid() { fresh "$REMOTE/$NET/cat-mid"; drop_prev cat_mid; }
run_cat_mid() { $SSH "$HOST" "cat > '$DEST'" <"$DATA_C/mid.bin"; }
reset_cat_none() { fresh "$REMOTE/$NET/cat-none"; }
run_cat_none() { $SSH "$HOST" "cat > '$DEST'" </dev/null; }
reset_clone_mid() { fresh "$PULLED/$NET/baton-clone-mid"; drop_prev clone_mid; }
run_clone_mid() { "$BATON" -q clone "$HOST:$PUSHED_MID" "$DEST"; }
reset_clone_tiny() { fresh "$PULLED/$NET/baton-clone-tiny"; }
run_clone_tiny() { "$BATON" -q clone "$HOST:$PUSHED_TINY" "$DEST"; }
reset_catdown_mid() { fresh "$PULLED/$NET/catdown-mid"; drop_prev catdown_mid; }
run_catdown_mid() { $SSH "$HOST" "cat '$DATA_C/mid.bin'" >"$DEST"; }
reset_catdown_none() { fresh "$PULLED/$NET/catdown-none"; }
run_catdown_none() { $SSH "$HOST" "cat /dev/null" >"$DEST"; }

reset_rsync() { fresh "$REMOTE/$NET/rsync"; RSYNC_DEST=$DEST; }
run_rsync() { rsync -a -e "$SSH" "$DATA_A/" "$HOST:$DEST/"; }

reset_scp() { fresh "$REMOTE/$NET/scp"; }
run_scp() { timeout "$SCP_TIMEOUT" scp -q -r -F "$SSH_CONFIG" "$DATA_A" "$HOST:$DEST"; }

reset_ssh_true() { :; }
run_ssh_true() { $SSH "$HOST" true; }

reset_clone() { fresh "$PULLED/$NET/baton-clone"; }
run_clone() { "$BATON" -q clone "$HOST:$PUSHED_SMALL" "$DEST"; }

reset_git_clone() { fresh "$PULLED/$NET/git-clone"; }
run_git_clone() { git clone -q --bare "$HOST:$GIT_DEST" "$DEST"; }

reset_clone_hist() { fresh "$PULLED/$NET/baton-clone-hist"; }
run_clone_hist() { "$BATON" -q clone "$HOST:$PULLSRC/baton-hist" "$DEST"; }
reset_git_clone_hist() { fresh "$PULLED/$NET/git-clone-hist"; }
run_git_clone_hist() { git clone -q --bare "$HOST:$PULLSRC/git-hist" "$DEST"; }

reset_rsync_down() { fresh "$PULLED/$NET/rsync-down"; }
run_rsync_down() { rsync -a -e "$SSH" "$HOST:$RSYNC_DEST/" "$DEST/"; }

# A fresh copy of the puller cloned from "base"; the timed part is the pull (fetch).
reset_pull() { fresh "$PULLED/$NET/baton-pull"; cp -a "$PULLSRC/tpl-baton-$HOST" "$DEST"; }
run_pull() { "$BATON" --store "$DEST" -q pull chg; }
reset_git_fetch() { fresh "$PULLED/$NET/git-fetch"; cp -a "$PULLSRC/tpl-git-$HOST" "$DEST"; }
run_git_fetch() { git --git-dir="$DEST" fetch -q origin; }

# check_X (untimed, after a run that succeeded): did the destination get it all?
check_store() { # check_store STORE BUNDLE: STORE's current is BUNDLE, and it verifies
  "$BATON" --store "$1" --json show current | grep -q "\"id\":\"$2\"" &&
    "$BATON" --store "$1" -q verify current
}
check_push_init() { check_store "$DEST" "$BUNDLE_SMALL"; }
check_push_new() { check_store "$DEST" "$BUNDLE_SMALL"; }
check_noop() { check_store "$PUSHED_SMALL" "$BUNDLE_SMALL"; }
check_git_push() { [[ $(git --git-dir="$DEST" rev-parse refs/heads/main) == "$(g rev-parse HEAD)" ]]; }
check_rsync() { diff -r -q "$DATA_A" "$DEST"; }
check_scp() { diff -r -q "$DATA_A" "$DEST"; }
check_clone() { check_store "$DEST" "$BUNDLE_SMALL"; }
check_git_clone() { [[ $(git --git-dir="$DEST" rev-parse refs/heads/main) == "$(g rev-parse HEAD)" ]]; }
check_rsync_down() { diff -r -q "$DATA_A" "$DEST"; }
check_pull() { check_store "$DEST" "$BUNDLE_CHANGE"; }
check_clone_hist() { check_store "$DEST" "$BUNDLE_HIST"; }
check_git_clone_hist() { [[ $(git --git-dir="$DEST" rev-parse refs/heads/main) == "$(gh rev-parse HEAD)" ]]; }
check_git_fetch() { [[ $(git --git-dir="$DEST" rev-parse refs/remotes/origin/main) == "$GIT_CHANGE" ]]; }
check_push_big() { check_store "$DEST" "$BUNDLE_BIG"; }
check_push_inc() { check_store "$DEST" "$BUNDLE_INC"; }
check_git_push_inc() { [[ $(git --git-dir="$DEST" rev-parse refs/heads/main) == "$GIT_CHANGE" ]]; }
check_cat_mid() { cmp "$DATA_C/mid.bin" "$DEST"; }
check_push_mid() { check_store "$DEST" "$BUNDLE_MID"; }
check_clone_mid() { check_store "$DEST" "$BUNDLE_MID"; }
check_push_tiny() { check_store "$DEST" "$BUNDLE_TINY"; }
check_clone_tiny() { check_store "$DEST" "$BUNDLE_TINY"; }
check_catdown_mid() { cmp "$DATA_C/mid.bin" "$DEST"; }
check_scp_big_up() { cmp "$DATA_B/big.bin" "$DEST"; }
check_clone_big() { check_store "$DEST" "$BUNDLE_BIG"; }
check_scp_big_down() { cmp "$DATA_B/big.bin" "$DEST"; }

# The 256 MiB file: each run removes the previous run's copy; the last pushed store is
# the source of the baton download.
reset_push_big() { fresh "$REMOTE/$NET/baton-big"; drop_prev push_big; new_target "$LOCAL/big"; PUSHED_BIG=$DEST; }
run_push_big() { run_push; }
reset_scp_big_up() { fresh "$REMOTE/$NET/scp-big"; drop_prev scp_big_up; }
run_scp_big_up() { scp -q -F "$SSH_CONFIG" "$DATA_B/big.bin" "$HOST:$DEST"; }
reset_clone_big() { fresh "$PULLED/$NET/baton-clone-big"; drop_prev clone_big; }
run_clone_big() { "$BATON" -q clone "$HOST:$PUSHED_BIG" "$DEST"; }
reset_scp_big_down() { fresh "$PULLED/$NET/scp-big"; drop_prev scp_big_down; }
run_scp_big_down() { scp -q -F "$SSH_CONFIG" "$HOST:$DATA_B/big.bin" "$DEST"; }

# The operations in the order they run, and their labels.
SMALL_OPS=(ssh_true push_init push_new git_push rsync scp noop clone git_clone rsync_down pull git_fetch push_inc git_push_inc clone_hist git_clone_hist)
BIG_OPS=(push_big scp_big_up clone_big scp_big_down)
RATE_OPS=(push_tiny push_mid cat_none cat_mid clone_tiny clone_mid catdown_none catdown_mid) # at the WAN delay only
# BENCH_ONLY: keep the named operations (in their usual order).
only() {
  local key
  for key in "$@"; do
    [[ -z $ONLY || " $ONLY " == *" $key "* ]] && printf '%s\n' "$key"
  done
  return 0
}
mapfile -t SMALL_OPS < <(only "${SMALL_OPS[@]}")
if [[ -n $ONLY ]]; then mapfile -t BIG_OPS < <(only "${BIG_OPS[@]}"); fi
mapfile -t RATE_OPS < <(only "${RATE_OPS[@]}")
declare -A LABEL=(
  [ssh_true]="ssh HOST true (connection only)"
  [push_init]="baton push, 1000 files (existing empty store)"
  [push_new]="baton push, 1000 files (creates the store)"
  [git_push]="git push, 1000 files (empty bare repo)"
  [rsync]="rsync -a, 1000 files"
  [scp]="scp -r, 1000 files"
  [noop]="baton push, nothing new (no-op)"
  [clone]="baton clone, 1000 files (into nothing)"
  [git_clone]="git clone --bare, 1000 files"
  [rsync_down]="rsync -a download, 1000 files"
  [pull]="baton pull of one new bundle (5 files changed)"
  [git_fetch]="git fetch of the same change"
  [push_inc]="baton push of one new bundle (5 files changed)"
  [git_push_inc]="git push of the same change"
  [push_tiny]="baton push, one small file (new store)"
  [push_mid]="baton push, 64 MiB file (new store)"
  [cat_none]="ssh host 'cat > FILE', nothing"
  [cat_mid]="ssh host 'cat > FILE', 64 MiB file"
  [clone_tiny]="baton clone, one small file"
  [clone_mid]="baton clone, 64 MiB file"
  [catdown_none]="ssh host 'cat FILE', nothing"
  [catdown_mid]="ssh host 'cat FILE', 64 MiB file"
  [clone_hist]="baton clone of a history of 40 pushes"
  [git_clone_hist]="git clone --bare of the same history"
  [push_big]="baton push, 256 MiB file"
  [scp_big_up]="scp upload, 256 MiB file"
  [clone_big]="baton clone, 256 MiB file"
  [scp_big_down]="scp download, 256 MiB file"
)
declare -A TIMES=()

# once KEY: one timed run of run_KEY after reset_KEY (and check_KEY after it, untimed),
# on network NET; appends the seconds to TIMES[KEY], or "fail", or "timeout" when it hit
# its timeout. Dirty pages are flushed (sync) before the run.
once() {
  local key=$1 t0 t1 rc t err
  err=$WORK/err/$key.$NET.$ROUND
  "reset_$key"
  sync
  t0=$EPOCHREALTIME
  set +e
  (set -e; "run_$key") 2>"$err"
  rc=$?
  set -e
  t1=$EPOCHREALTIME
  if ((rc == 0)) && declare -F "check_$key" >/dev/null; then
    set +e
    (set -e; "check_$key") >>"$err" 2>&1
    rc=$?
    set -e
    ((rc == 0)) || rc=200
  fi
  if ((rc == 124)); then
    t=timeout
  elif ((rc != 0)); then
    t=fail
    if ((rc == 200)); then
      log "${LABEL[$key]} on $NET: the destination is not right afterwards:"
    else
      log "${LABEL[$key]} on $NET failed (exit $rc):"
    fi
    sed 's/^/    /' "$err" >&2
  else
    t=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  fi
  TIMES[$key]="${TIMES[$key]:-}${TIMES[$key]:+ }$t"
  log "$(printf '%-4s %-3s %-46s %s' "$NET" "#$ROUND" "${LABEL[$key]}" "$t")"
}

# rounds OPS...: RUNS rounds, each running every operation once, so that load from other
# work on the machine spreads over all of them alike; then one results line per
# operation: "KEY<tab>NET<tab>LABEL<tab>secs...". scp -r at the WAN delay runs only in
# the first SCP_WAN_RUNS rounds.
rounds() {
  local key
  TIMES=()
  for ((ROUND = 1; ROUND <= RUNS; ROUND++)); do
    for key in "$@"; do
      if [[ $key == scp && $NET == wan ]] && ((ROUND > SCP_WAN_RUNS)); then
        continue
      fi
      once "$key"
    done
  done
  for key in "$@"; do
    [[ -n ${TIMES[$key]:-} ]] || continue # scp -r at the WAN delay with BENCH_SCP_WAN_RUNS=0
    printf '%s\t%s\t%s\t%s\n' "$key" "$NET" "${LABEL[$key]}" "${TIMES[$key]}" >>"$RESULTS"
    log "$(printf '%-4s all %-46s %s' "$NET" "${LABEL[$key]}" "${TIMES[$key]}")"
  done
}

# trace KEY: one more, untimed run of KEY with BATON_TRACE=1 and BATON_TRACE_SFTP=1; its
# stderr goes to $TRACES/KEY.NET (and a push's --json report to KEY.NET.json).
trace() {
  local key=$1
  "reset_$key"
  if (
    export BATON_TRACE=1 BATON_TRACE_SFTP=1
    if [[ $key == push_* || $key == noop ]]; then
      "$BATON" --store "$FROM" --json push "$TARGET" >"$TRACES/$key.$NET.json"
    elif [[ $key == pull ]]; then
      "$BATON" --store "$DEST" --json pull chg >"$TRACES/$key.$NET.json"
    else
      "run_$key"
    fi
  ) 2>"$TRACES/$key.$NET"; then
    log "$(printf '%-4s traced %s: %s lines' "$NET" "$key" "$(wc -l <"$TRACES/$key.$NET")")"
  else
    log "$NET: the traced run of $key failed:"
    tail -n 20 "$TRACES/$key.$NET" | sed 's/^/    /' >&2
  fi
}

: >"$RESULTS"
: >"$META"

# Probe (untimed): can baton push into a store made by a plain `baton init`? If not,
# say so in the report and give such stores the directory the push needs.
INIT_WORKAROUND=0 NET=lo HOST=benchbox
mkdir -p "$REMOTE/probe"
fresh "$REMOTE/probe/init"
server_init "$DEST"
new_target "$LOCAL/small"
if "$BATON" --store "$FROM" -q push "$TARGET" 2>"$WORK/err/probe"; then
  printf 'init_push\tok\n' >>"$META"
else
  log "baton push into a store made by 'baton init' fails: $(cat "$WORK/err/probe")"
  log "pre-creating refs/current in such stores from here on"
  printf 'init_push\t%s\n' "$(tr '\n' ' ' <"$WORK/err/probe" | sed "s|$WORK|\$WORK|g")" >>"$META"
  INIT_WORKAROUND=1
fi
rm -rf "$REMOTE/probe"
UPTIME_START=$(uptime)
log "load: $UPTIME_START"
for NET in lo wan; do
  [[ $NET == lo ]] && HOST=benchbox || HOST=benchwan
  mkdir -p "$REMOTE/$NET" "$PULLED/$NET"
  printf 'load_before_%s\t%s\n' "$NET" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$META"
  log "timing on $NET ($HOST), $RUNS rounds"
  ((${#SMALL_OPS[@]} == 0)) || rounds "${SMALL_OPS[@]}"
  for key in push_init push_new noop clone pull push_inc clone_hist; do
    [[ " ${SMALL_OPS[*]} " == *" $key "* ]] && trace "$key"
  done
  if [[ $NET == lo ]] && ((${#BIG_OPS[@]})); then
    rounds "${BIG_OPS[@]}"
    for key in push_big clone_big; do
      [[ " ${BIG_OPS[*]} " == *" $key "* ]] && trace "$key"
    done
  fi
  if [[ $NET == wan ]] && ((${#RATE_OPS[@]})); then
    rounds "${RATE_OPS[@]}"
  fi
  printf 'load_after_%s\t%s\n' "$NET" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$META"
  rm -rf "${REMOTE:?}/$NET" "${PULLED:?}/$NET"
done
UPTIME_END=$(uptime)
log "load: $UPTIME_END"

# --- environment ------------------------------------------------------------------------
first_line() { "$@" 2>&1 | head -n1; }
{
  printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
  printf 'runs\t%s\n' "$RUNS"
  printf 'scp_wan_runs\t%s\n' "$SCP_WAN_RUNS"
  printf 'scp_timeout\t%s\n' "$SCP_TIMEOUT"
  printf 'delay_ms\t%s\n' "$DELAY_MS"
  printf 'seed\t%s\n' "$SEED"
  printf 'small_files\t%s\n' "$(find "$DATA_A" -type f | wc -l)"
  printf 'small_dirs\t%s\n' "$(find "$DATA_A" -mindepth 1 -type d | wc -l)"
  printf 'small_bytes\t%s\n' "$(find "$DATA_A" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')"
  printf 'big_bytes\t%s\n' "$(stat -c %s "$DATA_B/big.bin")"
  printf 'mid_bytes\t%s\n' "$(stat -c %s "$DATA_C/mid.bin")"
  printf 'save_json\t%s\n' "$(tr -d '\n' <"$WORK/save_small.json")"
  printf 'nproc\t%s\n' "$(nproc)"
  printf 'cpu\t%s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  printf 'mem\t%s\n' "$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  printf 'kernel\t%s\n' "$(uname -r)"
  printf 'fs\t%s\n' "$(df -T "$WORK" | awk 'NR == 2 { print $2 }')"
  printf 'uptime_start\t%s\n' "$(sed 's/^ *//' <<<"$UPTIME_START")"
  printf 'uptime_end\t%s\n' "$(sed 's/^ *//' <<<"$UPTIME_END")"
  printf 'baton\t%s (commit %s%s)\n' "$("$BATON" --version)" \
    "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(GIT_OPTIONAL_LOCKS=0 git -C "$ROOT" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null | grep -q . && echo ', src modified' || true)"
  printf 'openssh\t%s\n' "$(first_line ssh -V)"
  printf 'git\t%s\n' "$(first_line git --version)"
  printf 'rsync\t%s\n' "$(first_line rsync --version | sed 's/  */ /g')"
} >>"$META"

# --- 5. report --------------------------------------------------------------------------
if [[ $DOCS == 1 ]]; then
  python3 "$ROOT/bench/sync_report.py" "$RESULTS" "$META" "$TRACES" "$ROOT/docs/benchmarks.md"
  log "wrote docs/benchmarks.md"
else
  python3 "$ROOT/bench/sync_report.py" "$RESULTS" "$META" "$TRACES" -
  log "docs/benchmarks.md left alone (set BENCH_DOCS=1 to write it)"
fi
