//! Sync through local-path targets only: file:// URLs, targets, incremental and
//! older-rev pushes, pull outcomes, interrupted and concurrent pushes, stale staging,
//! clone refusals, hostile files, merge and the hub audit of a lost race — all through
//! the real binary. The scenarios both transports share are in `scenarios.rs`.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    Env, disk_current, json_err, json_ok, pack_files, random_bytes, s, snapshot_files,
    staged_pack_size, text,
};
use serde_json::Value;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// A store directory's path next to the env's own store.
fn remote_dir(env: &Env) -> PathBuf {
    env.path().join("remote")
}

/// Check out `rev` of the env's store into a fresh directory; its files and modes.
pub(crate) fn checkout(env: &Env, rev: &str) -> Vec<(PathBuf, Vec<u8>, u32)> {
    let dir = env
        .path()
        .join(format!("co-{}", rev.replace(['/', '~'], "_")));
    let _ = fs::remove_dir_all(&dir);
    env.ok(&["checkout", rev, s(&dir)]);
    snapshot_files(&dir)
        .into_iter()
        .map(|(rel, bytes)| {
            let mode = fs::symlink_metadata(dir.join(&rel))
                .unwrap()
                .permissions()
                .mode()
                & 0o111;
            (rel, bytes, mode)
        })
        .collect()
}

fn verify(env: &Env, store: &Path) {
    let doc = json_ok(env, &["--store", s(store), "verify"]);
    assert_eq!(doc["report"]["problems"], serde_json::json!([]), "{doc}");
}

/// A tree with nesting, an empty file, binary content and an executable.
fn rich_tree(env: &Env, dir: &str, seed: u64) {
    let big = random_bytes(seed, 300_000);
    let bin: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    env.write_tree(
        dir,
        &[
            ("handoff.md", format!("# handoff {seed}\n").as_bytes()),
            ("empty", b""),
            ("data/blob.bin", &bin),
            ("data/deep/er/big.bin", &big),
            ("scripts/run.sh", b"#!/bin/sh\necho hi\n"),
        ],
    );
    let script = env.path().join(dir).join("scripts/run.sh");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A store with one saved bundle (from `rich_tree`) and target `r` at `remote`.
fn store_with_target(remote: &Path, seed: u64) -> (Env, String) {
    let env = Env::new();
    env.init();
    rich_tree(&env, "work", seed);
    let id = env.save("work", &["--summary", "base"]);
    env.ok(&["target", "add", "r", s(remote)]);
    (env, id)
}

/// A new bundle on top of the env's current with one changed file.
fn save_change(env: &Env, name: &str, content: &[u8]) -> String {
    env.write_tree("work", &[(name, content)]);
    env.save("work", &["--summary", name])
}

/// Clone `remote` into a fresh env's default store.
fn clone_env(remote: &Path) -> Env {
    let env = Env::new();
    let doc = json_ok(&env, &["clone", s(remote)]);
    assert_eq!(doc["report"]["outcome"], "initial", "{doc}");
    env.write_tree("work", &[]);
    env
}

fn audit(env: &Env) -> Vec<Value> {
    json_ok(env, &["log", "--audit"])["entries"]
        .as_array()
        .unwrap()
        .clone()
}

/// The remote's ref directory, byte for byte (a moved ref changes it).
fn refs_snapshot(remote: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    snapshot_files(&remote.join("refs"))
}

pub(crate) fn staging_entries(remote: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(remote.join("staging"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn touch_back(path: &Path, ago: &str) {
    let status = Command::new("touch")
        .arg("-d")
        .arg(ago)
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

// ---------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------

#[test]
fn file_url_and_explicit_clone_path_work() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, id) = store_with_target(&remote, 2);
    a.ok(&["target", "add", "f", &format!("file://{}", s(&remote))]);
    let doc = json_ok(&a, &["push", "f"]);
    assert_eq!(
        doc["url"],
        s(&remote),
        "file:// is stored as the plain path"
    );
    assert_eq!(disk_current(&remote).as_deref(), Some(id.as_str()));
    let b = Env::new();
    let dest = b.path().join("elsewhere");
    let doc = json_ok(&b, &["clone", &format!("file://{}", s(&remote)), s(&dest)]);
    assert_eq!(doc["store"], s(&dest));
    assert!(
        !b.store().exists(),
        "clone with PATH must not touch ./.baton"
    );
    let shown = json_ok(&b, &["--store", s(&dest), "show", "current"]);
    assert_eq!(shown["id"], id.as_str());
    verify(&b, &dest);
}

// ---------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------

#[test]
fn target_add_list_remove_and_malformed_urls_are_refused() {
    let env = Env::new();
    env.init();
    json_ok(&env, &["target", "add", "disk", "/mnt/disk/store"]);
    json_ok(&env, &["target", "add", "box", "me@box:work/.baton"]);
    json_ok(&env, &["target", "add", "url", "ssh://me@box:2222/srv/b"]);
    json_ok(&env, &["target", "add", "file", "file:///mnt/x"]);
    let list = json_ok(&env, &["target", "list"]);
    let targets = list["targets"].as_array().unwrap();
    let find = |name: &str| {
        targets
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {list}"))
            .clone()
    };
    assert_eq!(targets.len(), 4, "{list}");
    assert_eq!(
        find("disk")["default"],
        true,
        "the first target is the default"
    );
    assert_eq!(find("box")["default"], false);
    assert_eq!(find("disk")["url"], "/mnt/disk/store");
    assert_eq!(find("box")["url"], "ssh://me@box/~/work/.baton");
    assert_eq!(find("url")["url"], "ssh://me@box:2222/srv/b");
    assert_eq!(find("file")["url"], "/mnt/x");
    assert_eq!(find("disk")["last_seen"], Value::Null);

    // --default moves the default.
    json_ok(&env, &["target", "add", "other", "/srv/other", "--default"]);
    let list = json_ok(&env, &["target", "list"]);
    let defaults: Vec<&Value> = list["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["default"] == true)
        .collect();
    assert_eq!(defaults.len(), 1, "{list}");
    assert_eq!(defaults[0]["name"], "other");

    let config = env.store().join("config");
    let before = fs::read(&config).unwrap();
    for bad in [
        "-oProxyCommand=x:p",
        "ssh://-u@h/p",
        "ssh://u:pw@h/p",
        "ssh://-oProxyCommand=x/p",
        "host:",
        "http://h/p",
    ] {
        // After `--` so that the URL parser (not the argument parser) must refuse it.
        let err = json_err(&env, &["target", "add", "bad", "--", bad], 2);
        assert_eq!(err["code"], "usage", "{bad}: {err}");
        assert!(
            err["message"].as_str().unwrap().contains("malformed"),
            "{bad}: {err}"
        );
        assert_eq!(
            fs::read(&config).unwrap(),
            before,
            "{bad} changed the config"
        );
        // Without `--` too.
        let out = env.run(&["target", "add", "bad", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out));
        assert_eq!(
            fs::read(&config).unwrap(),
            before,
            "{bad} changed the config"
        );
    }
    // Duplicate names and bad names.
    json_err(&env, &["target", "add", "disk", "/elsewhere"], 2);
    json_err(&env, &["target", "add", "a/b", "/elsewhere"], 2);
    assert_eq!(fs::read(&config).unwrap(), before);

    json_ok(&env, &["target", "remove", "other"]);
    json_err(&env, &["target", "remove", "other"], 3);
    let list = json_ok(&env, &["target", "list"]);
    let names: Vec<&str> = list["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 4, "{list}");
    assert!(!names.contains(&"other"));
    // Nothing is the default now: a bare push cannot choose.
    json_err(&env, &["push"], 2);
    json_err(&env, &["pull", "nosuch"], 3);
}

#[test]
fn refused_url_with_a_password_does_not_echo_it() {
    let env = Env::new();
    env.init();
    for args in [
        vec!["target", "add", "bad", "ssh://u:hunter2@h/p"],
        vec!["clone", "ssh://u:hunter2@h/p", "dest"],
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(!text(&out).contains("hunter2"), "{}", text(&out));
        let mut json = vec!["--json"];
        json.extend_from_slice(&args);
        let out = env.run(&json);
        assert!(!text(&out).contains("hunter2"), "{}", text(&out));
    }
}

#[test]
fn push_without_targets_or_to_unknown_target_is_not_found() {
    let env = Env::new();
    env.init();
    env.write_tree("work", &[("a", b"a")]);
    env.save("work", &[]);
    json_err(&env, &["push"], 3);
    json_err(&env, &["pull"], 3);
}

// ---------------------------------------------------------------------------------------
// Push
// ---------------------------------------------------------------------------------------

#[test]
fn incremental_push_sends_only_new_objects() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 5);
    // Many files, so that "everything" and "only the new ones" differ a lot.
    let files: Vec<(String, Vec<u8>)> = (0..40)
        .map(|i| (format!("many/f{i:02}"), random_bytes(100 + i, 20_000)))
        .collect();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    a.write_tree("work", &refs);
    a.save("work", &[]);
    let first = json_ok(&a, &["push"]);
    let first_objects = first["report"]["objects_sent"].as_u64().unwrap();
    let first_bytes = first["report"]["bytes_sent"].as_u64().unwrap();
    assert!(first_objects > 40, "{first}");

    let new_id = save_change(&a, "many/f07", b"changed\n");
    let second = json_ok(&a, &["push"]);
    assert_eq!(second["report"]["bundle"], new_id.as_str());
    let objects = second["report"]["objects_sent"].as_u64().unwrap();
    let bytes = second["report"]["bytes_sent"].as_u64().unwrap();
    // The changed blob, the trees above it (many/ and the root) and the bundle.
    assert!(
        (1..=4).contains(&objects),
        "sent {objects} objects: {second}"
    );
    assert!(
        bytes * 20 < first_bytes,
        "sent {bytes} bytes again (first push {first_bytes})"
    );
    assert_eq!(pack_files(&remote).len(), 2, "one pack per push");
    assert_eq!(disk_current(&remote).as_deref(), Some(new_id.as_str()));
    verify(&a, &remote);
    // And a pushed bundle's history is complete on the other side.
    let b = clone_env(&remote);
    assert_eq!(checkout(&a, "current~1"), checkout(&b, "current~1"));
}

#[test]
fn push_of_an_older_rev_to_a_newer_remote_is_a_conflict() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, base) = store_with_target(&remote, 6);
    let newer = save_change(&a, "x", b"x");
    json_ok(&a, &["push"]);
    let before = refs_snapshot(&remote);
    // Pushing an ancestor would move the remote backwards: refused.
    let err = json_err(&a, &["push", "r", &base], 5);
    assert!(err["message"].as_str().unwrap().contains(&newer), "{err}");
    assert_eq!(refs_snapshot(&remote), before);
}

// ---------------------------------------------------------------------------------------
// Compare-and-swap on the remote ref
// ---------------------------------------------------------------------------------------

#[test]
fn force_none_creates_only_on_an_empty_remote() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, id) = store_with_target(&remote, 8);
    json_ok(&a, &["push", "--force", "none"]);
    assert_eq!(disk_current(&remote).as_deref(), Some(id.as_str()));
    let next = save_change(&a, "y", b"y");
    json_err(&a, &["push", "--force", "none"], 5);
    json_err(&a, &["push", "--force", "not-an-id"], 2);
    json_ok(&a, &["push", "--force", &id]);
    assert_eq!(disk_current(&remote).as_deref(), Some(next.as_str()));
}

