//! The save path's shortcuts (issue 14): the transcript cache of `baton handoff` (a
//! session file byte-for-byte the same as one a previous handoff found clean is taken
//! from the store, not normalised and scanned again), and what they must never skip.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{self, Env, s};

const SESSION: &str = "5e551011-0000-4000-8000-0000000000aa";

/// A git workspace with one commit, a Claude Code session of `lines` exchanges recorded
/// in it (under the env's HOME), and an initialised store; returns (workspace, session).
fn workspace_with_session(env: &Env, lines: usize) -> (PathBuf, PathBuf) {
    let ws = common::git_workspace(env);
    let session = common::claude_project_dir(env.path(), &ws).join(format!("{SESSION}.jsonl"));
    let mut text = String::new();
    for n in 1..=lines {
        text.push_str(&exchange(&ws, n, "run the tests"));
    }
    fs::write(&session, text).unwrap();
    in_ws(env, &ws, &["init"]);
    (ws, session)
}

/// One user line of a Claude Code session saying `what`.
fn exchange(ws: &Path, n: usize, what: &str) -> String {
    let line = serde_json::json!({
        "type": "user", "sessionId": SESSION, "cwd": s(ws), "uuid": format!("u{n}"),
        "parentUuid": format!("u{}", n - 1), "timestamp": "2026-11-30T10:00:00.000Z",
        "isSidechain": false,
        "message": {"role": "user", "content": format!("Step {n}: {what}.")},
    });
    format!("{line}\n")
}

fn in_ws(env: &Env, ws: &Path, args: &[&str]) -> std::process::Output {
    let out = env
        .cmd()
        .current_dir(ws)
        .args(args)
        .output()
        .expect("run baton");
    assert!(
        out.status.success(),
        "baton {args:?} failed: {}",
        common::text(&out)
    );
    out
}

/// `baton --json handoff` of the session; returns the `saved` part of the answer.
fn handoff(env: &Env, ws: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "--json",
        "handoff",
        "--to",
        "codex",
        "--no-brief",
        "--transcript",
        "claude-code:latest",
    ];
    args.extend_from_slice(extra);
    let out = in_ws(env, ws, &args);
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    doc["saved"].clone()
}

fn cat(env: &Env, ws: &Path, rev_path: &str) -> Vec<u8> {
    in_ws(env, ws, &["cat", rev_path]).stdout
}

fn raw_attachment() -> String {
    format!("attachments/transcript/claude-code-{SESSION}.jsonl")
}

#[test]
fn an_unchanged_session_is_taken_from_the_transcript_cache() {
    let env = Env::new();
    let (ws, session) = workspace_with_session(&env, 20);
    let first = handoff(&env, &ws, &[]);
    assert_eq!(first["transcript_cached"], false, "{first}");
    let second = handoff(&env, &ws, &[]);
    assert_eq!(second["transcript_cached"], true, "{second}");
    assert_eq!(first["files"], second["files"], "the same files, in order");
    // The same bytes as a fresh normalisation, with the same metadata.
    for path in ["transcript.jsonl".to_string(), raw_attachment()] {
        assert_eq!(
            cat(&env, &ws, &format!("current:{path}")),
            cat(&env, &ws, &format!("current~1:{path}")),
            "{path}"
        );
    }
    assert_eq!(
        cat(&env, &ws, &format!("current:{}", raw_attachment())),
        fs::read(&session).unwrap()
    );
    let shown = String::from_utf8(in_ws(&env, &ws, &["show", "current"]).stdout).unwrap();
    assert!(
        shown.contains(&format!("transcript.source=claude-code:{SESSION}")),
        "{shown}"
    );
    assert!(shown.contains("transcript.schema=baton.events/"), "{shown}");
    in_ws(&env, &ws, &["verify"]);
}

