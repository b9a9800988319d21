//! Export: a bundle (or its whole history) as the files another handoff tool reads.
//!
//! Two layouts, the ones `import-handoff` reads back (see `handoff::import`):
//!
//! - **frontmatter**: one `<created>-<from>.md` per bundle (`%Y-%m-%dT%H-%M-%S`, as the
//!   protocol names them): YAML frontmatter (`id`, `parent`, `agent`, `next_agent`,
//!   `summary`, `status`, `next_task`, `created`) above the briefing's text (a frontmatter
//!   the briefing already had is replaced). A bundle imported from frontmatter gets back
//!   its `id`, file name and every key it had, so a re-import gives the same bundle.
//! - **prowl**: a `.prowl/handoff/` directory: the newest bundle's briefing as
//!   `current.md`, each older one as `archive/<created>-<from>-to-<to>.md`, and `log.md`
//!   with one `<created> handoff <from> -> <to> (<file>)` line per bundle, oldest first.
//!   A name taken by an earlier file gets prowl's `-2`, `-3`, ... suffix; a bundle
//!   imported from prowl keeps its archive name. Each bundle's `sessions/*` excerpts go
//!   along, and REV's `context.md`.
//!   Prowl has no status field: a status is not exported in this layout.
//!
//! Pure: it returns the files to write, writing nothing.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::import::{NEXT_TASK, STATUS};

/// The layouts export writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Frontmatter,
    Prowl,
}

impl ExportFormat {
    pub const ALL: [ExportFormat; 2] = [ExportFormat::Frontmatter, ExportFormat::Prowl];

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
    /// The ids (hex) of its parents that are exported too, in order.
    pub parents: Vec<String>,
    /// Other files of the bundle the layout holds (prowl: `context.md`, `sessions/*`).
    pub extra: Vec<(String, String)>,
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

/// The files (relative slash paths and contents) that hold `chain` (every parent before
/// its children, the exported REV last) in `format`. Prowl's history is a line: its
/// bundles follow one another in that order.
pub fn render(chain: &[ExportBundle], format: ExportFormat) -> Vec<(String, String)> {
    match format {
        ExportFormat::Frontmatter => frontmatter(chain),
        ExportFormat::Prowl => prowl(chain),
    }
}

fn frontmatter(bundles: &[ExportBundle]) -> Vec<(String, String)> {
    let ids = frontmatter_ids(bundles);
    let index: HashMap<&str, usize> = bundles
        .iter()
        .enumerate()
        .map(|(i, b)| (b.id.as_str(), i))
        .collect();
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, b) in bundles.iter().enumerate() {
        let mut text = String::from("---\n");
        let mut field = |key: &str, value: &str| {
            text.push_str(&format!("{}: {}\n", yaml_key(key), quote(value)));
        };
        field("id", &ids[i]);
        let parents: Vec<String> = b
            .parents
            .iter()
            .filter_map(|p| index.get(p.as_str()))
            .map(|&p| quote(&ids[p]))
            .collect();
        let original = imported_frontmatter(b);
        let parent_line = match &parents[..] {
            [] => "parent: null\n".to_string(),
            [one] => format!("parent: {one}\n"),
            many => format!("parent: [{}]\n", many.join(", ")),
        };
        if original {
            // Written back as it was read: every key of the original frontmatter, with
            // the values import flattened (lists joined with `,`, null as empty), which
            // import reads back to the same metadata.
            if !parents.is_empty() || b.metadata.contains_key("frontmatter.parent") {
                text.push_str(&parent_line);
            }
            let mut field = |key: &str, value: &str| {
                text.push_str(&format!("{}: {}\n", yaml_key(key), quote(value)));
            };
            for (key, value) in &b.metadata {
                match key.strip_prefix(FRONTMATTER_KEY) {
                    Some("id" | "parent") | None => {}
                    Some(key) => field(key, value),
                }
            }
        } else {
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
            text.push_str(&parent_line);
        }
        text.push_str("---\n");
        text.push_str(body(b.briefing.as_deref().unwrap_or_default()));
        let name = match original_name(b) {
            Some(name) if !out.iter().any(|(p, _)| p == name) => name.to_string(),
            _ => {
                let stem = format!("{}-{}", frontmatter_time(&b.created), name_part(&b.from));
                unique_name(&out, &stem)
            }
        };
        out.push((name, text));
    }
    out
}

