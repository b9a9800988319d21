//! Compare a live workspace with captured evidence: is it the same repository, and how
//! does its HEAD relate to the captured one?
//!
//! This only informs. It runs read-only git queries (`status`, `cat-file -e`,
//! `merge-base --is-ancestor`, `rev-list --count`) in the live workspace, never fetches and
//! never changes anything. A captured HEAD that is not here is still placed, offline, by
//! the first-parent ids the evidence lists; the captured uncommitted changes are looked
//! for here by the hash of each file's change. Commit ids taken from the evidence are checked to be hex ids
//! before they reach a git command line, since evidence may come from elsewhere.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::evidence::{self, Evidence, Git, GitEvidence, Operation, PatchHash};

mod asks;
use asks::{AheadBehind, ahead_behind, count, inspect_and_ask};

/// How the live HEAD relates to the captured HEAD.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HeadRelation {
    /// The same commit.
    Same,
    /// The live HEAD descends from the captured HEAD: the live workspace has more.
    Ahead,
    /// The captured HEAD descends from the live HEAD: the live workspace lacks commits.
    Behind,
    /// Both have commits the other lacks.
    Diverged,
    /// Not the same repository.
    Unrelated,
    /// Cannot tell: no git on one side, no commits, or the captured HEAD is not here.
    Unknown,
}

/// Whether the captured uncommitted changes are in the live work tree.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Presence {
    /// Every captured file's change is here, byte for byte.
    Present,
    /// None of them is.
    Absent,
    /// Some files' changes are here, others not (or differ).
    Partly,
}

/// The captured uncommitted changes, looked for in the live work tree file by file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CapturedChanges {
    pub presence: Presence,
    /// Files whose captured change (staged and unstaged) is here.
    pub files_present: u64,
    /// Files with a captured change.
    pub files: u64,
    /// Up to [`MAX_NAMED`] files whose change is not here or differs.
    pub differing: Vec<String>,
}

/// Why the live workspace is not a place to carry on the handoff as it is.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mismatch {
    /// Another repository: no shared root commit, remote URL, path or commit.
    Unrelated,
    /// The same repository, but both HEADs have commits the other lacks.
    Diverged,
}

/// How many differing files a comparison names.
pub const MAX_NAMED: usize = 5;
/// How many commits of the live history are searched for the captured first parents.
const LIVE_HISTORY_CAP: usize = 10_000;

/// The result of a comparison; `notes` explains it in sentences.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    /// `None` when unknown (no git on one side, or nothing to compare by).
    pub same_repository: Option<bool>,
    /// What matched: `root commit`, `remote NAME url`, `path`, `captured HEAD`.
    pub matched_by: Vec<String>,
    pub head: HeadRelation,
    /// Commits in the live HEAD that are not in the captured HEAD.
    pub commits_ahead: Option<u64>,
    /// Commits in the captured HEAD that are not in the live HEAD.
    pub commits_behind: Option<u64>,
    pub live_branch: Option<String>,
    pub captured_branch: Option<String>,
    /// Whether the live workspace has staged, unstaged, conflicted or untracked files.
    pub live_uncommitted: Option<bool>,
    /// The same for the captured workspace.
    pub captured_uncommitted: bool,
    /// The captured staged and unstaged changes, looked for here (`None` for evidence
    /// without patch hashes or without such changes).
    #[serde(default)]
    pub captured_changes: Option<CapturedChanges>,
    /// The operation in progress in the captured workspace.
    #[serde(default)]
    pub in_progress: Option<Operation>,
    /// Set when the workspace is unrelated or has diverged.
    #[serde(default)]
    pub mismatch: Option<Mismatch>,
    /// The kickoff's warning line for a mismatch.
    #[serde(default)]
    pub warning: Option<String>,
    pub notes: Vec<String>,
}

/// Compare `captured` with the workspace at `live_dir`, using the `git` on `PATH`.
pub fn compare(captured: &Evidence, live_dir: &Path) -> Comparison {
    compare_with_git(captured, live_dir, &evidence::git_program())
}

