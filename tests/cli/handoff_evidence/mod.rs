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

// ---------------------------------------------------------------------------------------
// Capture
// ---------------------------------------------------------------------------------------

#[test]
fn captures_a_clone_with_upstream_changes_and_untracked_files() {
    let w = World::new();
    let work = w.clone("work");
    // Upstream moves on by one commit; the clone makes two of its own and fetches.
    commit(&w.seed, "upstream.txt", "up\n", "upstream change");
    git(&w.seed, &["push", "-q", "origin", "main"]);
    commit(&work, "l1.txt", "one\n", "local 1");
    let local2 = commit(&work, "l2.txt", "two\n", "local 2: with a longer subject");
    git(&work, &["fetch", "-q", "origin"]);
    git(
        &work,
        &[
            "remote",
            "add",
            "mirror",
            "https://user:hunter2@example.com/r.git",
        ],
    );

    // Staged: a modification and a rename into a path with a space; unstaged: a
    // modification and a deletion; untracked: awkward names, a binary, a symlink.
    fs::write(work.join("a.txt"), "alpha staged\n").expect("write");
    git(&work, &["add", "a.txt"]);
    fs::create_dir_all(work.join("dir")).expect("mkdir");
    git(&work, &["mv", "c.txt", "dir/c renamed.txt"]);
    fs::write(work.join("b.txt"), "bravo unstaged\n").expect("write");
    fs::remove_file(work.join("l1.txt")).expect("rm");
    let untracked: Vec<(&str, Vec<u8>)> = vec![
        ("space name.txt", b"spaces\n".to_vec()),
        ("new\nline.txt", b"newline\n".to_vec()),
        (
            "\u{fc}n\u{ef}code \u{2603}.txt",
            "snow \u{2603}\n".as_bytes().to_vec(),
        ),
        (
            "nested/deep/blob.bin",
            (0u8..=255).cycle().take(70_000).collect(),
        ),
    ];
    for (name, bytes) in &untracked {
        let path = work.join(name);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, bytes).expect("write");
    }
    std::os::unix::fs::symlink("a.txt", work.join("link")).expect("symlink");

    let cap = evidence::capture(&work);
    let e = &cap.evidence;
    assert_eq!(e.version, 1);
    assert_eq!(e.workspace, canonical(&work));
    assert!(e.partial.is_empty(), "{:?}", e.partial);
    let g = git_of(e);
    assert_eq!(g.root, canonical(&work));
    assert_eq!(g.branch.as_deref(), Some("main"));
    assert_eq!(g.head.as_deref(), Some(local2.as_str()));
    assert_eq!(g.upstream.as_deref(), Some("origin/main"));
    assert_eq!((g.ahead, g.behind), (Some(2), Some(1)));
    assert_eq!(g.root_commits, vec![w.first.clone()]);

    assert_eq!(g.remotes.len(), 2);
    assert_eq!(g.remotes[0].name, "origin");
    assert_eq!(g.remotes[0].url, w.origin.to_string_lossy());
    assert_eq!(g.remotes[1].name, "mirror");
    assert_eq!(
        g.remotes[1].url,
        "https://[REDACTED:url_credentials]@example.com/r.git"
    );

    let subjects: Vec<&str> = g
        .recent_commits
        .iter()
        .map(|c| c.subject.as_str())
        .collect();
    assert_eq!(
        subjects,
        [
            "local 2: with a longer subject",
            "local 1",
            "second",
            "first"
        ]
    );
    let newest = &g.recent_commits[0];
    assert_eq!(newest.id, local2);
    assert_eq!(newest.author, "Test Author <test@example.com>");
    assert!(
        newest.time.len() >= 20 && newest.time.as_bytes()[10] == b'T',
        "not ISO 8601: {}",
        newest.time
    );

    assert_eq!(
        g.staged,
        vec![
            change("a.txt", "modified"),
            change("dir/c renamed.txt", "renamed from c.txt"),
        ]
    );
    assert_eq!(
        g.unstaged,
        vec![change("b.txt", "modified"), change("l1.txt", "deleted")]
    );
    assert!(g.conflicted.is_empty());

    let mut expected: Vec<(String, u64, String)> = untracked
        .iter()
        .map(|(name, bytes)| (name.to_string(), bytes.len() as u64, blake3_hex(bytes)))
        .collect();
    expected.push(("link".to_string(), 5, blake3_hex(b"a.txt")));
    expected.sort();
    let mut got: Vec<(String, u64, String)> = g
        .untracked
        .iter()
        .map(|u| (u.path.clone(), u.size, u.id.clone().expect("hashed")))
        .collect();
    got.sort();
    assert_eq!(got, expected);

    let staged = String::from_utf8_lossy(&cap.staged_patch);
    let unstaged = String::from_utf8_lossy(&cap.unstaged_patch);
    assert!(staged.contains("diff --git a/a.txt b/a.txt"), "{staged}");
    assert!(staged.contains("+alpha staged"), "{staged}");
    assert!(staged.contains("b/dir/c renamed.txt"), "{staged}");
    assert!(!staged.contains("bravo unstaged"), "{staged}");
    assert!(unstaged.contains("+bravo unstaged"), "{unstaged}");
    assert!(unstaged.contains("deleted file mode"), "{unstaged}");
    assert!(!unstaged.contains("alpha staged"), "{unstaged}");
    assert_eq!(g.staged_patch_bytes, cap.staged_patch.len() as u64);
    assert_eq!(g.unstaged_patch_bytes, cap.unstaged_patch.len() as u64);

    // The evidence survives a JSON round trip.
    let json = serde_json::to_string(e).expect("serialize");
    let back: Evidence = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(&back, e);
}

