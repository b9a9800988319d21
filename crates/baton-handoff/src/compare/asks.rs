//! The git questions of a comparison besides the live evidence: where the two HEADs
//! stand (`rev-list`), and the live patches asked while the workspace is inspected.

use std::path::Path;

use crate::evidence::{self, Evidence, Git, PatchHash};

/// What the comparison asks git beside the live evidence, asked while the workspace is
/// inspected (each a few milliseconds of a process that waited for `status` before).
#[derive(Default)]
pub(super) struct Early {
    /// `rev-list --left-right --count CAPTURED...HEAD`, for a captured HEAD.
    pub(super) counts: Option<Option<AheadBehind>>,
    /// The live unstaged patch's hashes, when changes were captured.
    pub(super) patch_hashes: Option<Vec<PatchHash>>,
}

/// The live workspace's evidence, and the [`Early`] questions, asked at once when the
/// workspace is the root of a git work tree (most likely: it has its own `.git`). Asked
/// of `HEAD` before the evidence says what it is: the counts are used only where the
/// live HEAD exists and differs from the captured one, where they are what asking
/// afterwards gives (the unstaged patch does not depend on HEAD).
pub(super) fn inspect_and_ask(
    captured: &Evidence,
    live_dir: &Path,
    git_program: &Path,
    git: &Git,
) -> (Evidence, Early) {
    let inspect = || evidence::inspect(live_dir, git_program, false, &Vec::new).evidence;
    let cap = captured.git.as_ref();
    if cap.is_none() || !evidence::has_own_git(live_dir) {
        return (inspect(), Early::default());
    }
    let head = cap
        .and_then(|g| g.head.as_deref())
        .filter(|h| evidence::is_object_id(h));
    let changes = cap.is_some_and(|g| !g.patch_hashes.is_empty());
    std::thread::scope(|s| {
        let counts = head.map(|id| s.spawn(move || ahead_behind(git, id, "HEAD")));
        let patches = changes.then(|| s.spawn(|| evidence::read_patch_hashes(git, false, true)));
        let live = inspect();
        let early = Early {
            counts: counts.and_then(|h| h.join().ok()),
            patch_hashes: patches.and_then(|h| h.join().ok()),
        };
        (live, early)
    })
}

#[derive(Clone, Copy)]
pub(super) struct AheadBehind {
    pub(super) ahead: u64,
    pub(super) behind: u64,
}

/// `git rev-list --left-right --count CAPTURED...LIVE`: `None` when either is not a
/// commit here.
pub(super) fn ahead_behind(git: &Git, captured: &str, live: &str) -> Option<AheadBehind> {
    let out = git
        .run(&[
            "rev-list",
            "--left-right",
            "--count",
            &format!("{captured}...{live}"),
            "--",
        ])
        .ok()?;
    let text = String::from_utf8_lossy(&out);
    let mut counts = text.split_whitespace().map(|n| n.parse::<u64>().ok());
    match (counts.next(), counts.next(), counts.next()) {
        (Some(Some(behind)), Some(Some(ahead)), None) => Some(AheadBehind { ahead, behind }),
        _ => None,
    }
}

/// `git rev-list --count FROM..TO`.
pub(super) fn count(git: &Git, from: &str, to: &str) -> Option<u64> {
    let out = git
        .run(&["rev-list", "--count", &format!("{from}..{to}"), "--"])
        .ok()?;
    String::from_utf8_lossy(&out).trim().parse().ok()
}