// ---------------------------------------------------------------------------------------
// Pull
// ---------------------------------------------------------------------------------------

#[test]
fn pull_fast_forwards_and_a_diverged_pull_still_records_the_target() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, base) = store_with_target(&remote, 9);
    json_ok(&a, &["push"]);
    let b = Env::new();
    b.init();
    b.ok(&["target", "add", "r", s(&remote)]);
    // Into an empty store: "initial".
    let doc = json_ok(&b, &["pull"]);
    assert_eq!(doc["report"]["outcome"], "initial", "{doc}");
    assert_eq!(doc["report"]["current_before"], Value::Null);
    assert_eq!(doc["report"]["current_after"], base.as_str());
    b.write_tree("work", &[]);

    let x = save_change(&a, "x", b"x\n");
    json_ok(&a, &["push"]);
    let doc = json_ok(&b, &["pull", "r"]);
    assert_eq!(doc["report"]["outcome"], "fast-forward");
    assert_eq!(doc["report"]["current_after"], x.as_str());
    assert_eq!(checkout(&a, "current"), checkout(&b, "current"));

    // B ahead of the remote: nothing moves.
    let b_ahead = save_change(&b, "b", b"b\n");
    let doc = json_ok(&b, &["pull"]);
    assert_eq!(doc["report"]["outcome"], "local-ahead");
    assert_eq!(doc["report"]["current_after"], b_ahead.as_str());

    // Diverged: A pushes y, B has b_ahead.
    let y = save_change(&a, "y", b"y\n");
    json_ok(&a, &["push"]);
    let err = json_err(&b, &["pull"], 5);
    let message = err["message"].as_str().unwrap();
    assert!(message.contains(&y) && message.contains(&b_ahead), "{err}");
    assert!(
        err["hint"].as_str().unwrap_or("").contains("targets/r"),
        "{err}"
    );
    assert_eq!(json_ok(&b, &["show", "current"])["id"], b_ahead.as_str());
    assert_eq!(
        json_ok(&b, &["show", "targets/r"])["id"],
        y.as_str(),
        "the fetched remote bundle is recorded"
    );
    // Its content is there to look at.
    let out = b.ok(&["cat", "targets/r:y"]);
    assert_eq!(out, "y\n");
    verify(&b, &b.store());

    // Recovery without a re-clone: reset onto the fetched bundle (a compare-and-swap with
    // --expect), save the work again on top, push. Nothing is lost: the abandoned bundle
    // stays in the audit log and readable.
    assert!(
        err["hint"]
            .as_str()
            .unwrap_or("")
            .contains("baton reset targets/r"),
        "{err}"
    );
    let refused = json_err(&b, &["reset", "targets/r", "--expect", &base], 5);
    assert!(
        refused["message"].as_str().unwrap().contains(&b_ahead),
        "{refused}"
    );
    assert_eq!(json_ok(&b, &["show", "current"])["id"], b_ahead.as_str());
    json_err(&b, &["reset", "0123456789abcdef"], 3);
    let doc = json_ok(&b, &["reset", "targets/r", "--expect", &b_ahead]);
    assert_eq!(doc["old"], b_ahead.as_str(), "{doc}");
    assert_eq!(doc["new"], y.as_str(), "{doc}");
    assert_eq!(doc["moved"], true, "{doc}");
    let again = json_ok(&b, &["reset", "targets/r"]);
    assert_eq!(again["moved"], false, "{again}");
    let last = audit(&b);
    let reset_line = last
        .iter()
        .find(|e| e["action"] == "reset")
        .expect("a reset line");
    assert_eq!(reset_line["old"], b_ahead.as_str());
    assert_eq!(b.ok(&["cat", &format!("{b_ahead}:b")]), "b\n");
    let redone = save_change(&b, "b", b"b\n");
    json_ok(&b, &["push"]);
    let chain: Vec<String> = json_ok(&a, &["--store", s(&remote), "log"])["bundles"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["id"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(chain[..2], [redone.clone(), y.clone()], "{chain:?}");
    verify(&b, &remote);
}

#[test]
fn pull_from_an_empty_remote_store() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, id) = store_with_target(&remote, 10);
    json_ok(&a, &["push"]);
    // Make it a store with no current.
    for f in fs::read_dir(remote.join("refs/current")).unwrap() {
        fs::remove_file(f.unwrap().path()).unwrap();
    }
    let doc = json_ok(&a, &["pull"]);
    assert_eq!(doc["report"]["outcome"], "empty-remote");
    assert_eq!(doc["report"]["current_after"], id.as_str());
}