#[test]
fn staged_patch_applies_to_head() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = init(&dir.path().join("r"));
    commit(&repo, "text.txt", "one\ntwo\n", "base");
    fs::write(repo.join("text.txt"), "one\n2\nthree\n").expect("write");
    fs::write(repo.join("bin.dat"), [0u8, 1, 2, 255, 0, 7]).expect("write");
    git(&repo, &["add", "-A"]);
    let cap = evidence::capture(&repo);
    assert!(!cap.staged_patch.is_empty());
    // Apply the staged patch to a fresh clone at HEAD: it reproduces the index.
    let other = clone(&repo, &dir.path().join("other"));
    let patch = dir.path().join("staged.patch");
    fs::write(&patch, &cap.staged_patch).expect("write patch");
    git(&other, &["apply", "--index", &patch.to_string_lossy()]);
    assert_eq!(
        fs::read(other.join("bin.dat")).expect("read"),
        [0u8, 1, 2, 255, 0, 7]
    );
    assert_eq!(
        fs::read_to_string(other.join("text.txt")).expect("read"),
        "one\n2\nthree\n"
    );
}

#[test]
fn capture_and_compare_are_read_only() {
    let w = World::new();
    let work = w.clone("work");
    commit(&work, "l1.txt", "one\n", "local 1");
    fs::write(work.join("a.txt"), "staged\n").expect("write");
    git(&work, &["add", "a.txt"]);
    fs::write(work.join("b.txt"), "unstaged\n").expect("write");
    fs::write(work.join("untracked.txt"), "u\n").expect("write");
    // Stat-dirty but content-clean: `git status` or `git diff` would refresh and rewrite
    // the index for this file.
    age(&work.join("c.txt"));
    let index = work.join(".git/index");
    let index_before = (
        fs::read(&index).expect("index"),
        fs::metadata(&index)
            .expect("meta")
            .modified()
            .expect("mtime"),
    );
    let before = snapshot(&work);

    let cap = evidence::capture(&work);
    assert!(
        cap.evidence.partial.is_empty(),
        "{:?}",
        cap.evidence.partial
    );
    let again = evidence::capture(&work);
    assert_eq!(cap, again);
    let cmp = compare::compare(&cap.evidence, &work);
    assert_eq!(cmp.head, HeadRelation::Same);

    let index_after = (
        fs::read(&index).expect("index"),
        fs::metadata(&index)
            .expect("meta")
            .modified()
            .expect("mtime"),
    );
    assert!(index_before == index_after, ".git/index changed");
    assert_same_snapshot(&before, &snapshot(&work));

    // Control: an ordinary `git diff` does rewrite the index here, so the check above
    // would have noticed a capture that used it.
    git(&work, &["diff", "--quiet", "--", "c.txt"]);
    let index_control = fs::read(&index).expect("index");
    assert_ne!(
        index_before.0, index_control,
        "control: git diff left the index alone"
    );
}

#[test]
fn conflicted_files_from_a_real_merge() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = init(&dir.path().join("r"));
    commit(&repo, "f.txt", "base\n", "base");
    commit(&repo, "g.txt", "g\n", "g");
    git(&repo, &["checkout", "-q", "-b", "other"]);
    commit(&repo, "f.txt", "theirs\n", "theirs");
    git(&repo, &["rm", "-q", "g.txt"]);
    git(&repo, &["commit", "-q", "-m", "drop g"]);
    git(&repo, &["checkout", "-q", "main"]);
    commit(&repo, "f.txt", "ours\n", "ours");
    commit(&repo, "g.txt", "g changed\n", "change g");
    commit(&repo, "h.txt", "clean\n", "h");
    assert!(
        !git_may_fail(&repo, &["merge", "-q", "other"]),
        "merge should conflict"
    );

    let cap = evidence::capture(&repo);
    let g = git_of(&cap.evidence);
    let mut conflicted = g.conflicted.clone();
    conflicted.sort();
    assert_eq!(conflicted, ["f.txt", "g.txt"]);
    assert!(
        !g.staged
            .iter()
            .chain(&g.unstaged)
            .any(|c| c.path == "f.txt"),
        "{g:?}"
    );
    assert!(g.has_uncommitted());
}

#[test]
fn unborn_repository() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = init(&dir.path().join("r"));
    fs::write(repo.join("new.txt"), "new\n").expect("write");
    git(&repo, &["add", "new.txt"]);
    fs::write(repo.join("loose.txt"), "loose\n").expect("write");

    let cap = evidence::capture(&repo);
    let e = &cap.evidence;
    let g = git_of(e);
    assert_eq!(g.head, None);
    assert_eq!(g.branch.as_deref(), Some("main"));
    assert!(g.root_commits.is_empty() && g.recent_commits.is_empty());
    assert!(g.remotes.is_empty());
    assert_eq!(g.staged, vec![change("new.txt", "added")]);
    assert_eq!(g.untracked.len(), 1);
    assert_eq!(g.untracked[0].path, "loose.txt");
    assert!(
        e.partial.contains(&"no commits yet".to_string()),
        "{:?}",
        e.partial
    );
    assert!(
        e.partial.contains(&"no upstream".to_string()),
        "{:?}",
        e.partial
    );
    let staged = String::from_utf8_lossy(&cap.staged_patch);
    assert!(staged.contains("new file mode 100644"), "{staged}");
    assert!(staged.contains("+new"), "{staged}");
}

