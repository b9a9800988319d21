//! What each hook call records and prints: a checkpoint named after its event, nothing
//! new when nothing changed, failures logged with exit 0, Codex's argument, SessionStart's
//! context, and the time bound.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use super::{SESSION, THREAD, bundles, fixture, hook, log_lines, setup, turn};
use crate::common::{self, Env, s};

#[test]
fn precompact_saves_a_checkpoint_and_an_unchanged_one_adds_nothing() {
    let env = Env::new();
    let (ws, session) = setup(&env);
    let input = fixture("claude-code-precompact.json", &ws, &session, SESSION);
    let (out, _) = hook(&env, &ws, "claude-code", &input, &[]);
    assert!(
        out.stdout.is_empty(),
        "PreCompact prints nothing: {}",
        common::text(&out)
    );
    let shown = common::json_ok(&env, &["show", "current"]);
    let bundle = &shown;
    assert_eq!(
        bundle["note"],
        "checkpoint: PreCompact (auto) from claude-code"
    );
    assert_eq!(bundle["from"], "claude-code");
    assert_eq!(bundle["metadata"]["checkpoint.session"], SESSION);
    let files = shown.to_string();
    assert!(files.contains("transcript.jsonl"), "{shown}");
    let first = common::disk_current(&env.store()).unwrap();
    let log_before = fs::read(env.store().join("log")).unwrap();

    // Nothing changed: no bundle, no ref move, "unchanged" in the checkpoint log.
    let input = fixture("claude-code-sessionend.json", &ws, &session, SESSION);
    hook(&env, &ws, "claude-code", &input, &[]);
    assert_eq!(common::disk_current(&env.store()).unwrap(), first);
    assert_eq!(fs::read(env.store().join("log")).unwrap(), log_before);
    let lines = log_lines(&env, &ws);
    let outcomes: Vec<&str> = lines
        .iter()
        .map(|l| l["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["saved", "unchanged"]);
    assert_eq!(lines[1]["event"], "SessionEnd");
    assert_eq!(lines[1]["bundle"].as_str(), Some(first.as_str()));
    assert_eq!(lines[0]["session"], SESSION);
    assert_eq!(lines[0]["transcript"], "whole");

    // Two more turns: a new checkpoint, on top of the first.
    let mut grown = fs::read_to_string(&session).unwrap();
    grown.push_str(&turn(&ws, 2));
    fs::write(&session, grown).unwrap();
    let input = fixture("claude-code-stop.json", &ws, &session, SESSION);
    hook(&env, &ws, "claude-code", &input, &[]);
    let second = common::disk_current(&env.store()).unwrap();
    assert_ne!(second, first);
    let shown = common::json_ok(&env, &["show", "current"]);
    assert_eq!(shown["note"], "checkpoint: Stop from claude-code");
    assert_eq!(shown["parents"][0].as_str(), Some(first.as_str()));
    // The hook named the session by its file and id: only the new lines were normalised
    // and scanned (the append-aware transcript cache, SPEC 5.1).
    let lines = log_lines(&env, &ws);
    assert_eq!(lines[2]["outcome"], "saved", "{lines:?}");
    assert_eq!(lines[2]["transcript"], "appended", "{lines:?}");
    // A change in the workspace is a change too.
    fs::write(ws.join("a.txt"), "two\n").unwrap();
    hook(&env, &ws, "claude-code", &input, &[]);
    assert_ne!(common::disk_current(&env.store()).unwrap(), second);
    assert_eq!(bundles(&env).len(), 3);
    common::json_ok(&env, &["verify"]);
}

#[test]
fn bad_json_and_no_store_exit_0_with_a_log_line() {
    let env = Env::new();
    let (ws, _) = setup(&env);
    for bad in ["not json", "[1, 2]", ""] {
        let (out, _) = hook(&env, &ws, "claude-code", bad, &[]);
        assert!(out.stdout.is_empty());
    }
    let lines = log_lines(&env, &ws);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines.iter().all(|l| l["outcome"] == "failed"));
    assert!(
        lines[0]["error"].as_str().unwrap().contains("not JSON"),
        "{lines:?}"
    );
    let mode = fs::metadata(env.store().join("checkpoint.log")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    assert!(bundles(&env).is_empty());
    // The store with its log still verifies.
    common::json_ok(&env, &["verify"]);
    // A hook line that does not even parse exits 0 too.
    let (out, _) = hook(&env, &ws, "claude-code", "{}", &["--no-such-flag"]);
    assert!(out.stdout.is_empty());
    // Codex without its JSON argument, and a harness baton has no hooks for: logged.
    hook(&env, &ws, "codex", "", &[]);
    hook(&env, &ws, "gemini", "{}", &[]);
    let lines = log_lines(&env, &ws);
    let errors: Vec<&str> = lines[3..]
        .iter()
        .map(|l| l["error"].as_str().unwrap())
        .collect();
    assert!(errors[0].contains("no JSON argument"), "{errors:?}");
    assert!(errors[1].contains("--hook gemini"), "{errors:?}");
    // The log as text, oldest first.
    let text = env.ok(&["checkpoint", "--log"]);
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains("claude-code unknown failed"),
        "{text}"
    );

    // No store: the failure goes to the fallback log under ~/.local/state/baton.
    let bare = Env::new();
    let dir = bare.path().join("project");
    fs::create_dir_all(&dir).unwrap();
    let input = format!(
        r#"{{"session_id":"x","cwd":"{}","hook_event_name":"Stop"}}"#,
        s(&dir)
    );
    let (out, _) = hook(&bare, &dir, "claude-code", &input, &[]);
    assert!(out.stdout.is_empty());
    let fallback = bare.path().join(".local/state/baton/checkpoint.log");
    assert!(fallback.is_file(), "{}", common::text(&out));
    let lines = log_lines(&bare, &dir);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0]["error"]
            .as_str()
            .unwrap()
            .contains("no baton store"),
        "{lines:?}"
    );
}

