#!/usr/bin/env bash
# End-to-end demo: one agent saves a handoff, pushes it to a "remote" store, another
# clones it, resumes from it, hands back, and both sides verify. Runs in a temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
baton="${CARGO_TARGET_DIR:-$PWD/target}/release/baton"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; "$@"; }

export GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com \
  GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com
mkdir -p alice bob
git init -q -b main alice/repo
cd alice/repo
printf 'fn main() {}\n' > main.rs && git add main.rs && git commit -qm "skeleton"
printf 'fn main() { parse(); }\n' > main.rs                 # uncommitted work
printf 'export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx0123\n' > .env   # a secret
cat > ../briefing.md <<'BRIEF'
Sure! Here is my handoff:

## Objective
Ship the config parser.

## Current State
Tokenizer done; main.rs calls parse() but it is not written yet. Key is in .env.

## Next Steps
1. Write parse() in main.rs.
2. Run the tests.
BRIEF
printf '{"role":"user","text":"write the tokenizer"}\n{"role":"assistant","text":"tokenizer done, tests pass"}\n' > ../session.jsonl

run "$baton" init
run "$baton" save --brief ../briefing.md --from claude --to codex --transcript ../session.jsonl --attach .env
run "$baton" log
run "$baton" target add devbox "$work/devbox-store"
run "$baton" push
cd ../../bob
git clone -q "$work/alice/repo" repo && cd repo
run "$baton" clone "$work/devbox-store" .baton
run "$baton" resume --budget 400
run "$baton" search current tokenizer
run "$baton" cat current:attachments/.env
printf 'fn parse() {}\nfn main() { parse(); }\n' > main.rs
cat > ../briefing.md <<'BRIEF'
## Objective
Ship the config parser.

## Current State
parse() written, tests pass.

## Next Steps
1. Review and merge.
BRIEF
run "$baton" save --brief ../briefing.md --from codex --to claude
run "$baton" push
cd ../../alice/repo
run "$baton" pull
run "$baton" diff current~1 current
run "$baton" log --audit
run "$baton" verify
run "$baton" --json verify