#[test]
fn detached_head_and_no_upstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = init(&dir.path().join("r"));
    let one = commit(&repo, "f.txt", "1\n", "one");
    commit(&repo, "f.txt", "2\n", "two");

    let attached = evidence::capture(&repo).evidence;
    assert_eq!(attached.partial, ["no upstream"]);
    assert_eq!(git_of(&attached).upstream, None);
    assert_eq!(git_of(&attached).ahead, None);

    git(&repo, &["checkout", "-q", "--detach", "HEAD~1"]);
    let e = evidence::capture(&repo).evidence;
    let g = git_of(&e);
    assert_eq!(g.branch, None);
    assert_eq!(g.head.as_deref(), Some(one.as_str()));
    assert_eq!(g.upstream, None);
    assert_eq!(g.recent_commits.len(), 1);
    assert_eq!(e.partial, ["detached HEAD"]);
}

#[test]
fn upstream_that_is_gone() {
    let w = World::new();
    let work = w.clone("work");
    git(&work, &["update-ref", "-d", "refs/remotes/origin/main"]);
    let e = evidence::capture(&work).evidence;
    let g = git_of(&e);
    assert_eq!(g.upstream.as_deref(), Some("origin/main"));
    assert_eq!((g.ahead, g.behind), (None, None));
    assert_eq!(e.partial, ["upstream origin/main is gone"]);
}

#[test]
fn capture_from_a_subdirectory_covers_the_whole_work_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = init(&dir.path().join("r"));
    commit(&repo, "top.txt", "t\n", "one");
    commit(&repo, "sub/inner.txt", "i\n", "two");
    fs::write(repo.join("top.txt"), "changed\n").expect("write");
    let e = evidence::capture(&repo.join("sub")).evidence;
    assert_eq!(e.workspace, canonical(&repo.join("sub")));
    let g = git_of(&e);
    assert_eq!(g.root, canonical(&repo));
    assert_eq!(g.unstaged, vec![change("top.txt", "modified")]);
}

#[test]
fn submodules_are_listed_as_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = init(&dir.path().join("lib"));
    commit(&lib, "lib.txt", "lib\n", "lib");
    let app = init(&dir.path().join("app"));
    commit(&app, "app.txt", "app\n", "app");
    git(
        &app,
        &[
            "submodule",
            "add",
            "-q",
            &lib.to_string_lossy(),
            "vendor/lib",
        ],
    );
    let staged = git_of(&evidence::capture(&app).evidence).staged.clone();
    assert_eq!(
        staged,
        vec![
            change(".gitmodules", "added"),
            change("vendor/lib", "added (submodule)"),
        ]
    );
    git(&app, &["commit", "-q", "-m", "add submodule"]);

    let sub = app.join("vendor/lib");
    commit(&sub, "more.txt", "more\n", "new in submodule");
    fs::write(sub.join("lib.txt"), "edited\n").expect("write");
    let cap = evidence::capture(&app);
    let g = git_of(&cap.evidence);
    assert_eq!(
        g.unstaged,
        vec![change(
            "vendor/lib",
            "modified (submodule: new commits, modified content)"
        )]
    );
    assert!(g.untracked.is_empty(), "{:?}", g.untracked);
    let patch = String::from_utf8_lossy(&cap.unstaged_patch);
    assert!(patch.contains("Subproject commit"), "{patch}");
}

#[test]
fn untracked_files_are_capped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = init(&dir.path().join("r"));
    commit(&repo, "f.txt", "f\n", "one");
    for i in 0..2_005 {
        fs::write(repo.join(format!("u{i:05}.txt")), i.to_string()).expect("write");
    }
    let e = evidence::capture(&repo).evidence;
    let g = git_of(&e);
    assert_eq!(g.untracked.len(), evidence::UNTRACKED_CAP);
    assert!(g.untracked.iter().all(|u| u.id.is_some()));
    assert!(
        e.partial
            .contains(&"untracked files capped at 2000 of 2005".to_string()),
        "{:?}",
        e.partial
    );
}

#[test]
fn nested_repository_is_an_untracked_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = init(&dir.path().join("r"));
    commit(&repo, "f.txt", "f\n", "one");
    let nested = init(&repo.join("nested"));
    commit(&nested, "n.txt", "n\n", "nested");
    let e = evidence::capture(&repo).evidence;
    let g = git_of(&e);
    assert_eq!(g.untracked.len(), 1);
    assert_eq!(g.untracked[0].path, "nested/");
    assert_eq!(g.untracked[0].id, None);
    assert_eq!(e.partial, ["no upstream"]);
}