#[test]
fn an_appended_session_is_normalised_and_scanned_again() {
    let env = Env::new();
    let (ws, session) = workspace_with_session(&env, 5);
    handoff(&env, &ws, &[]);
    let mut text = fs::read_to_string(&session).unwrap();
    text.push_str(&exchange(&ws, 6, "one more step"));
    fs::write(&session, &text).unwrap();
    let saved = handoff(&env, &ws, &[]);
    assert_eq!(saved["transcript_cached"], false, "{saved}");
    let events = String::from_utf8(cat(&env, &ws, "current:transcript.jsonl")).unwrap();
    assert!(events.contains("one more step"), "{events}");
    // A secret appended later is found, although the prefix was cached clean.
    let token = format!("ghp_{}", "A1b2C3d4E5".repeat(4));
    text.push_str(&exchange(&ws, 7, &format!("use {token}")));
    fs::write(&session, &text).unwrap();
    let saved = handoff(&env, &ws, &[]);
    assert_eq!(saved["transcript_cached"], false, "{saved}");
    assert_eq!(saved["secrets"]["github_token"], 2, "{saved}");
    let raw = cat(&env, &ws, &format!("current:{}", raw_attachment()));
    assert!(!String::from_utf8_lossy(&raw).contains(&token));
}

#[test]
fn a_session_that_held_a_secret_is_scanned_on_every_handoff() {
    let env = Env::new();
    let (ws, session) = workspace_with_session(&env, 3);
    let token = format!("ghp_{}", "Z9y8X7w6V5".repeat(4));
    let mut text = fs::read_to_string(&session).unwrap();
    text.push_str(&exchange(&ws, 4, &format!("the token is {token}")));
    fs::write(&session, &text).unwrap();
    for _ in 0..2 {
        let saved = handoff(&env, &ws, &[]);
        assert_eq!(saved["transcript_cached"], false, "{saved}");
        assert_eq!(saved["secrets"]["github_token"], 2, "{saved}");
        let events = String::from_utf8(cat(&env, &ws, "current:transcript.jsonl")).unwrap();
        assert!(events.contains("[REDACTED:github_token]"), "{events}");
        assert!(!events.contains(&token));
    }
    // --secrets block refuses it every time, cache or not.
    let out = env
        .cmd()
        .current_dir(&ws)
        .args([
            "handoff",
            "--to",
            "codex",
            "--no-brief",
            "--transcript",
            "claude-code:latest",
            "--secrets",
            "block",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", common::text(&out));
}

#[test]
fn a_damaged_or_foreign_cache_is_not_trusted() {
    let env = Env::new();
    let (ws, _) = workspace_with_session(&env, 4);
    handoff(&env, &ws, &[]);
    let cache = ws.join(".baton/statcache");
    let good = fs::read(&cache).unwrap();
    // One flipped byte: the checksum fails, the whole cache is ignored and rewritten.
    let mut bad = good.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x20;
    fs::write(&cache, &bad).unwrap();
    let saved = handoff(&env, &ws, &[]);
    assert_eq!(saved["transcript_cached"], false, "{saved}");
    assert_eq!(handoff(&env, &ws, &[])["transcript_cached"], true);
    // A cache copied into another store names blobs that store does not hold.
    let other = env.path().join("other-store");
    let other = s(&other).to_string();
    in_ws(&env, &ws, &["--store", &other, "init"]);
    fs::write(
        Path::new(&other).join("statcache"),
        fs::read(&cache).unwrap(),
    )
    .unwrap();
    let saved = handoff(&env, &ws, &["--store", &other]);
    assert_eq!(saved["transcript_cached"], false, "{saved}");
    in_ws(&env, &ws, &["--store", &other, "verify"]);
}

/// Files under `dir`, recursively (temp files included).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_handoff_publishes_its_manifest_in_its_pack_with_five_syncs() {
    if !common::precondition(
        common::strace_usable(),
        "strace that can trace here (apt-get install -y strace)",
    ) {
        return;
    }
    let env = Env::new();
    let (ws, _) = workspace_with_session(&env, 3);
    fs::write(ws.join("a.txt"), "two\n").unwrap();
    for round in 0..2 {
        let trace = env.path().join("trace.txt");
        let out = env
            .strace(&["-f", "-qq", "-y"], &trace, "fsync,fdatasync")
            .args(["handoff", "--to", "codex", "--no-brief"])
            .args(["--transcript", "claude-code:latest"])
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "traced handoff\n{}",
            common::text(&out)
        );
        let syncs: Vec<String> = fs::read_to_string(&trace)
            .unwrap()
            .lines()
            .filter(|l| l.contains("fsync(") || l.contains("fdatasync("))
            .map(str::to_string)
            .collect();
        // The pack and packs/, the log line, the generation file and refs/current/.
        assert_eq!(syncs.len(), 5, "round {round}:\n{}", syncs.join("\n"));
        // Nothing loose: blobs, trees and the manifest all went into the pack.
        let loose = files_under(&ws.join(".baton/objects"));
        assert!(loose.is_empty(), "round {round}: loose {loose:?}");
    }
    assert_eq!(common::pack_files(&ws.join(".baton")).len(), 2);
    in_ws(&env, &ws, &["verify"]);
    in_ws(&env, &ws, &["verify", "current~1"]);
}

