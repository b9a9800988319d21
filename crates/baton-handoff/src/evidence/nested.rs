//! A workspace folder that is no git work tree but holds repositories below it (a folder
//! of checkouts): each one found, within fixed bounds, and captured as a work tree of its
//! own under its path relative to the workspace.
//!
//! This runs only when the workspace is not in a work tree, after git said so: a handoff
//! of a repository never walks anything. The walk reads at most [`MAX_DIRS`] directories
//! (plain directories only: no symlink is followed, no hidden directory entered, no
//! repository's own tree searched), so a large folder of other things costs a bounded
//! number of `readdir` calls.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use super::{Capture, GitEvidence, KnownHistory, inspect};

/// Repositories are looked for at most this many directories below the workspace
/// (`WS/a/b/c` is 3).
pub const MAX_DEPTH: usize = 3;
/// At most this many repositories below a workspace are captured.
pub const MAX_REPOSITORIES: usize = 16;
/// The walk reads at most this many directories.
pub const MAX_DIRS: usize = 2_000;

/// One repository below a workspace folder: what [`super::Evidence`] says of a workspace.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Repository {
    /// Why its capture is incomplete; empty when it is complete.
    pub partial: Vec<String>,
    pub git: Option<GitEvidence>,
}

/// A workspace in no work tree (and nothing else wrong: git ran): the repositories below
/// it, captured each, in place of the workspace's own "not a git repository". Only for
/// a capture, never for a comparison's look at the live side.
pub(super) fn below(
    capture: &mut Capture,
    workspace: &Path,
    git_program: &Path,
    full: bool,
    known: &(dyn Fn() -> Vec<KnownHistory> + Sync),
) {
    // A directory with a `.git` of its own is a broken checkout, not a folder of them:
    // nor is a repository found below searched again when git rejects its `.git`.
    if !full
        || capture.evidence.partial != [super::probe::NOT_A_REPOSITORY]
        || super::has_own_git(workspace)
    {
        return;
    }
    let Some((repositories, patches, notes)) = capture_below(workspace, git_program, known) else {
        return;
    };
    let partial = &mut capture.evidence.partial;
    partial.clear();
    partial.extend(notes);
    for (rel, repo) in &repositories {
        partial.extend(repo.partial.iter().map(|p| format!("{rel}: {p}")));
    }
    capture.evidence.repositories = repositories;
    capture.nested_patches = patches;
}

/// What was found below a workspace: the repositories (relative path, absolute path) in
/// path order, and why the search may be incomplete.
#[derive(Debug, Default, PartialEq)]
struct Found {
    repositories: Vec<(String, PathBuf)>,
    notes: Vec<String>,
}

/// The repositories below `workspace` (not itself one): directories with a `.git` of
/// their own (a directory or a gitfile), breadth first, within the bounds above.
fn find(workspace: &Path) -> Found {
    let mut found = Found::default();
    let mut queue = VecDeque::from([(workspace.to_path_buf(), String::new(), 0usize)]);
    let mut read = 0usize;
    let mut unnamed = 0usize;
    let mut more = false;
    while let Some((dir, rel, depth)) = queue.pop_front() {
        if read == MAX_DIRS {
            found.notes.push(format!(
                "the search for repositories below the workspace stopped after {MAX_DIRS} directories"
            ));
            break;
        }
        read += 1;
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut children: Vec<(String, PathBuf)> = Vec::new();
        for entry in entries.flatten() {
            // A plain directory only: a symlink may lead anywhere, even back up.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let Ok(name) = entry.file_name().into_string() else {
                unnamed += 1;
                continue;
            };
            if !name.starts_with('.') {
                children.push((name, entry.path()));
            }
        }
        children.sort();
        for (name, path) in children {
            let child_rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if path.join(".git").symlink_metadata().is_ok() {
                if found.repositories.len() == MAX_REPOSITORIES {
                    more = true;
                    break;
                }
                found.repositories.push((child_rel, path));
            } else if depth + 1 < MAX_DEPTH {
                queue.push_back((path, child_rel, depth + 1));
            }
        }
        if more {
            found.notes.push(format!(
                "more than {MAX_REPOSITORIES} repositories below the workspace: the first {MAX_REPOSITORIES} captured"
            ));
            break;
        }
    }
    if unnamed > 0 {
        found.notes.push(format!(
            "{unnamed} directories below the workspace have names that are not UTF-8 and were not searched"
        ));
    }
    found.repositories.sort();
    found
}