#[test]
fn non_git_and_missing_directories_are_partial() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("file.txt"), "x").expect("write");
    let cap = evidence::capture(dir.path());
    assert_eq!(cap.evidence.git, None);
    assert_eq!(cap.evidence.partial, ["not a git repository"]);
    assert_eq!(cap.evidence.workspace, canonical(dir.path()));
    assert!(cap.staged_patch.is_empty() && cap.unstaged_patch.is_empty());

    let missing = evidence::capture(&dir.path().join("nope")).evidence;
    assert_eq!(missing.git, None);
    assert_eq!(missing.partial, ["workspace is not a directory"]);

    let bare = dir.path().join("bare.git");
    git(dir.path(), &["init", "-q", "--bare", "bare.git"]);
    let e = evidence::capture(&bare).evidence;
    assert_eq!(e.git, None);
    assert_eq!(e.partial.len(), 1);
    assert!(e.partial[0].contains("work tree"), "{:?}", e.partial);
}

#[test]
fn missing_git_is_partial_not_an_error() {
    assert!(evidence::git_available());
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = init(&dir.path().join("r"));
    commit(&repo, "f.txt", "f\n", "one");
    let empty = dir.path().join("empty-path");
    fs::create_dir(&empty).expect("mkdir");
    let no_git = empty.join("git");

    let cap = evidence::capture_with_git(&repo, &no_git);
    assert_eq!(cap.evidence.git, None);
    assert_eq!(cap.evidence.partial, ["git not found"]);

    let real = evidence::capture(&repo).evidence;
    let cmp = compare::compare_with_git(&real, &repo, &no_git);
    assert_eq!(cmp.head, HeadRelation::Unknown);
    assert_eq!(cmp.same_repository, None);
    assert_eq!(cmp.live_uncommitted, None);
    assert!(
        cmp.notes.iter().any(|n| n.contains("git not found")),
        "{:?}",
        cmp.notes
    );
}

// ---------------------------------------------------------------------------------------
// Compare
// ---------------------------------------------------------------------------------------

/// The world for comparisons: `captured` (HEAD = `third`, pushed, with a staged change)
/// is captured; `stale` was cloned before `third` existed.
struct CompareWorld {
    w: World,
    captured: PathBuf,
    stale: PathBuf,
    evidence: Evidence,
    third: String,
}

impl CompareWorld {
    fn new() -> Self {
        let w = World::new();
        let stale = w.clone("stale");
        let captured = w.clone("captured");
        let third = commit(&captured, "third.txt", "3\n", "third");
        git(&captured, &["push", "-q", "origin", "main"]);
        fs::write(captured.join("a.txt"), "work in progress\n").expect("write");
        git(&captured, &["add", "a.txt"]);
        let evidence = evidence::capture(&captured).evidence;
        assert_eq!(git_of(&evidence).head.as_deref(), Some(third.as_str()));
        CompareWorld {
            w,
            captured,
            stale,
            evidence,
            third,
        }
    }

    fn compare(&self, live: &Path) -> Comparison {
        let c = compare::compare(&self.evidence, live);
        // Every comparison serializes, with the relation in lowercase.
        let json = serde_json::to_value(&c).expect("serialize");
        assert!(
            json["head"]
                .as_str()
                .is_some_and(|h| h.chars().all(|c| c.is_ascii_lowercase()))
        );
        c
    }
}

#[test]
fn compare_same_checkout() {
    let cw = CompareWorld::new();
    let c = cw.compare(&cw.captured);
    assert_eq!(c.same_repository, Some(true));
    assert_eq!(
        c.matched_by,
        ["root commit", "remote origin url", "path", "captured HEAD"]
    );
    assert_eq!(c.head, HeadRelation::Same);
    assert_eq!((c.commits_ahead, c.commits_behind), (Some(0), Some(0)));
    assert_eq!(c.live_branch.as_deref(), Some("main"));
    assert_eq!(c.captured_branch.as_deref(), Some("main"));
    assert!(c.captured_uncommitted);
    assert_eq!(c.live_uncommitted, Some(true));
    assert!(
        c.notes
            .iter()
            .any(|n| n == "the captured workspace had uncommitted changes (1 staged)"),
        "{:?}",
        c.notes
    );
    assert_eq!(
        serde_json::to_value(&c).expect("json")["head"],
        serde_json::json!("same")
    );
}

#[test]
fn compare_ahead_on_another_branch() {
    let cw = CompareWorld::new();
    let live = cw.w.clone("ahead");
    git(&live, &["checkout", "-q", "-b", "feature"]);
    commit(&live, "x.txt", "x\n", "x");
    commit(&live, "y.txt", "y\n", "y");
    let c = cw.compare(&live);
    assert_eq!(c.same_repository, Some(true));
    assert_eq!(
        c.matched_by,
        ["root commit", "remote origin url", "captured HEAD"]
    );
    assert_eq!(c.head, HeadRelation::Ahead);
    assert_eq!((c.commits_ahead, c.commits_behind), (Some(2), Some(0)));
    assert_eq!(c.live_branch.as_deref(), Some("feature"));
    assert_eq!(c.live_uncommitted, Some(false));
    let notes = c.notes.join("\n");
    assert!(
        notes.contains("2 commits ahead of the captured HEAD"),
        "{notes}"
    );
    assert!(
        notes.contains("different checkout of the same repository"),
        "{notes}"
    );
    assert!(
        notes.contains(
            "the captured workspace was on branch main; this workspace is on branch feature"
        ),
        "{notes}"
    );
}

