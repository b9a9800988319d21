//! Issue 31's walk end to end, as the README tells it: `baton hooks install` writes Claude
//! Code's settings.json, the hooks fire as the harness fires them (each command line read
//! back from that file and run by `sh -c` with the hook's JSON on stdin), a stand-in
//! session compacts and ends, the checkpoints are in `baton log` and pushed by the queue,
//! and a clone on another machine resumes with `--launch` into a stand-in harness.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, Env, s};

const SESSION: &str = "5e551011-0000-4000-8000-000000000031";

/// One exchange of the stand-in session: a prompt and the answer, as Claude Code records
/// them.
fn exchange(ws: &Path, i: usize) -> String {
    let line = |uuid: String, kind: &str, content: String| {
        let v = json!({
            "sessionId": SESSION, "cwd": s(ws), "uuid": uuid, "parentUuid": null,
            "timestamp": "2026-12-07T10:00:00.000Z", "isSidechain": false, "type": kind,
            "message": {"role": kind, "content": content},
        });
        format!("{v}\n")
    };
    line(
        format!("u{i}"),
        "user",
        format!("Step {i}: port module {i}."),
    ) + &line(format!("a{i}"), "assistant", format!("Module {i} ported."))
}

/// The command of baton's hook for `event` in the settings file.
fn hook_command(settings: &Value, event: &str) -> String {
    let groups = settings["hooks"][event].as_array().expect("event hooked");
    groups
        .iter()
        .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
        .filter_map(|h| h["command"].as_str().map(str::to_string))
        .find(|c| c.starts_with("baton checkpoint"))
        .unwrap_or_else(|| panic!("no baton hook for {event}: {settings}"))
}

/// Run a hook as Claude Code does: its command line through the shell, in the session's
/// directory, the event's JSON on stdin; it must exit 0 and print nothing.
fn fire(env: &Env, ws: &Path, command: &str, input: &Value) {
    let bin = Path::new(env!("CARGO_BIN_EXE_baton")).parent().unwrap();
    let path = format!("{}:{}", s(bin), std::env::var("PATH").unwrap_or_default());
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(ws)
        .env_clear()
        .env("PATH", path)
        .env("HOME", env.path())
        .env("USER", "tester")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out));
    assert!(out.stdout.is_empty(), "{}", common::text(&out));
}

fn event(ws: &Path, session: &Path, name: &str, extra: Value) -> Value {
    let mut v = json!({
        "session_id": SESSION, "transcript_path": s(session), "cwd": s(ws),
        "permission_mode": "default", "hook_event_name": name,
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// A stand-in `claude` that records its directory and first argument beside itself.
fn standin_claude(env: &Env) -> PathBuf {
    let bin = env.path().join("standin");
    fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nd='{}'\npwd -P > \"$d/cwd\"\nprintf %s \"$1\" > \"$d/prompt\"\n",
        s(&bin)
    );
    fs::write(bin.join("claude"), script).unwrap();
    fs::set_permissions(bin.join("claude"), fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn installed_hooks_checkpoint_a_session_that_a_clone_resumes_with_launch() {
    let env = Env::new();
    let ws = common::git_workspace(&env);
    env.init();
    let hub = env.path().join("hub");
    env.ok(&["target", "add", "hub", s(&hub)]);
    env.ok(&[
        "hooks",
        "install",
        "--harness",
        "claude-code",
        "--push",
        "hub",
    ]);
    let settings: Value =
        serde_json::from_slice(&fs::read(env.path().join(".claude/settings.json")).unwrap())
            .unwrap();

    // The session works, compacts, works on, and ends.
    let session = common::claude_project_dir(env.path(), &ws).join(format!("{SESSION}.jsonl"));
    fs::write(&session, exchange(&ws, 1)).unwrap();
    let precompact = event(
        &ws,
        &session,
        "PreCompact",
        json!({"trigger": "auto", "custom_instructions": ""}),
    );
    fire(
        &env,
        &ws,
        &hook_command(&settings, "PreCompact"),
        &precompact,
    );
    let mut text = fs::read_to_string(&session).unwrap();
    text.push_str(&exchange(&ws, 2));
    fs::write(&session, text).unwrap();
    let end = event(&ws, &session, "SessionEnd", json!({"reason": "exit"}));
    fire(&env, &ws, &hook_command(&settings, "SessionEnd"), &end);

    let log = common::json_ok(&env, &["log"]);
    let notes: Vec<&str> = log["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["note"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        notes,
        [
            "checkpoint: SessionEnd (exit) from claude-code",
            "checkpoint: PreCompact (auto) from claude-code"
        ],
        "{log}"
    );

    // The pushes ran in the background: wait until the queue is empty.
    let started = Instant::now();
    loop {
        let status = common::json_ok(&env, &["status"]);
        if status["queue"].as_array().is_some_and(|q| q.is_empty()) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{status}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let current = common::disk_current(&env.store()).unwrap();
    assert_eq!(
        common::disk_current(&hub).as_deref(),
        Some(current.as_str())
    );

    // Another machine clones the hub and resumes into a stand-in Claude Code.
    let other = Env::new();
    let clone = other.cmd().args(["clone", s(&hub)]).output().unwrap();
    assert!(clone.status.success(), "{}", common::text(&clone));
    let bin = standin_claude(&other);
    let path = format!("{}:{}", s(&bin), std::env::var("PATH").unwrap_or_default());
    let resumed = other
        .cmd()
        .env("PATH", path)
        .args(["resume", "--workspace", s(&ws), "--launch", "claude"])
        .output()
        .unwrap();
    assert!(resumed.status.success(), "{}", common::text(&resumed));
    let prompt = fs::read_to_string(bin.join("prompt")).expect("the stand-in ran");
    assert!(
        prompt.contains(&format!("# Handoff {}", &current[..12])),
        "{prompt}"
    );
    assert!(prompt.contains("Module 2 ported."), "{prompt}");
    let cwd = fs::read_to_string(bin.join("cwd")).unwrap();
    assert_eq!(cwd.trim(), s(&ws.canonicalize().unwrap()));
}