/// The captures of the repositories below `workspace` ([`capture_all`]): `None` when
/// there is none.
fn capture_below(
    workspace: &Path,
    git_program: &Path,
    known: &(dyn Fn() -> Vec<KnownHistory> + Sync),
) -> Option<(BTreeMap<String, Repository>, Patches, Vec<String>)> {
    let found = find(workspace);
    if found.repositories.is_empty() {
        return None;
    }
    let captures = capture_all(found.repositories, git_program, known);
    let mut repositories = BTreeMap::new();
    let mut patches = Patches::new();
    for (rel, capture) in captures {
        patches.insert(rel.clone(), (capture.staged_patch, capture.unstaged_patch));
        repositories.insert(
            rel,
            Repository {
                partial: capture.evidence.partial,
                git: capture.evidence.git,
            },
        );
    }
    Some((repositories, patches, found.notes))
}

/// Each repository captured, on as many threads of its own as there are cores (each
/// capture runs git processes and waits for them). Not on rayon's pool: a capture may
/// wait for the histories the store holds ([`super::BackgroundCapture::give_histories`]), and the caller's
/// thread may meanwhile need that pool for the transcript's scan.
fn capture_all(
    repositories: Vec<(String, PathBuf)>,
    git_program: &Path,
    known: &(dyn Fn() -> Vec<KnownHistory> + Sync),
) -> Vec<(String, Capture)> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let workers = cores.min(repositories.len()).max(1);
    let next = AtomicUsize::new(0);
    let repositories = &repositories;
    let mut captured: Vec<(usize, Capture)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((_, path)) = repositories.get(i) else {
                            break done;
                        };
                        done.push((i, inspect(path, git_program, true, known)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    captured.sort_by_key(|(i, _)| *i);
    captured
        .into_iter()
        .map(|(i, capture)| (repositories[i].0.clone(), capture))
        .collect()
}

/// The staged and unstaged patches of each repository below a workspace, by its path.
pub type Patches = BTreeMap<String, (Vec<u8>, Vec<u8>)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_are_found_within_the_bounds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for repo in [
            "api",
            "web",
            "libs/core",
            "a/b/deep",
            "a/b/c/too-deep",
            ".hidden/x",
        ] {
            std::fs::create_dir_all(root.join(repo).join(".git")).expect("mkdir");
        }
        // Below a repository nothing is searched; a gitfile (a worktree) counts.
        std::fs::create_dir_all(root.join("api/vendor/inner/.git")).expect("mkdir");
        std::fs::create_dir_all(root.join("wt")).expect("mkdir");
        std::fs::write(root.join("wt/.git"), "gitdir: /elsewhere\n").expect("write");
        std::os::unix::fs::symlink(root.join("web"), root.join("link")).expect("symlink");
        let found = find(root);
        let rels: Vec<&str> = found.repositories.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(rels, ["a/b/deep", "api", "libs/core", "web", "wt"]);
        assert!(found.notes.is_empty(), "{:?}", found.notes);

        let many = tempfile::tempdir().expect("tempdir");
        for i in 0..MAX_REPOSITORIES + 3 {
            std::fs::create_dir_all(many.path().join(format!("r{i:02}/.git"))).expect("mkdir");
        }
        let found = find(many.path());
        assert_eq!(found.repositories.len(), MAX_REPOSITORIES);
        assert_eq!(found.repositories[0].0, "r00");
        assert_eq!(found.notes.len(), 1, "{:?}", found.notes);
        assert!(found.notes[0].starts_with("more than 16 repositories"));
    }
}
