//! Export: a bundle (or its first-parent chain) as the files another handoff tool reads.
//!
//! Two layouts, the ones `import-handoff` reads back (see `handoff::import`):
//!
//! - **frontmatter**: one `<created>-<from>.md` per bundle: YAML frontmatter (`id`,
//!   `parent`, `agent`, `next_agent`, `summary`, `status`, `next_task`, `created`) above
//!   the briefing's text (a frontmatter the briefing already had is replaced).
//! - **prowl**: a `.prowl/handoff/` directory: the newest bundle's briefing as
//!   `current.md`, each older one as `archive/<created>-<from>-to-<to>.md`, and `log.md`
//!   with one `<created> handoff <from> -> <to> (<file>)` line per bundle, oldest first.
//!   A name taken by an earlier file gets prowl's `-2`, `-3`, ... suffix.
//!   Prowl has no status field: a status is not exported in this layout.
//!
//! Pure: it returns the files to write, writing nothing.

use std::collections::BTreeMap;

use super::import::{NEXT_TASK, STATUS};

/// The layouts export writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Frontmatter,
    Prowl,
}

impl ExportFormat {
    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Frontmatter => "frontmatter",
            ExportFormat::Prowl => "prowl",
        }
    }
}

/// One bundle to export, as read from the store.
pub struct ExportBundle {
    /// The bundle id, hex.
    pub id: String,
    /// The bundle's `created`, RFC 3339 UTC.
    pub created: String,
    pub from: String,
    pub to: String,
    pub summary: String,
    pub note: String,
    pub metadata: BTreeMap<String, String>,
    /// `handoff.md`, when the bundle has one.
    pub briefing: Option<String>,
}

/// Who stands in for an empty agent name, where the layout needs one.
const UNKNOWN: &str = "unknown";

/// The files (relative slash paths and contents) that hold `chain` (oldest first, each
/// the first parent of the next) in `format`.
pub fn render(chain: &[ExportBundle], format: ExportFormat) -> Vec<(String, String)> {
    match format {
        ExportFormat::Frontmatter => frontmatter(chain),
        ExportFormat::Prowl => prowl(chain),
    }
}

fn frontmatter(chain: &[ExportBundle]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, b) in chain.iter().enumerate() {
        let mut text = String::from("---\n");
        let mut field = |key: &str, value: &str| {
            text.push_str(&format!("{key}: {}\n", quote(value)));
        };
        field("id", &b.id);
        field("agent", &b.from);
        field("next_agent", &b.to);
        field("summary", &b.summary);
        if let Some(status) = b.metadata.get(STATUS) {
            field("status", status);
        }
        let task = b.metadata.get(NEXT_TASK).unwrap_or(&b.note);
        if !task.is_empty() {
            field("next_task", task);
        }
        field("created", &b.created);
        match i.checked_sub(1).map(|p| &chain[p]) {
            Some(parent) => text.push_str(&format!("parent: {}\n", quote(&parent.id))),
            None => text.push_str("parent: null\n"),
        }
        text.push_str("---\n");
        text.push_str(body(b.briefing.as_deref().unwrap_or_default()));
        let stem = format!("{}-{}", name_time(&b.created), name_part(&b.from));
        let name = unique_name(&out, &stem);
        out.push((name, text));
    }
    out
}

fn prowl(chain: &[ExportBundle]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut log = String::new();
    for (i, b) in chain.iter().enumerate() {
        let (from, to) = (name_part(&b.from), name_part(&b.to));
        let path = if i + 1 == chain.len() {
            "current.md".to_string()
        } else {
            let stem = format!("archive/{}-{from}-to-{to}", name_time(&b.created));
            unique_name(&out, &stem)
        };
        log.push_str(&format!("{} handoff {from} -> {to} ({path})\n", b.created));
        out.push((
            path,
            body(b.briefing.as_deref().unwrap_or_default()).to_string(),
        ));
    }
    out.push(("log.md".to_string(), log));
    out
}

