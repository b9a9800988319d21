//! The append-aware transcript cache (issue 14): a session that grew by lines since a
//! handoff of this store normalised it and found it clean is normalised and scanned only
//! in its new lines, and gives exactly the bundle files a whole normalisation gives.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{self, Env, s};

const SESSION: &str = "5e551011-0000-4000-8000-0000000000bb";

/// A git workspace, a Claude Code session of `n` exchanges (each a message, a tool call
/// and its result) recorded in it, and a store; returns (workspace, session file).
fn workspace(env: &Env, n: usize) -> (PathBuf, PathBuf) {
    let ws = common::git_workspace(env);
    let session = common::claude_project_dir(env.path(), &ws).join(format!("{SESSION}.jsonl"));
    let text: String = (1..=n).map(|i| exchange(&ws, i)).collect();
    fs::write(&session, text).unwrap();
    run(env, &ws, &["init"]);
    (ws, session)
}

fn base(ws: &Path, uuid: String) -> serde_json::Map<String, Value> {
    let v = json!({
        "sessionId": SESSION, "cwd": s(ws), "uuid": uuid, "parentUuid": null,
        "timestamp": "2026-11-30T10:00:00.000Z", "isSidechain": false,
    });
    v.as_object().unwrap().clone()
}

fn line(mut entry: serde_json::Map<String, Value>, kind: &str, message: Value) -> String {
    entry.insert("type".into(), kind.into());
    entry.insert("message".into(), message);
    format!("{}\n", Value::Object(entry))
}

/// A user message, a tool call `toolu_{i}` and its result.
fn exchange(ws: &Path, i: usize) -> String {
    let mut text = line(
        base(ws, format!("u{i}")),
        "user",
        json!({"role": "user", "content": format!("Step {i}: run the tests.")}),
    );
    text.push_str(&call(ws, i));
    text.push_str(&result(ws, i, "ok"));
    text
}

fn call(ws: &Path, i: usize) -> String {
    line(
        base(ws, format!("c{i}")),
        "assistant",
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("toolu_{i}"), "name": "Bash",
             "input": {"command": format!("cargo test m{i}")}}]}),
    )
}

fn result(ws: &Path, i: usize, text: &str) -> String {
    line(
        base(ws, format!("r{i}-{text}")),
        "user",
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}"), "content": text}]}),
    )
}

fn run(env: &Env, ws: &Path, args: &[&str]) -> std::process::Output {
    let out = env.cmd().current_dir(ws).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "baton {args:?}: {}",
        common::text(&out)
    );
    out
}

/// A handoff's `saved` JSON (into `store` when given).
fn handoff(env: &Env, ws: &Path, store: Option<&Path>, extra: &[&str]) -> Value {
    let mut args = vec!["--json"];
    if let Some(store) = store {
        args.extend(["--store", s(store)]);
    }
    args.extend(["handoff", "--to", "codex", "--no-brief"]);
    args.extend(["--transcript", "claude-code:latest"]);
    args.extend(extra);
    let out = run(env, ws, &args);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["saved"].clone()
}

/// The bytes of the bundle's transcript files: transcript.jsonl and the attachment.
fn transcript_files(env: &Env, ws: &Path, store: Option<&Path>, bundle: &str) -> Vec<Vec<u8>> {
    let attachment = format!("attachments/transcript/claude-code-{SESSION}.jsonl");
    ["transcript.jsonl", attachment.as_str()]
        .iter()
        .map(|path| {
            let spec = format!("{bundle}:{path}");
            let mut args = Vec::new();
            if let Some(store) = store {
                args.extend(["--store", s(store)]);
            }
            args.extend(["cat", spec.as_str()]);
            run(env, ws, &args).stdout
        })
        .collect()
}

fn append(session: &Path, text: &str) {
    let mut bytes = fs::read(session).unwrap();
    bytes.extend_from_slice(text.as_bytes());
    fs::write(session, bytes).unwrap();
}

