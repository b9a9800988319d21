//! Fuzzes `baton import-handoff` planning: frontmatter handoff files (YAML), prowl
//! directories and agent-handoff bundles (`manifest.json`, transcripts, timestamps).
//!
//! The input is a small directory tree: parts separated by the line `%%% PATH`, each
//! giving a relative path and its content. A leading part without a header is
//! `2024-05-01T10-00-00-fuzz.md`, so a bare input is one frontmatter handoff file.
#![no_main]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use baton::handoff::import::plan;
use libfuzzer_sys::fuzz_target;

const HEADER: &[u8] = b"%%% ";
const DEFAULT_NAME: &str = "2024-05-01T10-00-00-fuzz.md";

fn work_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir"))
        .path()
}

/// A safe relative path: up to 3 components of `A-Za-z0-9._-`, no `.` or `..`.
fn safe_path(raw: &[u8]) -> Option<PathBuf> {
    let text = std::str::from_utf8(raw).ok()?.trim();
    let parts: Vec<&str> = text.split('/').collect();
    let ok = !parts.is_empty()
        && parts.len() <= 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && *p != "."
                && *p != ".."
                && p.len() <= 64
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        });
    ok.then(|| parts.iter().collect())
}

fn split_parts(data: &[u8]) -> Vec<(PathBuf, &[u8])> {
    let header_at = |h: usize| data[h..].starts_with(HEADER) && (h == 0 || data[h - 1] == b'\n');
    let mut parts = Vec::new();
    let mut name = PathBuf::from(DEFAULT_NAME);
    let mut body_start = 0;
    let mut pos = 0;
    loop {
        match (pos..data.len()).find(|&h| header_at(h)) {
            None => {
                parts.push((name, &data[body_start..]));
                break;
            }
            Some(h) => {
                if h > 0 {
                    let body = &data[body_start..h];
                    parts.push((name, body.strip_suffix(b"\n").unwrap_or(body)));
                }
                let end = data[h..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(data.len(), |n| h + n);
                name = safe_path(&data[h + HEADER.len()..end])
                    .unwrap_or_else(|| PathBuf::from(DEFAULT_NAME));
                body_start = (end + 1).min(data.len());
                pos = body_start;
            }
        }
    }
    parts.truncate(12);
    parts
}

fuzz_target!(|data: &[u8]| {
    let root = work_dir().join("input");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir(&root).expect("mkdir input");
    for (path, content) in split_parts(data) {
        let full = root.join(&path);
        if let Some(parent) = full.parent()
            && std::fs::create_dir_all(parent).is_err()
        {
            continue;
        }
        // A name already used as a directory (or under a file) is skipped.
        let _ = std::fs::write(&full, content);
    }
    if let Ok(plan) = plan(&root) {
        assert!(!plan.bundles.is_empty());
        // Topological order: parents come before children, keys are unique.
        let mut seen = BTreeSet::new();
        for bundle in &plan.bundles {
            for parent in &bundle.parents {
                assert!(
                    seen.contains(parent),
                    "parent {parent:?} planned after its child"
                );
            }
            assert!(
                seen.insert(bundle.key.clone()),
                "key {:?} planned twice",
                bundle.key
            );
            assert_eq!(
                bundle.metadata.get("import.format").map(String::as_str),
                Some(plan.format.name())
            );
            assert!(bundle.metadata.contains_key("import.source"));
        }
    }
});
