//! `baton hooks install|status|remove` through the real binary, against real-looking harness
//! configuration: a Claude Code settings.json full of a user's own hooks, permissions and
//! keys (`claude.rs`), a Codex config.toml with comments and tables (`codex.rs`).

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use common::via::InDir;
use common::{Env, Via, json_err, json_ok};
use serde_json::Value;

mod claude;
mod codex;

/// `--json hooks ARGS` in the environment's directory; the document.
fn hooks_ok(env: &Env, args: &[&str]) -> Value {
    let mut all = vec!["hooks"];
    all.extend_from_slice(args);
    json_ok(env, &all)
}

/// `--json hooks ARGS`, required to fail with `exit`; the error.
fn hooks_err(env: &Env, args: &[&str], exit: i32) -> Value {
    let mut all = vec!["hooks"];
    all.extend_from_slice(args);
    json_err(env, &all, exit)
}

/// `--json hooks ARGS` run in `dir`.
fn hooks_ok_in(env: &Env, dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["hooks"];
    all.extend_from_slice(args);
    InDir(dir).json_ok(env, &all)
}

/// The `action` of each change in an install or remove document, as (event, action).
fn actions(doc: &Value) -> Vec<(String, String)> {
    doc["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("changes: {doc}"))
        .iter()
        .map(|c| {
            (
                c["event"].as_str().unwrap().to_string(),
                c["action"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(e, a)| (e.to_string(), a.to_string()))
        .collect()
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn write(path: &Path, text: &str) -> PathBuf {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    path.to_path_buf()
}

/// The one entry of `hooks status --json` for (harness, scope).
fn status_of<'a>(doc: &'a Value, harness: &str, scope: &str) -> &'a Value {
    doc["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["harness"] == harness && e["scope"] == scope)
        .unwrap_or_else(|| panic!("no {harness} {scope} in {doc}"))
}

/// The README's "Automatic checkpoints" block, run as written in a fresh home: every line
/// works, and status then shows both harnesses hooked.
#[test]
fn the_readme_hooks_walk_works_in_a_fresh_home() {
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let block = readme
        .split("## Automatic checkpoints")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("the sh block of Automatic checkpoints");
    let env = Env::new();
    let mut ran = 0;
    for line in block.lines() {
        let command = line.split('#').next().unwrap().trim();
        let args: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(args.first(), Some(&"baton"), "{line}");
        let out = env.cmd().args(&args[1..]).output().expect("run baton");
        assert!(out.status.success(), "{line}: {}", common::text(&out));
        ran += 1;
    }
    assert_eq!(ran, 3, "{block}");
    let status = hooks_ok(&env, &["status"]);
    assert_eq!(
        status_of(&status, "claude-code", "user")["state"],
        "installed"
    );
    assert_eq!(status_of(&status, "codex", "user")["state"], "installed");
    let text = env.ok(&["hooks", "status"]);
    assert!(
        text.contains("PreCompact, SessionEnd") && text.contains("agent-turn-complete"),
        "{text}"
    );
}
