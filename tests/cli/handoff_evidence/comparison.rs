//! Evidence: compare.

use super::*;

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