/// `<stem>.md`, or, when an earlier file of the export has that name, prowl's own answer
/// to a name taken (its `reserveFileURL`): `<stem>-2.md`, `<stem>-3.md`, ... Import reads
/// a `-<n>` beside the unsuffixed name as that suffix, so no two bundles share a file
/// and none is lost.
fn unique_name(out: &[(String, String)], stem: &str) -> String {
    let mut name = format!("{stem}.md");
    let mut n = 2;
    while out.iter().any(|(p, _)| *p == name) {
        name = format!("{stem}-{n}.md");
        n += 1;
    }
    name
}

/// A briefing without a frontmatter block of its own.
fn body(text: &str) -> &str {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return text;
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        if matches!(line.trim_end(), "---" | "...") {
            return rest[offset..].trim_start_matches(['\r', '\n']);
        }
    }
    text
}

/// A YAML double-quoted scalar (JSON's string syntax is a subset).
fn quote(value: &str) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "\"\"".to_string())
}

/// `2024-05-01T09:15:00Z` as a file-name timestamp, `2024-05-01T09-15-00Z`.
fn name_time(created: &str) -> String {
    created.replace(':', "-")
}

/// An agent name fit for a file name: no separators, spaces or `-to-`; empty is
/// `unknown`.
fn name_part(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let clean = clean.replace("-to-", "_to_");
    if clean.is_empty() || clean.starts_with('.') {
        format!("{UNKNOWN}{clean}")
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(id: &str, created: &str, from: &str, to: &str) -> ExportBundle {
        ExportBundle {
            id: id.into(),
            created: created.into(),
            from: from.into(),
            to: to.into(),
            summary: format!("work of {from}: \"quoted\""),
            note: String::new(),
            metadata: BTreeMap::new(),
            briefing: Some(format!("---\nold: x\n---\n\n## Objective\nby {from}\n")),
        }
    }

    #[test]
    fn layouts() {
        let chain = [
            bundle("aa", "2024-05-01T09:15:00Z", "claude", "codex"),
            bundle("bb", "2024-05-02T10:00:00Z", "codex x", ""),
        ];
        let files = render(&chain, ExportFormat::Prowl);
        let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "archive/2024-05-01T09-15-00Z-claude-to-codex.md",
                "current.md",
                "log.md"
            ]
        );
        assert_eq!(files[0].1, "## Objective\nby claude\n");
        assert_eq!(
            files[2].1,
            "2024-05-01T09:15:00Z handoff claude -> codex (archive/2024-05-01T09-15-00Z-claude-to-codex.md)\n\
             2024-05-02T10:00:00Z handoff codex_x -> unknown (current.md)\n"
        );
        let files = render(&chain, ExportFormat::Frontmatter);
        assert_eq!(files[1].0, "2024-05-02T10-00-00Z-codex_x.md");
        assert!(
            files[1]
                .1
                .starts_with("---\nid: \"bb\"\nagent: \"codex x\"\n"),
            "{}",
            files[1].1
        );
        assert!(
            files[1]
                .1
                .contains("summary: \"work of codex x: \\\"quoted\\\"\"\n")
        );
        assert!(
            files[1]
                .1
                .contains("parent: \"aa\"\n---\n## Objective\nby codex x\n")
        );
        assert!(files[0].1.contains("parent: null\n"));
    }

    #[test]
    fn names_taken_get_prowl_suffixes() {
        let chain = [
            bundle("aa", "2024-05-01T09:15:00Z", "claude", "codex"),
            bundle("bb", "2024-05-01T09:15:00Z", "claude", "codex"),
            bundle("cc", "2024-05-01T09:15:00Z", "claude", "codex"),
            bundle("dd", "2024-05-01T09:15:00Z", "claude", "codex"),
        ];
        let files = render(&chain, ExportFormat::Prowl);
        let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "archive/2024-05-01T09-15-00Z-claude-to-codex.md",
                "archive/2024-05-01T09-15-00Z-claude-to-codex-2.md",
                "archive/2024-05-01T09-15-00Z-claude-to-codex-3.md",
                "current.md",
                "log.md"
            ]
        );
    }
}
