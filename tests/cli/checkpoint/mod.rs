//! `baton checkpoint --hook`, the push queue, `baton sync` and `baton status` (issue 31):
//! the hook command driven with the JSON the harnesses document (fixtures/hooks/), a
//! real Claude Code session file and Codex rollout, real stores and targets. `hooks`:
//! what each hook call records and prints; `queue`: `--push`, the queue, sync, status.

mod hooks;
mod queue;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, Env, s};

pub const SESSION: &str = "0c4ec0de-0000-4000-8000-000000000031";
pub const THREAD: &str = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5";

/// A git workspace under `env` (its store at `env.store()`, found from the workspace by
/// walking up) with a Claude Code session of one exchange; (workspace, session file).
pub fn setup(env: &Env) -> (PathBuf, PathBuf) {
    let ws = common::git_workspace(env);
    let session = common::claude_project_dir(env.path(), &ws).join(format!("{SESSION}.jsonl"));
    fs::write(&session, turn(&ws, 1)).unwrap();
    env.init();
    (ws, session)
}

/// One user message and the assistant's answer, as Claude Code records them.
pub fn turn(ws: &Path, i: usize) -> String {
    let line = |uuid: String, kind: &str, content: &str| {
        let v = serde_json::json!({
            "sessionId": SESSION, "cwd": s(ws), "uuid": uuid, "parentUuid": null,
            "timestamp": "2026-11-30T10:00:00.000Z", "isSidechain": false, "type": kind,
            "message": {"role": kind, "content": content},
        });
        format!("{v}\n")
    };
    line(
        format!("u{i}"),
        "user",
        &format!("Step {i}: run the tests."),
    ) + &line(format!("a{i}"), "assistant", &format!("Step {i} passes."))
}

/// The fixture `name` of fixtures/hooks with its placeholders filled in.
pub fn fixture(name: &str, ws: &Path, transcript: &Path, session: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/hooks")
        .join(name);
    fs::read_to_string(path)
        .unwrap()
        .replace("{{SESSION}}", session)
        .replace("{{TRANSCRIPT}}", s(transcript))
        .replace("{{CWD}}", s(ws))
        .trim()
        .to_string()
}

/// `baton checkpoint --hook HARNESS EXTRA...` in `dir` with `stdin`; its output and time.
pub fn hook(
    env: &Env,
    dir: &Path,
    harness: &str,
    stdin: &str,
    extra: &[&str],
) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = env
        .cmd()
        .current_dir(dir)
        .args(["checkpoint", "--hook", harness])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "a hook must exit 0: {}",
        common::text(&out)
    );
    (out, took)
}

/// The checkpoint log's lines (`checkpoint --log --json`, run in `dir`).
pub fn log_lines(env: &Env, dir: &Path) -> Vec<Value> {
    let out = env
        .cmd()
        .current_dir(dir)
        .args(["--json", "checkpoint", "--log"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["lines"].as_array().unwrap().clone()
}

pub fn bundles(env: &Env) -> Vec<Value> {
    common::json_ok(env, &["log"])["bundles"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}
