#!/usr/bin/env bash
# A hub that never slows down (issue 32): clone, pull of one new bundle and push of one
# new bundle against a hub that received SMALL pushes and one that received LARGE pushes
# (one pack each), over SSH (a private sshd on loopback) and S3 (the test harness's
# server, tests/common/s3_server.py: moto, in memory), before and after
# `baton gc --target` merged the hub's packs; `git clone` / `git fetch` / `git push` of a
# repository with as many commits, over the same sshd, in the same rounds (alternating).
# Each push saves one changed file of a 50-file tree. The large hub is made once through
# a local path, then served as it is over SSH and copied into the bucket.
#
# Usage: bash bench/hub.sh
#
# Environment: BENCH_SMALL (default 100), BENCH_LARGE (default 10000), BENCH_RUNS
# (default 5), BENCH_DIR (default a new temp directory, removed afterwards), BATON (a
# built binary; default: build the release one).
# Prints the "## A hub of many pushes (issue 32)" section of docs/benchmarks.md.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SMALL=${BENCH_SMALL:-100}
LARGE=${BENCH_LARGE:-10000}
RUNS=${BENCH_RUNS:-5}
WORK=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/baton-hub.XXXXXX")}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
SSHD_PID=
S3_PID=
cleanup() {
  set +e
  exec 3>&- 2>/dev/null
  for pid in $SSHD_PID $S3_PID; do
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  [[ -n ${BENCH_DIR:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT
log() { printf '==> %s\n' "$*" >&2; }

if [[ -z ${BATON:-} ]]; then
  log "building baton (release)"
  (cd "$ROOT" && cargo build --release --quiet)
  BATON=${CARGO_TARGET_DIR:-$ROOT/target}/release/baton
fi

SERVER=$WORK/server
CLIENT_HOME=$WORK/home
# shellcheck source=bench/sshd.sh
source "$ROOT/bench/sshd.sh"
make_keys
start_sshd
client_config "benchbox:$PORT"
export HOME=$CLIENT_HOME GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
unset SSH_AUTH_SOCK BATON_STORE BATON_TRACE
export GIT_SSH_COMMAND="ssh -F $HOME/.ssh/config"

# The S3 server, its credentials in the environment every baton run sees.
mkdir -p "$WORK/s3"
mkfifo "$WORK/s3/in"
exec 3<>"$WORK/s3/in"
python3 "$ROOT/tests/common/s3_server.py" hub-bench --auth <"$WORK/s3/in" >"$WORK/s3/out" 2>"$WORK/s3/log" &
S3_PID=$!
for ((i = 0; ; i++)); do
  [[ -s $WORK/s3/out ]] && break
  ((i < 600)) && kill -0 "$S3_PID" 2>/dev/null || { cat "$WORK/s3/log" >&2; exit 1; }
  sleep 0.1
done
read -r S3_PORT S3_KEY S3_SECRET < <(python3 -c 'import json, sys; d = json.loads(open(sys.argv[1]).readline()); print(d["port"], d["access_key"], d["secret_key"])' "$WORK/s3/out")
export AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET

g() { git -c user.name=bench -c user.email=bench@example.com "$@"; }

# make_hub N DIR: a store DIR/a pushed N times to the local hub DIR/hub (a pack a push),
# and a git repository DIR/git.git of N commits (the same changes), pushed to likewise.
make_hub() {
  local n=$1 dir=$2 i
  mkdir -p "$dir/tree"
  for i in $(seq 1 50); do seq 1 200 | sed "s/^/file $i line /" >"$dir/tree/f$i.txt"; done
  "$BATON" --store "$dir/a" -q init
  "$BATON" --store "$dir/a" -q save "$dir/tree" >/dev/null
  "$BATON" --store "$dir/a" -q target add hub "$dir/hub" >/dev/null
  "$BATON" --store "$dir/a" -q push hub >/dev/null
  for i in $(seq 2 "$n"); do
    echo "change $i" >>"$dir/tree/f$((i % 50 + 1)).txt"
    "$BATON" --store "$dir/a" -q save "$dir/tree" >/dev/null
    "$BATON" --store "$dir/a" -q push hub >/dev/null
  done
  # git: the same history, one commit a push.
  g init -q -b main "$dir/gtree"
  cp "$dir/tree"/*.txt "$dir/gtree/"
  g -C "$dir/gtree" add -A && g -C "$dir/gtree" commit -qm base
  python3 - "$dir/gtree" "$n" <<'PYEOF'
import subprocess, sys
tree, n = sys.argv[1], int(sys.argv[2])
# fast-import: n-1 commits, each appending one line to one file (as the pushes did).
files = {i: open(f"{tree}/f{i}.txt").read() for i in range(1, 51)}
out = []
for i in range(2, n + 1):
    k = i % 50 + 1
    files[k] += f"change {i}\n"
    data = files[k].encode()
    out.append(b"commit refs/heads/main\ncommitter b <b@example.com> %d +0000\ndata 1\nc\n" % (1700000000 + i))
    if i == 2:
        out.append(b"from refs/heads/main^0\n")
    out.append(b"M 100644 inline f%d.txt\ndata %d\n" % (k, len(data)) + data + b"\n")
subprocess.run(["git", "-C", tree, "fast-import", "--quiet"], input=b"".join(out), check=True)
PYEOF
  g -C "$dir/gtree" reset -q --hard
  g init -q --bare -b main "$dir/git.git"
  g -C "$dir/gtree" push -q "$dir/git.git" main
}

# to_bucket DIR PREFIX: the local hub's files as keys under PREFIX (a store as S3 holds one).
to_bucket() {
  python3 - "$1/hub" "$2" <<'PYEOF'
import os, sys, boto3
from concurrent.futures import ThreadPoolExecutor
root, prefix = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if "staging" not in d]
def put(path):
    with open(path, "rb") as f:
        s3.put_object(Bucket="hub-bench", Key=f"{prefix}/{os.path.relpath(path, root)}", Body=f.read())
with ThreadPoolExecutor(16) as pool:
    list(pool.map(put, files))
PYEOF
}

t() {
  local s=$EPOCHREALTIME
  "$@" >/dev/null 2>"$WORK/err" || { echo "FAILED: $*" >&2; cat "$WORK/err" >&2; exit 1; }
  echo "$EPOCHREALTIME - $s" | bc
}
median() { sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]*1000}'; }

# measure DIR URL GITURL LABEL: medians (ms) of clone, pull of one bundle, push of one
# bundle, and git's clone / fetch / push of the same, alternating.
measure() {
  local dir=$1 url=$2 giturl=$3 label=$4 i
  local c=() p=() u=() gc=() gp=() gu=()
  rm -rf "$dir/c2" "$dir/pusher" "$dir/gc2" "$dir/gpusher"
  "$BATON" -q clone "$url" "$dir/c2" >/dev/null
  "$BATON" -q clone "$url" "$dir/pusher" >/dev/null
  g clone -q "$giturl" "$dir/gc2" && g clone -q "$giturl" "$dir/gpusher"
  for i in $(seq 1 "$RUNS"); do
    rm -rf "$dir/cc" "$dir/gcc"
    c+=("$(t "$BATON" -q clone "$url" "$dir/cc")")
    gc+=("$(t g clone -q --bare "$giturl" "$dir/gcc")")
    echo "pushed $i" >>"$dir/tree/f1.txt"
    "$BATON" --store "$dir/pusher" -q save "$dir/tree" >/dev/null
    u+=("$(t "$BATON" --store "$dir/pusher" -q push origin)")
    echo "pushed $i" >>"$dir/gpusher/f1.txt"
    g -C "$dir/gpusher" commit -qam "pushed $i"
    gu+=("$(t g -C "$dir/gpusher" push -q origin main)")
    p+=("$(t "$BATON" --store "$dir/c2" -q pull origin)")
    gp+=("$(t g -C "$dir/gc2" pull -q --ff-only origin main)")
  done
  local packs
  packs=$("$BATON" --store "$dir/pusher" --json gc --target origin --dry-run | python3 -c 'import json,sys; print(json.load(sys.stdin)["report"]["packs_before"])')
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$packs" \
    "$(printf '%s\n' "${c[@]}" | median)" "$(printf '%s\n' "${gc[@]}" | median)" \
    "$(printf '%s\n' "${p[@]}" | median)" "$(printf '%s\n' "${gp[@]}" | median)" \
    "$(printf '%s\n' "${u[@]}" | median)" "$(printf '%s\n' "${gu[@]}" | median)"
}

rows=()
for n in "$SMALL" "$LARGE"; do
  log "a hub of $n pushes"
  make_hub "$n" "$WORK/h$n"
  to_bucket "$WORK/h$n" "h$n"
  ssh_url="ssh://benchbox$WORK/h$n/hub"
  s3_url="s3://hub-bench/h$n"
  git_url="ssh://benchbox$WORK/h$n/git.git"
  rows+=("$(measure "$WORK/h$n" "$ssh_url" "$git_url" "SSH, $n pushes")")
  rows+=("$(measure "$WORK/h$n" "$s3_url" "$git_url" "S3, $n pushes")")
  for via in ssh s3; do
    url=$ssh_url
    [[ $via == s3 ]] && url=$s3_url
    "$BATON" --store "$WORK/h$n/a" -q target add "gc-$via" "$url" >/dev/null 2>&1 || true
    s=$EPOCHREALTIME
    "$BATON" --store "$WORK/h$n/a" --json gc --target "gc-$via" >"$WORK/gc-$via-$n.json"
    e=$EPOCHREALTIME
    log "gc --target over $via of $n pushes: $(echo "($e - $s) * 1000" | bc) ms: $(cat "$WORK/gc-$via-$n.json")"
  done
  rows+=("$(measure "$WORK/h$n" "$ssh_url" "$git_url" "SSH, $n pushes, after gc --target")")
  rows+=("$(measure "$WORK/h$n" "$s3_url" "$git_url" "S3, $n pushes, after gc --target")")
done

cat <<EOF
## A hub of many pushes (issue 32)

Measured $(date -u '+%Y-%m-%d %H:%M UTC') with \`bash bench/hub.sh\` (commit $(git -C "$ROOT" rev-parse --short HEAD)), median of $RUNS alternating rounds; load average at the end $(cut -d' ' -f1-3 /proc/loadavg).

- Data: a 50-file tree (about 9 KB each); each push saves one changed file, so the hub holds one pack per push. git: a bare repository of as many commits (the same changes), served by the same sshd.
- Operations: a clone of the hub; a pull into an up-to-date clone of one new bundle pushed from another clone; a push of one new bundle. git: \`clone --bare\`, \`pull --ff-only\`, \`push\` of one commit.
- "after gc --target": the same hub after \`baton gc --target\` (geometric) merged its packs over that transport.

| hub | packs (at the end) | baton clone (ms) | git clone (ms) | baton pull one (ms) | git pull one (ms) | baton push one (ms) | git push one (ms) |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
$(printf '%s\n' "${rows[@]}")
EOF