/// [`compare`] with a given git program.
pub fn compare_with_git(captured: &Evidence, live_dir: &Path, git_program: &Path) -> Comparison {
    let git = Git::new(git_program, &evidence::absolute(live_dir));
    let (live, early) = inspect_and_ask(captured, live_dir, git_program, &git);
    let mut c = Comparison {
        same_repository: None,
        matched_by: Vec::new(),
        head: HeadRelation::Unknown,
        commits_ahead: None,
        commits_behind: None,
        live_branch: None,
        captured_branch: captured.git.as_ref().and_then(|g| g.branch.clone()),
        live_uncommitted: None,
        captured_uncommitted: captured
            .git
            .as_ref()
            .is_some_and(GitEvidence::has_uncommitted),
        captured_changes: None,
        in_progress: captured.git.as_ref().and_then(|g| g.in_progress.clone()),
        mismatch: None,
        warning: None,
        notes: Vec::new(),
    };
    let same_path = live.workspace == captured.workspace;

    let (Some(cap), Some(lg)) = (&captured.git, &live.git) else {
        if captured.git.is_none() {
            c.notes.push(format!(
                "the captured evidence has no git state ({}), so the repository and HEAD cannot be compared",
                reasons(&captured.partial)
            ));
        }
        if live.git.is_none() {
            c.notes.push(format!(
                "this workspace has no git state ({}), so the repository and HEAD cannot be compared",
                reasons(&live.partial)
            ));
        }
        if same_path {
            c.notes
                .push("this is the directory the evidence was captured from".to_string());
        }
        return c;
    };
    if !captured.partial.is_empty() {
        c.notes.push(format!(
            "the capture was partial: {}",
            captured.partial.join("; ")
        ));
    }
    c.live_branch = lg.branch.clone();
    c.live_uncommitted = Some(lg.has_uncommitted());

    // Same repository?
    if cap.root_commits.iter().any(|r| lg.root_commits.contains(r)) {
        c.matched_by.push("root commit".to_string());
    }
    let mut fetch_from: Option<String> = None;
    for remote in &cap.remotes {
        let Some(key) = url_key(&remote.url) else {
            continue;
        };
        if let Some(live_remote) = lg
            .remotes
            .iter()
            .find(|r| url_key(&r.url).as_ref() == Some(&key))
        {
            c.matched_by.push(format!("remote {} url", remote.name));
            fetch_from.get_or_insert_with(|| live_remote.name.clone());
        }
    }
    if same_path || cap.root == lg.root {
        c.matched_by.push("path".to_string());
    }
    let captured_head = cap.head.as_deref().filter(|h| evidence::is_object_id(h));
    // One git process places the two HEADs when the captured one is here: it is
    // refused when that commit is not.
    let counts = captured_head
        .zip(lg.head.as_deref())
        .filter(|(id, live)| id != live)
        .and_then(|(id, live)| match early.counts {
            Some(counts) => counts,
            None => ahead_behind(&git, id, live),
        });
    let head_present = counts.is_some()
        || captured_head.is_some_and(|id| {
            lg.head.as_deref() == Some(id)
                || git
                    .test(&["cat-file", "-e", &format!("{id}^{{commit}}")])
                    .unwrap_or(false)
        });
    if head_present {
        c.matched_by.push("captured HEAD".to_string());
    }
    c.same_repository = if !c.matched_by.is_empty() {
        Some(true)
    } else if (!cap.root_commits.is_empty() && !lg.root_commits.is_empty())
        || (!cap.remotes.is_empty() && !lg.remotes.is_empty())
    {
        Some(false)
    } else {
        None
    };

    if c.same_repository == Some(false) {
        c.head = HeadRelation::Unrelated;
        c.notes.push(format!(
            "this is not the captured repository: no shared root commit, remote URL or path (captured at {})",
            cap.root
        ));
    } else {
        relate_heads(
            &mut c,
            cap,
            lg,
            &git,
            captured_head,
            (head_present, counts),
            fetch_from,
        );
        if c.same_repository == Some(true) && !c.matched_by.iter().any(|m| m == "path") {
            c.notes.push(format!(
                "this is a different checkout of the same repository (captured at {})",
                cap.root
            ));
        }
    }

    if c.captured_branch != c.live_branch {
        let captured = describe_branch(&c.captured_branch, "was");
        let live = describe_branch(&c.live_branch, "is");
        c.notes.push(format!(
            "the captured workspace {captured}; this workspace {live}"
        ));
    }
    if let Some(op) = &c.in_progress {
        c.notes.push(format!(
            "the captured workspace was in the middle of a {}",
            op.describe()
        ));
    }
    c.captured_changes = captured_changes(cap, lg, &git, early.patch_hashes);
    set_mismatch(&mut c, cap);
    if c.captured_uncommitted {
        c.notes.push(format!(
            "the captured workspace had uncommitted changes ({})",
            cap.uncommitted_summary()
        ));
    }
    if lg.has_uncommitted() {
        c.notes.push(format!(
            "this workspace has uncommitted changes ({})",
            lg.uncommitted_summary()
        ));
    }
    c
}

