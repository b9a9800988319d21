//! `context.md`: a human-readable page generated from the captured workspace evidence.

use std::fmt::Write;

use super::evidence::Evidence;

/// Lists longer than this are cut, with a count of what was left out.
const MAX_LIST: usize = 50;

/// Where each patch went and how big it was, for the page.
pub struct PatchNote {
    /// The repository below a workspace folder it is of (its relative path); empty for
    /// the workspace's own.
    pub repository: String,
    pub name: &'static str,
    pub bytes: u64,
    pub stored_at: Option<String>,
    /// Secrets in it were replaced by placeholders, so it no longer applies as it is.
    pub redacted: bool,
}

/// One stored patch's line: its size as captured, where it is, and whether it applies.
fn patch_line(p: &PatchNote, at: &str) -> String {
    let note = if p.redacted {
        format!(" ({})", super::evidence::PATCH_REDACTED)
    } else {
        String::new()
    };
    format!("- {}: {} bytes, in `{at}`{note}", p.name, p.bytes)
}

fn list<T>(out: &mut String, items: &[T], line: impl Fn(&T) -> String) {
    for item in items.iter().take(MAX_LIST) {
        let _ = writeln!(out, "- {}", line(item));
    }
    if items.len() > MAX_LIST {
        let _ = writeln!(
            out,
            "- … and {} more (see evidence/evidence.json)",
            items.len() - MAX_LIST
        );
    }
}

pub fn render(evidence: &Evidence, captured_at: &str, patches: &[PatchNote]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Workspace context\n");
    let _ = writeln!(
        out,
        "Captured read-only from `{}` at {captured_at}.\n",
        evidence.workspace
    );
    if !evidence.partial.is_empty() {
        let _ = writeln!(
            out,
            "**Partial capture:** {}.\n",
            evidence.partial.join("; ")
        );
    }
    if !evidence.repositories.is_empty() {
        repositories(&mut out, evidence, patches);
        return out;
    }
    let Some(git) = &evidence.git else {
        let _ = writeln!(out, "No git repository was captured.");
        return out;
    };
    let _ = writeln!(out, "## Repository\n");
    let _ = writeln!(out, "- root: `{}`", git.root);
    let _ = writeln!(
        out,
        "- branch: {}",
        git.branch.as_deref().unwrap_or("(detached HEAD)")
    );
    let _ = writeln!(
        out,
        "- HEAD: {}",
        git.head.as_deref().unwrap_or("(no commits yet)")
    );
    match (&git.upstream, git.ahead, git.behind) {
        (Some(up), Some(a), Some(b)) => {
            let _ = writeln!(out, "- upstream: {up} (ahead {a}, behind {b})");
        }
        (Some(up), _, _) => {
            let _ = writeln!(out, "- upstream: {up}");
        }
        _ => {
            let _ = writeln!(out, "- upstream: none");
        }
    }
    if let Some(op) = &git.in_progress {
        let _ = writeln!(out, "- in progress: {}", op.describe());
    }
    for remote in &git.remotes {
        let _ = writeln!(out, "- remote {}: {}", remote.name, remote.url);
    }
    if !git.root_commits.is_empty() {
        let _ = writeln!(out, "- root commit(s): {}", git.root_commits.join(", "));
    }
    let _ = writeln!(out, "\n## Status\n");
    let changes = |title: &str, items: &[super::evidence::Change], out: &mut String| {
        let _ = writeln!(out, "{title}: {}", items.len());
        list(out, items, |c| format!("{} ({})", c.path, c.status));
    };
    changes("Staged", &git.staged, &mut out);
    changes("Unstaged", &git.unstaged, &mut out);
    let _ = writeln!(out, "Conflicted: {}", git.conflicted.len());
    list(&mut out, &git.conflicted, |p| p.clone());
    let untracked_bytes: u64 = git.untracked.iter().map(|u| u.size).sum();
    let _ = writeln!(
        out,
        "Untracked: {} ({untracked_bytes} bytes; contents not saved unless attached)",
        git.untracked.len()
    );
    list(&mut out, &git.untracked, |u| {
        format!(
            "{} ({} bytes, {})",
            u.path,
            u.size,
            u.id.as_deref().unwrap_or("not hashed")
        )
    });
    if !patches.is_empty() {
        let _ = writeln!(out, "\n## Patches\n");
        for p in patches.iter().filter(|p| p.repository.is_empty()) {
            match &p.stored_at {
                Some(at) => {
                    let _ = writeln!(out, "{}", patch_line(p, at));
                }
                None => {
                    let _ = writeln!(out, "- {}: empty", p.name);
                }
            }
        }
    }
    if !git.recent_commits.is_empty() {
        let _ = writeln!(out, "\n## Recent commits\n");
        list(&mut out, &git.recent_commits, |c| {
            format!(
                "{} {} ({}, {})",
                &c.id[..c.id.len().min(12)],
                c.subject,
                c.author,
                c.time
            )
        });
    }
    out
}

/// A workspace folder holding repositories: one short section each (the full record is
/// `evidence/evidence.json`'s `repositories`).
fn repositories(out: &mut String, evidence: &Evidence, patches: &[PatchNote]) {
    let _ = writeln!(
        out,
        "The workspace is not a git repository; {} repositories below it were captured \
         (at most {}, at most {} directories down).",
        evidence.repositories.len(),
        super::evidence::NESTED_MAX_REPOSITORIES,
        super::evidence::NESTED_MAX_DEPTH,
    );
    for (rel, repo) in &evidence.repositories {
        let _ = writeln!(out, "\n## Repository `{rel}`\n");
        let Some(git) = &repo.git else {
            let _ = writeln!(out, "- not captured: {}", repo.partial.join("; "));
            continue;
        };
        let _ = writeln!(
            out,
            "- branch: {}",
            git.branch.as_deref().unwrap_or("(detached HEAD)")
        );
        let _ = writeln!(
            out,
            "- HEAD: {}",
            git.head.as_deref().unwrap_or("(no commits yet)")
        );
        if let Some(up) = &git.upstream {
            let _ = writeln!(out, "- upstream: {up}");
        }
        for remote in &git.remotes {
            let _ = writeln!(out, "- remote {}: {}", remote.name, remote.url);
        }
        let summary = git.uncommitted_summary();
        let _ = writeln!(
            out,
            "- uncommitted: {}",
            if summary.is_empty() { "none" } else { &summary }
        );
        list(out, &git.unstaged, |c| {
            format!("unstaged {} ({})", c.path, c.status)
        });
        list(out, &git.staged, |c| {
            format!("staged {} ({})", c.path, c.status)
        });
        for p in patches.iter().filter(|p| p.repository == *rel) {
            if let Some(at) = &p.stored_at {
                let _ = writeln!(out, "{}", patch_line(p, at));
            }
        }
        if let Some(c) = git.recent_commits.first() {
            let _ = writeln!(
                out,
                "- last commit: {} {}",
                &c.id[..c.id.len().min(12)],
                c.subject
            );
        }
    }
}
