#!/usr/bin/env bash
# Object-storage benchmark (issue 15): baton push / clone / incremental push / pull against
# an S3 server through a proxy adding 50 ms of round trip, against `aws s3 sync` of the
# same files to and from the same server in the same rounds (alternating), on the
# 1,000-file set (bench/gen_sync.py small) and a typical-handoff set (200 source files of
# ~4 KiB and a 3 MB session transcript, as bench/handoff.sh makes). The server is the test
# harness's (tests/common/s3_server.py: moto, in memory, SigV4 checked).
# Writes the "## Object storage (issue 15)" section of docs/benchmarks.md.
#
# Usage: bash bench/s3.sh
#
# Environment:
#   BENCH_RUNS      rounds, each timing every operation once; median reported (default 5)
#   BENCH_SEED      generator seed (default 42)
#   BENCH_DELAY_MS  one-way delay of the WAN proxy (default 25, i.e. 50 ms RTT)
#   BENCH_DIR       work directory (default: a new mktemp -d; removed afterwards)
#   BENCH_KEEP      1 = keep the work directory (and the server's log) afterwards
#   BENCH_DOCS      1 = write docs/benchmarks.md, 0 = only print the section
#                   (default: write only with 3 or more rounds and the default delay)
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${BENCH_RUNS:-5}
SEED=${BENCH_SEED:-42}
DELAY_MS=${BENCH_DELAY_MS:-25}
DOCS=${BENCH_DOCS:-$( ((RUNS >= 3)) && [[ $DELAY_MS == 25 ]] && echo 1 || echo 0)}
if [[ -n ${BENCH_DIR:-} ]]; then
  WORK=$BENCH_DIR
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-s3.XXXXXX")
fi
WORK=$(cd "$WORK" && pwd)
BUCKET=baton-bench
MOTO_PIN="moto[s3]==5.2.1 flask==3.1.3 flask-cors==6.0.5"
AWSCLI_PIN="awscli==1.45.11"

SERVER_PID=
PROXY_PID=
log() { printf '==> %s\n' "$*" >&2; }