fn relate_heads(
    c: &mut Comparison,
    cap: &GitEvidence,
    lg: &GitEvidence,
    git: &Git,
    captured_head: Option<&str>,
    (head_present, counts): (bool, Option<AheadBehind>),
    fetch_from: Option<String>,
) {
    let Some(captured_full) = cap.head.as_deref() else {
        c.notes
            .push("the captured workspace had no commits yet".to_string());
        return;
    };
    let Some(id) = captured_head else {
        c.notes.push(format!(
            "the captured HEAD {captured_full:?} is not a valid commit id"
        ));
        return;
    };
    let short = &id[..12];
    if lg.head.as_deref() == Some(id) {
        c.head = HeadRelation::Same;
        c.commits_ahead = Some(0);
        c.commits_behind = Some(0);
        return;
    }
    if !head_present {
        let mut fetch = fetch_from
            .or_else(|| {
                lg.remotes
                    .iter()
                    .find(|r| r.name == "origin")
                    .or(lg.remotes.first())
                    .map(|r| r.name.clone())
            })
            .map_or_else(
                || "fetch it from the captured workspace's repository".to_string(),
                |name| format!("fetch from {name}"),
            );
        if let (Some(ahead @ 1..), Some(upstream)) = (cap.ahead, &cap.upstream) {
            fetch.push_str(&format!(
                " (the captured branch had {ahead} commit{} not pushed to {upstream})",
                plural(ahead)
            ));
        }
        if !relate_offline(c, cap, lg, git, short, &fetch) {
            c.notes.push(format!(
                "the captured HEAD {short} is not in this repository: {fetch}"
            ));
        }
        return;
    }
    let Some(live_head) = lg.head.as_deref() else {
        c.notes.push(format!(
            "this workspace has no commits yet; the captured HEAD {short} is in its object store"
        ));
        return;
    };
    let (forward, backward, ahead, behind) = match counts {
        // An ancestor is a side with no commits of its own (`merge-base --is-ancestor`).
        Some(AheadBehind { ahead, behind }) => (behind == 0, ahead == 0, Some(ahead), Some(behind)),
        // Present, yet not counted: the slow way, which says why it fails.
        None => {
            let forward = git.test(&["merge-base", "--is-ancestor", id, live_head]);
            let backward = git.test(&["merge-base", "--is-ancestor", live_head, id]);
            match (forward, backward) {
                (Ok(f), Ok(b)) => (f, b, count(git, id, live_head), count(git, live_head, id)),
                (Err(e), _) | (_, Err(e)) => {
                    c.notes.push(format!(
                        "could not relate HEAD to the captured HEAD {short}: {}",
                        e.describe()
                    ));
                    return;
                }
            }
        }
    };
    c.commits_ahead = ahead;
    c.commits_behind = behind;
    let ahead = ahead.unwrap_or(0);
    let behind = behind.unwrap_or(0);
    if forward {
        c.head = HeadRelation::Ahead;
        c.notes.push(format!(
            "this workspace is {ahead} commit{} ahead of the captured HEAD {short}",
            plural(ahead)
        ));
    } else if backward {
        c.head = HeadRelation::Behind;
        c.notes.push(format!(
            "this workspace is {behind} commit{} behind the captured HEAD {short}",
            plural(behind)
        ));
    } else {
        c.head = HeadRelation::Diverged;
        c.notes.push(format!(
            "this workspace has diverged from the captured HEAD {short}: {ahead} commit{} here and {behind} commit{} there since they split",
            plural(ahead),
            plural(behind)
        ));
    }
}