/// Where import keeps a frontmatter key: `frontmatter.<key>`.
const FRONTMATTER_KEY: &str = "frontmatter.";

/// Whether `b` was imported from a frontmatter file (and so has its keys in metadata).
fn imported_frontmatter(b: &ExportBundle) -> bool {
    b.metadata.get("import.format").map(String::as_str) == Some("frontmatter")
}

/// Each bundle's `id`: the one its frontmatter had when it was imported from one (the
/// first bundle to claim an id keeps it), else the bundle id.
fn frontmatter_ids(bundles: &[ExportBundle]) -> Vec<String> {
    let mut used = HashSet::new();
    let mut ids: Vec<Option<String>> = bundles
        .iter()
        .map(|b| {
            let id = b.metadata.get("frontmatter.id")?;
            (imported_frontmatter(b) && !id.trim().is_empty() && used.insert(id.trim()))
                .then(|| id.clone())
        })
        .collect();
    for (slot, b) in ids.iter_mut().zip(bundles) {
        if slot.is_none() {
            *slot = Some(b.id.clone());
        }
    }
    ids.into_iter().flatten().collect()
}

/// The file name a bundle imported from frontmatter had, when it is a plain `.md` name
/// whose timestamp is the bundle's `created` (so a re-import reads the same time).
fn original_name(b: &ExportBundle) -> Option<&str> {
    if !imported_frontmatter(b) {
        return None;
    }
    let name = b.metadata.get("import.source")?;
    let stem = name.strip_suffix(".md")?;
    let plain = !stem.is_empty()
        && !name.starts_with('.')
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control());
    let same_time = super::import::file_name_time(stem)
        .is_some_and(|t| baton_format::bundle::format_time(t) == b.created);
    (plain && same_time).then_some(name.as_str())
}

/// The `archive/` name a bundle imported from prowl had, when it is a plain name whose
/// timestamp a re-import reads back as the bundle's: its `created`, or for a replaced
/// `current.md` the transition that replaced it (its `created` comes from `log.md`).
fn original_archive_name(b: &ExportBundle) -> Option<String> {
    if b.metadata.get("import.format").map(String::as_str) != Some("prowl") {
        return None;
    }
    let name = b.metadata.get("import.source")?.strip_prefix("archive/")?;
    let stem = name.strip_suffix(".md")?;
    let plain = !stem.is_empty()
        && !name.starts_with('.')
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control());
    let time = super::import::file_name_time(stem)?;
    let replaced = b.metadata.get("prowl.replaced").map(String::as_str) == Some("true");
    let same_time = replaced || baton_format::bundle::format_time(time) == b.created;
    (plain && same_time).then(|| format!("archive/{name}"))
}

