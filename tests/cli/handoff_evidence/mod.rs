//! Workspace evidence and comparison against real git repositories built in temporary
//! directories: upstreams with real ahead/behind, staged, unstaged, untracked and
//! conflicted files, submodules, unborn and detached repositories, non-git directories, a
//! missing git, and every HEAD relation — and proof that capture never writes.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::git;

use baton::handoff::compare::{self, Comparison, HeadRelation};
use baton::handoff::evidence::{self, Change, Evidence, GitEvidence};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Like [`git`] but tolerating failure (for a merge that conflicts).
fn git_may_fail(dir: &Path, args: &[&str]) -> bool {
    common::git_cmd(dir, args)
        .output()
        .expect("run git")
        .status
        .success()
}

fn init(dir: &Path) -> PathBuf {
    fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q"]);
    dir.to_path_buf()
}

/// Write `file` with `content`, stage it, commit with `message`; return the commit id.
fn commit(dir: &Path, file: &str, content: &str, message: &str) -> String {
    let path = dir.join(file);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(&path, content).expect("write");
    git(dir, &["add", "--", file]);
    git(dir, &["commit", "-q", "-m", message]);
    head(dir)
}

fn head(dir: &Path) -> String {
    git(dir, &["rev-parse", "HEAD"])
}

fn clone(from: &Path, to: &Path) -> PathBuf {
    git(
        from.parent().expect("parent"),
        &[
            "clone",
            "-q",
            &from.to_string_lossy(),
            &to.to_string_lossy(),
        ],
    );
    to.to_path_buf()
}

fn canonical(path: &Path) -> String {
    fs::canonicalize(path)
        .expect("canonicalize")
        .to_string_lossy()
        .into_owned()
}

fn git_of(e: &Evidence) -> &GitEvidence {
    e.git
        .as_ref()
        .unwrap_or_else(|| panic!("no git evidence: {:?}", e.partial))
}

fn change(path: &str, status: &str) -> Change {
    Change {
        path: path.to_string(),
        status: status.to_string(),
    }
}

fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Every entry under `dir` (including `.git`): kind, content and modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Option<Vec<u8>>, SystemTime, u64)> {
    let mut map = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = fs::symlink_metadata(&path).expect("metadata");
        let mtime = meta.modified().expect("mtime");
        let content = if meta.is_file() {
            Some(fs::read(&path).expect("read"))
        } else if meta.file_type().is_symlink() {
            Some(
                fs::read_link(&path)
                    .expect("readlink")
                    .to_string_lossy()
                    .into_owned()
                    .into_bytes(),
            )
        } else {
            None
        };
        if meta.is_dir() {
            for entry in fs::read_dir(&path).expect("read_dir") {
                stack.push(entry.expect("entry").path());
            }
        }
        map.insert(path, (content, mtime, meta.len()));
    }
    map
}

fn assert_same_snapshot(
    before: &BTreeMap<PathBuf, (Option<Vec<u8>>, SystemTime, u64)>,
    after: &BTreeMap<PathBuf, (Option<Vec<u8>>, SystemTime, u64)>,
) {
    let before_keys: Vec<_> = before.keys().collect();
    let after_keys: Vec<_> = after.keys().collect();
    assert_eq!(before_keys, after_keys, "entries were created or removed");
    for (path, b) in before {
        assert!(after[path] == *b, "{} changed", path.display());
    }
}

/// Set a file's modification time into the past without changing its content, so that
/// git would like to refresh the index entry (and write the index) on the next status.
fn age(path: &Path) {
    let file = fs::File::options()
        .write(true)
        .open(path)
        .expect("open for mtime");
    file.set_modified(SystemTime::now() - Duration::from_secs(86_400 * 400))
        .expect("set mtime");
}

/// A bare origin, a seed clone that pushed `first`, and a place for more clones.
struct World {
    dir: tempfile::TempDir,
    origin: PathBuf,
    seed: PathBuf,
    first: String,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let origin = dir.path().join("origin.git");
        git(dir.path(), &["init", "-q", "--bare", "origin.git"]);
        let seed = init(&dir.path().join("seed"));
        git(
            &seed,
            &["remote", "add", "origin", &origin.to_string_lossy()],
        );
        commit(&seed, "a.txt", "alpha\n", "first");
        fs::write(seed.join("b.txt"), "bravo\n").expect("write");
        fs::write(seed.join("c.txt"), "charlie\n").expect("write");
        git(&seed, &["add", "b.txt", "c.txt"]);
        git(&seed, &["commit", "-q", "-m", "second"]);
        git(&seed, &["push", "-q", "-u", "origin", "main"]);
        let first = git(&seed, &["rev-parse", "HEAD~1"]);
        World {
            dir,
            origin,
            seed,
            first,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn clone(&self, name: &str) -> PathBuf {
        clone(&self.origin, &self.path(name))
    }
}

mod capture;
mod comparison;
mod inprocess;
mod offline;
