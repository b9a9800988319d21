//! The first question about a workspace: is it in a git work tree, and where is its root.

use std::path::{Path, PathBuf};

use super::git::{Git, GitError, bytes_to_path, trim_newline};
use super::history::STATE_FILES;

/// The partial-evidence note of a workspace in no git work tree.
pub(super) const NOT_A_REPOSITORY: &str = "not a git repository";

/// The first question in full: `rev-parse --is-inside-work-tree --show-toplevel` and
/// `--git-path` of each of the operation state files.
pub(super) fn combined_args() -> Vec<&'static str> {
    let mut args = vec!["rev-parse", "--is-inside-work-tree", "--show-toplevel"];
    for name in STATE_FILES {
        args.extend(["--git-path", name]);
    }
    args
}

/// The answer to [`combined_args`] asked in `dir`: `true`, the root, then one path per
/// state file (relative ones are relative to `dir`). The root and the absolute state
/// paths; `None` for anything else, including a root or path holding a newline (the
/// lines would be ambiguous: the root is then asked on its own).
pub(super) fn work_tree_state(out: &[u8], dir: &Path) -> Option<(Vec<u8>, Vec<PathBuf>)> {
    let body = out.strip_suffix(b"\n")?;
    let lines: Vec<&[u8]> = body.split(|b| *b == b'\n').collect();
    let [first, root, paths @ ..] = &lines[..] else {
        return None;
    };
    if *first != b"true"
        || root.is_empty()
        || paths.len() != STATE_FILES.len()
        || paths.iter().any(|p| p.is_empty())
    {
        return None;
    }
    let paths = paths
        .iter()
        .map(|line| {
            let path = bytes_to_path(line);
            if path.is_absolute() {
                path
            } else {
                dir.join(path)
            }
        })
        .collect();
    Some((root.to_vec(), paths))
}

/// Whether `probe`'s directory is in a git work tree, one question at a time (each
/// failure noted as such in `partial`); its root if so.
pub(super) fn probe_root(probe: &Git, partial: &mut Vec<String>) -> Option<Vec<u8>> {
    match probe.run(&["rev-parse", "--is-inside-work-tree"]) {
        Err(GitError::Failed { message, .. }) if message.contains("not a git repository") => {
            partial.push(NOT_A_REPOSITORY.to_string());
            return None;
        }
        Err(e @ (GitError::Missing | GitError::Spawn(_))) => {
            partial.push(e.describe());
            return None;
        }
        Err(e) => {
            partial.push(format!(
                "git could not read the repository: {}",
                e.describe()
            ));
            return None;
        }
        Ok(out) if trim_newline(&out) != b"true" => {
            partial.push(
                "not inside a git work tree (a bare repository or .git directory)".to_string(),
            );
            return None;
        }
        Ok(_) => {}
    }
    match probe.run(&["rev-parse", "--show-toplevel"]) {
        Ok(out) => Some(trim_newline(&out).to_vec()),
        Err(e) => {
            partial.push(format!(
                "git could not find the work-tree root: {}",
                e.describe()
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_combined_answer_is_read_only_in_a_work_tree() {
        let dir = Path::new("/w/sub");
        let paths = "../.git/rebase-merge\n../.git/rebase-apply\n../.git/MERGE_HEAD\n\
                     ../.git/CHERRY_PICK_HEAD\n/abs/REVERT_HEAD\n../.git/BISECT_LOG\n";
        let out = format!("true\n/w\n{paths}");
        let (root, state) = work_tree_state(out.as_bytes(), dir).expect("a work tree");
        assert_eq!(root, b"/w".to_vec());
        assert_eq!(state.len(), STATE_FILES.len());
        assert_eq!(state[0], Path::new("/w/sub/../.git/rebase-merge"));
        assert_eq!(state[4], Path::new("/abs/REVERT_HEAD"));
        // A newline in the root (or a path) makes the lines ambiguous: asked again.
        let out = format!("true\n/w/new\nline\n{paths}");
        assert_eq!(work_tree_state(out.as_bytes(), dir), None);
        assert_eq!(
            work_tree_state(format!("false\n/w\n{paths}").as_bytes(), dir),
            None
        );
        assert_eq!(
            work_tree_state(format!("true\n\n{paths}").as_bytes(), dir),
            None
        );
        assert_eq!(work_tree_state(b"true\n/w\n", dir), None);
        assert_eq!(work_tree_state(b"", dir), None);
    }
}
