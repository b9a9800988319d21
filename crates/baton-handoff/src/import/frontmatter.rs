//! Import of a folder of `<TS>-<agent>.md` handoff files with flat YAML frontmatter.

use super::*;
use std::collections::HashMap;
use std::path::Path;
use std::sync::LazyLock;
use std::time::SystemTime;

use regex::Regex;
use serde_norway::Value as Yaml;

use baton_error::{Error, Result};

/// Frontmatter keys naming what blocks the work, first found wins.
const BLOCKER_KEYS: &[&str] = &[
    "blocker",
    "blockers",
    "blocked_by",
    "blocked_reason",
    "blocking_reason",
];
/// Frontmatter keys naming the question to discuss, first found wins.
const QUESTION_KEYS: &[&str] = &["question", "open_question", "open_questions", "discussion"];

/// The parsed frontmatter of one handoff file, with what ordering needs.
pub(super) struct FrontmatterFile {
    pub(super) node: Node,
    pub(super) bundle: PlannedBundle,
}

pub(super) fn plan_frontmatter(dir: &Path) -> Result<Plan> {
    let mut parsed = Vec::new();
    for e in list_dir(dir)? {
        let Some(stem) = e.name.strip_suffix(".md") else {
            continue;
        };
        if e.hidden() || e.kind == Kind::Dir {
            continue;
        }
        e.require_file()?;
        let named = match name_timestamp(stem) {
            Some(Ok((time, agent))) => Some((time, agent.to_string())),
            Some(Err(msg)) => return Err(file_error(&e.path, msg)),
            None => None,
        };
        let bytes = read(&e.path)?;
        if !opens_frontmatter(&bytes) {
            if named.is_some() {
                return Err(line_error(
                    &e.path,
                    1,
                    "handoff file has no frontmatter (its first line must be `---`)",
                ));
            }
            continue;
        }
        parsed.push(parse_frontmatter_file(&e, bytes, named)?);
    }
    if parsed.is_empty() {
        return Err(Error::usage(format!("{}: no handoff files", dir.display())).with_hint(LAYOUTS));
    }
    let nodes: Vec<&Node> = parsed.iter().map(|f| &f.node).collect();
    let order = topological_order(&nodes, "handoff file")?;
    let mut slots: Vec<Option<PlannedBundle>> =
        parsed.into_iter().map(|f| Some(f.bundle)).collect();
    let bundles = order.into_iter().filter_map(|i| slots[i].take()).collect();
    Ok(Plan {
        warnings: Vec::new(),
        format: Format::Frontmatter,
        bundles,
    })
}

