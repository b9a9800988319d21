//! Import of a prowl `.prowl/handoff/` directory: archived briefings, then `current.md`.

use super::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::SystemTime;

use regex::Regex;

use crate::error::{Error, IoContext, Result};

/// One transition line of `log.md`: `<time> handoff <from> -> <to> (<file>)`, or as
/// prowl writes it, `- <time>  <from> → <to>  pane=...` (a list item, no `handoff`).
struct LogLine {
    time: SystemTime,
    from: String,
    to: String,
    /// The briefing file the line names (`archive/...` or `current.md`), if any.
    file: Option<String>,
}

static LOG_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?P<time>\S+)\s+(?:handoff\s+)?(?P<from>\S+?)\s*(?:->|→)\s*(?P<to>[^\s(]+)",
        r"(?:\s*\((?P<file>[^)]*)\))?(?:\s.*)?$",
    ))
    .expect("valid regex")
});

/// The transition lines of `log.md`, in file order, and a warning (`path:line: ...`) for
/// each line that names a transition (an arrow, or `handoff` after a time) but cannot
/// be read; other lines (headings, `save` events, free text) are skipped.
fn read_log(dir: &Path) -> Result<(Vec<LogLine>, Vec<String>)> {
    let path = dir.join("log.md");
    if !path.exists() {
        return Ok((Vec::new(), Vec::new()));
    }
    let bytes = read_regular(&path)?;
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for (i, line) in text(&path, &bytes)?.lines().enumerate() {
        let item = list_item(line.trim());
        // A note is free text: an arrow in it names no transition.
        let said = item.split_once(" note=").map_or(item, |(before, _)| before);
        let warn = |why: &str| {
            format!(
                "{}:{}: log line names a transition but cannot be read ({why}); skipped",
                path.display(),
                i + 1
            )
        };
        let Some(c) = LOG_LINE.captures(said) else {
            let mut words = said.split_whitespace();
            let timed_handoff = words.next().is_some_and(|w| full_timestamp(w).is_some())
                && words.next() == Some("handoff");
            if !item.starts_with('#') && (said.contains("->") || said.contains('→') || timed_handoff)
            {
                warnings.push(warn("expected `<time> [handoff] <from> -> <to>`"));
            }
            continue;
        };
        let time = match full_timestamp(&c["time"]) {
            Some(Ok(t)) => t,
            Some(Err(msg)) => {
                warnings.push(warn(&msg));
                continue;
            }
            None => {
                warnings.push(warn(&format!(
                    "`{}` is not a timestamp like 2024-05-01T10:00:00Z",
                    &c["time"]
                )));
                continue;
            }
        };
        out.push(LogLine {
            time,
            from: c["from"].to_string(),
            to: c["to"].to_string(),
            file: c.name("file").map(|m| m.as_str().trim().to_string()),
        });
    }
    Ok((out, warnings))
}

/// A Markdown list item's text (`- x`, `* x`, `+ x`), else the line.
fn list_item(line: &str) -> &str {
    ["- ", "* ", "+ "]
        .iter()
        .find_map(|m| line.strip_prefix(m))
        .map_or(line, str::trim_start)
}

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
            let tie = (
                logged.unwrap_or(usize::MAX),
                format!("{prefix}{rest}"),
                seq,
            );
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

/// The metadata key prefix of a session excerpt's fields:
/// `prowl.session.<name>.<field>`, `<name>` being its path below `sessions/` without
/// `.md`.
pub(super) const SESSION: &str = "prowl.session.";

/// The names a session excerpt's header gives its fields (lowercase), and the metadata
/// field each becomes.
const SESSION_FIELDS: &[(&str, &str)] = &[
    ("agent", "agent"),
    ("session id", "session"),
    ("session", "session"),
    ("session_id", "session"),
    ("confidence", "confidence"),
    ("native transcript", "path"),
    ("transcript", "path"),
    ("transcript path", "path"),
    ("path", "path"),
    ("pane", "pane"),
    ("source", "source"),
    ("captured", "captured"),
];

