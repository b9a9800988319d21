//! The repositories captured below a workspace folder (evidence `repositories`), each
//! compared with the same path below the live workspace, as one compact kickoff line
//! each.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use super::compare::{self, Comparison, HeadRelation, Presence};
use super::evidence::{Evidence, NESTED_MAX_REPOSITORIES, Repository};

/// One line per captured repository, in path order: `api: main at 1a2b3c4d5e6f, 1
/// unstaged; live HEAD same, changes present`. Empty when the evidence has none.
pub fn describe(captured: &Evidence, live_dir: &Path) -> Vec<String> {
    if captured.repositories.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "workspace folder of {} repositories (captured each; full record: evidence.json `repositories`)",
        captured.repositories.len()
    )];
    // Evidence from elsewhere may list more than a capture writes: each costs git
    // processes here, so no more than a capture would have listed are looked at.
    for (rel, repo) in captured.repositories.iter().take(NESTED_MAX_REPOSITORIES) {
        // The path comes from evidence, which may come from elsewhere: only a plain
        // relative path is looked at here.
        let plain = !rel.is_empty()
            && Path::new(rel)
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        let live = plain
            .then(|| compare::compare(&as_workspace(captured, rel, repo), &live_dir.join(rel)));
        lines.push(line(rel, repo, live.as_ref()));
    }
    lines
}

/// A repository's record as the evidence of a workspace of its own.
fn as_workspace(captured: &Evidence, rel: &str, repo: &Repository) -> Evidence {
    Evidence {
        version: captured.version,
        workspace: format!("{}/{rel}", captured.workspace.trim_end_matches('/')),
        partial: repo.partial.clone(),
        git: repo.git.clone(),
        repositories: BTreeMap::new(),
    }
}

fn line(rel: &str, repo: &Repository, live: Option<&Comparison>) -> String {
    let Some(git) = &repo.git else {
        return format!("{rel}: not captured ({})", repo.partial.join("; "));
    };
    let head: String = git.head.as_deref().map_or_else(
        || "no commits".to_string(),
        |h| h.chars().take(12).collect(),
    );
    let mut text = format!(
        "{rel}: {} at {head}",
        git.branch.as_deref().unwrap_or("(detached)")
    );
    let summary = git.uncommitted_summary();
    if !summary.is_empty() {
        text.push_str(&format!(", {summary}"));
    }
    let Some(c) = live else {
        return text;
    };
    let relation = match (c.same_repository, c.head) {
        (Some(false), _) | (_, HeadRelation::Unrelated) => "a different repository".to_string(),
        (None, _) => "no repository here".to_string(),
        (_, relation) => {
            let name = serde_json::to_value(relation)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("HEAD {name}")
        }
    };
    text.push_str(&format!("; live {relation}"));
    if let Some(changes) = &c.captured_changes {
        let presence = match changes.presence {
            Presence::Present => "present",
            Presence::Absent => "absent",
            Presence::Partly => "partly present",
        };
        text.push_str(&format!(", changes {presence}"));
    }
    text
}
