//! `checkpoint --push`, the push queue, `baton sync` and `baton status`: a hanging
//! target does not hold the hook up, a failed push stays queued until the target is
//! reachable, a kill -9 of sync loses nothing and a re-run pushes once.

use std::fs;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{SESSION, fixture, hook, log_lines, setup};
use crate::common::{self, Env, kill::kill_at, s};

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
fn a_checkpoint_queued_during_a_sync_is_pushed_by_it_or_after_it() {
    let env = Env::new();
    let (ws, session) = setup(&env);
    let big: Vec<(String, Vec<u8>)> = (0..8)
        .map(|i| (format!("f{i}.bin"), common::random_bytes(77 + i, 4 << 20)))
        .collect();
    let dir = env.write_files("big", &big);
    env.ok(&["save", s(&dir), "--secrets", "allow"]);
    let (blocker, remote) = blocked_target(&env);
    let input = fixture("claude-code-precompact.json", &ws, &session, SESSION);
    hook(&env, &ws, "claude-code", &input, &["--push", "disk"]);
    wait_for_drain(&env);
    fs::remove_file(&blocker).unwrap();
    fs::create_dir(&blocker).unwrap();
    let out = env
        .cmd()
        .args(["--store", s(&remote), "init"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    // A sync busy with 32 MiB while a new checkpoint is queued: its newer bundle (in a
    // pack the sync's process has not seen) replaces the entry being pushed.
    let sync = env
        .cmd()
        .arg("sync")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    fs::write(ws.join("a.txt"), "during the sync\n").unwrap();
    hook(&env, &ws, "claude-code", &input, &["--push", "disk"]);
    let newest = common::disk_current(&env.store()).unwrap();
    let out = sync.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    wait_for_drain(&env);
    assert_eq!(
        common::disk_current(&remote).as_deref(),
        Some(newest.as_str())
    );
    assert!(
        common::json_ok(&env, &["status"])["queue"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let out = env
        .cmd()
        .args(["--store", s(&remote), "verify"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
}