pub(super) fn parse_frontmatter_file(
    e: &Entry,
    bytes: Vec<u8>,
    named: Option<(SystemTime, String)>,
) -> Result<FrontmatterFile> {
    let path = &e.path;
    let content = text(path, &bytes)?;
    let lines: Vec<&str> = content
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let Some(close) = lines
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, l)| matches!(l.trim_end(), "---" | "..."))
        .map(|(i, _)| i)
    else {
        return Err(line_error(
            path,
            1,
            "frontmatter opened here is never closed by a `---` line",
        ));
    };
    // File line of YAML line 1 is 2 (line 1 is the opening `---`).
    let yaml_lines = &lines[1..close];
    let yaml = yaml_lines.join("\n");
    let keys = key_lines(yaml_lines, 2);
    let value: Yaml = serde_norway::from_str(&yaml).map_err(|err| {
        let msg = err.to_string();
        if msg.starts_with("duplicate entry with key")
            && let Some((key, lines)) = keys.iter().find(|(_, lines)| lines.len() > 1)
        {
            return line_error(
                path,
                lines[1],
                format!(
                    "duplicate frontmatter key `{key}` (first on line {})",
                    lines[0]
                ),
            );
        }
        let line = err.location().map_or(1, |l| l.line() + 1);
        line_error(
            path,
            line,
            format!("invalid YAML frontmatter: {}", shift_yaml_lines(&msg, 1)),
        )
    })?;
    let mapping = match value {
        Yaml::Null => serde_norway::Mapping::new(),
        Yaml::Mapping(m) => m,
        _ => {
            return Err(line_error(
                path,
                2,
                "frontmatter must be a mapping of keys to values",
            ));
        }
    };
    let key_line = |key: &str| keys.get(key).and_then(|l| l.first().copied()).unwrap_or(1);

    let mut metadata = import_metadata(Format::Frontmatter, &e.name);
    let mut id = None;
    let mut parents = Vec::new();
    let (mut agent, mut to, mut summary, mut note) =
        (String::new(), String::new(), String::new(), String::new());
    for (k, v) in &mapping {
        let Yaml::String(key) = k else {
            return Err(line_error(path, 2, "frontmatter keys must be strings"));
        };
        let line = key_line(key);
        match key.as_str() {
            "id" => match yaml_id(v) {
                Some(found) if !found.is_empty() => id = Some(found),
                Some(_) => return Err(line_error(path, line, "frontmatter `id` is empty")),
                None => {
                    return Err(line_error(path, line, "frontmatter `id` must be a string"));
                }
            },
            "parent" => {
                parents = yaml_parents(v).ok_or_else(|| {
                    line_error(
                        path,
                        line,
                        "frontmatter `parent` must be an id, a list of ids or null",
                    )
                })?;
                if let Some(dup) = first_duplicate(&parents) {
                    return Err(line_error(
                        path,
                        line,
                        format!("frontmatter `parent` lists `{dup}` twice"),
                    ));
                }
            }
            "agent" | "next_agent" | "summary" | "next_task" | "status" => {
                let Some(scalar) = yaml_scalar(v) else {
                    return Err(line_error(
                        path,
                        line,
                        format!("frontmatter `{key}` must be a string"),
                    ));
                };
                match key.as_str() {
                    "agent" => agent = scalar,
                    "next_agent" => to = scalar,
                    "summary" => summary = scalar,
                    "next_task" => note = scalar,
                    _ => {}
                }
            }
            _ => {}
        }
        let Some(flat) = yaml_flat_text(v) else {
            return Err(line_error(
                path,
                line,
                format!("frontmatter must be flat: `{key}` holds a nested value"),
            ));
        };
        metadata.insert(format!("frontmatter.{key}"), flat);
    }
    let Some(id) = id else {
        return Err(line_error(path, 1, "frontmatter has no `id`"));
    };
    // What the handoff says about itself, for the kickoff: the frontmatter's own keys,
    // else the body's `## Blockers` / `## Open Questions`.
    let body = lines[close + 1..].join("\n");
    let first_key = |names: &[&str]| {
        names.iter().find_map(|n| {
            metadata
                .get(&format!("frontmatter.{n}"))
                .filter(|v| !v.trim().is_empty())
                .cloned()
        })
    };
    let fields = [
        (STATUS, first_key(&["status"])),
        (NEXT_TASK, first_key(&["next_task"])),
        (
            BLOCKER,
            first_key(BLOCKER_KEYS).or_else(|| markdown_section(&body, &["Blockers", "Blocker"])),
        ),
        (
            QUESTION,
            first_key(QUESTION_KEYS)
                .or_else(|| markdown_section(&body, &["Open Questions", "Questions"])),
        ),
    ];
    for (key, value) in fields {
        if let Some(value) = value {
            metadata.insert(key.to_string(), value);
        }
    }
    // The briefing is what follows the frontmatter, byte for byte: the frontmatter itself
    // is the metadata, and an export writes it back from there.
    let body_start: usize = content
        .split_inclusive('\n')
        .take(close + 1)
        .map(str::len)
        .sum();
    let briefing = content.as_bytes()[body_start..].to_vec();
    let (created, name_agent) = named.map_or((None, String::new()), |(t, a)| (Some(t), a));
    let from: String = if agent.is_empty() { name_agent } else { agent };
    let node = Node {
        key: id.clone(),
        parents: parents.clone(),
        created,
        name: e.name.clone(),
        file: path.clone(),
        key_line: key_line("id"),
        parent_line: key_line("parent"),
    };
    let bundle = PlannedBundle {
        key: id,
        parents,
        files: vec![("handoff.md".to_string(), briefing)],
        created,
        from,
        to,
        summary,
        note,
        metadata,
    };
    Ok(FrontmatterFile { node, bundle })
}

pub(super) static KEY_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^(?:"([^"\\]*)"|'([^']*)'|([A-Za-z_][A-Za-z0-9_.\-]*))[ \t]*:(?:[ \t]|$)"#)
        .expect("valid key regex")
});

/// File lines of the top-level `key:` lines of a block mapping, for error messages only
/// (the YAML itself is parsed by serde_norway).
pub(super) fn key_lines(lines: &[&str], first_line: usize) -> HashMap<String, Vec<usize>> {
    let mut map: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(c) = KEY_LINE.captures(line) {
            let key = c
                .get(1)
                .or(c.get(2))
                .or(c.get(3))
                .map_or("", |m| m.as_str());
            map.entry(key.to_string()).or_default().push(first_line + i);
        }
    }
    map
}

pub(super) static AT_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"at line (\d+) column (\d+)").expect("valid regex"));

/// Rewrite the `at line N column C` positions of a YAML error to file lines.
pub(super) fn shift_yaml_lines(msg: &str, offset: usize) -> String {
    AT_LINE
        .replace_all(msg, |c: &regex::Captures| {
            let line = c[1].parse::<usize>().map_or(0, |n| n + offset);
            format!("at line {line} column {}", &c[2])
        })
        .into_owned()
}

