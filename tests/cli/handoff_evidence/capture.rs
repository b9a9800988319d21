//! Evidence: capture.

use super::*;

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
