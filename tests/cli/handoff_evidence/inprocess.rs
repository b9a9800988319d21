//! The reads a capture does in this process (the work tree's state files, its remotes, its
//! recent commits, "nothing staged") against the same capture with every read asked of
//! git: repositories built to differ where a reimplementation would (configuration
//! includes, equal and skewed commit dates, odd messages and time zones), and the cases
//! that must go back to git (replace refs, grafts, a shallow clone, a commit encoding,
//! staged and intended-to-add entries, a linked work tree).

use super::*;

/// `capture`, a capture begun by `Started` (git started and the in-process reads done on
/// the calling thread, as a handoff does) and `capture_asking_git` of `dir` give the same
/// evidence and patches.
fn assert_agrees_with_git(dir: &Path) {
    let asked = evidence::capture_asking_git(dir);
    let started = evidence::Started::new(dir).capture(&Vec::new);
    for inproc in [evidence::capture(dir), started] {
        assert_eq!(inproc.evidence, asked.evidence, "{}", dir.display());
        assert_eq!(inproc.staged_patch, asked.staged_patch);
        assert_eq!(inproc.unstaged_patch, asked.unstaged_patch);
        assert!(
            inproc.evidence.git.is_some(),
            "{:?}",
            inproc.evidence.partial
        );
    }
}

/// Run git with `date` (`@SECONDS ±HHMM`) as author and committer date; require success.
fn git_dated(dir: &Path, args: &[&str], date: &str) {
    let mut cmd = common::git_cmd(dir, args);
    cmd.env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date);
    common::git_checked(cmd, dir, args);
}

/// Commit `file` at `date` with `message` kept verbatim (leading blank lines, trailing
/// spaces, CRs).
fn commit_at(dir: &Path, file: &str, date: &str, message: &str) {
    fs::write(dir.join(file), format!("{date}\n{message}")).expect("write");
    git(dir, &["add", "--", file]);
    let verbatim = ["--allow-empty-message", "--cleanup=verbatim", "-m", message];
    git_dated(dir, &[&["commit", "-q"][..], &verbatim].concat(), date);
}

/// `count` commits of `file`, one second apart from `first` (seconds) in time zone
/// `zone`, their messages `label 0`, `label 1`...
fn commit_series(dir: &Path, file: &str, first: u64, zone: &str, label: &str, count: u64) {
    for i in 0..count {
        let date = format!("@{} {zone}", first + i);
        commit_at(dir, file, &date, &format!("{label} {i}"));
    }
}

/// A repository whose history and configuration exercise every in-process read.
fn tricky_repository(root: &Path) -> PathBuf {
    let dir = init(&root.join("tricky"));
    // Remotes: credentials, a second URL, a dotted name, one from an include and one from
    // a conditional include, and a nameless `[remote]` section git does not list.
    git(
        &dir,
        &[
            "remote",
            "add",
            "origin",
            "https://user:s3cret@example.com/a.git",
        ],
    );
    git(&dir, &["remote", "add", "up", "git@example.com:a/b.git"]);
    git(
        &dir,
        &[
            "remote",
            "set-url",
            "--add",
            "up",
            "https://example.com/second.git",
        ],
    );
    git(&dir, &["remote", "add", "Dotted.Name", "/srv/dotted.git"]);
    let included = root.join("included.config");
    fs::write(
        &included,
        "[remote \"included\"]\n\turl = https://example.com/inc.git\n",
    )
    .expect("write include");
    git(
        &dir,
        &["config", "include.path", &included.to_string_lossy()],
    );
    let conditional = root.join("conditional.config");
    fs::write(
        &conditional,
        "[remote \"conditional\"]\n\turl = ssh://h/c.git\n",
    )
    .expect("write");
    let gitdir = format!("includeIf.gitdir:{}/.path", canonical(&dir));
    git(&dir, &["config", &gitdir, &conditional.to_string_lossy()]);
    git(&dir, &["config", "remote.url", "nameless"]);

    // History: more than RECENT_COMMITS commits, a merge whose sides share one date
    // (git orders ties as met), a commit older than its parent, odd messages and zones.
    commit_at(&dir, "a", "@1700000000 +0000", "base");
    commit_series(&dir, "a", 1_700_000_100, "+0530", "main", 6);
    git(&dir, &["checkout", "-q", "-b", "side", "HEAD~3"]);
    commit_series(&dir, "b", 1_700_000_100, "-0130", "side", 4);
    git(&dir, &["checkout", "-q", "main"]);
    let merge = ["merge", "-q", "--no-ff", "-m", "merge side", "side"];
    git_dated(&dir, &merge, "@1700000200 +0000");
    commit_at(&dir, "a", "@1600000000 +1400", "older than its parent");
    commit_at(
        &dir,
        "a",
        "@1700000300 -1200",
        "\n\n  leading blank lines\nand a second line  \n\nbody",
    );
    commit_at(
        &dir,
        "a",
        "@1700000301 +0000",
        "crlf subject\r\nnext\r\n\r\nbody\r\n",
    );
    commit_at(
        &dir,
        "a",
        "@1700000302 +0100",
        " \t\n \nafter whitespace-only lines",
    );
    commit_at(&dir, "a", "@1700000303 +0000", "");
    commit_series(&dir, "c", 1_700_000_400, "+0000", "tail", 8);
    dir
}

