#!/usr/bin/env bash
# End-to-end demo: one agent saves a handoff, pushes it to a "remote" store, another
# clones it, resumes from it, hands back, and both sides verify. Runs in a temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
baton="$PWD/target/release/baton"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; "$@"; }

mkdir -p alice/workspace/src bob
printf '## Objective\nShip the parser.\n\n## Current State\nTokenizer done.\n\n## Next Steps\nWrite the grammar.\n' > alice/workspace/handoff.md
printf 'fn main() {}\n' > alice/workspace/src/main.rs
printf '#!/bin/sh\ncargo test\n' > alice/workspace/run-tests.sh && chmod +x alice/workspace/run-tests.sh
ln -s handoff.md alice/workspace/README

cd alice
run "$baton" init
run "$baton" save workspace --from claude --to codex --summary "tokenizer done, grammar next"
run "$baton" target add devbox "$work/devbox-store"
run "$baton" push
cd ../bob
run "$baton" clone "$work/devbox-store"
run "$baton" log
run "$baton" show current
run "$baton" cat current:handoff.md
run "$baton" checkout current resumed
run ls -l resumed
printf 'Grammar written.\n' >> resumed/handoff.md
run "$baton" save resumed --from codex --to claude --summary "grammar written"
run "$baton" push
cd ../alice
run "$baton" pull
run "$baton" diff current~1 current
run "$baton" log --audit
run "$baton" verify
run "$baton" --json verify
