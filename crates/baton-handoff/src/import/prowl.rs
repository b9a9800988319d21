//! Import of a prowl `.prowl/handoff/` directory: archived briefings, then `current.md`.

use super::prowl_text::{read_log, session_fields};
use super::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use baton_error::{Error, IoContext, Result};

/// The stem of an archived briefing that `current.md` was replaced by a newer one.
const REPLACED: &str = "replaced-current";

pub(super) fn plan_prowl(dir: &Path) -> Result<Plan> {
    struct Briefing {
        key: String,
        source: String,
        path: PathBuf,
        /// Ordering: the transition time, then 0 for a state before it (a replaced
        /// `current.md`), 1 for the briefing written at it; `current.md` comes last.
        order: (Option<SystemTime>, u8),
        /// Ties: the position of the `log.md` line naming the file (lines that name
        /// none last), the file name without a collision suffix, then the suffix.
        tie: (usize, String, u32),
        created: Option<SystemTime>,
        from: String,
        to: String,
    }
    let (log, warnings) = read_log(dir)?;
    let mut briefings = Vec::new();
    let archive = dir.join("archive");
    if archive.is_dir() {
        let entries = list_dir(&archive)?;
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        for e in &entries {
            let Some(stem) = e.name.strip_suffix(".md") else {
                continue;
            };
            if e.hidden() || e.kind == Kind::Dir {
                continue;
            }
            e.require_file()?;
            let (at, rest) = match name_timestamp(stem) {
                Some(Ok(found)) => found,
                Some(Err(msg)) => return Err(file_error(&e.path, msg)),
                None => {
                    return Err(file_error(
                        &e.path,
                        "archive file name has no parsable timestamp; expected \
                         `<ts>-<from>-to-<to>.md` or `<ts>-replaced-current.md` with a \
                         timestamp like 2024-05-01T10-00-00",
                    ));
                }
            };
            let prefix = &stem[..stem.len() - rest.len()];
            let (rest, seq) = collision_suffix(stem, rest, &names);
            let source = format!("archive/{}", e.name);
            let logged = log
                .iter()
                .position(|l| l.file.as_deref() == Some(source.as_str()));
            let tie = (logged.unwrap_or(usize::MAX), format!("{prefix}{rest}"), seq);
            let (order, created, from, to) = if rest == REPLACED {
                // The briefing that was current until `at`: written by the last
                // transition logged before it.
                match log.iter().rev().find(|l| l.time < at) {
                    Some(w) => ((Some(at), 0), Some(w.time), w.from.clone(), w.to.clone()),
                    None => ((Some(at), 0), Some(at), String::new(), String::new()),
                }
            } else {
                let (from, to) = rest.split_once("-to-").unwrap_or((rest, ""));
                ((Some(at), 1), Some(at), from.to_string(), to.to_string())
            };
            briefings.push(Briefing {
                key: e.name.clone(),
                source,
                path: e.path.clone(),
                order,
                tie,
                created,
                from,
                to,
            });
        }
    }
    briefings.sort_by(|a, b| (a.order, &a.tie).cmp(&(b.order, &b.tie)));
    let current = dir.join("current.md");
    if current.exists() {
        let meta = fs::symlink_metadata(&current).ctx("cannot read", &current)?;
        if !meta.is_file() {
            return Err(file_error(&current, "not a regular file"));
        }
        let last = briefings.iter().filter_map(|b| b.created).max();
        // The last transition of `log.md` wrote `current.md`: it names from and to, and
        // its time is when (else the file's modification time, when later than the
        // archive).
        let (created, from, to) = match log.last().filter(|l| last.is_none_or(|t| l.time >= t)) {
            Some(l) => (Some(l.time), l.from.clone(), l.to.clone()),
            None => (
                meta.modified().ok().filter(|m| last.is_none_or(|l| *m > l)),
                String::new(),
                String::new(),
            ),
        };
        briefings.push(Briefing {
            key: "current.md".into(),
            source: "current.md".into(),
            path: current,
            order: (None, 2),
            tie: (0, String::new(), 1),
            created,
            from,
            to,
        });
    }
    if briefings.is_empty() {
        return Err(Error::usage(format!(
            "{}: no briefing to import (neither current.md nor archive/*.md)",
            dir.display()
        )));
    }
    // Session excerpts go to the bundle of the first transition at or after their time
    // (the briefing that ends the work they show); untimed ones, and later ones, go last.
    let count = briefings.len();
    let mut sessions: Vec<Vec<(String, Vec<u8>)>> = vec![Vec::new(); count];
    let sessions_dir = dir.join("sessions");
    if sessions_dir.is_dir() {
        let mut files = Vec::new();
        collect_files(&sessions_dir, "sessions/", &mut files)?;
        for (rel, bytes) in files {
            let name = rel.trim_start_matches("sessions/");
            let stem = name.strip_suffix(".md").unwrap_or(name);
            let at = match name_timestamp(stem) {
                Some(Ok((t, _))) if !name.contains('/') => Some(t),
                _ => None,
            };
            let slot = at
                .and_then(|t| {
                    briefings
                        .iter()
                        .position(|b| b.created.is_some_and(|c| c >= t))
                })
                .unwrap_or(count - 1);
            sessions[slot].push((rel, bytes));
        }
    }
    let mut bundles: Vec<PlannedBundle> = Vec::with_capacity(count);
    for (i, (b, excerpts)) in briefings.into_iter().zip(sessions).enumerate() {
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
        }
        let mut metadata = import_metadata(Format::Prowl, &b.source);
        for (rel, bytes) in &excerpts {
            session_fields(rel, bytes, &mut metadata);
        }
        files.extend(excerpts);
        let parents = bundles
            .last()
            .map(|p| vec![p.key.clone()])
            .unwrap_or_default();
        if b.order.1 == 0 {
            metadata.insert("prowl.replaced".into(), "true".into());
        }
        bundles.push(PlannedBundle {
            key: b.key,
            parents,
            files,
            created: b.created,
            from: b.from,
            to: b.to,
            summary,
            note: String::new(),
            metadata,
        });
    }
    Ok(Plan {
        format: Format::Prowl,
        bundles,
        warnings,
    })
}

