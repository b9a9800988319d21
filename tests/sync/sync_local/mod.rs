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

/// `baton --json push` in `b` and in `c` at once; both outputs.
fn race_pushes(b: &Env, c: &Env) -> (std::process::Output, std::process::Output) {
    let spawn = |env: &Env| {
        env.cmd()
            .args(["--json", "push"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (pb, pc) = (spawn(b), spawn(c));
    (
        pb.wait_with_output().unwrap(),
        pc.wait_with_output().unwrap(),
    )
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

mod hostile;
mod hub_compact;
mod hub_repair;
mod interrupted_clone;
mod merge;
mod push_pull;

// What the shared scenarios (tests/sync/scenarios.rs) borrow from the sections.
pub(crate) use hostile::{Hostile, make_hostile};
pub(crate) use hub_repair::{hostname_of, pushes, store_audit};
pub(crate) use merge::save_handoff;
