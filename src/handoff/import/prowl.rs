//! Import of a prowl `.prowl/handoff/` directory: archived briefings, then `current.md`.

use super::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, IoContext, Result};

pub(super) fn plan_prowl(dir: &Path) -> Result<Plan> {
    struct Briefing {
        key: String,
        source: String,
        path: PathBuf,
        created: Option<SystemTime>,
        from: String,
        to: String,
    }
    let mut briefings = Vec::new();
    let archive = dir.join("archive");
    if archive.is_dir() {
        for e in list_dir(&archive)? {
            let Some(stem) = e.name.strip_suffix(".md") else {
                continue;
            };
            if e.hidden() || e.kind == Kind::Dir {
                continue;
            }
            e.require_file()?;
            let (created, rest) = match name_timestamp(stem) {
                Some(Ok(found)) => found,
                Some(Err(msg)) => return Err(file_error(&e.path, msg)),
                None => {
                    return Err(file_error(
                        &e.path,
                        "archive file name has no parsable timestamp; expected \
                         `<ts>-<from>-to-<to>.md` with a timestamp like 2024-05-01T10-00-00",
                    ));
                }
            };
            let (from, to) = rest.split_once("-to-").unwrap_or((rest, ""));
            briefings.push(Briefing {
                key: e.name.clone(),
                source: format!("archive/{}", e.name),
                path: e.path.clone(),
                created: Some(created),
                from: from.to_string(),
                to: to.to_string(),
            });
        }
    }
    briefings.sort_by(|a, b| (a.created, &a.key).cmp(&(b.created, &b.key)));
    let current = dir.join("current.md");
    if current.exists() {
        let meta = fs::symlink_metadata(&current).ctx("cannot read", &current)?;
        if !meta.is_file() {
            return Err(file_error(&current, "not a regular file"));
        }
        let last = briefings.last().and_then(|b| b.created);
        let created = meta.modified().ok().filter(|m| last.is_none_or(|l| *m > l));
        briefings.push(Briefing {
            key: "current.md".into(),
            source: "current.md".into(),
            path: current,
            created,
            from: String::new(),
            to: String::new(),
        });
    }
    if briefings.is_empty() {
        return Err(Error::usage(format!(
            "{}: no briefing to import (neither current.md nor archive/*.md)",
            dir.display()
        )));
    }
    let count = briefings.len();
    let mut bundles: Vec<PlannedBundle> = Vec::with_capacity(count);
    for (i, b) in briefings.into_iter().enumerate() {
        let bytes = read(&b.path)?;
        let summary = objective_line(text(&b.path, &bytes)?);
        let mut files = vec![("handoff.md".to_string(), bytes)];
        if i + 1 == count {
            for name in ["context.md", "log.md"] {
                let path = dir.join(name);
                if path.exists() {
                    files.push((name.to_string(), read_regular(&path)?));
                }
            }
            let sessions = dir.join("sessions");
            if sessions.is_dir() {
                collect_files(&sessions, "sessions/", &mut files)?;
            }
        }
        let parents = bundles
            .last()
            .map(|p| vec![p.key.clone()])
            .unwrap_or_default();
        bundles.push(PlannedBundle {
            key: b.key,
            parents,
            files,
            created: b.created,
            from: b.from,
            to: b.to,
            summary,
            note: String::new(),
            metadata: import_metadata(Format::Prowl, &b.source),
        });
    }
    Ok(Plan {
        format: Format::Prowl,
        bundles,
    })
}

/// The first non-blank line of the `## Objective` section, without a list marker.
pub(super) fn objective_line(text: &str) -> String {
    let mut lines = text.lines();
    for line in lines.by_ref() {
        if line.trim().eq_ignore_ascii_case("## objective") {
            break;
        }
    }
    for line in lines {
        let line = line.trim();
        if line.starts_with('#') {
            break;
        }
        if !line.is_empty() {
            let line = line
                .strip_prefix("- ")
                .or_else(|| line.strip_prefix("* "))
                .unwrap_or(line);
            return line.trim().to_string();
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::import::test_util::*;

    #[test]
    fn prowl_project_root() {
        let root = fixture("prowl");
        assert_eq!(detect(&root).unwrap(), Format::Prowl);
        let plan = plan(&root).unwrap();
        assert_eq!(plan.format, Format::Prowl);
        assert_eq!(
            keys(&plan),
            [
                "2024-05-01T09-15-00-claude-to-codex.md",
                "2024-05-02T14-30-00Z-codex-to-claude.md",
                "current.md"
            ]
        );
        let [first, second, current] = &plan.bundles[..] else {
            panic!()
        };
        assert!(first.parents.is_empty());
        assert_eq!(second.parents, [first.key.as_str()]);
        assert_eq!(current.parents, [second.key.as_str()]);

        assert_eq!(
            (first.from.as_str(), first.to.as_str()),
            ("claude", "codex")
        );
        assert_eq!(
            (second.from.as_str(), second.to.as_str()),
            ("codex", "claude")
        );
        assert_eq!((current.from.as_str(), current.to.as_str()), ("", ""));
        assert_eq!(first.created, Some(at("2024-05-01T09:15:00Z")));
        assert_eq!(second.created, Some(at("2024-05-02T14:30:00Z")));
        assert!(
            current
                .created
                .is_none_or(|t| t > at("2024-05-02T14:30:00Z"))
        );

        assert_eq!(
            first.summary,
            "Add idempotency keys to the `POST /transfers` endpoint."
        );
        assert_eq!(
            second.summary,
            "Finish replay handling for idempotent transfers and cover it with tests."
        );
        assert_eq!(
            current.summary,
            "Expire idempotency keys and document the replay semantics."
        );

        assert_eq!(names(first), ["handoff.md"]);
        assert_eq!(names(second), ["handoff.md"]);
        assert_eq!(
            names(current),
            [
                "handoff.md",
                "context.md",
                "log.md",
                "sessions/2024-05-02T14-25-10-pane-2.md"
            ]
        );
        let dir = root.join(".prowl/handoff");
        assert_eq!(
            file(current, "handoff.md"),
            fs::read(dir.join("current.md")).unwrap()
        );
        assert_eq!(
            file(first, "handoff.md"),
            fs::read(dir.join("archive/2024-05-01T09-15-00-claude-to-codex.md")).unwrap()
        );
        assert_eq!(first.metadata["import.format"], "prowl");
        assert_eq!(
            first.metadata["import.source"],
            "archive/2024-05-01T09-15-00-claude-to-codex.md"
        );
        assert_eq!(current.metadata["import.source"], "current.md");
        assert_eq!(current.metadata.len(), 2);
        assert!(plan.bundles.iter().all(|b| b.note.is_empty()));

        // The handoff directory itself gives the same plan.
        assert_eq!(detect(&dir).unwrap(), Format::Prowl);
        assert_eq!(super::plan(&dir).unwrap(), plan);
    }
}
