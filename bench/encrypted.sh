#!/usr/bin/env bash
# Encrypted store benchmark (issue 5): save and checkout of the generated benchmark tree
# in an age-encrypted store vs a plain store, as a ratio (goal: within 1.5x). Writes the
# "## Encrypted store (issue 5)" section of docs/benchmarks.md.
#
# Usage: bash bench/encrypted.sh
#
# Environment: BENCH_SCALE (MiB, default 500), BENCH_RUNS (default 3), BENCH_DIR
# (default bench/work-enc), BENCH_SEED (default 42), BENCH_DOCS (1 = write the docs
# section; default: always, with the scale recorded in it).
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCALE=${BENCH_SCALE:-500}
RUNS=${BENCH_RUNS:-3}
SEED=${BENCH_SEED:-42}
WORK=${BENCH_DIR:-$ROOT/bench/work-enc}
DOCS=${BENCH_DOCS:-1}
log() { printf '==> %s\n' "$*" >&2; }

cleanup() { rm -rf "$WORK/tree" "$WORK/plain" "$WORK/enc" "$WORK/out" "$WORK/key.txt"; rmdir "$WORK" 2>/dev/null || true; }
trap cleanup EXIT

(cd "$ROOT" && cargo build --release --quiet)
BATON=${CARGO_TARGET_DIR:-$ROOT/target}/release/baton
[[ $BATON == /* ]] || BATON=$ROOT/$BATON
command -v age-keygen >/dev/null || { log "age-keygen is required (apt package age)"; exit 1; }

mkdir -p "$WORK"
log "generating a ${SCALE} MiB tree"
python3 "$ROOT/bench/gen_tree.py" "$WORK/tree" "$SCALE" "$SEED" >/dev/null
age-keygen -o "$WORK/key.txt" 2>/dev/null
PUB=$(sed -n 's/^# public key: //p' "$WORK/key.txt")

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# time_op KIND OP: one timed run, fresh store for save, fresh dir for checkout
time_op() {
  local kind=$1 op=$2 store=$WORK/$1 args=()
  [[ $kind == enc ]] && args=(--identity "$WORK/key.txt")
  if [[ $op == save ]]; then
    rm -rf "$store"
    if [[ $kind == enc ]]; then "$BATON" --store "$store" -q init --encrypt --recipient "$PUB"
    else "$BATON" --store "$store" -q init; fi
    sync
    local t0; t0=$(now)
    "$BATON" --store "$store" "${args[@]}" -q save --secrets allow "$WORK/tree" >/dev/null
  else
    rm -rf "$WORK/out"; sync
    local t0; t0=$(now)
    "$BATON" --store "$store" "${args[@]}" -q checkout current "$WORK/out" >/dev/null
  fi
  echo "$(now) - $t0" | bc
}

declare -A RES
for op in save checkout; do
  # Plain and encrypted runs alternate, so that background load hits both alike.
  declare -a t_plain=() t_enc=()
  for _ in $(seq "$RUNS"); do
    t_plain+=("$(time_op plain $op)")
    t_enc+=("$(time_op enc $op)")
  done
  RES[plain-$op]=$(printf '%s\n' "${t_plain[@]}" | median)
  RES[enc-$op]=$(printf '%s\n' "${t_enc[@]}" | median)
  log "plain $op: ${RES[plain-$op]} s; enc $op: ${RES[enc-$op]} s"
done
ratio() { python3 -c "print(f'{${RES[enc-$1]} / ${RES[plain-$1]}:.2f}')"; }
secs() { python3 -c "print(f'{$1:.2f}')"; }
verdict() { python3 -c "print('PASS' if $1 <= 1.5 else 'MISS')"; }
SAVE_R=$(ratio save); CO_R=$(ratio checkout)
SECTION=$(cat <<MD
## Encrypted store (issue 5)

\`bash bench/encrypted.sh\` (BENCH_SCALE=$SCALE MiB tree from bench/gen_tree.py, seed $SEED,
median of $RUNS runs, page cache warm, $(nproc) CPUs, $(date -u +%Y-%m-%d)). The same tree
saved into and checked out of a plain store and an age-encrypted store (one X25519
recipient). Goal: within 1.5x.

| operation | plain (s) | encrypted (s) | ratio | goal ≤ 1.5x |
|-----------|----------:|--------------:|------:|---|
| save      | $(secs ${RES[plain-save]}) | $(secs ${RES[enc-save]}) | ${SAVE_R}x | $(verdict $SAVE_R) |
| checkout  | $(secs ${RES[plain-checkout]}) | $(secs ${RES[enc-checkout]}) | ${CO_R}x | $(verdict $CO_R) |

Reproduce: \`bash bench/encrypted.sh\` (BENCH_SCALE, BENCH_RUNS, BENCH_DOCS=0 to only print).
MD
)
echo "$SECTION"
if [[ $DOCS == 1 ]]; then
  python3 - "$ROOT/docs/benchmarks.md" "$SECTION" <<'PY'
import sys, re
path, section = sys.argv[1], sys.argv[2]
text = open(path).read()
pat = re.compile(r"^## Encrypted store \(issue 5\)\n.*?(?=^## |\Z)", re.S | re.M)
if pat.search(text):
    text = pat.sub(section + "\n\n", text)
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
open(path, "w").write(text)
PY
fi