// ---------------------------------------------------------------------------------------
// Interrupted, stale and concurrent pushes
// ---------------------------------------------------------------------------------------

#[test]
fn killed_push_leaves_the_remote_current_unchanged_and_verifying() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, mut base) = store_with_target(&remote, 13);
    json_ok(&a, &["push"]);
    let total: u64 = 200 << 20;
    let mut killed = None;
    for attempt in 0..3u64 {
        let big_file = a.path().join("work").join("big.bin");
        fs::write(&big_file, random_bytes(13 + attempt, total as usize)).unwrap();
        let big = a.save("work", &["--secrets", "allow"]);
        let refs_before = refs_snapshot(&remote);
        let packs_before = pack_files(&remote);
        let mut child = a
            .cmd()
            .args(["--json", "push"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let caught = loop {
            let staged = staged_pack_size(&remote).unwrap_or(0);
            if staged > 16 << 20 && staged < total - (16 << 20) {
                child.kill().unwrap(); // SIGKILL, mid-upload
                break true;
            }
            if child.try_wait().unwrap().is_some() {
                break false;
            }
            assert!(Instant::now() < deadline, "push did not finish");
            std::thread::sleep(Duration::from_micros(200));
        };
        let status = child.wait().unwrap();
        if caught {
            killed = Some((big, refs_before, packs_before));
            break;
        }
        // Too fast to catch: it is the new base; try again with another bundle.
        assert!(status.success(), "push failed on its own: {status:?}");
        eprintln!("attempt {attempt}: the push finished before it could be killed");
        base = big;
    }
    let (big, refs_before, packs_before) = killed.expect("could not catch the push mid-upload");

    assert_eq!(refs_snapshot(&remote), refs_before, "the remote ref moved");
    assert_eq!(disk_current(&remote).as_deref(), Some(base.as_str()));
    assert_eq!(
        pack_files(&remote),
        packs_before,
        "a partial pack was published"
    );
    verify(&a, &remote);
    assert_eq!(
        json_ok(&a, &["show", "targets/r"])["id"],
        base.as_str(),
        "the killed push moved targets/r"
    );
    verify(&a, &a.store());

    // The leftover staging was made on this host by a process that is gone: the next
    // push removes it at once, and succeeds.
    let leftovers = staging_entries(&remote);
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    let doc = json_ok(&a, &["push"]);
    assert_eq!(doc["report"]["remote_before"], base.as_str());
    assert_eq!(disk_current(&remote).as_deref(), Some(big.as_str()));
    assert!(
        staging_entries(&remote).is_empty(),
        "{:?}",
        staging_entries(&remote)
    );
    verify(&a, &remote);
}

#[test]
fn stale_staging_is_removed_by_the_next_push_and_fresh_staging_kept() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 14);
    json_ok(&a, &["push"]);
    let stale = remote.join("staging/otherhost-123-1");
    let fresh = remote.join("staging/otherhost-456-2");
    for dir in [&stale, &fresh] {
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join("pack"), b"partial").unwrap();
        fs::write(dir.join("sub/x"), b"x").unwrap();
    }
    touch_back(&stale, "2 hours ago");
    touch_back(&fresh, "30 minutes ago");
    save_change(&a, "z", b"z");
    json_ok(&a, &["push"]);
    assert!(!stale.exists(), "stale staging survived the push");
    assert!(fresh.join("pack").exists(), "fresh staging was removed");
    assert_eq!(
        staging_entries(&remote),
        vec!["otherhost-456-2".to_string()]
    );
    // An up-to-date push cleans too.
    touch_back(&fresh, "3 hours ago");
    let doc = json_ok(&a, &["push"]);
    assert_eq!(doc["report"]["up_to_date"], true);
    assert!(staging_entries(&remote).is_empty());
    verify(&a, &remote);
}