/// `baton --json save w` with `extra`: the answer.
fn save_w(env: &Env, extra: &[&str]) -> Value {
    let mut args = vec!["save", "w"];
    args.extend_from_slice(extra);
    common::json_ok(env, &args)
}

#[test]
fn a_file_stored_with_its_secrets_comes_from_the_cache_and_is_reported_again() {
    let env = Env::new();
    env.init();
    let token = format!("ghp_{}", "a1B2c3D4e5".repeat(4).get(..36).unwrap());
    env.write_tree(
        "w",
        &[
            ("clean.txt", b"nothing\n"),
            ("leaky.txt", format!("token = {token}\n").as_bytes()),
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    let reported = |doc: &Value| {
        assert_eq!(doc["secrets"].as_array().map(Vec::len), Some(1), "{doc}");
        assert_eq!(doc["secrets"][0]["path"], "leaky.txt", "{doc}");
        assert_eq!(doc["secrets"][0]["kinds"][0], "github_token", "{doc}");
    };
    let first = save_w(&env, &["--secrets", "allow"]);
    assert_eq!(first["files_cached"], 0, "{first}");
    reported(&first);
    let meta = |rev: &str| {
        env.ok(&["show", rev])
            .lines()
            .filter(|l| l.starts_with("meta"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // Stored as it is, so the same bytes: taken from the cache with what was found.
    let second = save_w(&env, &["--secrets", "allow"]);
    assert_eq!(second["files_cached"], 2, "{second}");
    assert_eq!(second["objects_written"], 0, "{second}");
    reported(&second);
    assert_eq!(meta("current"), meta("current~1"));
    assert!(env.ok(&["cat", "current:leaky.txt"]).contains(&token));
    // The default (block) refuses it without reading it, naming it.
    let out = env.run(&["save", "w"]);
    assert_eq!(out.status.code(), Some(6), "{}", common::text(&out));
    assert!(common::text(&out).contains("leaky.txt"));
    // Redacting needs the bytes: read again, and its entry is dropped.
    let redacted = save_w(&env, &["--secrets", "redact"]);
    assert_eq!(redacted["files_cached"], 1, "{redacted}");
    reported(&redacted);
    assert!(!env.ok(&["cat", "current:leaky.txt"]).contains(&token));
    let again = save_w(&env, &["--secrets", "allow"]);
    assert_eq!(again["files_cached"], 1, "{again}");
    reported(&again);
    assert!(env.ok(&["cat", "current:leaky.txt"]).contains(&token));
    assert!(env.ok(&["verify"]).contains("ok"));
}
