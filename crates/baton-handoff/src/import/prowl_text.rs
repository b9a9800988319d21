//! The text files prowl writes beside its briefings: `log.md` transition lines and the
//! header fields of `sessions/*.md` excerpts.

use super::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;
use std::time::SystemTime;

use regex::Regex;

use baton_error::Result;
/// One transition line of `log.md`: `<time> handoff <from> -> <to> (<file>)`, or as
/// prowl writes it, `- <time>  <from> → <to>  pane=...` (a list item, no `handoff`).
pub(super) struct LogLine {
    pub(super) time: SystemTime,
    pub(super) from: String,
    pub(super) to: String,
    /// The briefing file the line names (`archive/...` or `current.md`), if any.
    pub(super) file: Option<String>,
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
pub(super) fn read_log(dir: &Path) -> Result<(Vec<LogLine>, Vec<String>)> {
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
            if !item.starts_with('#')
                && (said.contains("->") || said.contains('→') || timed_handoff)
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
pub(super) fn list_item(line: &str) -> &str {
    ["- ", "* ", "+ "]
        .iter()
        .find_map(|m| line.strip_prefix(m))
        .map_or(line, str::trim_start)
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
pub(super) fn session_fields(rel: &str, bytes: &[u8], metadata: &mut BTreeMap<String, String>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::plan;
    use crate::import::test_util::*;

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
            [
                ("claude", "codex"),
                ("codex", "gemini"),
                ("gemini", "claude")
            ]
        );
        assert_eq!(log[0].time, at("2026-11-20T10:00:00Z"), "no zone is UTC");
        assert_eq!(log[2].file.as_deref(), Some("current.md"));
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        for (w, line) in warnings.iter().zip([7, 8, 9]) {
            assert!(
                w.contains(&format!("log.md:{line}: log line names a transition")),
                "{w}"
            );
        }
        assert!(warnings[0].contains("not a valid time"), "{}", warnings[0]);
        assert!(
            warnings[1].contains("`yesterday` is not a timestamp"),
            "{}",
            warnings[1]
        );

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
}