#[test]
fn compare_behind_on_a_detached_head() {
    let cw = CompareWorld::new();
    let live = cw.w.clone("behind");
    git(&live, &["checkout", "-q", "--detach", "HEAD~2"]);
    assert_eq!(head(&live), cw.w.first);
    let c = cw.compare(&live);
    assert_eq!(c.head, HeadRelation::Behind);
    assert_eq!((c.commits_ahead, c.commits_behind), (Some(0), Some(2)));
    assert_eq!(c.live_branch, None);
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("this workspace is on a detached HEAD")),
        "{:?}",
        c.notes
    );
}

#[test]
fn compare_diverged() {
    let cw = CompareWorld::new();
    let live = cw.w.clone("diverged");
    git(&live, &["reset", "-q", "--hard", "HEAD~1"]);
    commit(&live, "d1.txt", "d1\n", "d1");
    commit(&live, "d2.txt", "d2\n", "d2");
    fs::write(live.join("junk.txt"), "junk\n").expect("write");
    let c = cw.compare(&live);
    assert_eq!(c.head, HeadRelation::Diverged);
    assert_eq!((c.commits_ahead, c.commits_behind), (Some(2), Some(1)));
    assert_eq!(c.live_uncommitted, Some(true));
    assert!(
        c.notes
            .iter()
            .any(|n| n == "this workspace has uncommitted changes (1 untracked)"),
        "{:?}",
        c.notes
    );
}

#[test]
fn compare_missing_captured_head_says_fetch() {
    let mut cw = CompareWorld::new();
    // Evidence without the first-parent ids (as written before they were recorded)
    // cannot place the stale clone offline.
    if let Some(g) = cw.evidence.git.as_mut() {
        g.first_parents.clear();
    }
    let c = cw.compare(&cw.stale);
    assert_eq!(c.same_repository, Some(true));
    assert_eq!(c.matched_by, ["root commit", "remote origin url"]);
    assert_eq!(c.head, HeadRelation::Unknown);
    assert_eq!((c.commits_ahead, c.commits_behind), (None, None));
    let short = &cw.third[..12];
    assert!(
        c.notes.contains(&format!(
            "the captured HEAD {short} is not in this repository: fetch from origin"
        )),
        "{:?}",
        c.notes
    );
    // After the suggested fetch the relation is known: the stale clone is behind.
    git(&cw.stale, &["fetch", "-q", "origin"]);
    let c = cw.compare(&cw.stale);
    assert_eq!(c.head, HeadRelation::Behind);
    assert_eq!(c.commits_behind, Some(1));
}

#[test]
fn compare_unpushed_captured_head_mentions_it() {
    let cw = CompareWorld::new();
    let unpushed = commit(&cw.captured, "local.txt", "l\n", "never pushed");
    let e = evidence::capture(&cw.captured).evidence;
    assert_eq!(git_of(&e).ahead, Some(1));
    let c = compare::compare(&e, &cw.stale);
    assert_eq!(c.head, HeadRelation::Behind);
    assert_eq!(c.commits_behind, Some(2));
    let note = format!(
        "this workspace is 2 commits behind the captured HEAD {} (by the handoff's first-parent history; those commits are not here: fetch from origin (the captured branch had 1 commit not pushed to origin/main))",
        &unpushed[..12]
    );
    assert!(c.notes.contains(&note), "{:?}", c.notes);
}

#[test]
fn compare_shallow_clone_matches_by_remote_url() {
    let cw = CompareWorld::new();
    let url = format!("file://{}/", cw.w.origin.to_string_lossy());
    let shallow = cw.w.path("shallow");
    git(
        cw.w.dir.path(),
        &[
            "clone",
            "-q",
            "--depth",
            "1",
            &url,
            &shallow.to_string_lossy(),
        ],
    );
    let c = cw.compare(&shallow);
    assert_eq!(c.matched_by, ["remote origin url", "captured HEAD"]);
    assert_eq!(c.same_repository, Some(true));
    assert_eq!(c.head, HeadRelation::Same);
}

#[test]
fn compare_unrelated_repository() {
    let cw = CompareWorld::new();
    let other = init(&cw.w.path("unrelated"));
    commit(
        &other,
        "other.txt",
        "something else entirely\n",
        "unrelated root",
    );
    let c = cw.compare(&other);
    assert_eq!(c.same_repository, Some(false));
    assert!(c.matched_by.is_empty());
    assert_eq!(c.head, HeadRelation::Unrelated);
    assert_eq!((c.commits_ahead, c.commits_behind), (None, None));
    assert!(
        c.notes
            .iter()
            .any(|n| n.starts_with("this is not the captured repository")),
        "{:?}",
        c.notes
    );
}

#[test]
fn compare_non_git_and_unborn() {
    let cw = CompareWorld::new();
    let plain = cw.w.path("plain");
    fs::create_dir(&plain).expect("mkdir");
    let c = cw.compare(&plain);
    assert_eq!(c.same_repository, None);
    assert_eq!(c.head, HeadRelation::Unknown);
    assert_eq!(c.live_uncommitted, None);
    assert!(c.captured_uncommitted);
    assert!(
        c.notes.iter().any(|n| n.contains("not a git repository")),
        "{:?}",
        c.notes
    );

    // An unborn repository with no remotes: nothing to match by, HEAD not present.
    let unborn = init(&cw.w.path("unborn"));
    let c = cw.compare(&unborn);
    assert_eq!(c.same_repository, None);
    assert_eq!(c.head, HeadRelation::Unknown);
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("is not in this repository")),
        "{:?}",
        c.notes
    );

    // Captured from a non-git directory: nothing can be related.
    let e = evidence::capture(&plain).evidence;
    let c = compare::compare(&e, &cw.captured);
    assert_eq!(c.same_repository, None);
    assert_eq!(c.head, HeadRelation::Unknown);
    assert!(!c.captured_uncommitted);
}

