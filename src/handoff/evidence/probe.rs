//! The first question about a workspace: is it in a git work tree, and where is its root.

use super::git::{Git, GitError, trim_newline};

/// The work-tree root from `rev-parse --is-inside-work-tree --show-toplevel`: `true`,
/// then the root; anything else is `None`.
pub(super) fn work_tree_root(out: &[u8]) -> Option<Vec<u8>> {
    let at = out.iter().position(|b| *b == b'\n')?;
    let root = trim_newline(&out[at + 1..]);
    (&out[..at] == b"true" && !root.is_empty()).then(|| root.to_vec())
}

/// Whether `probe`'s directory is in a git work tree, one question at a time (each
/// failure noted as such in `partial`); its root if so.
pub(super) fn probe_root(probe: &Git, partial: &mut Vec<String>) -> Option<Vec<u8>> {
    match probe.run(&["rev-parse", "--is-inside-work-tree"]) {
        Err(GitError::Failed { message, .. }) if message.contains("not a git repository") => {
            partial.push("not a git repository".to_string());
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
        assert_eq!(work_tree_root(b"true\n/a/b\n"), Some(b"/a/b".to_vec()));
        assert_eq!(
            work_tree_root(b"true\n/a/new\nline\n"),
            Some(b"/a/new\nline".to_vec())
        );
        assert_eq!(work_tree_root(b"false\n"), None);
        assert_eq!(work_tree_root(b"false\n/a/b\n"), None);
        assert_eq!(work_tree_root(b"true\n\n"), None);
        assert_eq!(work_tree_root(b""), None);
    }
}