#[test]
fn a_codex_notify_argument_checkpoints_its_thread() {
    let env = Env::new();
    let (ws, _) = setup(&env);
    let rollout = env
        .path()
        .join(".codex/sessions/2026/11/30/rollout-2026-11-30T13-00-00-019a2d7a.jsonl");
    fs::create_dir_all(rollout.parent().unwrap()).unwrap();
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/transcripts/codex/rollout-main.jsonl");
    let text = fs::read_to_string(source)
        .unwrap()
        .replace("{{WORKSPACE}}", s(&ws));
    fs::write(&rollout, text).unwrap();
    let payload = fixture("codex-notify.json", &ws, Path::new("/"), THREAD);
    // Codex passes the JSON as the last argument; its stdin is not the hook's input.
    let (out, _) = hook(&env, &ws, "codex", "", &[&payload]);
    assert!(out.stdout.is_empty(), "{}", common::text(&out));
    let shown = common::json_ok(&env, &["show", "current"]);
    assert_eq!(shown["note"], "checkpoint: agent-turn-complete from codex");
    assert_eq!(
        shown["metadata"]["transcript.source"],
        format!("codex:{THREAD}")
    );

    // A thread whose session file cannot be found: the workspace alone, said so.
    let payload = fixture("codex-notify.json", &ws, Path::new("/"), "no-such-thread");
    hook(&env, &ws, "codex", "", &[&payload]);
    let shown = common::json_ok(&env, &["show", "current"]);
    let note = shown["note"].as_str().unwrap();
    assert_eq!(
        note,
        "checkpoint: agent-turn-complete from codex; no transcript"
    );
    let lines = log_lines(&env, &ws);
    assert_eq!(lines.last().unwrap()["outcome"], "saved");
    assert!(
        lines.last().unwrap()["note"]
            .as_str()
            .unwrap()
            .contains("no-such-thread")
    );
}

#[test]
fn session_start_prints_the_latest_kickoff_as_additional_context() {
    let env = Env::new();
    let (ws, session) = setup(&env);
    let start = fixture("claude-code-sessionstart.json", &ws, &session, SESSION);
    // Nothing saved yet: nothing printed.
    let (out, _) = hook(&env, &ws, "claude-code", &start, &[]);
    assert!(out.stdout.is_empty(), "{}", common::text(&out));
    assert_eq!(log_lines(&env, &ws)[0]["outcome"], "no-context");

    // A trigger with a bidirectional override and an accent: the answer stays JSON.
    let input = fixture("claude-code-precompact.json", &ws, &session, SESSION)
        .replace(r#""trigger":"auto""#, r#""trigger":"auto \u202e é""#);
    hook(&env, &ws, "claude-code", &input, &[]);
    let id = common::disk_current(&env.store()).unwrap();
    let (out, _) = hook(&env, &ws, "claude-code", &start, &[]);
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let specific = &doc["hookSpecificOutput"];
    assert_eq!(specific["hookEventName"], "SessionStart");
    let context = specific["additionalContext"].as_str().unwrap();
    assert!(
        context.contains(&format!("# Handoff {}", &id[..12])),
        "{context}"
    );
    assert!(
        context.contains("checkpoint: PreCompact (auto \u{202e} é) from claude-code"),
        "{context}"
    );
    // SessionStart records no bundle.
    assert_eq!(common::disk_current(&env.store()).unwrap(), id);
}

#[test]
fn a_checkpoint_blocked_on_the_store_lock_gives_up_in_time() {
    let env = Env::new();
    let (ws, session) = setup(&env);
    // Another process (this one) holds the store lock, as a long save would.
    let lock = fs::File::open(env.store().join("lock")).unwrap();
    lock.lock().unwrap();
    let input = fixture("claude-code-precompact.json", &ws, &session, SESSION);
    let (out, took) = hook(&env, &ws, "claude-code", &input, &["--timeout", "1"]);
    assert!(took < Duration::from_millis(1800), "took {took:?}");
    assert!(took >= Duration::from_secs(1), "took {took:?}");
    assert!(out.stdout.is_empty());
    drop(lock);
    let lines = log_lines(&env, &ws);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["outcome"], "gave-up");
    assert_eq!(lines[0]["error"], "gave up after 1s");
    assert_eq!(lines[0]["event"], "PreCompact");
    assert!(bundles(&env).is_empty());
    common::json_ok(&env, &["verify"]);
}

#[test]
fn checkpoints_at_once_of_the_same_change_record_it_once() {
    let env = Env::new();
    let (ws, session) = setup(&env);
    let input = fixture("claude-code-stop.json", &ws, &session, SESSION);
    for round in 1..=3 {
        fs::write(ws.join("a.txt"), format!("round {round}\n")).unwrap();
        // Three hooks started together, their input written once all run.
        let mut hooks: Vec<_> = (0..3)
            .map(|_| {
                env.cmd()
                    .current_dir(&ws)
                    .args(["checkpoint", "--hook", "claude-code"])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in &mut hooks {
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.as_bytes()).unwrap();
        }
        for child in hooks {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success() && out.stdout.is_empty());
        }
        assert_eq!(bundles(&env).len(), round, "round {round}");
    }
    let lines = log_lines(&env, &ws);
    let count = |outcome: &str| lines.iter().filter(|l| l["outcome"] == outcome).count();
    assert_eq!((count("saved"), count("unchanged")), (3, 6), "{lines:?}");
}
