//! `baton checkpoint --hook`, the push queue, `baton sync` and `baton status` (issue 31):
//! the hook command driven with the JSON the harnesses document (fixtures/hooks/), a
//! real Claude Code session file and Codex rollout, real stores and targets.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, Env, kill::kill_at, s};

const SESSION: &str = "0c4ec0de-0000-4000-8000-000000000031";
const THREAD: &str = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5";

/// A git workspace under `env` (its store at `env.store()`, found from the workspace by
/// walking up) with a Claude Code session of one exchange; (workspace, session file).
fn setup(env: &Env) -> (PathBuf, PathBuf) {
    let ws = common::git_workspace(env);
    let session = common::claude_project_dir(env.path(), &ws).join(format!("{SESSION}.jsonl"));
    fs::write(&session, turn(&ws, 1)).unwrap();
    env.init();
    (ws, session)
}

/// One user message and the assistant's answer, as Claude Code records them.
fn turn(ws: &Path, i: usize) -> String {
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
fn fixture(name: &str, ws: &Path, transcript: &Path, session: &str) -> String {
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
fn hook(env: &Env, dir: &Path, harness: &str, stdin: &str, extra: &[&str]) -> (Output, Duration) {
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
fn log_lines(env: &Env, dir: &Path) -> Vec<Value> {
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

fn bundles(env: &Env) -> Vec<Value> {
    common::json_ok(env, &["log"])["bundles"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

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

/// A TCP port that accepts connections into its backlog and never answers: an SSH
/// target that hangs.
fn black_hole() -> std::net::TcpListener {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap()
}

#[test]
fn a_push_to_a_hanging_target_returns_at_once_and_is_queued() {
    let env = Env::new();
    let (ws, session) = setup(&env);
    let hole = black_hole();
    let port = hole.local_addr().unwrap().port();
    let url = format!("ssh://tester@127.0.0.1:{port}/srv/.baton");
    env.ok(&["target", "add", "devbox", &url]);
    let input = fixture("claude-code-precompact.json", &ws, &session, SESSION);
    let (out, took) = hook(&env, &ws, "claude-code", &input, &["--push", "devbox"]);
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert!(out.stdout.is_empty());
    let id = common::disk_current(&env.store()).unwrap();
    let status = common::json_ok(&env, &["status"]);
    let queue = status["queue"].as_array().unwrap();
    assert_eq!(queue.len(), 1, "{status}");
    assert_eq!(queue[0]["target"], "devbox");
    assert_eq!(queue[0]["bundle"].as_str(), Some(id.as_str()));
    assert!(queue[0]["since"].is_string());
    assert_eq!(status["current"]["id"].as_str(), Some(id.as_str()));
    let human = env.ok(&["status"]);
    assert!(
        human.contains(&format!("queued  {} -> devbox", &id[..12])),
        "{human}"
    );
    let last = log_lines(&env, &ws).pop().unwrap();
    assert_eq!(last["note"], "queued for a push to devbox");
    // An unknown target is said in the log, and the checkpoint is still made.
    fs::write(ws.join("a.txt"), "changed\n").unwrap();
    hook(&env, &ws, "claude-code", &input, &["--push", "nowhere"]);
    let last = log_lines(&env, &ws).pop().unwrap();
    assert_eq!(last["outcome"], "saved");
    assert!(
        last["note"].as_str().unwrap().contains("not queued"),
        "{last}"
    );
    drop(hole);
}

/// A local target whose parent is a file: unreachable until the file goes.
fn blocked_target(env: &Env) -> (PathBuf, PathBuf) {
    let blocker = env.path().join("disk");
    fs::write(&blocker, "not a directory").unwrap();
    let remote = blocker.join("remote");
    env.ok(&["target", "add", "disk", s(&remote)]);
    (blocker, remote)
}

/// Wait until the background drain of a checkpoint has tried the queue (every entry
/// has a failed attempt) and ended (the drain lock is free).
fn wait_for_drain(env: &Env) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = common::json_ok(env, &["status"]);
        let tried = status["queue"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["attempts"].as_u64() >= Some(1));
        let free = fs::File::open(env.store().join("push-queue/.sync"))
            .is_ok_and(|f| f.try_lock().is_ok());
        if tried && free {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the background drain never ended: {status}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sync_pushes_the_queue_once_the_target_is_reachable() {
    let env = Env::new();
    let (ws, session) = setup(&env);
    let (blocker, remote) = blocked_target(&env);
    let input = fixture("claude-code-precompact.json", &ws, &session, SESSION);
    hook(&env, &ws, "claude-code", &input, &["--push", "disk"]);
    wait_for_drain(&env);
    let first = common::disk_current(&env.store()).unwrap();
    let status = common::json_ok(&env, &["status"]);
    assert_eq!(status["queue"][0]["attempts"], 1, "{status}");
    assert!(status["queue"][0]["last_error"].is_string(), "{status}");

    // A second checkpoint replaces the queued bundle (its push carries the first).
    fs::write(ws.join("a.txt"), "two\n").unwrap();
    hook(&env, &ws, "claude-code", &input, &["--push", "disk"]);
    wait_for_drain(&env);
    let second = common::disk_current(&env.store()).unwrap();
    assert_ne!(first, second);
    let status = common::json_ok(&env, &["status"]);
    assert_eq!(status["queue"].as_array().unwrap().len(), 1);
    assert_eq!(status["queue"][0]["bundle"].as_str(), Some(second.as_str()));

    // Still unreachable: sync fails, lists the failure, keeps the entry.
    let out = env.cmd().arg("sync").output().unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", common::text(&out));
    let text = common::text(&out);
    assert!(text.contains("to disk failed"), "{text}");
    let err = common::json_err(&env, &["sync"], out.status.code().unwrap());
    assert!(err["message"].as_str().unwrap().contains("disk"), "{err}");
    assert_eq!(
        common::json_ok(&env, &["status"])["queue"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Reachable: the queue is pushed and emptied.
    fs::remove_file(&blocker).unwrap();
    fs::create_dir(&blocker).unwrap();
    let out = env
        .cmd()
        .args(["--store", s(&remote), "init"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let doc = common::json_ok(&env, &["sync"]);
    assert_eq!(doc["pushed"][0]["target"], "disk", "{doc}");
    assert_eq!(doc["pushed"][0]["bundle"].as_str(), Some(second.as_str()));
    assert!(doc["queue"].as_array().unwrap().is_empty());
    assert_eq!(
        common::disk_current(&remote).as_deref(),
        Some(second.as_str())
    );
    assert!(
        common::json_ok(&env, &["status"])["queue"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(env.ok(&["sync"]).trim(), "nothing queued");
    // An unchanged checkpoint the target already has queues nothing.
    hook(&env, &ws, "claude-code", &input, &["--push", "disk"]);
    let last = log_lines(&env, &ws).pop().unwrap();
    assert_eq!(last["outcome"], "unchanged");
    assert_eq!(last["note"], "disk already has it");
    assert!(!env.store().join("push-queue/disk").exists());
    // The queue's files and the log are allowed in a store: verify and gc pass.
    common::json_ok(&env, &["verify"]);
    common::json_ok(&env, &["gc"]);
    common::json_ok(&env, &["verify"]);
    common::assert_private_tree(&env.store());
    let out = env
        .cmd()
        .args(["--store", s(&remote), "verify"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
}

#[test]
fn kill_9_of_sync_mid_push_leaves_the_entry_and_a_rerun_pushes_once() {
    let env = Env::new();
    let (ws, session) = setup(&env);
    // Enough to push that a kill lands mid-push: a snapshot of 24 MiB of noise under
    // the checkpoint.
    let big: Vec<(String, Vec<u8>)> = (0..6)
        .map(|i| (format!("f{i}.bin"), common::random_bytes(31 + i, 4 << 20)))
        .collect();
    let dir = env.write_files("big", &big);
    env.ok(&["save", s(&dir), "--secrets", "allow"]);
    let (blocker, remote) = blocked_target(&env);
    let input = fixture("claude-code-precompact.json", &ws, &session, SESSION);
    hook(&env, &ws, "claude-code", &input, &["--push", "disk"]);
    wait_for_drain(&env);
    let id = common::disk_current(&env.store()).unwrap();
    fs::remove_file(&blocker).unwrap();
    fs::create_dir(&blocker).unwrap();
    let out = env
        .cmd()
        .args(["--store", s(&remote), "init"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));

    let mut killed = 0;
    let mut mid_upload = 0;
    for delay_ms in (1..=40u64).map(|i| i * 5) {
        let child = env
            .cmd()
            .arg("sync")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (out, finished) = kill_at(child, Duration::from_millis(delay_ms));
        if finished.is_some() {
            assert!(out.status.success(), "{}", common::text(&out));
            break;
        }
        killed += 1;
        // A kill during the upload leaves the push's staging behind (swept by the next).
        let staging = fs::read_dir(remote.join("staging")).map_or(0, |d| d.count());
        mid_upload += usize::from(staging > 0);
        // Killed: the entry is still queued, or the bundle is there (then a re-run
        // finds it up to date).
        let queued = common::json_ok(&env, &["status"])["queue"]
            .as_array()
            .unwrap()
            .len();
        let pushed = common::disk_current(&remote).as_deref() == Some(id.as_str());
        assert!(queued == 1 || pushed, "after a kill at {delay_ms} ms: lost");
    }
    assert!(
        mid_upload > 0,
        "no sync was killed mid-push ({killed} killed)"
    );
    let doc = common::json_ok(&env, &["sync"]);
    assert!(doc["queue"].as_array().unwrap().is_empty(), "{doc}");
    assert_eq!(common::disk_current(&remote).as_deref(), Some(id.as_str()));
    // Never a duplicate: the remote's current moved once (one generation file).
    let generations = fs::read_dir(remote.join("refs/current")).unwrap().count();
    assert_eq!(
        generations, 1,
        "the remote current moved {generations} times"
    );
    let out = env
        .cmd()
        .args(["--store", s(&remote), "verify"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    // The background drain of a checkpoint and two syncs at once: one push, no error.
    fs::write(ws.join("a.txt"), "three\n").unwrap();
    hook(&env, &ws, "claude-code", &input, &["--push", "disk"]);
    let next = common::disk_current(&env.store()).unwrap();
    let syncs: Vec<_> = (0..2)
        .map(|_| {
            env.cmd()
                .arg("sync")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in syncs {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", common::text(&out));
    }
    wait_for_drain(&env);
    assert_eq!(
        common::disk_current(&remote).as_deref(),
        Some(next.as_str())
    );
    let generations = fs::read_dir(remote.join("refs/current")).unwrap().count();
    assert_eq!(
        generations, 2,
        "the remote current moved {generations} times"
    );
    assert!(
        common::json_ok(&env, &["status"])["queue"]
            .as_array()
            .unwrap()
            .is_empty()
    );
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