/// Record the header fields of the session excerpt `rel` (`sessions/...`) in `metadata`:
/// the `- Key: value` lines prowl writes above the excerpt itself (`- Agent: codex`,
/// `- Session ID: ...`, `- Confidence: high`, `- Native transcript: /path`), read up to
/// the first `##` heading or code fence so the terminal text is never taken for one. A
/// value prowl wrote as `unknown` is no value.
fn session_fields(rel: &str, bytes: &[u8], metadata: &mut BTreeMap<String, String>) {
    let Some(name) = rel
        .strip_prefix("sessions/")
        .and_then(|n| n.strip_suffix(".md"))
    else {
        return;
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("##") || line.starts_with("```") || line.starts_with("~~~") {
            break;
        }
        let Some((key, value)) = list_item(line).split_once(':') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim();
        let Some((_, field)) = SESSION_FIELDS.iter().find(|(k, _)| *k == key) else {
            continue;
        };
        if value.is_empty() || value.eq_ignore_ascii_case("unknown") {
            continue;
        }
        metadata
            .entry(format!("{SESSION}{name}.{field}"))
            .or_insert_with(|| value.to_string());
    }
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
    fn log_lines_as_list_items_with_either_arrow_and_warnings_for_the_unreadable() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write(
            dir,
            "log.md",
            "# Handoff log\n\n\
             - 2026-11-20T10:00:00 claude -> codex\n\
             - 2026-11-20T11:00:00Z  codex → gemini  pane=p2  preparation=completed  note=\"a -> b\"\n\
             * 2026-11-20T12:00:00Z handoff gemini->claude (current.md)\n\
             - 2026-11-20T12:30:00Z  save  agent=claude  repos=1  note=\"moved x -> y\"\n\
             - 2026-13-40T10:00:00Z claude -> codex\n\
             - yesterday claude -> codex\n\
             - 2026-11-20T13:00:00Z handoff claude\n\
             Free text, no transition.\n",
        );
        write(
            dir,
            "archive/2026-11-20T11-00-00Z-replaced-current.md",
            "## Objective\nold\n",
        );
        write(dir, "current.md", "## Objective\nnew\n");
        let (log, warnings) = read_log(dir).unwrap();
        let read: Vec<(&str, &str)> = log
            .iter()
            .map(|l| (l.from.as_str(), l.to.as_str()))
            .collect();
        assert_eq!(
            read,
            [("claude", "codex"), ("codex", "gemini"), ("gemini", "claude")]
        );
        assert_eq!(log[0].time, at("2026-11-20T10:00:00Z"), "no zone is UTC");
        assert_eq!(log[2].file.as_deref(), Some("current.md"));
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        for (w, line) in warnings.iter().zip([7, 8, 9]) {
            assert!(w.contains(&format!("log.md:{line}: log line names a transition")), "{w}");
        }
        assert!(warnings[0].contains("not a valid time"), "{}", warnings[0]);
        assert!(warnings[1].contains("`yesterday` is not a timestamp"), "{}", warnings[1]);

        let plan = plan(dir).unwrap();
        assert_eq!(plan.warnings, warnings);
        let [old, new] = &plan.bundles[..] else {
            panic!()
        };
        assert_eq!((old.from.as_str(), old.to.as_str()), ("claude", "codex"));
        assert_eq!((new.from.as_str(), new.to.as_str()), ("gemini", "claude"));
        assert_eq!(new.created, Some(at("2026-11-20T12:00:00Z")));
    }

    #[test]
    fn session_excerpt_fields_are_metadata() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        // As prowl's HandoffStore renders a session context.
        write(
            dir,
            "sessions/2026-11-20T09-59-00-p1.md",
            "# Handoff Session Context\n\n- Captured: 2026-11-20T09:59:00Z\n\
             - Agent: claude\n- Session ID: 5f0c1d2e\n- Pane: p1 (editor)\n\
             - Source: hook\n- Confidence: high\n\
             - Native transcript: /home/dev/.claude/projects/x/5f0c1d2e.jsonl\n\n\
             ## Terminal Excerpt\n\n````text\nAgent: not a field\n````\n",
        );
        write(
            dir,
            "sessions/2026-11-20T09-58-00-p2.md",
            "# Handoff Session Context\n\n- Agent: unknown\n- Session ID: unknown\n\
             - Confidence: low\n",
        );
        write(dir, "current.md", "## Objective\nx\n");
        let plan = plan(dir).unwrap();
        let m = &plan.bundles[0].metadata;
        let p1 = |f: &str| m[&format!("{SESSION}2026-11-20T09-59-00-p1.{f}")].as_str();
        assert_eq!(p1("agent"), "claude");
        assert_eq!(p1("session"), "5f0c1d2e");
        assert_eq!(p1("confidence"), "high");
        assert_eq!(p1("path"), "/home/dev/.claude/projects/x/5f0c1d2e.jsonl");
        assert_eq!(p1("pane"), "p1 (editor)");
        assert_eq!(p1("source"), "hook");
        assert_eq!(p1("captured"), "2026-11-20T09:59:00Z");
        let p2: Vec<&str> = m
            .keys()
            .filter(|k| k.contains("-p2."))
            .map(String::as_str)
            .collect();
        assert_eq!(p2, [format!("{SESSION}2026-11-20T09-58-00-p2.confidence")]);
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