#[test]
fn compare_refuses_forged_ids() {
    let cw = CompareWorld::new();
    let marker = cw.w.path("pwned");
    let mut forged = cw.evidence.clone();
    if let Some(g) = forged.git.as_mut() {
        g.head = Some(format!("--output={}", marker.to_string_lossy()));
    }
    let c = compare::compare(&forged, &cw.captured);
    assert_eq!(c.head, HeadRelation::Unknown);
    assert!(!marker.exists());
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("is not a valid commit id")),
        "{:?}",
        c.notes
    );
    // Still recognised as the same repository by root commit, remote and path.
    assert_eq!(c.same_repository, Some(true));
}

// ---------------------------------------------------------------------------------------
// Evidence a receiver can trust offline (issue 12)
// ---------------------------------------------------------------------------------------

/// `baton ARGS` run in `dir` with the environment's store; stdout, or a panic with the
/// whole output when the exit code is not `exit`.
fn baton_in(env: &common::Env, dir: &Path, args: &[&str], exit: i32) -> String {
    let out = env
        .cmd()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run baton");
    assert_eq!(
        out.status.code(),
        Some(exit),
        "baton {args:?} in {}: {}",
        dir.display(),
        common::text(&out)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// A store in a fresh environment, repository `a` with two commits and `b` cloned from
/// it; then three more commits in `a` that `b` never fetches. Returns (env, a, b, old
/// HEAD of b, new HEAD of a).
fn behind_world() -> (common::Env, PathBuf, PathBuf, String, String) {
    let env = common::Env::new();
    env.init();
    let a = init(&env.path().join("a"));
    commit(&a, "one.txt", "1\n", "one");
    let old = commit(&a, "two.txt", "2\n", "two");
    let b = clone(&a, &env.path().join("b"));
    commit(&a, "three.txt", "3\n", "three");
    commit(&a, "four.txt", "4\n", "four");
    let new = commit(&a, "five.txt", "5\n", "five");
    (env, a, b, old, new)
}

#[test]
fn offline_receiver_that_did_not_fetch_is_behind_by_n() {
    let (env, a, b, old, new) = behind_world();
    let e = evidence::capture(&a).evidence;
    let g = git_of(&e);
    assert_eq!(g.first_parents.first(), Some(&new));
    assert_eq!(g.first_parents.len(), 5);
    assert!(g.first_parents.contains(&old));

    // b lacks the captured HEAD's object, yet knows how far behind it is.
    assert!(!git_may_fail(
        &b,
        &["cat-file", "-e", &format!("{new}^{{commit}}")]
    ));
    let c = compare::compare(&e, &b);
    assert_eq!(c.head, HeadRelation::Behind, "{:?}", c.notes);
    assert_eq!((c.commits_ahead, c.commits_behind), (Some(0), Some(3)));
    assert_eq!(c.mismatch, None);
    assert!(
        c.notes.iter().any(|n| n.starts_with(&format!(
            "this workspace is 3 commits behind the captured HEAD {}",
            &new[..12]
        ))),
        "{:?}",
        c.notes
    );

    // The same through save and resume.
    baton_in(&env, &a, &["save", "--no-brief"], 0);
    let out = baton_in(&env, &b, &["resume"], 0);
    assert!(
        out.contains("- HEAD: behind (live is 0 ahead, 3 behind the captured HEAD)"),
        "{out}"
    );
    assert!(!out.contains("HEAD: unknown"), "{out}");

    // Ahead: b fetched, merged and added a commit of its own.
    git(&b, &["pull", "-q", "--ff-only"]);
    commit(&b, "six.txt", "6\n", "six");
    let c = compare::compare(&e, &b);
    assert_eq!(c.head, HeadRelation::Ahead);
    assert_eq!((c.commits_ahead, c.commits_behind), (Some(1), Some(0)));
}

#[test]
fn offline_receiver_with_its_own_commit_has_diverged() {
    let (_env, a, b, old, new) = behind_world();
    commit(&b, "mine.txt", "mine\n", "mine");
    let e = evidence::capture(&a).evidence;
    let c = compare::compare(&e, &b);
    assert_eq!(c.head, HeadRelation::Diverged, "{:?}", c.notes);
    assert_eq!((c.commits_ahead, c.commits_behind), (Some(1), Some(3)));
    assert!(
        c.notes.iter().any(|n| n.contains(&format!(
            "3 captured commits not here, 1 here not in the handoff, since {}",
            &old[..12]
        ))),
        "{:?}",
        c.notes
    );
    assert_eq!(c.mismatch, Some(compare::Mismatch::Diverged));
    let warning = c.warning.expect("a warning");
    assert!(
        warning.starts_with(&format!(
            "Warning: this workspace has diverged from the handoff's HEAD {}",
            &new[..12]
        )),
        "{warning}"
    );
    // Older evidence without the first parents still says "unknown" and to fetch.
    let mut old_evidence = e.clone();
    if let Some(g) = old_evidence.git.as_mut() {
        g.first_parents.clear();
    }
    let text = serde_json::to_string(&old_evidence).expect("json");
    assert!(
        !text.contains("first_parents"),
        "empty lists are not written"
    );
    let reread: Evidence = serde_json::from_str(&text).expect("old evidence reads");
    assert_eq!(compare::compare(&reread, &b).head, HeadRelation::Unknown);
}

/// Two branches that both change `f.txt` from `base`: `other` and `main`.
fn conflicting_branches(repo: &Path) -> (String, String) {
    commit(repo, "f.txt", "base\n", "base");
    git(repo, &["checkout", "-q", "-b", "other"]);
    let theirs = commit(repo, "f.txt", "theirs\n", "theirs");
    git(repo, &["checkout", "-q", "main"]);
    let ours = commit(repo, "f.txt", "ours\n", "ours");
    (ours, theirs)
}

#[test]
fn in_progress_merge_cherry_pick_and_rebase_are_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let op_of = |repo: &Path| {
        git_of(&evidence::capture(repo).evidence)
            .in_progress
            .clone()
    };

    let repo = init(&dir.path().join("merge"));
    let (_, theirs) = conflicting_branches(&repo);
    assert_eq!(op_of(&repo), None);
    assert!(
        !git_may_fail(&repo, &["merge", "-q", "other"]),
        "merge conflicts"
    );
    let op = op_of(&repo).expect("merge in progress");
    assert_eq!(
        (op.kind.as_str(), op.target.as_deref(), op.branch.as_deref()),
        ("merge", Some(theirs.as_str()), None)
    );

    let repo = init(&dir.path().join("pick"));
    let (_, theirs) = conflicting_branches(&repo);
    assert!(
        !git_may_fail(&repo, &["cherry-pick", "other"]),
        "pick conflicts"
    );
    let op = op_of(&repo).expect("cherry-pick in progress");
    assert_eq!(op.describe(), format!("cherry-pick of {}", &theirs[..12]));

    let repo = init(&dir.path().join("rebase"));
    let (ours, _) = conflicting_branches(&repo);
    git(&repo, &["checkout", "-q", "other"]);
    assert!(
        !git_may_fail(&repo, &["rebase", "main"]),
        "rebase conflicts"
    );
    let op = op_of(&repo).expect("rebase in progress");
    assert_eq!(
        (op.kind.as_str(), op.target.as_deref(), op.branch.as_deref()),
        ("rebase", Some(ours.as_str()), Some("other"))
    );

    // A linked worktree has its own state: the pick there, none in the main checkout.
    let repo = init(&dir.path().join("main-checkout"));
    let (_, theirs) = conflicting_branches(&repo);
    let linked = dir.path().join("linked");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            &linked.to_string_lossy(),
            "main",
        ],
    );
    assert!(
        !git_may_fail(&linked, &["cherry-pick", &theirs]),
        "pick conflicts"
    );
    assert_eq!(op_of(&repo), None);
    assert_eq!(
        op_of(&linked).map(|o| o.kind),
        Some("cherry-pick".to_string())
    );
}