/// Place the live HEAD by the captured first-parent ids when the captured HEAD is not
/// here: the live HEAD among them is behind; a listed id in the live history (but not
/// HEAD) means both sides moved on. `false` when neither can be told.
fn relate_offline(
    c: &mut Comparison,
    cap: &GitEvidence,
    lg: &GitEvidence,
    git: &Git,
    short: &str,
    fetch: &str,
) -> bool {
    let (Some(live_head), false) = (lg.head.as_deref(), cap.first_parents.is_empty()) else {
        return false;
    };
    if let Some(n) = cap.first_parents.iter().position(|id| id == live_head) {
        let n = n as u64;
        c.head = HeadRelation::Behind;
        c.commits_ahead = Some(0);
        c.commits_behind = Some(n);
        c.notes.push(format!(
            "this workspace is {n} commit{} behind the captured HEAD {short} (by the handoff's first-parent history; those commits are not here: {fetch})",
            plural(n)
        ));
        return true;
    }
    let cap_arg = format!("--max-count={LIVE_HISTORY_CAP}");
    let Ok(out) = git.run(&["rev-list", &cap_arg, live_head, "--"]) else {
        return false;
    };
    let text = String::from_utf8_lossy(&out);
    let live: std::collections::HashSet<&str> = text.lines().collect();
    let Some((i, base)) = cap
        .first_parents
        .iter()
        .enumerate()
        .find(|(_, id)| evidence::is_object_id(id) && live.contains(id.as_str()))
    else {
        return false;
    };
    let behind = i as u64;
    let ahead = count(git, base, live_head);
    c.head = HeadRelation::Diverged;
    c.commits_behind = Some(behind);
    c.commits_ahead = ahead;
    let here = ahead.map_or_else(|| "some here".to_string(), |a| format!("{a} here"));
    c.notes.push(format!(
        "this workspace has diverged from the captured HEAD {short}: {behind} captured commit{} not here, {here} not in the handoff, since {} ({fetch})",
        plural(behind),
        &base[..12]
    ));
    true
}

/// Look for each captured file's change in the live patches by its hash.
fn captured_changes(
    cap: &GitEvidence,
    lg: &GitEvidence,
    git: &Git,
    early: Option<Vec<PatchHash>>,
) -> Option<CapturedChanges> {
    if cap.patch_hashes.is_empty() {
        return None;
    }
    let has_head = lg.head.is_some();
    // Nothing staged, as status shows: no staged patch to ask git for.
    let mut live = if lg.staged.is_empty() {
        Vec::new()
    } else {
        evidence::read_patch_hashes(git, true, has_head)
    };
    live.extend(match early {
        Some(unstaged) => unstaged,
        None => evidence::read_patch_hashes(git, false, has_head),
    });
    let here = |h: &PatchHash| {
        live.iter()
            .any(|l| l.path == h.path && l.blake3 == h.blake3)
    };
    let mut files: std::collections::BTreeMap<&str, bool> = std::collections::BTreeMap::new();
    for h in &cap.patch_hashes {
        let ok = files.entry(h.path.as_str()).or_insert(true);
        *ok = *ok && here(h);
    }
    let present = files.values().filter(|p| **p).count() as u64;
    let total = files.len() as u64;
    Some(CapturedChanges {
        presence: match present {
            0 => Presence::Absent,
            p if p == total => Presence::Present,
            _ => Presence::Partly,
        },
        files_present: present,
        files: total,
        differing: files
            .iter()
            .filter(|(_, p)| !**p)
            .take(MAX_NAMED)
            .map(|(path, _)| path.to_string())
            .collect(),
    })
}