/// A YAML mapping key: plain when that reads back as the same string, else quoted.
fn yaml_key(key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && !matches!(
            key.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    if plain { key.to_string() } else { quote(key) }
}

fn prowl(chain: &[ExportBundle]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut log = String::new();
    for (i, b) in chain.iter().enumerate() {
        let (from, to) = (name_part(&b.from), name_part(&b.to));
        let last = i + 1 == chain.len();
        let path = if last {
            "current.md".to_string()
        } else {
            match original_archive_name(b) {
                Some(name) if !out.iter().any(|(p, _)| *p == name) => name,
                _ => {
                    let stem = format!("archive/{}-{from}-to-{to}", name_time(&b.created));
                    unique_name(&out, &stem)
                }
            }
        };
        log.push_str(&format!("{} handoff {from} -> {to} ({path})\n", b.created));
        out.push((
            path,
            body(b.briefing.as_deref().unwrap_or_default()).to_string(),
        ));
        for (path, text) in &b.extra {
            // Prowl has one context.md: REV's.
            if path == "context.md" && !last {
                continue;
            }
            // The same excerpt in two bundles (imported twice) is one file.
            if out.iter().any(|(p, t)| p == path && t == text) {
                continue;
            }
            let path = match path.strip_suffix(".md") {
                Some(stem) => unique_name(&out, stem),
                None => {
                    let mut name = path.clone();
                    let mut n = 2;
                    while out.iter().any(|(p, _)| *p == name) {
                        name = format!("{path}-{n}");
                        n += 1;
                    }
                    name
                }
            };
            out.push((path, text.clone()));
        }
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

/// `2024-05-01T09:15:00Z` as the frontmatter protocol names files, `2024-05-01T09-15-00`
/// (its `date +%Y-%m-%dT%H-%M-%S`; import reads a name without zone as UTC).
fn frontmatter_time(created: &str) -> String {
    name_time(created.strip_suffix('Z').unwrap_or(created))
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
            parents: Vec::new(),
            extra: Vec::new(),
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
        let mut chain = [
            bundle("aa", "2024-05-01T09:15:00Z", "claude", "codex"),
            bundle("bb", "2024-05-02T10:00:00Z", "codex x", ""),
        ];
        chain[1].parents = vec!["aa".into()];
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
        // Named as the frontmatter protocol names its files: no zone.
        assert_eq!(files[0].0, "2024-05-01T09-15-00-claude.md");
        assert_eq!(files[1].0, "2024-05-02T10-00-00-codex_x.md");
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
    fn imported_frontmatter_is_written_back_with_its_ids_keys_and_merges() {
        let mut a = bundle("aa", "2024-06-03T09:00:00Z", "planner", "backend");
        let mut b = bundle("bb", "2024-06-03T11:30:00Z", "backend", "reviewer");
        let mut c = bundle("cc", "2024-06-03T11:45:00Z", "frontend", "reviewer");
        let mut d = bundle("dd", "2024-06-03T15:10:00Z", "reviewer", "backend");
        for (x, id, name) in [
            (&mut a, "plan-1", "2024-06-03T09-00-00-planner.md"),
            (&mut b, "api-2", "2024-06-03T11-30-00-backend.md"),
            (&mut c, "ui-3", "2024-06-03T11-45-00-frontend.md"),
            // Its name's time is not its created: not kept.
            (&mut d, "review-4", "2024-06-03T15-00-00-reviewer.md"),
        ] {
            x.briefing = Some("\n## Context\nbody\n".into());
            x.metadata = BTreeMap::from([
                ("import.format".into(), "frontmatter".into()),
                ("import.source".into(), name.into()),
                ("frontmatter.id".into(), id.into()),
                ("frontmatter.parent".into(), String::new()),
                ("frontmatter.tags".into(), "x,y".into()),
                ("frontmatter.null".into(), String::new()),
            ]);
        }
        b.parents = vec!["aa".into()];
        c.parents = vec!["aa".into()];
        d.parents = vec!["cc".into(), "bb".into()];
        let files = render(&[a, b, c, d], ExportFormat::Frontmatter);
        let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "2024-06-03T09-00-00-planner.md",
                "2024-06-03T11-30-00-backend.md",
                "2024-06-03T11-45-00-frontend.md",
                "2024-06-03T15-10-00-reviewer.md"
            ]
        );
        assert_eq!(
            files[3].1,
            "---\nid: \"review-4\"\nparent: [\"ui-3\", \"api-2\"]\n\"null\": \"\"\n\
             tags: \"x,y\"\n---\n\n## Context\nbody\n"
        );
        assert!(
            files[0]
                .1
                .starts_with("---\nid: \"plan-1\"\nparent: null\n")
        );
        assert!(files[1].1.contains("parent: \"plan-1\"\n"));
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
