//! An agent-handoff bundle's `state.json` as baton workspace evidence, for `resume`.
//!
//! The bundle records less than a baton capture: a branch, a HEAD and which files were
//! dirty. Those become an [`Evidence`] whose `partial` says what is missing (remotes,
//! root commits, patches), so the comparison at resume reports what it can.

use serde_json::{Value, json};

use crate::evidence::{EVIDENCE_VERSION, Evidence};

/// Names read from `state.json`, first present wins (`a.b`: member `b` of object `a`).
const BRANCH: &[&str] = &["branch", "git.branch", "workspace.branch"];
const HEAD: &[&str] = &["head", "commit", "git.head", "git.commit", "workspace.head"];
const DIRTY: &[&str] = &["dirty", "git.dirty", "dirty_files", "workspace.dirty"];
const ROOT: &[&str] = &["root", "workspace_root", "git.root", "workspace.root"];

/// What the evidence of an imported bundle says it lacks.
pub const STATE_PARTIAL: &str = "imported from an agent-handoff bundle's state.json: no remotes, root commits or patches were recorded";

fn lookup<'a>(docs: &[&'a Value], names: &[&str]) -> Option<&'a Value> {
    names.iter().find_map(|name| {
        docs.iter().find_map(|doc| {
            name.split('.')
                .try_fold(*doc, |v, member| v.get(member))
                .filter(|v| !v.is_null())
        })
    })
}

/// The evidence `state.json` (and the manifest's `workspace`, when given) records;
/// `None` when it is not JSON or records no git state at all.
pub fn evidence_from_state(state: &str, manifest: Option<&str>) -> Option<Evidence> {
    let state: Value = serde_json::from_str(state).ok()?;
    let manifest: Value = manifest
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or(Value::Null);
    let docs = [&state, &manifest];
    let text = |names: &[&str]| {
        lookup(&docs, names)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let branch = text(BRANCH);
    let head = text(HEAD);
    // `dirty`: a list of paths, or a bare yes/no.
    let unstaged: Vec<Value> = match lookup(&docs, DIRTY) {
        Some(Value::Array(paths)) => paths
            .iter()
            .filter_map(Value::as_str)
            .map(|p| json!({ "path": p, "status": "modified" }))
            .collect(),
        Some(Value::Bool(true)) => {
            vec![json!({ "path": "(paths not recorded)", "status": "modified" })]
        }
        _ => Vec::new(),
    };
    if branch.is_none() && head.is_none() && unstaged.is_empty() {
        return None;
    }
    let root = text(ROOT).unwrap_or_default();
    // Built as JSON so that fields this code does not know keep their defaults.
    let evidence = json!({
        "version": EVIDENCE_VERSION,
        "workspace": root,
        "partial": [STATE_PARTIAL],
        "git": {
            "root": root,
            "branch": branch,
            "head": head,
            "upstream": null,
            "ahead": null,
            "behind": null,
            "remotes": [],
            "root_commits": [],
            "recent_commits": [],
            "staged": [],
            "unstaged": unstaged,
            "conflicted": [],
            "untracked": [],
            "staged_patch_bytes": 0,
            "unstaged_patch_bytes": 0,
        },
    });
    serde_json::from_value(evidence).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_state_is_evidence() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("fixtures/import/agent-bundle");
        let state = std::fs::read_to_string(dir.join("state.json")).unwrap();
        let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
        let e = evidence_from_state(&state, Some(&manifest)).expect("evidence");
        let git = e.git.as_ref().expect("git");
        assert_eq!(git.branch.as_deref(), Some("feat/config-loader"));
        assert_eq!(git.head.as_deref(), Some("4be17c0"));
        assert_eq!(git.unstaged.len(), 1);
        assert_eq!(git.unstaged[0].path, "src/main.rs");
        assert!(git.has_uncommitted());
        assert_eq!(e.workspace, "/home/dev/svc-billing");
        assert_eq!(e.partial, [STATE_PARTIAL]);
        assert!(evidence_from_state("{\"todo\": []}", None).is_none());
        assert!(evidence_from_state("not json", None).is_none());
    }
}