#[test]
fn in_progress_rebase_is_in_context_and_kickoff() {
    let env = common::Env::new();
    env.init();
    let repo = init(&env.path().join("repo"));
    let (ours, _) = conflicting_branches(&repo);
    git(&repo, &["checkout", "-q", "other"]);
    assert!(
        !git_may_fail(&repo, &["rebase", "main"]),
        "rebase conflicts"
    );
    baton_in(&env, &repo, &["save", "--no-brief"], 0);
    let line = format!("rebase of other onto {}", &ours[..12]);
    let context = baton_in(&env, &repo, &["cat", "current:context.md"], 0);
    assert!(
        context.contains(&format!("- in progress: {line}\n")),
        "{context}"
    );
    let kickoff = baton_in(&env, &repo, &["resume"], 0);
    let header: String = kickoff
        .split("\n## ")
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(
        header.contains(&format!("\nIn progress: {line}\n")),
        "{kickoff}"
    );
    let doc = common::json_ok(&env, &["resume", "--workspace", &repo.to_string_lossy()]);
    assert_eq!(doc["workspace"]["in_progress"]["kind"], "rebase", "{doc}");
    assert_eq!(doc["workspace"]["in_progress"]["branch"], "other", "{doc}");
}

/// `a` with a staged change to `x.txt` and an unstaged one to `y.txt`, captured; `b` a
/// clone at the same HEAD with a clean tree.
fn changes_world(env: &common::Env) -> (PathBuf, PathBuf, Evidence) {
    let a = init(&env.path().join("a"));
    commit(&a, "x.txt", "x\n", "x");
    commit(&a, "y.txt", "y\n", "y");
    let b = clone(&a, &env.path().join("b"));
    fs::write(a.join("x.txt"), "x changed\n").expect("write");
    git(&a, &["add", "x.txt"]);
    fs::write(a.join("y.txt"), "y changed\n").expect("write");
    let e = evidence::capture(&a).evidence;
    let hashed: Vec<(&str, &str)> = git_of(&e)
        .patch_hashes
        .iter()
        .map(|h| (h.path.as_str(), h.patch.as_str()))
        .collect();
    assert_eq!(hashed, [("x.txt", "staged"), ("y.txt", "unstaged")]);
    (a, b, e)
}