pub(super) fn yaml_scalar(v: &Yaml) -> Option<String> {
    match v {
        Yaml::Null => Some(String::new()),
        Yaml::Bool(b) => Some(b.to_string()),
        Yaml::Number(n) => Some(n.to_string()),
        Yaml::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// A scalar as text, or a list of scalars joined with `,`; `None` for anything nested.
pub(super) fn yaml_flat_text(v: &Yaml) -> Option<String> {
    match v {
        Yaml::Sequence(items) => {
            let parts: Option<Vec<String>> = items
                .iter()
                .map(|i| match i {
                    Yaml::Sequence(_) | Yaml::Mapping(_) | Yaml::Tagged(_) => None,
                    other => yaml_scalar(other),
                })
                .collect();
            parts.map(|p| p.join(","))
        }
        other => yaml_scalar(other),
    }
}

/// An id: a string, or an integer written bare.
pub(super) fn yaml_id(v: &Yaml) -> Option<String> {
    match v {
        Yaml::String(s) => Some(s.trim().to_string()),
        Yaml::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// `parent`: null or an empty string (none), an id, or a list of ids.
pub(super) fn yaml_parents(v: &Yaml) -> Option<Vec<String>> {
    match v {
        Yaml::Null => Some(Vec::new()),
        Yaml::String(s) if s.trim().is_empty() => Some(Vec::new()),
        Yaml::Sequence(items) => items
            .iter()
            .map(|i| yaml_id(i).filter(|id| !id.is_empty()))
            .collect(),
        other => yaml_id(other).map(|id| vec![id]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::test_util::*;

    #[test]
    fn frontmatter_folder() {
        let dir = fixture("frontmatter");
        assert_eq!(detect(&dir).unwrap(), Format::Frontmatter);
        let plan = plan(&dir).unwrap();
        assert_eq!(plan.format, Format::Frontmatter);
        assert_eq!(keys(&plan), ["plan-1", "api-2", "ui-3", "review-4"]);
        let [plan1, api, ui, review] = &plan.bundles[..] else {
            panic!()
        };
        assert!(plan1.parents.is_empty());
        assert_eq!(api.parents, ["plan-1"]);
        assert_eq!(ui.parents, ["plan-1"]);
        assert_eq!(review.parents, ["ui-3", "api-2"], "list order is kept");

        assert_eq!(review.from, "reviewer");
        assert_eq!(review.to, "backend");
        assert_eq!(
            review.summary,
            "Export works end to end; blocked on the column-order mismatch"
        );
        assert_eq!(
            review.note,
            "Emit columns in the on-screen order (date, account, memo, debit, credit)"
        );
        assert_eq!(review.created, Some(at("2024-06-03T15:10:00Z")));
        assert_eq!(plan1.created, Some(at("2024-06-03T09:00:00Z")));
        assert_eq!(
            (api.from.as_str(), api.to.as_str()),
            ("backend", "reviewer")
        );

        let name = "2024-06-03T15-10-00-reviewer.md";
        assert_eq!(names(review), ["handoff.md"]);
        // The briefing is the file below its frontmatter; the frontmatter is metadata.
        let whole = fs::read_to_string(dir.join(name)).unwrap();
        let below = &whole[whole[4..].find("\n---\n").unwrap() + 9..];
        assert!(below.starts_with("\n## Context\n"), "{below:?}");
        assert_eq!(file(review, "handoff.md"), below.as_bytes());
        let m = &review.metadata;
        assert_eq!(m["import.format"], "frontmatter");
        assert_eq!(m["import.source"], name);
        assert_eq!(m["frontmatter.id"], "review-4");
        assert_eq!(m["frontmatter.parent"], "ui-3,api-2");
        assert_eq!(m["frontmatter.status"], "blocked");
        assert_eq!(m["frontmatter.agent"], "reviewer");
        assert_eq!(m["frontmatter.next_agent"], "backend");
        assert!(m.contains_key("frontmatter.next_task"));
        assert!(m.contains_key("frontmatter.summary"));
        assert_eq!(m.len(), 13, "frontmatter keys, import.*, handoff.*: {m:?}");
        assert_eq!(m[STATUS], "blocked");
        assert!(
            m[BLOCKER].starts_with("- The CSV puts `memo` last"),
            "{m:?}"
        );
        assert!(m[NEXT_TASK].starts_with("Emit columns"), "{m:?}");
        assert_eq!(plan1.metadata["frontmatter.parent"], "");
    }

    #[test]
    fn frontmatter_numbers_lists_and_skipped_files() {
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            "README.md",
            "# Handoffs\n\nNot a handoff file.\n",
        );
        write(tmp.path(), "notes.txt", "ignored\n");
        write(
            tmp.path(),
            "2024-01-01T00-00-00-a.md",
            "---\nid: 1\ntags: [x, y]\n---\nbody\n",
        );
        write(
            tmp.path(),
            "2024-01-01T00-00-00-b.md",
            "---\r\nid: \"2\"\r\nparent: [1]\r\nparent_note: ''\r\n---\r\n",
        );
        let plan = plan(tmp.path()).unwrap();
        assert_eq!(keys(&plan), ["1", "2"]);
        assert_eq!(plan.bundles[0].from, "a", "agent from the file name");
        assert_eq!(plan.bundles[0].metadata["frontmatter.tags"], "x,y");
        assert_eq!(plan.bundles[1].parents, ["1"]);
        assert_eq!(file(&plan.bundles[0], "handoff.md"), b"body\n");
        assert_eq!(file(&plan.bundles[1], "handoff.md"), b"");
    }

    #[test]
    fn yaml_error_lines_are_file_lines() {
        let err = plan(&fixture("bad/frontmatter-yaml-syntax"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("at line 4 column"), "{err}");
    }
}