#[test]
fn concurrent_pushes_exactly_one_wins() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 15);
    json_ok(&a, &["push"]);
    for round in 0..3u64 {
        // Two stores on top of the same remote base, each with its own new bundle.
        let base = disk_current(&remote);
        let b = clone_env(&remote);
        let c = clone_env(&remote);
        let b_id = save_change(&b, "b.bin", &random_bytes(1000 + round, 4 << 20));
        let c_id = save_change(&c, "c.bin", &random_bytes(2000 + round, 4 << 20));
        let spawn = |env: &Env| {
            env.cmd()
                .args(["--json", "push"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (pb, pc) = (spawn(&b), spawn(&c));
        let (ob, oc) = (
            pb.wait_with_output().unwrap(),
            pc.wait_with_output().unwrap(),
        );
        let (winner, loser) = match (ob.status.code(), oc.status.code()) {
            (Some(0), Some(5)) => (b_id, &oc),
            (Some(5), Some(0)) => (c_id, &ob),
            other => panic!(
                "round {round}: exit codes {other:?}\nB: {}\nC: {}",
                text(&ob),
                text(&oc)
            ),
        };
        let err: Value = serde_json::from_slice(&loser.stdout).unwrap();
        assert_eq!(err["error"]["code"], "store_conflict", "{err}");
        assert_ne!(disk_current(&remote), base);
        assert_eq!(disk_current(&remote).as_deref(), Some(winner.as_str()));
        verify(&a, &remote);
    }
    // Whoever lost can still catch up.
    let d = clone_env(&remote);
    verify(&d, &d.store());
}

// ---------------------------------------------------------------------------------------
// Audit log
// ---------------------------------------------------------------------------------------

#[test]
fn every_ref_move_lands_in_the_audit_log() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, base) = store_with_target(&remote, 16);
    json_ok(&a, &["push"]);
    let entries = audit(&a);
    let last = entries.last().unwrap();
    assert_eq!(last["ref"], "targets/r", "{last}");
    assert_eq!(last["action"], "push");
    assert_eq!(last["old"], Value::Null);
    assert_eq!(last["new"], base.as_str());
    // An up-to-date push moves nothing and logs nothing.
    let n = entries.len();
    json_ok(&a, &["push"]);
    assert_eq!(audit(&a).len(), n);

    let b = clone_env(&remote);
    let entries = audit(&b);
    let find = |entries: &[Value], r: &str, action: &str, new: &str| {
        entries
            .iter()
            .any(|e| e["ref"] == r && e["action"] == action && e["new"] == new)
    };
    assert!(
        find(&entries, "targets/origin", "fetch", &base),
        "{entries:#?}"
    );
    assert!(find(&entries, "current", "pull", &base), "{entries:#?}");

    let next = save_change(&a, "n", b"n");
    json_ok(&a, &["push"]);
    let entries = audit(&a);
    let last = entries.last().unwrap();
    assert_eq!(last["ref"], "targets/r");
    assert_eq!(last["action"], "push");
    assert_eq!(last["old"], base.as_str());
    assert_eq!(last["new"], next.as_str());

    let before = audit(&b).len();
    json_ok(&b, &["pull"]);
    let entries = audit(&b);
    assert_eq!(entries.len(), before + 2, "{entries:#?}");
    let fetched = entries
        .iter()
        .find(|e| e["ref"] == "targets/origin" && e["new"] == next.as_str())
        .unwrap_or_else(|| panic!("no fetch entry: {entries:#?}"));
    assert_eq!(fetched["action"], "fetch");
    assert_eq!(fetched["old"], base.as_str());
    let pulled = entries
        .iter()
        .find(|e| e["ref"] == "current" && e["new"] == next.as_str())
        .unwrap_or_else(|| panic!("no pull entry: {entries:#?}"));
    assert_eq!(pulled["action"], "pull");
    assert_eq!(pulled["old"], base.as_str());

    // The remote's own ref file is a log line of the push.
    let line = fs::read_to_string(remote.join("refs/current/00000000000000000002")).unwrap();
    let entry: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(entry["action"], "push");
    assert_eq!(entry["old"], base.as_str());
    assert_eq!(entry["new"], next.as_str());
    assert!(line.ends_with('\n'));
}

// ---------------------------------------------------------------------------------------
// Clone
// ---------------------------------------------------------------------------------------

#[test]
fn clone_into_an_existing_path_is_refused() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 17);
    json_ok(&a, &["push"]);
    let b = Env::new();
    let dest = b.path().join("taken");
    fs::create_dir(&dest).unwrap();
    fs::write(dest.join("mine"), b"keep me").unwrap();
    let err = json_err(&b, &["clone", s(&remote), s(&dest)], 2);
    assert!(err["message"].as_str().unwrap().contains("exists"), "{err}");
    assert_eq!(
        snapshot_files(&dest),
        vec![(PathBuf::from("mine"), b"keep me".to_vec())]
    );
    // The default path too: an existing ./.baton is never cloned over.
    b.init();
    let before = snapshot_files(&b.store());
    json_err(&b, &["clone", s(&remote)], 2);
    assert_eq!(snapshot_files(&b.store()), before);
}

#[test]
fn clone_of_a_missing_store_is_not_found_and_leaves_nothing() {
    let b = Env::new();
    let missing = b.path().join("nothing-here");
    let err = json_err(&b, &["clone", s(&missing)], 3);
    assert_eq!(err["code"], "not_found");
    assert!(!b.store().exists(), "a failed clone left ./.baton");
    let dest = b.path().join("dest");
    json_err(&b, &["clone", s(&missing), s(&dest)], 3);
    assert!(!dest.exists());
    assert!(!missing.exists(), "clone created the remote");
    // A directory that is not a store is not a store either.
    fs::create_dir(&missing).unwrap();
    json_err(&b, &["clone", s(&missing), s(&dest)], 3);
    assert!(!dest.exists());
    // A malformed URL is a usage error, and nothing is created.
    json_err(&b, &["clone", "relative/path", s(&dest)], 2);
    assert!(!dest.exists());
}

#[test]
fn push_into_a_store_made_by_init_and_into_missing_parent_directories() {
    for fresh in ["made-by-init", "missing/parents/store"] {
        let scratch = Env::new();
        let remote = scratch.path().join(fresh);
        if fresh == "made-by-init" {
            scratch.ok(&["--store", s(&remote), "init"]);
        }
        let (env, id) = store_with_target(&remote, 7);
        let doc = json_ok(&env, &["push"]);
        assert_eq!(doc["report"]["bundle"], id.as_str(), "{fresh}");
        assert_eq!(
            disk_current(&remote).as_deref(),
            Some(id.as_str()),
            "{fresh}"
        );
        verify(&env, &remote);
    }
}

// ---------------------------------------------------------------------------------------
// Hostile remote files: packs larger than declared, devices, FIFOs
// ---------------------------------------------------------------------------------------

/// How a hostile remote replaces one of its files.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Hostile {
    /// A sparse file of 1 TiB (zeros: no pack trailer).
    SparseTiB,
    /// A symlink to /dev/zero (endless zeros).
    DevZero,
    /// A FIFO nobody writes to (an open for reading blocks for ever).
    Fifo,
}

pub(crate) fn make_hostile(path: &Path, how: Hostile) {
    fs::remove_file(path).unwrap();
    match how {
        Hostile::SparseTiB => fs::File::create(path).unwrap().set_len(1 << 40).unwrap(),
        Hostile::DevZero => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
        Hostile::Fifo => {
            let c = std::ffi::CString::new(s(path)).unwrap();
            // SAFETY: mkfifo reads the NUL-terminated path only.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }
    }
}

/// `baton --json ARGS` in `env`, capped (files at 64 MiB, 30 s): the exit code, the
/// error document and the time it took.
fn capped_json(env: &Env, args: &[&str]) -> (Option<i32>, Value, Duration) {
    let mut cmd = env.cmd();
    cmd.arg("--json").args(args);
    let (out, took) = common::capped_output(cmd, Duration::from_secs(30));
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(doc.is_object(), "{args:?}: {}", text(&out));
    (out.status.code(), doc, took)
}

/// A clone of `remote` that must be refused as an integrity error, fast, leaving
/// nothing where the clone would have gone.
fn assert_clone_refused(remote: &Path, what: &str) -> Value {
    let env = Env::new();
    let (code, doc, took) = capped_json(&env, &["clone", s(remote), "c"]);
    assert_eq!(code, Some(4), "clone with {what}: {doc}");
    assert!(
        took < Duration::from_secs(10),
        "clone with {what} took {took:?}"
    );
    let left: Vec<String> = fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n == "c" || n.starts_with(".baton-clone-"))
        .collect();
    assert!(left.is_empty(), "clone with {what} left {left:?}");
    doc["error"].clone()
}