#[test]
fn captured_changes_present_absent_or_partly_here() {
    use compare::Presence;
    let env = common::Env::new();
    let (_a, b, e) = changes_world(&env);
    let changes = |live: &Path| {
        compare::compare(&e, live)
            .captured_changes
            .expect("patch hashes compared")
    };

    // Clean tree: absent.
    let c = changes(&b);
    assert_eq!(c.presence, Presence::Absent);
    assert_eq!((c.files_present, c.files), (0, 2));
    assert_eq!(c.differing, ["x.txt", "y.txt"]);

    // One of the two files changed the same way: partly.
    fs::write(b.join("x.txt"), "x changed\n").expect("write");
    let c = changes(&b);
    assert_eq!(c.presence, Presence::Partly);
    assert_eq!((c.files_present, c.files), (1, 2));
    assert_eq!(c.differing, ["y.txt"]);

    // The same changes (unstaged here, staged there does not matter): present.
    fs::write(b.join("y.txt"), "y changed\n").expect("write");
    let c = changes(&b);
    assert_eq!(c.presence, Presence::Present);
    assert_eq!((c.files_present, c.files, c.differing.len()), (2, 2, 0));

    // A different change to y.txt: partly again, y.txt named.
    fs::write(b.join("y.txt"), "y changed otherwise\n").expect("write");
    assert_eq!(changes(&b).differing, ["y.txt"]);
}

#[test]
fn resume_says_whether_captured_changes_are_here() {
    let env = common::Env::new();
    env.init();
    let (a, b, _) = changes_world(&env);
    baton_in(&env, &a, &["save", "--no-brief"], 0);
    let out = baton_in(&env, &b, &["resume"], 0);
    assert!(
        out.contains("- uncommitted changes: the captured ones are absent here (0 of 2 files; not here or different: x.txt, y.txt)"),
        "{out}"
    );
    fs::write(b.join("x.txt"), "x changed\n").expect("write");
    let out = baton_in(&env, &b, &["resume"], 0);
    assert!(
        out.contains("- uncommitted changes: the captured ones are partly present here (1 of 2 files; not here or different: y.txt)"),
        "{out}"
    );
    assert!(!out.contains("captured yes, live yes"), "{out}");
    fs::write(b.join("y.txt"), "y changed\n").expect("write");
    let doc = common::json_ok(&env, &["resume", "--workspace", &b.to_string_lossy()]);
    let changes = &doc["workspace"]["captured_changes"];
    assert_eq!(changes["presence"], "present", "{doc}");
    assert_eq!(changes["files_present"], 2, "{doc}");
}

#[test]
fn unrelated_workspace_warns_and_require_same_repo_exits_5() {
    let env = common::Env::new();
    env.init();
    let a = init(&env.path().join("a"));
    commit(&a, "a.txt", "a\n", "a");
    baton_in(&env, &a, &["save", "--no-brief"], 0);
    let other = init(&env.path().join("other"));
    commit(&other, "o.txt", "something else\n", "other root");

    let out = baton_in(&env, &other, &["resume"], 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("# Handoff "), "{out}");
    assert!(
        lines[1].starts_with("Warning: this directory is not the handoff's repository ("),
        "{out}"
    );
    let doc = common::json_ok(&env, &["resume", "--workspace", &other.to_string_lossy()]);
    assert_eq!(doc["workspace"]["mismatch"], "unrelated", "{doc}");
    assert_eq!(doc["workspace"]["same_repository"], false, "{doc}");

    let err = common::json_err(
        &env,
        &[
            "resume",
            "--require-same-repo",
            "--workspace",
            &other.to_string_lossy(),
        ],
        5,
    );
    assert_eq!(err["code"], "store_conflict", "{err}");
    assert!(
        err["message"].as_str().is_some_and(|m| m
            .starts_with("--require-same-repo: this directory is not the handoff's repository")),
        "{err}"
    );
    // A non-git directory cannot be confirmed either.
    let plain = env.path().join("plain");
    fs::create_dir(&plain).expect("mkdir");
    baton_in(&env, &plain, &["resume", "--require-same-repo"], 5);
    // The handoff's own repository passes.
    let out = baton_in(&env, &a, &["resume", "--require-same-repo"], 0);
    assert!(!out.contains("Warning:"), "{out}");
}

#[test]
fn diverged_workspace_warns_and_require_same_repo_exits_5() {
    let (env, a, b, _, _) = behind_world();
    baton_in(&env, &a, &["save", "--no-brief"], 0);
    // Behind is not a mismatch.
    let out = baton_in(&env, &b, &["resume", "--require-same-repo"], 0);
    assert!(!out.contains("Warning:"), "{out}");
    commit(&b, "mine.txt", "mine\n", "mine");
    let out = baton_in(&env, &b, &["resume"], 0);
    assert!(
        out.lines().nth(1).is_some_and(|l| l
            .starts_with("Warning: this workspace has diverged from the handoff's HEAD")
            && l.ends_with("(3 captured commits not here, 1 here not in the handoff)")),
        "{out}"
    );
    let doc = common::json_ok(&env, &["resume", "--workspace", &b.to_string_lossy()]);
    assert_eq!(doc["workspace"]["mismatch"], "diverged", "{doc}");
    assert_eq!(doc["workspace"]["head"], "diverged", "{doc}");
    let err = common::json_err(
        &env,
        &[
            "resume",
            "--require-same-repo",
            "--workspace",
            &b.to_string_lossy(),
        ],
        5,
    );
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("has diverged")),
        "{err}"
    );
}
