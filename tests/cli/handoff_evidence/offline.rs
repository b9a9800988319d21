//! Evidence a receiver can trust offline (issue 12).

use super::*;

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