#[test]
fn clone_refuses_a_pack_with_bytes_its_index_does_not_declare() {
    let remote_env = Env::new();
    let remote = remote_dir(&remote_env);
    let (a, _) = store_with_target(&remote, 42);
    a.ok(&["push"]);
    // A gap of 8 MiB before the index: the footer and index still fit the file, but the
    // object area holds bytes no entry declares.
    let pack = pack_files(&remote).pop().unwrap();
    let bytes = fs::read(&pack).unwrap();
    let footer = &bytes[bytes.len() - 32..];
    let count = u64::from_be_bytes(footer[0..8].try_into().unwrap());
    let index_offset = u64::from_be_bytes(footer[8..16].try_into().unwrap()) as usize;
    let gap = 8usize << 20;
    let mut hostile = bytes[..index_offset].to_vec();
    hostile.resize(index_offset + gap, 0);
    hostile.extend_from_slice(&bytes[index_offset..bytes.len() - 32]);
    hostile.extend_from_slice(&count.to_be_bytes());
    hostile.extend_from_slice(&((index_offset + gap) as u64).to_be_bytes());
    hostile.extend_from_slice(&footer[16..]);
    let named = pack.with_file_name(format!("{}.pack", blake3::hash(&hostile).to_hex()));
    fs::remove_file(&pack).unwrap();
    fs::write(&named, &hostile).unwrap();
    let err = assert_clone_refused(&remote, "an undeclared gap");
    assert!(
        err["message"].as_str().unwrap().contains("object area"),
        "{err}"
    );
}

