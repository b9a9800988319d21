//! History and operation state: the first-parent ids of HEAD (so that a receiver that has
//! not fetched can still say how far behind it is) and an in-progress merge, rebase,
//! cherry-pick, revert, `am` or bisect, found through `git rev-parse --git-path` (so a
//! linked worktree's own state is read, not the main checkout's).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::git::{Git, bytes_to_path, is_object_id, lossy};

/// At most this many first-parent ids of HEAD are recorded.
pub const FIRST_PARENTS_CAP: usize = 1_000;
/// Files under the git directory are read only up to this size.
const MAX_STATE_FILE: u64 = 64 << 10;

/// An operation git was in the middle of when the capture was taken.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Operation {
    /// `merge`, `rebase`, `cherry-pick`, `revert`, `am` or `bisect`.
    pub kind: String,
    /// The commit being merged, picked or reverted, or the one a rebase goes onto.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// For a rebase: the branch being rebased (`None` for a detached HEAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

impl Operation {
    /// `rebase of feature onto 1a2b3c4d5e6f`, `merge of 1a2b3c4d5e6f`, `bisect`: one
    /// line, whatever the (possibly foreign) evidence holds.
    pub fn describe(&self) -> String {
        let target: Option<String> = self.target.as_deref().map(|t| t.chars().take(12).collect());
        let text = match (self.kind.as_str(), target) {
            ("rebase", Some(onto)) => match &self.branch {
                Some(branch) => format!("rebase of {branch} onto {onto}"),
                None => format!("rebase of a detached HEAD onto {onto}"),
            },
            (kind, Some(target)) => format!("{kind} of {target}"),
            (kind, None) => kind.to_string(),
        };
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    }
}

/// The first-parent ids of HEAD, newest (HEAD itself) first, at most
/// [`FIRST_PARENTS_CAP`]. A failure is said in `partial` and gives an empty list.
pub(crate) fn read_first_parents(git: &Git, partial: &mut Vec<String>) -> Vec<String> {
    let cap = format!("--max-count={FIRST_PARENTS_CAP}");
    match git.run(&["rev-list", "--first-parent", &cap, "HEAD", "--"]) {
        Ok(out) => out
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(lossy)
            .filter(|id| is_object_id(id))
            .collect(),
        Err(e) => {
            partial.push(format!(
                "git rev-list --first-parent failed: {}",
                e.describe()
            ));
            Vec::new()
        }
    }
}

/// The state files whose presence says which operation is in progress, in the order
/// `rev-parse --git-path` is asked for them.
pub(crate) const STATE_FILES: [&str; 6] = [
    "rebase-merge",
    "rebase-apply",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "BISECT_LOG",
];

/// The operation in progress in the work tree at `root`, if any (its state files asked
/// for on their own).
pub(crate) fn read_operation(git: &Git, root: &Path) -> Option<Operation> {
    let mut args = vec!["rev-parse"];
    for name in STATE_FILES {
        args.extend(["--git-path", name]);
    }
    let out = git.run(&args).ok()?;
    let paths: Vec<PathBuf> = out
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let p = bytes_to_path(l);
            if p.is_absolute() { p } else { root.join(p) }
        })
        .collect();
    operation_at(&paths)
}

/// The operation in progress, from the absolute paths of [`STATE_FILES`] (same order).
pub(crate) fn operation_at(paths: &[PathBuf]) -> Option<Operation> {
    let [rebase_merge, rebase_apply, merge, pick, revert, bisect] = paths else {
        return None;
    };
    for dir in [rebase_merge, rebase_apply] {
        if dir.is_dir() {
            let kind = if dir.join("applying").exists() {
                "am"
            } else {
                "rebase"
            };
            let branch = read_line(&dir.join("head-name"))
                .filter(|b| b != "detached HEAD")
                .map(|b| b.strip_prefix("refs/heads/").unwrap_or(&b).to_string());
            return Some(Operation {
                kind: kind.to_string(),
                target: read_id(&dir.join("onto")),
                branch,
            });
        }
    }
    for (file, kind) in [(merge, "merge"), (pick, "cherry-pick"), (revert, "revert")] {
        if file.is_file() {
            return Some(Operation {
                kind: kind.to_string(),
                target: read_id(file),
                branch: None,
            });
        }
    }
    bisect.is_file().then(|| Operation {
        kind: "bisect".to_string(),
        target: None,
        branch: None,
    })
}

/// The first line of a small state file, trimmed; `None` when absent, large or empty.
fn read_line(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_STATE_FILE {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_string())
}

/// The commit id on the first line of a state file (`MERGE_HEAD`, `onto`, ...).
fn read_id(path: &Path) -> Option<String> {
    read_line(path).filter(|id| is_object_id(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_described() {
        let id = "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d".to_string();
        let op = |kind: &str, target: Option<&String>, branch: Option<&str>| Operation {
            kind: kind.into(),
            target: target.cloned(),
            branch: branch.map(str::to_string),
        };
        assert_eq!(
            op("rebase", Some(&id), Some("feature")).describe(),
            "rebase of feature onto 1a2b3c4d5e6f"
        );
        assert_eq!(
            op("merge", Some(&id), None).describe(),
            "merge of 1a2b3c4d5e6f"
        );
        assert_eq!(op("bisect", None, None).describe(), "bisect");
    }
}