#[test]
fn the_in_process_reads_agree_with_git() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tricky_repository(tmp.path());
    // Nothing staged: the index's cache tree names HEAD's tree.
    fs::write(dir.join("a"), "unstaged\n").expect("write");
    assert_agrees_with_git(&dir);
    let e = evidence::capture(&dir).evidence;
    let g = git_of(&e);
    let names: Vec<&str> = g.remotes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["origin", "up", "Dotted.Name", "included", "conditional"],
        "{:?}",
        g.remotes
    );
    assert_eq!(g.recent_commits.len(), evidence::RECENT_COMMITS);
    assert_eq!(g.recent_commits[0].subject, "tail 7");
    assert!(g.staged.is_empty() && !g.unstaged.is_empty());

    // Something staged: the patch is asked of git.
    fs::write(dir.join("c"), "staged\n").expect("write");
    git(&dir, &["add", "c"]);
    assert_agrees_with_git(&dir);
    // Staged, then taken back: the cache tree is no longer whole, git is asked again.
    git(&dir, &["reset", "-q", "c"]);
    assert_agrees_with_git(&dir);
    // An entry intended to add (`add -N`).
    fs::write(dir.join("new"), "new\n").expect("write");
    git(&dir, &["add", "-N", "new"]);
    assert_agrees_with_git(&dir);
}

#[test]
fn a_rewritten_or_shallow_history_agrees_with_git() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = init(&tmp.path().join("repo"));
    let first = commit(&dir, "a", "1\n", "one");
    let second = commit(&dir, "a", "2\n", "two");
    commit(&dir, "a", "3\n", "three");
    assert_agrees_with_git(&dir);

    // A shallow clone: git shows the boundary commit without parents.
    let shallow = tmp.path().join("shallow");
    let url = format!("file://{}", canonical(&dir));
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--depth",
            "2",
            &url,
            &shallow.to_string_lossy(),
        ],
    );
    assert_agrees_with_git(&shallow);

    // A replace ref: git shows the replacement's message.
    let replacement = common::git_cmd(
        &dir,
        &[
            "commit-tree",
            "-m",
            "replaced",
            &format!("{second}^{{tree}}"),
            "-p",
            &first,
        ],
    )
    .output()
    .expect("commit-tree");
    let replacement = String::from_utf8_lossy(&replacement.stdout)
        .trim()
        .to_string();
    git(&dir, &["replace", &second, &replacement]);
    assert_agrees_with_git(&dir);
    git(&dir, &["replace", "-d", &second]);

    // A graft: git shows the first commit without its history.
    fs::create_dir_all(dir.join(".git/info")).expect("mkdir");
    fs::write(dir.join(".git/info/grafts"), format!("{second}\n")).expect("grafts");
    assert_agrees_with_git(&dir);
    fs::remove_file(dir.join(".git/info/grafts")).expect("rm grafts");

    // A commit recorded in another encoding: git re-encodes its message.
    fs::write(dir.join("a"), "4\n").expect("write");
    git(&dir, &["add", "a"]);
    let latin1 = common::git_cmd(
        &dir,
        &[
            "-c",
            "i18n.commitEncoding=ISO-8859-1",
            "commit",
            "-q",
            "-F",
            "-",
        ],
    )
    .stdin(std::process::Stdio::piped())
    .spawn()
    .and_then(|mut child| {
        use std::io::Write;
        child.stdin.take().expect("stdin").write_all(b"caf\xe9\n")?;
        child.wait()
    })
    .expect("commit latin1");
    assert!(latin1.success());
    assert_agrees_with_git(&dir);
}

#[test]
fn a_linked_work_tree_agrees_with_git() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = init(&tmp.path().join("repo"));
    commit(&dir, "a", "1\n", "one");
    let linked = tmp.path().join("linked");
    git(
        &dir,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "other",
            &linked.to_string_lossy(),
        ],
    );
    commit(&linked, "b", "2\n", "on the linked tree");
    fs::write(linked.join("b"), "changed\n").expect("write");
    // An operation in progress is found in the linked tree's own git directory.
    let state = PathBuf::from(git(&linked, &["rev-parse", "--git-path", "MERGE_HEAD"]));
    let state = if state.is_absolute() {
        state
    } else {
        linked.join(state)
    };
    fs::write(&state, format!("{}\n", head(&dir))).expect("MERGE_HEAD");
    assert_agrees_with_git(&linked);
    let e = evidence::capture(&linked).evidence;
    assert!(git_of(&e).in_progress.is_some(), "{:?}", git_of(&e));
}