#[test]
fn a_fifo_in_a_local_remote_is_refused_instead_of_hanging() {
    let remote_env = Env::new();
    let remote = remote_dir(&remote_env);
    let (a, _) = store_with_target(&remote, 43);
    a.ok(&["push"]);
    let newest = fs::read_dir(remote.join("refs/current"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .max()
        .unwrap();
    let pack = pack_files(&remote).pop().unwrap();
    for (path, what) in [
        (remote.join("config"), "config"),
        (newest, "ref generation"),
        (pack, "pack"),
    ] {
        let saved = fs::read(&path).unwrap();
        make_hostile(&path, Hostile::Fifo);
        let err = assert_clone_refused(&remote, &format!("a FIFO at the {what}"));
        let message = err["message"].as_str().unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(message.contains(name), "{what}: {err}");
        fs::remove_file(&path).unwrap();
        fs::write(&path, saved).unwrap();
    }
    // The remote itself is fine again.
    clone_env(&remote);
}

#[test]
fn clone_stops_a_pack_download_at_its_first_bad_object() {
    use std::io::{Seek, SeekFrom, Write};
    let remote_env = Env::new();
    let remote = remote_dir(&remote_env);
    let (a, _) = store_with_target(&remote, 46);
    a.ok(&["push"]);
    // A sparse 1 TiB pack whose magic, index and footer are all valid: its one declared
    // object fills the whole object area, and is zeros (not a zstd frame).
    let pack = pack_files(&remote).pop().unwrap();
    fs::remove_file(&pack).unwrap();
    let size: u64 = 1 << 40;
    let index_offset = size - 48 - 32;
    let mut file = fs::File::create(&pack).unwrap();
    file.set_len(size).unwrap();
    file.write_all(b"baton-pack-v1\n\0\0").unwrap();
    file.seek(SeekFrom::Start(index_offset)).unwrap();
    file.write_all(blake3::hash(b"anything").as_bytes())
        .unwrap();
    file.write_all(&16u64.to_be_bytes()).unwrap();
    file.write_all(&(index_offset - 16).to_be_bytes()).unwrap();
    file.write_all(&1u64.to_be_bytes()).unwrap();
    file.write_all(&index_offset.to_be_bytes()).unwrap();
    file.write_all(b"baton-pack-end\n\0").unwrap();
    drop(file);
    let err = assert_clone_refused(&remote, "a 1 TiB object of zeros");
    assert!(
        err["message"].as_str().unwrap().contains("corrupt"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// Merge: diverged lines converge
// ---------------------------------------------------------------------------------------

/// A briefing whose Next Steps is `step`.
fn briefing_text(objective: &str, step: &str) -> String {
    format!(
        "# Handoff\n\n## Objective\n\n{objective}\n\n## Current State\n\nState of {objective}\n\n## Next Steps\n\n1. {step}\n"
    )
}

/// Save a handoff of the env's `work` directory with `step` as its Next Steps.
pub(crate) fn save_handoff(env: &Env, objective: &str, step: &str, from: &str, to: &str) -> String {
    fs::write(env.path().join("brief.md"), briefing_text(objective, step)).unwrap();
    let doc = json_ok(
        env,
        &[
            "save", "work", "--brief", "brief.md", "--from", from, "--to", to,
        ],
    );
    doc["bundle"].as_str().unwrap().to_string()
}

/// Two clones of one local remote, each with a handoff saved on the same parent, and A
/// has pushed. Returns (holder, remote, a, b, A's bundle, B's bundle).
fn two_lines() -> (Env, PathBuf, Env, Env, String, String) {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let seed = Env::new();
    seed.init();
    seed.write_tree("work", &[("notes.txt", b"base\n")]);
    save_handoff(&seed, "Base", "Start", "seed", "");
    seed.ok(&["target", "add", "origin", s(&remote)]);
    json_ok(&seed, &["push"]);
    let a = clone_env(&remote);
    let b = clone_env(&remote);
    let a_id = save_handoff(&a, "Ship the parser", "Write the grammar", "alice", "bob");
    let b_id = save_handoff(&b, "Ship the docs", "Publish the manual", "carol", "dave");
    json_ok(&a, &["push"]);
    (holder, remote, a, b, a_id, b_id)
}

/// `two_lines`, then B has pulled (diverged, exit 5): `targets/origin` is A's bundle.
fn diverged_pair() -> (Env, PathBuf, Env, Env, String, String) {
    let (holder, remote, a, b, a_id, b_id) = two_lines();
    let err = json_err(&b, &["pull"], 5);
    assert_eq!(err["code"], "store_conflict", "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("store_conflict"),
        "{err}"
    );
    let hint = err["hint"].as_str().unwrap_or("");
    assert!(hint.contains("baton merge targets/origin"), "{err}");
    assert!(hint.contains("baton reset targets/origin"), "{err}");
    assert_eq!(
        json_ok(&b, &["show", "targets/origin"])["id"],
        a_id.as_str()
    );
    (holder, remote, a, b, a_id, b_id)
}

fn short(id: &str) -> &str {
    &id[..12]
}

#[test]
fn merge_keeps_both_lines_and_push_then_fast_forwards() {
    let (_holder, remote, a, b, a_id, b_id) = two_lines();

    // B's push loses the race: store_conflict, and the hint offers merge before reset.
    let before = snapshot_files(&remote);
    let err = json_err(&b, &["push"], 5);
    assert_eq!(err["code"], "store_conflict");
    assert!(
        err["message"].as_str().unwrap().contains("store_conflict"),
        "{err}"
    );
    let hint = err["hint"].as_str().unwrap_or("");
    let merge_at = hint
        .find("baton merge targets/origin")
        .expect("merge in hint");
    let reset_at = hint
        .find("baton reset targets/origin")
        .expect("reset in hint");
    assert!(merge_at < reset_at, "{hint}");
    assert_eq!(snapshot_files(&remote), before);

    // B pulls: diverged (exit 5), A's bundle fetched as targets/origin.
    let err = json_err(&b, &["pull"], 5);
    assert!(
        err["message"].as_str().unwrap().contains("store_conflict"),
        "{err}"
    );
    assert!(
        err["hint"]
            .as_str()
            .unwrap_or("")
            .contains("baton merge targets/origin"),
        "{err}"
    );

    // The merge: parents current then REV, both Next Steps labelled.
    let doc = json_ok(&b, &["merge", "targets/origin"]);
    assert_eq!(doc["merged"], true, "{doc}");
    let merge_id = doc["bundle"].as_str().unwrap().to_string();
    assert_eq!(doc["parents"], serde_json::json!([b_id, a_id]), "{doc}");
    let shown = json_ok(&b, &["show", "current"]);
    assert_eq!(shown["id"], merge_id.as_str());
    let handoff = b.ok(&["cat", "current:handoff.md"]);
    let ours = handoff
        .find(&format!("### From {} (carol -> dave)", short(&b_id)))
        .unwrap_or_else(|| panic!("B's label missing:\n{handoff}"));
    let ours_step = handoff.find("1. Publish the manual").expect("B's step");
    let theirs = handoff
        .find(&format!("### From {} (alice -> bob)", short(&a_id)))
        .unwrap_or_else(|| panic!("A's label missing:\n{handoff}"));
    let theirs_step = handoff.find("1. Write the grammar").expect("A's step");
    assert!(
        ours < ours_step && ours_step < theirs && theirs < theirs_step,
        "{handoff}"
    );
    assert!(
        handoff.contains("Ship the docs"),
        "current's Objective: {handoff}"
    );
    // The rest of the tree is current's.
    assert_eq!(
        b.ok(&["cat", "current:context.md"]),
        b.ok(&["cat", &format!("{b_id}:context.md")])
    );

    // log shows it as a merge, in both forms.
    let log = b.ok(&["log", "-n", "1"]);
    assert!(
        log.contains(&format!("Merge:   {} {}", short(&b_id), short(&a_id))),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "Merge targets/origin ({}) into {}",
            short(&a_id),
            short(&b_id)
        )),
        "{log}"
    );
    let bundles = json_ok(&b, &["log"])["bundles"].clone();
    assert_eq!(bundles[0]["id"], merge_id.as_str());
    assert_eq!(bundles[0]["parents"].as_array().unwrap().len(), 2);
    let ids: Vec<&str> = bundles
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&a_id.as_str()) && ids.contains(&b_id.as_str()));

    // The kickoff names both lines and carries both sides' steps.
    let kickoff = b.ok(&["resume", "--workspace", "work"]);
    assert!(
        kickoff.contains(&format!("Merge of: {} and {}", short(&b_id), short(&a_id))),
        "{kickoff}"
    );
    assert!(
        kickoff.contains("Publish the manual") && kickoff.contains("Write the grammar"),
        "{kickoff}"
    );

    // B's push now fast-forwards; A's pull fast-forwards to the merge.
    let doc = json_ok(&b, &["push"]);
    assert_eq!(doc["report"]["remote_before"], a_id.as_str(), "{doc}");
    assert_eq!(disk_current(&remote).as_deref(), Some(merge_id.as_str()));
    let doc = json_ok(&a, &["pull"]);
    assert_eq!(doc["report"]["outcome"], "fast-forward", "{doc}");
    assert_eq!(doc["report"]["current_after"], merge_id.as_str());
    assert_eq!(
        a.ok(&["cat", "current:handoff.md"]),
        handoff,
        "A reads the same merged briefing"
    );
    verify(&a, &a.store());
    verify(&b, &b.store());
    verify(&b, &remote);
    let audit_line = audit(&b)
        .into_iter()
        .rev()
        .find(|e| e["action"] == "merge")
        .expect("a merge line in the audit log");
    assert_eq!(audit_line["old"], b_id.as_str());
    assert_eq!(audit_line["new"], merge_id.as_str());
}

#[test]
fn merge_refuses_what_is_already_merged_and_a_fast_forward() {
    let (_holder, _remote, _a, b, a_id, b_id) = diverged_pair();
    // REV is current itself, or one of its ancestors: exit 0, a note, nothing written.
    let audit_before = audit(&b).len();
    for rev in ["current", "current~1", b_id.as_str()] {
        let doc = json_ok(&b, &["merge", rev]);
        assert_eq!(doc["merged"], false, "{doc}");
        assert_eq!(doc["reason"], "already-merged", "{doc}");
        assert_eq!(disk_current(&b.store()).as_deref(), Some(b_id.as_str()));
    }
    let human = b.ok(&["merge", "current~1"]);
    assert!(human.contains("already merged"), "{human}");

    let merge_id = json_ok(&b, &["merge", "targets/origin"])["bundle"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = json_ok(&b, &["merge", "targets/origin"]);
    assert_eq!(doc["reason"], "already-merged", "{doc}");
    assert_eq!(disk_current(&b.store()).as_deref(), Some(merge_id.as_str()));
    assert_eq!(audit(&b).len(), audit_before + 1, "one merge line, no more");

    // current is an ancestor of REV: that is a fast-forward, done with reset (exit 2).
    json_ok(&b, &["reset", &a_id]);
    let audit_before = audit(&b).len();
    let err = json_err(&b, &["merge", &merge_id], 2);
    assert!(
        err["message"].as_str().unwrap().contains("ancestor"),
        "{err}"
    );
    assert!(
        err["hint"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("baton reset {merge_id}")),
        "{err}"
    );
    assert_eq!(disk_current(&b.store()).as_deref(), Some(a_id.as_str()));
    assert_eq!(audit(&b).len(), audit_before);
    // An unknown REV is not found.
    json_err(&b, &["merge", "0123456789abcdef"], 3);
    verify(&b, &b.store());
}

#[test]
fn merge_with_a_new_briefing_replaces_it_redacted_and_refuses_a_bad_one() {
    let (_holder, remote, a, b, a_id, b_id) = diverged_pair();
    // An invalid briefing is refused like save's, before anything is written.
    fs::write(b.path().join("bad.md"), "## Objective\n\nonly this\n").unwrap();
    let err = json_err(&b, &["merge", "targets/origin", "--brief", "bad.md"], 2);
    assert!(
        err["message"].as_str().unwrap().contains("Next Steps"),
        "{err}"
    );
    json_err(&b, &["merge", "targets/origin", "--brief", "missing.md"], 3);
    assert_eq!(disk_current(&b.store()).as_deref(), Some(b_id.as_str()));

    let secret = "AKIA".to_string() + "Q7RZ3K5M2N8P4T6W";
    let text = format!(
        "# Merged\n\n## Objective\n\nShip both, key {secret}\n\n## Current State\n\nParser and docs on two lines.\n\n## Next Steps\n\n1. Reconcile the grammar with the manual.\n"
    );
    fs::write(b.path().join("merged.md"), &text).unwrap();
    json_err(
        &b,
        &[
            "merge",
            "targets/origin",
            "--brief",
            "merged.md",
            "--secrets",
            "block",
        ],
        6,
    );
    assert_eq!(disk_current(&b.store()).as_deref(), Some(b_id.as_str()));

    let doc = json_ok(
        &b,
        &[
            "merge",
            "targets/origin",
            "--brief",
            "merged.md",
            "--summary",
            "one line again",
        ],
    );
    assert_eq!(doc["briefing"], "new", "{doc}");
    assert_eq!(doc["parents"], serde_json::json!([b_id, a_id]), "{doc}");
    assert_eq!(doc["secrets"]["aws_access_key"], 1, "{doc}");
    let handoff = b.ok(&["cat", "current:handoff.md"]);
    assert!(
        handoff.contains("1. Reconcile the grammar with the manual."),
        "{handoff}"
    );
    assert!(!handoff.contains(&secret), "{handoff}");
    assert!(handoff.contains("[REDACTED:aws_access_key]"), "{handoff}");
    assert!(!handoff.contains("### From"), "{handoff}");
    // The workspace handoff is not re-captured: every other file is current's.
    assert_eq!(
        b.ok(&["cat", "current:context.md"]),
        b.ok(&["cat", &format!("{b_id}:context.md")])
    );
    assert_eq!(
        json_ok(&b, &["show", "current"])["summary"],
        "one line again"
    );
    json_ok(&b, &["push"]);
    assert_eq!(json_ok(&a, &["pull"])["report"]["outcome"], "fast-forward");
    verify(&b, &remote);
}

#[test]
fn a_handoff_that_loses_the_push_race_is_offered_merge_and_converges() {
    let (_holder, remote, a, b, a_id, _b_id) = two_lines();
    fs::write(
        b.path().join("brief.md"),
        briefing_text("Ship the docs", "Index the manual"),
    )
    .unwrap();
    let err = json_err(
        &b,
        &[
            "handoff",
            "--to",
            "erin",
            "--brief",
            "brief.md",
            "--workspace",
            "work",
            "--push",
            "origin",
        ],
        5,
    );
    let hint = err["hint"].as_str().unwrap_or("");
    assert!(hint.contains("baton merge targets/origin"), "{err}");
    assert!(hint.contains("baton reset targets/origin"), "{err}");
    let saved = json_ok(&b, &["show", "current"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    json_err(&b, &["pull"], 5);
    let doc = json_ok(&b, &["merge", "targets/origin"]);
    assert_eq!(doc["parents"], serde_json::json!([saved, a_id]), "{doc}");
    let handoff = b.ok(&["cat", "current:handoff.md"]);
    assert!(
        handoff.contains(&format!("### From {} (-> erin)", short(&saved)))
            && handoff.contains("1. Index the manual")
            && handoff.contains("1. Write the grammar"),
        "{handoff}"
    );
    json_ok(&b, &["push", "origin"]);
    assert_eq!(
        disk_current(&remote).as_deref(),
        doc["bundle"].as_str(),
        "the merge fast-forwarded the target"
    );
    assert_eq!(json_ok(&a, &["pull"])["report"]["outcome"], "fast-forward");
}

#[test]
fn push_and_clone_into_a_non_empty_directory_that_is_not_a_store_are_refused() {
    let remote_env = Env::new();
    let full = remote_env.path().join("project");
    fs::create_dir_all(full.join("src")).unwrap();
    fs::write(full.join("notes.txt"), b"mine\n").unwrap();
    fs::write(full.join("src/lib.rs"), b"// mine\n").unwrap();
    let before = snapshot_files(&full);
    let (env, id) = store_with_target(&full, 61);
    let err = json_err(&env, &["push"], 2);
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("not a baton store"), "{err}");
    assert!(message.contains("notes.txt"), "{err}");
    assert!(
        err["hint"]
            .as_str()
            .unwrap()
            .contains("empty or new directory"),
        "{err}"
    );
    assert_eq!(
        snapshot_files(&full),
        before,
        "nothing written beside the files"
    );
    assert_eq!(fs::read_dir(&full).unwrap().count(), 2);

    // An existing empty directory is fine, and so is pushing to it again.
    let empty = remote_env.path().join("empty");
    fs::create_dir(&empty).unwrap();
    env.ok(&["target", "add", "e", s(&empty)]);
    env.ok(&["push", "e"]);
    assert_eq!(disk_current(&empty).as_deref(), Some(id.as_str()));
    env.ok(&["push", "e"]);

    // clone never writes into a non-empty directory either.
    let dest = Env::new();
    fs::write(dest.path().join("keep.txt"), b"keep\n").unwrap();
    let target = dest.path().join("dest");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("keep.txt"), b"keep\n").unwrap();
    let out = dest.run(&["clone", s(&empty), s(&target)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        fs::read_dir(&target).unwrap().count(),
        1,
        "nothing written into the directory"
    );
}

// ---------------------------------------------------------------------------------------
// Hub audit and repair (issue 12)
// ---------------------------------------------------------------------------------------

/// `log --audit` entries of the store at `store`, read by a fresh env.
pub(crate) fn store_audit(store: &Path, extra: &[&str]) -> Vec<Value> {
    let env = Env::new();
    let mut args = vec!["--store", s(store), "log", "--audit"];
    args.extend_from_slice(extra);
    json_ok(&env, &args)["entries"].as_array().unwrap().clone()
}

pub(crate) fn pushes(entries: &[Value]) -> Vec<(String, String, String, String)> {
    entries
        .iter()
        .filter(|e| e["action"] == "push" && e["ref"] == "current")
        .map(|e| {
            (
                e["old"].as_str().unwrap_or("none").to_string(),
                e["new"].as_str().unwrap().to_string(),
                e["user"].as_str().unwrap().to_string(),
                e["from"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

pub(crate) fn hostname_of(entry: &Value) -> String {
    entry["host"].as_str().unwrap_or("").to_string()
}

#[test]
fn a_push_that_loses_the_race_leaves_no_move_in_the_hub_audit() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 42);
    json_ok(&a, &["push"]);
    for round in 0..2u64 {
        let b = clone_env(&remote);
        let c = clone_env(&remote);
        let b_id = save_change(&b, "b.bin", &random_bytes(3000 + round, 2 << 20));
        let c_id = save_change(&c, "c.bin", &random_bytes(4000 + round, 2 << 20));
        let spawn = |env: &Env| {
            env.cmd()
                .args(["--json", "push"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (pb, pc) = (spawn(&b), spawn(&c));
        let (ob, oc) = (
            pb.wait_with_output().unwrap(),
            pc.wait_with_output().unwrap(),
        );
        let (winner, loser) = match (ob.status.code(), oc.status.code()) {
            (Some(0), Some(5)) => (b_id, c_id),
            (Some(5), Some(0)) => (c_id, b_id),
            other => panic!("exit codes {other:?}: {} {}", text(&ob), text(&oc)),
        };
        let moves = pushes(&store_audit(&remote, &[]));
        assert_eq!(moves.len() as u64, round + 2, "{moves:#?}");
        assert_eq!(moves.last().unwrap().1, winner);
        assert!(moves.iter().all(|m| m.1 != loser), "{moves:#?}");
        // Every move starts where the one before it ended.
        for pair in moves.windows(2) {
            assert_eq!(pair[0].1, pair[1].0, "{moves:#?}");
        }
    }
}

/// Every loose object file of a store, sorted.
fn loose_files(store: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for fanout in fs::read_dir(store.join("objects")).unwrap() {
        let fanout = fanout.unwrap().path();
        if fanout.is_dir() {
            for f in fs::read_dir(&fanout).unwrap() {
                out.push(f.unwrap().path());
            }
        }
    }
    out.sort();
    out
}

/// `verify` of the env's store fails with exit 4 and a hint that names the repair.
fn assert_damaged(env: &Env, extra: &[&str]) -> Value {
    let mut args = extra.to_vec();
    args.push("verify");
    let err = json_err(env, &args, 4);
    let hint = err["hint"].as_str().unwrap_or("");
    assert!(hint.contains("baton pull --repair"), "{err}");
    err
}

#[test]
fn pull_repair_from_a_target_that_lacks_the_object_is_exit_4_and_changes_nothing() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 44);
    json_ok(&a, &["push"]);
    // A bundle the target never received, with one of its blobs lost here, and an
    // object the target has, lost too.
    let only_here = random_bytes(4400, 5000);
    save_change(&a, "only-here.bin", &only_here);
    // Every object loose, as saves stored them before they wrote packs.
    common::unpack_to_loose(&a.store());
    let id = blake3::hash(&only_here).to_hex().to_string();
    fs::remove_file(common::object_path(&a.store(), &id)).unwrap();
    let big = random_bytes(44, 300_000);
    fs::remove_file(common::object_path(
        &a.store(),
        blake3::hash(&big).to_hex().as_str(),
    ))
    .unwrap();
    let snap = snapshot_files(&a.store());
    let err = json_err(&a, &["pull", "--repair"], 4);
    let message = err["message"].as_str().unwrap();
    assert!(message.contains(&id), "{err}");
    assert!(message.contains("lacks 1 object"), "{err}");
    assert_eq!(snapshot_files(&a.store()), snap, "the store is unchanged");
}

#[test]
fn pull_repair_refetches_ciphertext_into_an_encrypted_store() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let a = Env::new();
    let (_, public) = common::age_keygen(&a, "key.txt");
    a.ok(&["init", "--encrypt", "--recipient", &public]);
    rich_tree(&a, "work", 45);
    a.save("work", &["--identity", "key.txt", "--summary", "base"]);
    a.ok(&["--identity", "key.txt", "target", "add", "r", s(&remote)]);
    a.ok(&["--identity", "key.txt", "push"]);
    let key = ["--identity", "key.txt"];
    // Every object loose, as saves stored them before they wrote packs.
    common::unpack_to_loose(&a.store());
    // Lose every loose object but one, and damage that one.
    let files = loose_files(&a.store());
    assert!(files.len() > 3, "{files:?}");
    let (last, rest) = files.split_last().unwrap();
    let originals: Vec<Vec<u8>> = files.iter().map(|f| fs::read(f).unwrap()).collect();
    for f in rest {
        fs::remove_file(f).unwrap();
    }
    let mut bytes = fs::read(last).unwrap();
    let end = bytes.len() - 1;
    bytes[end] ^= 0x5a;
    fs::write(last, &bytes).unwrap();
    assert_damaged(&a, &key);
    let doc = json_ok(&a, &["--identity", "key.txt", "pull", "--repair"]);
    assert_eq!(
        doc["repair"]["objects_received"],
        files.len() as u64,
        "{doc}"
    );
    // The same ciphertext as before, byte for byte.
    for (f, original) in files.iter().zip(&originals) {
        assert_eq!(&fs::read(f).unwrap(), original, "{}", f.display());
    }
    let out = a.ok(&["--identity", "key.txt", "verify"]);
    assert!(out.contains(": ok"), "{out}");
}

#[test]
fn pull_repair_removes_a_damaged_loose_file_that_shadows_a_healthy_packed_copy() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 46);
    json_ok(&a, &["push"]);
    let b = clone_env(&remote);
    let before = checkout(&b, "current");
    // The clone holds everything packed; a damaged loose file in front of one object.
    let big = random_bytes(46, 300_000);
    let path = common::object_path(&b.store(), blake3::hash(&big).to_hex().as_str());
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::set_permissions(path.parent().unwrap(), fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(&path, b"not an object").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    // And in front of the bundle itself, which the repair walk must read (from the pack).
    let bundle = disk_current(&b.store()).unwrap();
    let bundle_path = common::object_path(&b.store(), &bundle);
    fs::create_dir_all(bundle_path.parent().unwrap()).unwrap();
    fs::set_permissions(
        bundle_path.parent().unwrap(),
        fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    fs::write(&bundle_path, b"not a bundle").unwrap();
    fs::set_permissions(&bundle_path, fs::Permissions::from_mode(0o600)).unwrap();
    assert_damaged(&b, &[]);
    // An empty target suffices: nothing needs fetching.
    let empty = holder.path().join("empty");
    holder.ok(&["--store", s(&empty), "init"]);
    b.ok(&["target", "add", "empty", s(&empty)]);
    let doc = json_ok(&b, &["pull", "--repair", "empty"]);
    assert_eq!(doc["repair"]["shadowed_removed"], 2, "{doc}");
    assert_eq!(doc["repair"]["objects_received"], 0, "{doc}");
    assert!(!path.exists() && !bundle_path.exists());
    verify(&b, &b.store());
    assert_eq!(checkout(&b, "current"), before);
}
