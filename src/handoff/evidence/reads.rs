//! The independent git reads of a capture: remotes, root and recent commits, and the
//! staged and unstaged patches.

use super::git::{Git, GitError, lossy, trim_newline};
use super::{Commit, PatchHash, RECENT_COMMITS, Remote, hash_patch, redact_url_credentials};

pub(super) fn read_root_commits(git: &Git, partial: &mut Vec<String>) -> Vec<String> {
    match git.run(&["rev-list", "--max-parents=0", "HEAD", "--"]) {
        Ok(out) => out
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(lossy)
            .collect(),
        Err(e) => {
            partial.push(format!("git rev-list failed: {}", e.describe()));
            Vec::new()
        }
    }
}

/// The per-file hashes of the live staged and unstaged patches (for a comparison).
pub(crate) fn read_patch_hashes(git: &Git, has_head: bool) -> Vec<PatchHash> {
    let mut ignored = Vec::new();
    let mut hashes = hash_patch(&read_patch(git, true, has_head, &mut ignored), "staged");
    hashes.extend(hash_patch(
        &read_patch(git, false, has_head, &mut ignored),
        "unstaged",
    ));
    hashes
}

pub(super) fn read_remotes(git: &Git, partial: &mut Vec<String>) -> Vec<Remote> {
    let out = match git.run(&["config", "-z", "--get-regexp", r"^remote\..*\.url$"]) {
        Ok(out) => out,
        Err(GitError::Failed { code: Some(1), .. }) => return Vec::new(), // none configured
        Err(e) => {
            partial.push(format!("git config failed: {}", e.describe()));
            return Vec::new();
        }
    };
    let mut remotes: Vec<Remote> = Vec::new();
    // With -z each entry is `key\nvalue\0`.
    for entry in out.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let text = lossy(entry);
        let (key, value) = text.split_once('\n').unwrap_or((&text, ""));
        let Some(name) = key
            .strip_prefix("remote.")
            .and_then(|k| k.strip_suffix(".url"))
        else {
            continue;
        };
        // The first url of a remote is the one it fetches from.
        if remotes.iter().any(|r| r.name == name) {
            continue;
        }
        remotes.push(Remote {
            name: name.to_string(),
            url: redact_url_credentials(value),
        });
    }
    remotes
}

pub(super) fn read_recent_commits(git: &Git, partial: &mut Vec<String>) -> Vec<Commit> {
    let count = format!("-n{RECENT_COMMITS}");
    let out = match git.run(&[
        "log",
        &count,
        "-z",
        "--no-show-signature",
        "--format=%H%x00%an <%ae>%x00%aI%x00%s",
        "HEAD",
        "--",
    ]) {
        Ok(out) => out,
        Err(e) => {
            partial.push(format!("git log failed: {}", e.describe()));
            return Vec::new();
        }
    };
    let mut fields: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    // The format terminates each commit, so the output ends with a NUL.
    if fields.len() % 4 == 1 && fields.last().is_some_and(|f| f.is_empty()) {
        fields.pop();
    }
    fields
        .chunks_exact(4)
        .map(|c| Commit {
            id: lossy(c[0]),
            author: lossy(c[1]),
            time: lossy(c[2]),
            subject: lossy(c[3]),
        })
        .collect()
}

/// A patch from the plumbing diff commands: `diff-index --cached HEAD` (the empty tree
/// before the first commit) for staged changes, `diff-files` for unstaged ones. Porcelain
/// `git diff` is avoided because it rewrites the index to refresh stat information, even
/// with `GIT_OPTIONAL_LOCKS=0`; the plumbing never writes it.
pub(super) fn read_patch(
    git: &Git,
    staged: bool,
    has_head: bool,
    partial: &mut Vec<String>,
) -> Vec<u8> {
    let which = if staged {
        "git diff-index --cached"
    } else {
        "git diff-files"
    };
    let base = if !staged {
        None
    } else if has_head {
        Some("HEAD".to_string())
    } else {
        // Hashing empty input as a tree writes nothing; it names the empty tree in the
        // repository's hash algorithm.
        match git.run(&["hash-object", "-t", "tree", "--stdin"]) {
            Ok(out) => Some(lossy(trim_newline(&out))),
            Err(e) => {
                partial.push(format!("{which} failed: {}", e.describe()));
                return Vec::new();
            }
        }
    };
    let mut args: Vec<&str> = if staged {
        vec!["diff-index", "--cached"]
    } else {
        vec!["diff-files"]
    };
    args.extend([
        "-p",
        "--binary",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--submodule=short",
        "--ignore-submodules=none",
        "--src-prefix=a/",
        "--dst-prefix=b/",
    ]);
    if let Some(base) = &base {
        args.push(base);
    }
    args.push("--");
    match git.run(&args) {
        Ok(out) => out,
        Err(e) => {
            partial.push(format!("{which} failed: {}", e.describe()));
            Vec::new()
        }
    }
}
