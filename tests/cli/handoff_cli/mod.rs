//! Handoffs through the real binary: `save --brief` against real git repositories
//! (staged, unstaged, untracked and conflicted files; a workspace that must not change),
//! a save/push/clone/resume round trip across two stores with every HEAD relation,
//! secrets that must never reach the store, invalid briefings, kickoff budget snapshots,
//! transcript search pages, and `import-handoff` of every fixture format.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::SystemTime;

use baton::handoff::secrets::KINDS;
use common::{Env, Via, git, git_cmd, json_ok, snapshot_files};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Helpers: git
// ---------------------------------------------------------------------------------------

/// Run git that is expected to fail (a merge that conflicts).
fn git_fails(dir: &Path, args: &[&str]) {
    let out = git_cmd(dir, args).output().expect("run git");
    assert!(
        !out.status.success(),
        "git {args:?} in {} should have failed",
        dir.display()
    );
}

fn git_init(dir: &Path) -> PathBuf {
    fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q"]);
    dir.to_path_buf()
}

/// Write `file`, stage it, commit; return the new HEAD.
fn commit(dir: &Path, file: &str, content: &str, message: &str) -> String {
    let path = dir.join(file);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(&path, content).expect("write");
    git(dir, &["add", "--", file]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

fn git_clone(from: &Path, to: &Path) -> PathBuf {
    git(
        from.parent().expect("parent"),
        &["clone", "-q", &s(from), &s(to)],
    );
    to.to_path_buf()
}

fn s(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn canonical(path: &Path) -> String {
    s(&fs::canonicalize(path).expect("canonicalize"))
}

// ---------------------------------------------------------------------------------------
// Helpers: baton
// ---------------------------------------------------------------------------------------

/// Run baton with `dir` as the working directory.
fn baton_in(env: &Env, dir: &Path, args: &[&str]) -> Output {
    env.cmd()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run baton")
}

/// Run baton in `dir` with `input` on stdin.
fn baton_stdin(env: &Env, dir: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = env
        .cmd()
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn baton");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("wait for baton")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Require success; returns stdout.
fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status.code(),
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// The one JSON document on stdout.
fn doc(out: &Output) -> Value {
    serde_json::from_str(stdout(out).trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {:?} stderr {:?}",
            stdout(out),
            stderr(out)
        )
    })
}

/// Run with --json in `dir`, require success, return the document.
fn json_in(env: &Env, dir: &Path, args: &[&str]) -> Value {
    common::via::InDir(dir).json_ok(env, args)
}

/// `baton cat REV:PATH` as text.
fn cat(env: &Env, spec: &str) -> String {
    ok(baton_in(env, env.path(), &["cat", spec]), spec)
}

/// `baton cat REV:PATH` as bytes.
fn cat_bytes(env: &Env, spec: &str) -> Vec<u8> {
    let out = baton_in(env, env.path(), &["cat", spec]);
    assert!(out.status.success(), "cat {spec}: {}", stderr(&out));
    out.stdout
}

/// Paths of the files of a bundle (`show --json` entries that are files).
fn bundle_files(env: &Env, rev: &str) -> BTreeMap<String, Value> {
    files_of(&json_ok(env, &["show", rev]))
}

/// The file entries of a `show --json` document by path.
fn files_of(show: &Value) -> BTreeMap<String, Value> {
    show["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["kind"] == "file")
        .map(|e| (e["path"].as_str().expect("path").to_string(), e.clone()))
        .collect()
}

/// Every entry under `root`: kind, bytes, mode and modification time (directories too,
/// so a file created and removed again still shows as a changed directory mtime).
type DirState = BTreeMap<PathBuf, (char, Vec<u8>, u32, SystemTime)>;

fn dir_state(root: &Path) -> DirState {
    let mut map = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = fs::symlink_metadata(&path).expect("metadata");
        let (kind, bytes) = if meta.is_dir() {
            for entry in fs::read_dir(&path).expect("read_dir") {
                stack.push(entry.expect("entry").path());
            }
            ('d', Vec::new())
        } else if meta.file_type().is_symlink() {
            (
                'l',
                fs::read_link(&path)
                    .expect("readlink")
                    .into_os_string()
                    .into_encoded_bytes(),
            )
        } else {
            ('f', fs::read(&path).expect("read"))
        };
        let mode = meta.permissions().mode();
        map.insert(
            path.strip_prefix(root).expect("prefix").to_path_buf(),
            (kind, bytes, mode, meta.modified().expect("mtime")),
        );
    }
    map
}

fn assert_same_dir_state(before: &DirState, after: &DirState, what: &str) {
    let b: Vec<_> = before.keys().collect();
    let a: Vec<_> = after.keys().collect();
    assert_eq!(b, a, "{what}: entries were created or removed");
    for (path, state) in before {
        assert!(after[path] == *state, "{what}: {} changed", path.display());
    }
}

// ---------------------------------------------------------------------------------------
// Helpers: store contents
// ---------------------------------------------------------------------------------------

fn be64(bytes: &[u8]) -> usize {
    u64::from_be_bytes(bytes.try_into().expect("8 bytes")) as usize
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The index of a pack: (object id, offset, length) per entry.
fn pack_index(pack: &[u8]) -> Vec<(String, usize, usize)> {
    let len = pack.len();
    assert!(len >= 48, "pack too short");
    assert!(pack.ends_with(b"baton-pack-end\n\0"), "not a pack");
    let count = be64(&pack[len - 32..len - 24]);
    let index_offset = be64(&pack[len - 24..len - 16]);
    (0..count)
        .map(|i| {
            let e = &pack[index_offset + 48 * i..index_offset + 48 * (i + 1)];
            (hex(&e[..32]), be64(&e[32..40]), be64(&e[40..48]))
        })
        .collect()
}

/// Every object of a store, decompressed: loose files under `objects/` and every object
/// of every pack under `packs/`. Returns (where, content).
fn all_objects(store: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (rel, bytes) in snapshot_files(store) {
        let rel_s = s(&rel);
        if bytes == b"<dir>"
            && fs::symlink_metadata(store.join(&rel))
                .expect("meta")
                .is_dir()
        {
            continue;
        }
        let name = rel.file_name().map(|n| s(Path::new(n))).unwrap_or_default();
        if name.starts_with(".tmp-") {
            continue;
        }
        if rel_s.starts_with("objects/") {
            let content = zstd::decode_all(&bytes[..])
                .unwrap_or_else(|e| panic!("{rel_s} is not a zstd frame: {e}"));
            out.push((rel_s, content));
        } else if rel_s.starts_with("packs/") && rel_s.ends_with(".pack") {
            for (id, offset, length) in pack_index(&bytes) {
                let content = zstd::decode_all(&bytes[offset..offset + length])
                    .unwrap_or_else(|e| panic!("{rel_s} object {id}: {e}"));
                out.push((format!("{rel_s}#{id}"), content));
            }
        }
    }
    out
}

/// Every non-object file of a store (log, refs, config...) as it is on disk.
fn plain_files(store: &Path) -> Vec<(String, Vec<u8>)> {
    snapshot_files(store)
        .into_iter()
        .filter(|(rel, _)| {
            let r = s(rel);
            !r.starts_with("objects/") && !r.starts_with("packs/") && store.join(rel).is_file()
        })
        .map(|(rel, bytes)| (s(&rel), bytes))
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Flip a byte inside object `id` of a store, loose or packed.
fn corrupt_object(store: &Path, id: &str) {
    let loose = common::object_path(store, id);
    if loose.is_file() {
        let mut bytes = fs::read(&loose).expect("read object");
        let at = bytes.len() / 2;
        bytes[at] ^= 0x5a;
        fs::write(&loose, bytes).expect("write object");
        return;
    }
    for pack in common::pack_files(store) {
        let mut bytes = fs::read(&pack).expect("read pack");
        if let Some((_, offset, length)) = pack_index(&bytes).into_iter().find(|(i, _, _)| i == id)
        {
            bytes[offset + length / 2] ^= 0x5a;
            fs::write(&pack, bytes).expect("write pack");
            return;
        }
    }
    panic!("object {id} is not in {}", store.display());
}

// ---------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------

const SKELETON_LINES: [&str; 4] = [
    "# Handoff",
    "## Objective",
    "## Current State",
    "## Next Steps",
];

/// A chat answer wrapping a valid briefing: preamble, a ```markdown fence, postamble.
fn chat_briefing(objective: &str) -> String {
    format!(
        "Sure! Here is the handoff for the next agent:\n\n```markdown\n# Handoff\n\n\
         ## Objective\n\n{objective}\n\n## Current State\n\nThe parser handles merges; \
         the conflict in conflict.txt is unresolved.\n\n## Next Steps\n\n1. Resolve \
         conflict.txt.\n2. Run the tests.\n```\n\nLet me know if you need anything else!\n"
    )
}

/// The normalized document inside [`chat_briefing`].
fn normalized_briefing(objective: &str) -> String {
    format!(
        "# Handoff\n\n## Objective\n\n{objective}\n\n## Current State\n\nThe parser handles \
         merges; the conflict in conflict.txt is unresolved.\n\n## Next Steps\n\n1. Resolve \
         conflict.txt.\n2. Run the tests.\n"
    )
}

const VALID_BRIEF: &str = "# Handoff\n\n## Objective\n\nShip the thing. Then rest.\n\n\
    ## Current State\n\nHalf done.\n\n## Next Steps\n\n1. Finish it.\n";

mod briefings;
mod budget;
mod deliver_launch;
mod deliver_tmux;
mod escapes;
mod import;
mod kickoff_papercuts;
mod kickoff_promises;
mod lossless;
mod mcp;
mod mcp_paths;
mod multi_repo;
mod patch_redacted;
mod pii;
mod real_sessions;
mod real_sessions_codex_gemini;
mod round_trip;
mod save_brief;
mod search;
mod secrets;
mod secrets_coverage;
mod skill;
mod transcript_limits;
mod transcript_stored;
mod transcripts;
mod tree_races;

/// The official Python MCP SDK's client, which the MCP tests drive `baton mcp` with, is
/// installed (`.ci/run` installs it): else the test fails, never passes untested.
fn require_mcp_sdk() {
    let has_sdk = std::process::Command::new("python3")
        .args(["-c", "import mcp.client.stdio"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "needs python3 with the MCP SDK: pip install mcp==2.3.0 (.ci/run installs it)"
    );
}