#[test]
fn an_appended_session_is_normalised_only_in_its_new_lines_and_gives_the_same_files() {
    let env = Env::new();
    let (ws, session) = workspace(&env, 30);
    let first = handoff(&env, &ws, None, &[]);
    assert_eq!(
        (&first["transcript_cached"], &first["transcript_appended"]),
        (&json!(false), &json!(false))
    );
    // New lines: a second result of an earlier call (paired with its tool from the
    // cached part) and two whole exchanges; twice, so an appended entry is appended to.
    for round in 0..2 {
        let mut text = result(&ws, 3 + round, "again");
        text.push_str(&exchange(&ws, 31 + 2 * round));
        text.push_str(&exchange(&ws, 32 + 2 * round));
        append(&session, &text);
        let saved = handoff(&env, &ws, None, &[]);
        assert_eq!(
            saved["transcript_appended"],
            json!(true),
            "round {round}: {saved}"
        );
        assert_eq!(saved["transcript_cached"], json!(false));
        // A store without any cache normalises the whole file: the same bytes.
        let cold = env.path().join(format!("cold{round}"));
        run(&env, &ws, &["--store", s(&cold), "init"]);
        let fresh = handoff(&env, &ws, Some(&cold), &[]);
        assert_eq!(fresh["transcript_appended"], json!(false));
        let ours = transcript_files(&env, &ws, None, saved["bundle"].as_str().unwrap());
        let theirs = transcript_files(&env, &ws, Some(&cold), fresh["bundle"].as_str().unwrap());
        assert_eq!(ours, theirs, "round {round}");
        let jsonl = String::from_utf8(ours[0].clone()).unwrap();
        assert!(jsonl.contains("\"again\""), "{jsonl}");
        // Unchanged since: the whole-file entry hits.
        let again = handoff(&env, &ws, None, &[]);
        assert_eq!(again["transcript_cached"], json!(true), "{again}");
    }
}

#[test]
fn a_secret_in_the_new_lines_is_found_and_redacted_or_refused() {
    let env = Env::new();
    let (ws, session) = workspace(&env, 10);
    handoff(&env, &ws, None, &[]);
    let token = format!("ghp_{}", "a1B2c3D4e5".repeat(4));
    append(
        &session,
        &result(&ws, 2, &format!("export GITHUB_TOKEN={token}")),
    );
    let refused = env
        .cmd()
        .current_dir(&ws)
        .args(["handoff", "--to", "codex", "--no-brief"])
        .args(["--transcript", "claude-code:latest", "--secrets", "block"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(6), "{}", common::text(&refused));
    let saved = handoff(&env, &ws, None, &[]);
    assert_eq!(saved["transcript_appended"], json!(false), "{saved}");
    assert!(
        saved["secrets"].to_string().contains("github"),
        "the token is reported: {saved}"
    );
    let files = transcript_files(&env, &ws, None, saved["bundle"].as_str().unwrap());
    for bytes in &files {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.contains(&token), "the token is redacted");
    }
}

#[test]
fn a_rewritten_session_or_a_call_that_pairs_an_earlier_result_is_normalised_whole() {
    let env = Env::new();
    let (ws, session) = workspace(&env, 10);
    // A result whose call is not there yet: a later call with its id would pair it.
    append(&session, &result(&ws, 90, "early"));
    handoff(&env, &ws, None, &[]);
    append(&session, &call(&ws, 90));
    let saved = handoff(&env, &ws, None, &[]);
    assert_eq!(saved["transcript_appended"], json!(false), "{saved}");
    let cold = env.path().join("cold");
    run(&env, &ws, &["--store", s(&cold), "init"]);
    let fresh = handoff(&env, &ws, Some(&cold), &[]);
    assert_eq!(
        transcript_files(&env, &ws, None, saved["bundle"].as_str().unwrap()),
        transcript_files(&env, &ws, Some(&cold), fresh["bundle"].as_str().unwrap())
    );
    // Rewritten, not appended: a byte of an earlier line changed, then a line added.
    let text = fs::read_to_string(&session)
        .unwrap()
        .replacen("Step 1:", "Step 9:", 1);
    fs::write(&session, format!("{text}{}", exchange(&ws, 11))).unwrap();
    let saved = handoff(&env, &ws, None, &[]);
    assert_eq!(
        (&saved["transcript_cached"], &saved["transcript_appended"]),
        (&json!(false), &json!(false)),
        "{saved}"
    );
    let jsonl = &transcript_files(&env, &ws, None, saved["bundle"].as_str().unwrap())[0];
    assert!(String::from_utf8_lossy(jsonl).contains("Step 9:"));
}

#[test]
fn personal_data_in_the_new_lines_is_redacted_and_never_cached() {
    let env = Env::new();
    let (ws, session) = workspace(&env, 10);
    handoff(&env, &ws, None, &[]);
    let email = "jane.customer@corp-mail.io";
    append(
        &session,
        &result(&ws, 2, &format!("row 4: {email}, +1 415 555 2671")),
    );
    for round in 0..2 {
        let saved = handoff(&env, &ws, None, &[]);
        // Once in transcript.jsonl, twice in the session file (the test's entry uuid
        // holds the text too).
        assert_eq!(
            saved["pii"]["found"],
            json!({ "email": 3, "phone": 3 }),
            "round {round}: {saved}"
        );
        assert_eq!(saved["transcript_cached"], json!(false), "{saved}");
        let files = transcript_files(&env, &ws, None, saved["bundle"].as_str().unwrap());
        for bytes in &files {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.contains(email),
                "round {round}: the email is redacted"
            );
            assert!(text.contains("[REDACTED:email]"), "round {round}");
        }
    }
}
