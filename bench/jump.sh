#!/usr/bin/env bash
# Clones over SSH, quiet and under load, and through a jump host (issue 32): `baton clone`
# of a store holding one 256 MiB file, directly and through `?jump=` (the bastion is the
# same private sshd on loopback, so the second hop is a forwarded connection back to it),
# against `scp` and `scp -J` of that file, alternating, median of BENCH_RUNS; then the
# same with BENCH_LOAD busy loops running beside it. Writes the "## Clones through a jump
# host and under load (issue 32)" section of docs/benchmarks.md (BENCH_DOCS=0: only print).
#
# Usage: bash bench/jump.sh   (BENCH_MB=256, BENCH_RUNS=5, BENCH_LOAD=10,
#        BENCH_DIR=bench/work; BATON=path uses that build instead of building release)
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${BENCH_RUNS:-5}
MB=${BENCH_MB:-256}
LOAD=${BENCH_LOAD:-10}
WORK=${BENCH_DIR:-$ROOT/bench/work}/jump
rm -rf "$WORK"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
SSHD_PID=
BUSY=()
cleanup() {
  [[ -z $SSHD_PID ]] || kill "$SSHD_PID" 2>/dev/null || true
  ((${#BUSY[@]} == 0)) || kill "${BUSY[@]}" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

if [[ -z ${BATON:-} ]]; then
  echo "==> building baton (release)" >&2
  (cd "$ROOT" && cargo build --release --quiet)
  BATON=${CARGO_TARGET_DIR:-$ROOT/target}/release/baton
fi
for tool in scp ssh ssh-keygen python3; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
done

SERVER=$WORK/server
CLIENT_HOME=$WORK/home
# shellcheck source=bench/sshd.sh
source "$ROOT/bench/sshd.sh"
make_keys
start_sshd
client_config "benchbox:$PORT"
export HOME=$CLIENT_HOME
unset SSH_AUTH_SOCK BATON_STORE BATON_TRACE

echo "==> a store of one ${MB} MiB file" >&2
mkdir -p "$WORK/tree"
head -c $((MB << 20)) /dev/urandom >"$WORK/tree/big.bin"
SRC=$WORK/src.baton
"$BATON" --store "$SRC" -q init
"$BATON" --store "$SRC" -q save --secrets allow "$WORK/tree" --summary "jump bench" >/dev/null
cat "$SRC"/packs/* "$WORK/tree/big.bin" >/dev/null # page cache warm

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A T
timed() { # KEY COMMAND...: one run into a fresh $WORK/dest
  local key=$1
  shift
  rm -rf "$WORK/dest"
  local start=$EPOCHREALTIME
  "$@" >/dev/null
  local end=$EPOCHREALTIME
  T[$key]+="$(echo "$end - $start" | bc) "
}
SCP=(scp -q -F "$HOME/.ssh/config")
rounds() { # PHASE: BENCH_RUNS rounds of the four transfers
  local phase=$1 r
  for r in $(seq "$RUNS"); do
    echo "==> $phase: round $r of $RUNS" >&2
    timed "direct_$phase" "$BATON" -q clone "ssh://benchbox$SRC" "$WORK/dest"
    timed "jump_$phase" "$BATON" -q clone "ssh://benchbox$SRC?jump=benchbox" "$WORK/dest"
    timed "scp_$phase" "${SCP[@]}" "benchbox:$WORK/tree/big.bin" "$WORK/dest"
    timed "scpj_$phase" "${SCP[@]}" -J benchbox "benchbox:$WORK/tree/big.bin" "$WORK/dest"
  done
}
rounds quiet
LOAD_QUIET=$(cut -d' ' -f1-3 /proc/loadavg)
for _ in $(seq "$LOAD"); do
  bash -c 'while :; do :; done' &
  BUSY+=($!)
done
sleep 15 # the load average catches up
rounds load
LOAD_BUSY=$(cut -d' ' -f1-3 /proc/loadavg)
kill "${BUSY[@]}" 2>/dev/null || true
BUSY=()
rm -rf "$WORK/dest"
"$BATON" -q clone "ssh://benchbox$SRC?jump=benchbox" "$WORK/dest" >/dev/null
"$BATON" --store "$WORK/dest" -q verify

s() { printf '%.2f' "$(echo "${T[$1]}" | median)"; }
ratio() { printf '%.2f' "$(echo "$(echo "${T[$1]}" | median) / $(echo "${T[$2]}" | median)" | bc -l)"; }
{
  echo "## Clones through a jump host and under load (issue 32)"
  echo
  echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC with \`bash bench/jump.sh\` (commit $(git -C "$ROOT" rev-parse --short HEAD))."
  echo
  echo "- Data: a store of one save of a ${MB} MiB random file, in the page cache."
  echo "- Method: \`baton clone\` over a private sshd on 127.0.0.1 (ed25519, internal-sftp) directly and with \`?jump=benchbox\` (the same sshd as bastion: the second hop is a \`direct-tcpip\` connection it forwards back to itself), against \`scp\` and \`scp -J benchbox\` of the file, alternating, median of $RUNS; quiet (load average after: $LOAD_QUIET), then with $LOAD busy shell loops running (load average after: $LOAD_BUSY)."
  echo
  echo "| work | load | baton clone (s) | scp (s) | ratio |"
  echo "| --- | --- | ---: | ---: | ---: |"
  for phase in quiet load; do
    echo "| direct | $phase | $(s "direct_$phase") | $(s "scp_$phase") | $(ratio "direct_$phase" "scp_$phase") |"
    echo "| through the jump host | $phase | $(s "jump_$phase") | $(s "scpj_$phase") | $(ratio "jump_$phase" "scpj_$phase") |"
  done
  echo
  cat <<'TEXT'
Goal (issue 32): 1x scp or less at any load. Through a jump host every byte is encrypted and decrypted twice on each side, and on this 2-core machine four parties share the cores (baton's session and its relay thread, the bastion's sshd, the server's sshd). libssh2 opens a forwarded channel with a 2 MiB receive window and keeps it there; the relay keeps it at 16 MiB, as the SFTP channel inside asks: with 2 MiB the same clone took 1.1-3.0 s.
TEXT
} >"$WORK/section.md"
cat "$WORK/section.md"
if [[ ${BENCH_DOCS:-1} == 1 ]]; then
  python3 "$ROOT/bench/put_section.py" "$ROOT/docs/benchmarks.md" "$WORK/section.md"
fi