/// An unrelated repository or a diverged HEAD: the fact and its warning line.
fn set_mismatch(c: &mut Comparison, cap: &GitEvidence) {
    if c.same_repository == Some(false) {
        c.mismatch = Some(Mismatch::Unrelated);
        c.warning = Some(format!(
            "Warning: this directory is not the handoff's repository (no shared root commit, remote URL, path or commit; captured at {})",
            cap.root
        ));
    } else if c.head == HeadRelation::Diverged {
        let short: String = cap.head.as_deref().unwrap_or("").chars().take(12).collect();
        let n = |v: Option<u64>| v.map_or_else(|| "some".to_string(), |v| v.to_string());
        c.mismatch = Some(Mismatch::Diverged);
        c.warning = Some(format!(
            "Warning: this workspace has diverged from the handoff's HEAD {short} ({} captured commits not here, {} here not in the handoff)",
            n(c.commits_behind),
            n(c.commits_ahead)
        ));
    }
}

/// Commits on the live side only (`ahead`) and on the captured side only (`behind`).
fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn reasons(partial: &[String]) -> String {
    if partial.is_empty() {
        "no reason recorded".to_string()
    } else {
        partial.join("; ")
    }
}

fn describe_branch(branch: &Option<String>, verb: &str) -> String {
    match branch {
        Some(b) => format!("{verb} on branch {b}"),
        None => format!("{verb} on a detached HEAD"),
    }
}

/// A key that is equal for two URLs naming the same repository: scheme, user, port,
/// trailing slashes and `.git` are ignored, and scp-like `host:path` equals
/// `ssh://host/path`. A local path keeps only its path. `None` for an empty path.
fn url_key(url: &str) -> Option<String> {
    let url = url.trim();
    let (host, path) = if let Some(i) = url.find("://") {
        let rest = &url[i + 3..];
        let end = rest.find('/').unwrap_or(rest.len());
        let authority = &rest[..end];
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        (strip_port(host_port).to_ascii_lowercase(), &rest[end..])
    } else if let Some((prefix, path)) = url.split_once(':').filter(|(p, _)| scp_host(p)) {
        let host = prefix.rsplit_once('@').map_or(prefix, |(_, h)| h);
        (host.to_ascii_lowercase(), path)
    } else {
        (String::new(), url)
    };
    let mut path = path.trim_end_matches('/');
    path = path.strip_suffix(".git").unwrap_or(path);
    let path = path.trim_matches('/');
    if path.is_empty() {
        return None;
    }
    Some(format!("{host}:{path}"))
}

/// Whether the text before the first `:` is an scp-like `[user@]host` (not a Windows
/// drive letter, not a path).
fn scp_host(prefix: &str) -> bool {
    prefix.len() > 1 && !prefix.contains('/') && !prefix.contains('\\')
}

fn strip_port(host_port: &str) -> &str {
    match host_port.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => host_port,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_keys_match_across_forms() {
        let same = [
            "https://github.com/a/b.git",
            "https://[REDACTED:url_credentials]@github.com/a/b",
            "https://GitHub.com/a/b/",
            "git@github.com:a/b.git",
            "ssh://git@github.com:22/a/b.git",
        ];
        for url in same {
            assert_eq!(url_key(url), Some("github.com:a/b".to_string()), "{url}");
        }
        assert_eq!(url_key("/srv/git/origin.git/"), url_key("/srv/git/origin"));
        assert_eq!(
            url_key("file:///srv/git/origin.git"),
            url_key("/srv/git/origin")
        );
        assert_ne!(
            url_key("https://github.com/a/b"),
            url_key("https://github.com/a/c")
        );
        assert_eq!(url_key("C:/repos/x.git"), Some(":C:/repos/x".to_string()));
        assert_eq!(url_key("https://github.com/"), None);
    }

    #[test]
    fn head_relation_serializes_lowercase() {
        let text = serde_json::to_string(&HeadRelation::Diverged).ok();
        assert_eq!(text.as_deref(), Some("\"diverged\""));
    }
}