cleanup() {
  local rc=$? pid
  set +e
  exec 3>&- 2>/dev/null
  for pid in $PROXY_PID $SERVER_PID; do
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then
    log "keeping $WORK (BENCH_KEEP=1)"
  else
    rm -rf "$WORK"
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
if ! python3 -c "import moto.server, boto3, flask" 2>/dev/null; then
  log "installing $MOTO_PIN"
  # shellcheck disable=SC2086
  python3 -m pip install -q $MOTO_PIN
fi
if ! command -v aws >/dev/null || ! aws --version >/dev/null 2>&1; then
  log "installing $AWSCLI_PIN"
  python3 -m pip install -q "$AWSCLI_PIN"
fi

# --- 2. server and delay proxy ----------------------------------------------------------
mkdir -p "$WORK/server" "$WORK/home" "$WORK/err"
mkfifo "$WORK/server/in"
exec 3<>"$WORK/server/in" # the launcher serves until its standard input closes
python3 "$ROOT/tests/common/s3_server.py" "$BUCKET" --auth <"$WORK/server/in" \
  >"$WORK/server/out" 2>"$WORK/server/log" &
SERVER_PID=$!
for ((i = 0; ; i++)); do
  [[ -s $WORK/server/out ]] && break
  if ((i > 600)) || ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "the S3 server did not start; its log:" >&2
    cat "$WORK/server/log" >&2
    exit 1
  fi
  sleep 0.1
done
read -r PORT KEY SECRET < <(python3 -c 'import json, sys; d = json.loads(open(sys.argv[1]).readline()); print(d["port"], d["access_key"], d["secret_key"])' "$WORK/server/out")
WAN_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log "starting the delay proxy (${DELAY_MS} ms each way) in front of 127.0.0.1:$PORT"
python3 "$ROOT/bench/delayproxy.py" "$WAN_PORT" "$PORT" "$DELAY_MS" </dev/null >/dev/null 2>"$WORK/server/proxy.log" &
PROXY_PID=$!
for ((i = 0; ; i++)); do
  python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' \
    "$WAN_PORT" 2>/dev/null && break
  if ((i > 100)) || ! kill -0 "$PROXY_PID" 2>/dev/null; then
    echo "the delay proxy did not start:" >&2
    cat "$WORK/server/proxy.log" >&2
    exit 1
  fi
  sleep 0.05
done

# Every client (baton and aws) sees only these settings.
export HOME=$WORK/home
unset BATON_STORE BATON_TRACE AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_REGION
export AWS_ENDPOINT_URL=http://127.0.0.1:$WAN_PORT AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=$SECRET AWS_EC2_METADATA_DISABLED=true
AWS=(aws --endpoint-url "$AWS_ENDPOINT_URL" s3 sync --only-show-errors)
# A download compares exact timestamps: without it, aws s3 sync skips an object of the
# local file's size that is newer than the file (awscli's download rule), and misses the
# 5 rewritten files.
AWS_DOWN=("${AWS[@]}" --exact-timestamps)

# --- 3. data sets -----------------------------------------------------------------------
log "generating the data sets (seed $SEED)"
python3 "$ROOT/bench/gen_sync.py" small "$WORK/data/small" "$SEED"
python3 - "$WORK/data/typical" <<'EOF'
import json, os, random, sys
out = sys.argv[1]
rng = random.Random(7)
for i in range(200):
    d = os.path.join(out, f"src/mod{i % 10}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"file{i}.rs"), "w") as f:
        for j in range(100):
            f.write(f"fn f{i}_{j}() -> u64 {{ {rng.randrange(1 << 30)} }}\n")
os.makedirs(os.path.join(out, "session"), exist_ok=True)
with open(os.path.join(out, "session", "transcript.jsonl"), "w") as f:
    size, n = 0, 0
    while size < 3 * 1024 * 1024:
        n += 1
        line = json.dumps({"n": n, "type": "assistant", "text": f"Step {n}: ran the tests for module {n % 10}. " * 6}) + "\n"
        f.write(line)
        size += len(line)
EOF
SETS=(small typical)
declare -A SET_LABEL=([small]="1,000 files of 12 KiB (12.3 MB, incompressible)" [typical]="typical handoff: 200 source files + 3 MB transcript")

# --- 4. the operations ------------------------------------------------------------------
# Per round and data set: a fresh copy of the files and a fresh store holding one bundle
# of them (untimed), a fresh prefix; then, timed, alternating baton and aws:
#   push (creates the store) / aws s3 sync up, clone / aws s3 sync down,
#   5 files changed and saved (untimed), incremental push / sync up, pull / sync down.
declare -A TIMES=()
timed() { # timed KEY CMD...: run CMD, append its seconds (or "fail") to TIMES[KEY]
  local key=$1 t0 t1 t err=$WORK/err/$1.$ROUND
  shift
  t0=$EPOCHREALTIME
  if "$@" >"$err" 2>&1; then
    t1=$EPOCHREALTIME
    t=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  else
    t=fail
    log "$key failed:"
    sed 's/^/    /' "$err" >&2
  fi
  TIMES[$key]="${TIMES[$key]:-}${TIMES[$key]:+ }$t"
  log "$(printf '#%-3s %-28s %s' "$ROUND" "$key" "$t")"
}
change_five() { # change_five DIR: rewrite 5 files (same sizes, new bytes)
  python3 - "$1" "$ROUND" <<'EOF'
import os, sys
root, rnd = sys.argv[1], sys.argv[2]
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)[:5]
for path in files:
    size = os.path.getsize(path)
    with open(path, "wb") as f:
        f.write((f"round {rnd} {path}\n" * (size // 16 + 1)).encode()[:size])
EOF
}

UPTIME_START=$(uptime)
log "load: $UPTIME_START"
for ((ROUND = 1; ROUND <= RUNS; ROUND++)); do
  for ds in "${SETS[@]}"; do
    r=$WORK/r$ROUND/$ds
    mkdir -p "$r"
    cp -r "$WORK/data/$ds" "$r/files"
    "$BATON" --store "$r/store" -q init
    "$BATON" --store "$r/store" -q save --secrets allow "$r/files" --summary "s3 bench $ds" >/dev/null
    "$BATON" --store "$r/store" -q target add origin "s3://$BUCKET/r$ROUND/$ds/baton"
    url=s3://$BUCKET/r$ROUND/$ds/baton
    awsurl=s3://$BUCKET/r$ROUND/$ds/aws
    timed "$ds.push" "$BATON" --store "$r/store" -q push
    timed "$ds.aws_up" "${AWS[@]}" "$r/files" "$awsurl"
    timed "$ds.clone" "$BATON" -q clone "$url" "$r/clone"
    timed "$ds.aws_down" "${AWS_DOWN[@]}" "$awsurl" "$r/down"
    change_five "$r/files"
    "$BATON" --store "$r/store" -q save --secrets allow "$r/files" --summary "s3 bench $ds, 5 changed" >/dev/null
    timed "$ds.push_incr" "$BATON" --store "$r/store" -q push
    timed "$ds.aws_up_incr" "${AWS[@]}" "$r/files" "$awsurl"
    timed "$ds.pull" "$BATON" --store "$r/clone" -q pull
    timed "$ds.aws_down_incr" "${AWS_DOWN[@]}" "$awsurl" "$r/down"
    # Untimed checks: the clone is at the pushed bundle and verifies; aws got the files.
    want=$("$BATON" --store "$r/store" --json log -n 1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["bundles"][0]["id"])')
    got=$("$BATON" --store "$r/clone" --json log -n 1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["bundles"][0]["id"])')
    [[ $want == "$got" ]] || { echo "round $ROUND $ds: the pulled clone is at $got, not $want" >&2; exit 1; }
    "$BATON" --store "$r/clone" -q verify
    diff -r -q "$r/files" "$r/down"
    # One more incremental push, traced, for the request counts (untimed).
    if ((ROUND == 1)); then
      change_five "$r/files"
      "$BATON" --store "$r/store" -q save --secrets allow "$r/files" --summary traced >/dev/null
      BATON_TRACE=1 "$BATON" --store "$r/store" -q push 2>"$WORK/err/$ds.trace"
      grep -m1 '^trace summary: requests' "$WORK/err/$ds.trace" >"$WORK/$ds.requests" || echo "(no request summary)" >"$WORK/$ds.requests"
    fi
    rm -rf "$WORK/r$ROUND"
  done
done
UPTIME_END=$(uptime)
log "load: $UPTIME_END"

# --- 5. report --------------------------------------------------------------------------
stat_of() { # median (min–max) of TIMES[KEY], or "fail"
  tr ' ' '\n' <<<"${TIMES[$1]}" | python3 -c '
import statistics, sys
v = [x for x in sys.stdin.read().split() if x]
ok = sorted(float(x) for x in v if x != "fail")
if len(ok) < len(v) or not ok:
    print("fail (%d of %d runs)" % (len(v) - len(ok), len(v)))
else:
    m = statistics.median(ok)
    print("%.2f (%.2f–%.2f)" % (m, ok[0], ok[-1]) if len(ok) > 1 else "%.2f" % m)'
}
med() { tr ' ' '\n' <<<"${TIMES[$1]}" | grep -v fail | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print 0}'; }
ratio() { awk -v a="$(med "$1")" -v b="$(med "$2")" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "–" }'; }
{
  echo "## Object storage (issue 15)"
  echo
  echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC with \`bash bench/s3.sh\` (commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown))."
  echo
  echo "- Server: the test harness's S3 server (\`tests/common/s3_server.py\`: moto $(python3 -c 'import moto; print(moto.__version__)'), in memory, SigV4 checked) on 127.0.0.1, reached through \`bench/delayproxy.py\` (${DELAY_MS} ms each way). moto is a Python emulator: every request costs it milliseconds of CPU, so these figures are an upper bound for a real object store and compare the two clients' request patterns more than raw speed."
  echo "- Peer: \`$(aws --version 2>&1 | head -n1)\`, \`aws s3 sync\` of the same files to and from the same server (downloads with \`--exact-timestamps\`, without which it skips rewritten files of unchanged size), run right after the matching baton command in every round."
  echo "- Method: median (min–max) of $RUNS rounds, wall time of the whole command; each round uses a fresh prefix, store and destination. baton pushes a bundle already saved (\`baton save\`, untimed); the incremental rows follow a rewrite of 5 files (saved as a second bundle, untimed). Load: \`$(sed 's/^ *//' <<<"$UPTIME_START")\` at the start, \`$(sed 's/^ *//' <<<"$UPTIME_END")\` at the end."
  echo "- Requests of one traced incremental push (\`BATON_TRACE=1\`): 1,000-file set \`$(cat "$WORK/small.requests")\`; typical set \`$(cat "$WORK/typical.requests")\`."
  echo "- The same data set over SSH at 50 ms RTT: see the Sync (issue 3) section above."
  echo
  for ds in "${SETS[@]}"; do
    echo "| ${SET_LABEL[$ds]} | baton (s) | aws s3 sync (s) | ratio |"
    echo "|---|--:|--:|--:|"
    echo "| push, new prefix / sync up | $(stat_of "$ds.push") | $(stat_of "$ds.aws_up") | $(ratio "$ds.push" "$ds.aws_up") |"
    echo "| clone / sync down | $(stat_of "$ds.clone") | $(stat_of "$ds.aws_down") | $(ratio "$ds.clone" "$ds.aws_down") |"
    echo "| push, 5 files changed / sync up | $(stat_of "$ds.push_incr") | $(stat_of "$ds.aws_up_incr") | $(ratio "$ds.push_incr" "$ds.aws_up_incr") |"
    echo "| pull, 5 files changed / sync down | $(stat_of "$ds.pull") | $(stat_of "$ds.aws_down_incr") | $(ratio "$ds.pull" "$ds.aws_down_incr") |"
    echo
  done
} >"$WORK/section.md"
cat "$WORK/section.md"
if [[ $DOCS == 1 ]]; then
  python3 "$ROOT/bench/put_section.py" "$ROOT/docs/benchmarks.md" "$WORK/section.md"
  log "wrote docs/benchmarks.md"
else
  log "docs/benchmarks.md left alone (set BENCH_DOCS=1 to write it)"
fi
