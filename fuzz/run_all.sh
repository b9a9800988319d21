#!/usr/bin/env bash
# Build every fuzz target, regenerate the seeds, then run each target for SECONDS
# (default 600) two at a time under nice, and print per target: executions, exec/s, the
# final coverage line and the crashes found. SKIP_BUILD=1: use the binaries already built;
# SKIP_RUN=1: only print the table from the last logs. Logs: fuzz/artifacts/logs/TARGET.log;
# crashing inputs: fuzz/artifacts/TARGET/. Usage: fuzz/run_all.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_PER_TARGET=${1:-600}
shift || true
JOBS=${FUZZ_JOBS:-2}

if [ "$#" -gt 0 ]; then
  TARGETS=("$@")
else
  mapfile -t TARGETS < <(cargo +nightly fuzz list)
fi

[ -n "${SKIP_BUILD:-}" ] || nice cargo +nightly fuzz build
[ -n "${SKIP_RUN:-}" ] || python3 seeds.py --keep
mkdir -p artifacts/logs

# Targets that build stores and directories per input do file I/O on every run: on tmpfs
# it does not wait behind other processes' fsyncs.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  export TMPDIR=/dev/shm
fi

# The binaries are run directly, not through `cargo fuzz run`: that would rebuild first,
# and others editing src/ meanwhile would make every later target wait for a rebuild.
BIN_DIR=target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release
export BIN_DIR

run_one() {
  local target=$1 secs=$2
  mkdir -p "corpus/$target" "artifacts/$target"
  # -timeout: an input slower than 30 s is a hang worth reporting.
  nice "$BIN_DIR/$target" -artifact_prefix="artifacts/$target/" \
    -max_total_time="$secs" -timeout=30 -print_final_stats=1 "corpus/$target" \
    >"artifacts/logs/$target.log" 2>&1 || true
}
export -f run_one
[ -n "${SKIP_RUN:-}" ] || printf '%s\n' "${TARGETS[@]}" | xargs -P "$JOBS" -I{} bash -c "run_one {} $SECONDS_PER_TARGET"

printf '\n%-20s %12s %8s %8s  %-40s %s\n' target execs exec/s seconds "final coverage" crashes
for t in "${TARGETS[@]}"; do
  log="artifacts/logs/$t.log"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o '[0-9]* second' | grep -o '[0-9]*' || echo '?')
  cov=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*/[0-9a-zA-Z]*' | tail -1)
  crashes=$(find "artifacts/$t" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) | wc -l)
  printf '%-20s %12s %8s %8s  %-40s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${secs:-?}" "${cov:-?}" "$crashes"
done