/// `rest` (the part of the archive file's `stem` after its timestamp) without the
/// `-<n>` (n >= 2) prowl adds when the name it wants is taken, and that n (1 when none):
/// a suffix counts only beside the unsuffixed file, so an agent named `codex-2` stays
/// itself.
fn collision_suffix<'a>(stem: &str, rest: &'a str, names: &[&str]) -> (&'a str, u32) {
    let Some((base, n)) = rest.rsplit_once('-') else {
        return (rest, 1);
    };
    let Some(seq) = n
        .parse::<u32>()
        .ok()
        .filter(|&s| s >= 2 && n.bytes().all(|b| b.is_ascii_digit()))
    else {
        return (rest, 1);
    };
    let unsuffixed = format!("{}.md", &stem[..stem.len() - n.len() - 1]);
    if names.contains(&unsuffixed.as_str()) {
        (base, seq)
    } else {
        (rest, 1)
    }
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
    use crate::import::test_util::*;

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
        assert_eq!(
            (current.from.as_str(), current.to.as_str()),
            ("claude", "codex"),
            "the last line of log.md"
        );
        assert_eq!(first.created, Some(at("2024-05-01T09:15:00Z")));
        assert_eq!(second.created, Some(at("2024-05-02T14:30:00Z")));
        assert_eq!(current.created, Some(at("2024-05-03T08:05:41Z")));

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
        assert_eq!(
            names(second),
            ["handoff.md", "sessions/2024-05-02T14-25-10-pane-2.md"]
        );
        assert_eq!(names(current), ["handoff.md", "context.md", "log.md"]);
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
        assert_eq!(current.metadata.len(), 3, "{:?}", current.metadata);
        assert_eq!(current.metadata[FINGERPRINT].len(), 64);
        assert!(plan.bundles.iter().all(|b| b.note.is_empty()));

        // The handoff directory itself gives the same plan.
        assert_eq!(detect(&dir).unwrap(), Format::Prowl);
        assert_eq!(super::plan(&dir).unwrap(), plan);
    }

    #[test]
    fn collision_suffixes_count_only_beside_the_unsuffixed_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for (name, text) in [
            ("archive/2024-05-01T10-00-00-a-to-b-3.md", "third"),
            ("archive/2024-05-01T10-00-00-a-to-b-2.md", "second"),
            ("archive/2024-05-01T10-00-00-a-to-b.md", "first"),
            ("archive/2024-05-01T10-00-00-c-to-gpt-5.md", "own name"),
        ] {
            write(dir, name, &format!("## Objective\n{text}\n"));
        }
        write(dir, "log.md", "# log\n");
        let plan = plan(dir).unwrap();
        let got: Vec<(&str, &str, &str)> = plan
            .bundles
            .iter()
            .map(|b| (b.summary.as_str(), b.from.as_str(), b.to.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("first", "a", "b"),
                ("second", "a", "b"),
                ("third", "a", "b"),
                ("own name", "c", "gpt-5"),
            ]
        );
    }

    #[test]
    fn replaced_current_is_the_state_before_its_transition() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write(
            dir,
            "log.md",
            "# log\n2024-05-01T09:00:00Z handoff ann -> bob (current.md)\n\
             2024-05-01T12:00:00Z handoff bob -> cy (current.md)\n",
        );
        write(
            dir,
            "archive/2024-05-01T12-00-00Z-replaced-current.md",
            "## Objective\nold\n",
        );
        write(dir, "current.md", "## Objective\nnew\n");
        write(dir, "sessions/2024-05-01T08-00-00-a.md", "early\n");
        write(dir, "sessions/2024-05-01T10-00-00-b.md", "between\n");
        write(dir, "sessions/notes.md", "untimed\n");
        let plan = plan(dir).unwrap();
        assert_eq!(
            keys(&plan),
            ["2024-05-01T12-00-00Z-replaced-current.md", "current.md"]
        );
        let [old, new] = &plan.bundles[..] else {
            panic!()
        };
        // Written by the transition before the replacement, not an agent named
        // "replaced-current".
        assert_eq!((old.from.as_str(), old.to.as_str()), ("ann", "bob"));
        assert_eq!(old.created, Some(at("2024-05-01T09:00:00Z")));
        assert_eq!(old.metadata["prowl.replaced"], "true");
        assert_eq!((new.from.as_str(), new.to.as_str()), ("bob", "cy"));
        assert_eq!(new.created, Some(at("2024-05-01T12:00:00Z")));
        assert_eq!(new.parents, [old.key.as_str()]);
        assert_eq!(
            names(old),
            ["handoff.md", "sessions/2024-05-01T08-00-00-a.md"]
        );
        assert_eq!(
            names(new),
            [
                "handoff.md",
                "log.md",
                "sessions/2024-05-01T10-00-00-b.md",
                "sessions/notes.md"
            ]
        );
        // Same input, same plan (fingerprints included).
        assert_eq!(super::plan(dir).unwrap(), plan);
    }
}
