//! Import: turn handoffs written by other tools into a plan of bundles, parents first.
//!
//! Three layouts found in the field are recognised (design notes, section 5):
//!
//! - **prowl**: a `.prowl/handoff/` directory (PATH is the project root holding it, or the
//!   directory itself). Each `archive/<ts>-<from>-to-<to>.md` briefing becomes a bundle, in
//!   timestamp order, then `current.md`; each bundle's parent is the one before it. Every
//!   bundle holds its briefing as `handoff.md`; the last one also holds `context.md`,
//!   `log.md` and `sessions/*`. `from`/`to` come from the archive file name (`current.md`
//!   has no name to take them from, so they stay empty), the summary is the first line of
//!   the `## Objective` section, and `created` is the file-name timestamp (for
//!   `current.md`: its modification time when that is later than the last archived
//!   briefing, else none).
//! - **frontmatter**: a folder of `<TS>-<agent>.md` files with flat YAML frontmatter
//!   (PATH is the folder, or a project holding `.local/handoff/`). Each file is a bundle
//!   whose `handoff.md` is the whole file; parents come from `parent` (an id, a list of ids
//!   in the given order, or null); `from` = `agent` (else the agent in the file name),
//!   `to` = `next_agent`, `summary` = `summary`, `note` = `next_task`, `created` = the file
//!   name's timestamp. Every frontmatter key is kept as `frontmatter.<key>` (lists joined
//!   with `,`, null as the empty string). `status` is kept as given, not checked.
//! - **agent-bundle**: a bundle directory with `manifest.json` (plus `handoff.md`,
//!   `state.json`, `transcript.jsonl`, `artifacts/`), or a directory of such bundle
//!   directories. The bundle's files are every regular file of its directory, at the same
//!   relative paths (`manifest.json` included). See [`MANIFEST_FIELDS`] for the manifest
//!   names read; every top-level scalar (and list of scalars) is also kept as
//!   `manifest.<key>`; objects are not (they stay readable in `manifest.json`). Several
//!   bundles are linked by their parent fields when any manifest names a parent (each
//!   parent must then be one of them), else chained in `created` order (then by directory
//!   name); a lone bundle's parent lies outside the plan and is kept in metadata only.
//!   `manifest.json` and `state.json` must be valid JSON, and every non-blank line of
//!   `transcript.jsonl` a JSON object.
//!
//! Detection, first match wins: `manifest.json` in PATH (one bundle); `.prowl/handoff/`
//! in PATH; PATH itself a prowl directory (`current.md`, or `archive/` beside `log.md` or
//! `context.md`); `.local/handoff/` in PATH; subdirectories holding `manifest.json`
//! (several bundles; every other visible subdirectory is then an error); a visible `.md`
//! file named `<TS>-<agent>.md` or opening with a `---` line (frontmatter folder).
//!
//! In frontmatter and manifests an id is a string or a bare integer; a parent of null,
//! an empty string or an empty list means none; a parent listed twice is refused. Bundles
//! are ordered parents first, ties by `created` (none first), then file or directory name.
//!
//! Every bundle's metadata has `import.format` (`prowl`, `frontmatter`, `agent-bundle`)
//! and `import.source`: the original path relative to the format's own root (the
//! `.prowl/handoff/` directory, the frontmatter folder, the bundle directory's name), so
//! the same input gives the same bundles however PATH was spelled.
//!
//! This layer is pure: it reads the input and returns a [`Plan`], writing nothing. Any
//! malformed input refuses the whole plan with a `usage` error that names the file and,
//! when the fault is inside it, the 1-based line (`path:line: message`). Symbolic links
//! inside an input are refused, never followed. File-name timestamps are
//! `%Y-%m-%dT%H-%M-%S` or an RFC 3339-like variant (`2024-05-01T10:00:00Z`,
//! `20240501T100000Z`, fractional seconds, `Z` or a `+hh:mm` offset; no zone means UTC).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use regex::Regex;
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_yaml_ng::Value as Yaml;

use crate::error::{Error, IoContext, Result};

/// The source layouts import understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Prowl,
    Frontmatter,
    AgentBundle,
}

impl Format {
    /// The name recorded as `import.format`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Prowl => "prowl",
            Format::Frontmatter => "frontmatter",
            Format::AgentBundle => "agent-bundle",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One bundle to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedBundle {
    /// This bundle's id in the source format: a file name, a frontmatter `id`, a manifest
    /// id (else the bundle directory's name).
    pub key: String,
    /// Keys of parent bundles in this plan, in order.
    pub parents: Vec<String>,
    /// Relative slash-separated path -> content.
    pub files: Vec<(String, Vec<u8>)>,
    pub created: Option<SystemTime>,
    pub from: String,
    pub to: String,
    pub summary: String,
    pub note: String,
    /// Always has `import.format` and `import.source`.
    pub metadata: BTreeMap<String, String>,
}

/// What to import: bundles in topological order (parents before children).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub format: Format,
    pub bundles: Vec<PlannedBundle>,
}

/// Manifest names read for an agent-handoff bundle, by role. The first name present wins;
/// a null value counts as absent.
pub const MANIFEST_FIELDS: &[(&str, &[&str])] = &[
    ("key", ID_KEYS),
    ("parents", PARENT_KEYS),
    ("from", FROM_KEYS),
    ("to", TO_KEYS),
    ("summary", SUMMARY_KEYS),
    ("note", NOTE_KEYS),
    ("created", CREATED_KEYS),
];
const ID_KEYS: &[&str] = &["id", "bundle_id", "handoff_id"];
const PARENT_KEYS: &[&str] = &["parent", "parents", "parent_id"];
const FROM_KEYS: &[&str] = &["from", "from_agent", "source_agent", "agent"];
const TO_KEYS: &[&str] = &["to", "to_agent", "target_agent", "next_agent"];
const SUMMARY_KEYS: &[&str] = &["summary", "title"];
const NOTE_KEYS: &[&str] = &["note"];
const CREATED_KEYS: &[&str] = &["created", "created_at", "timestamp"];

const LAYOUTS: &str = "recognised layouts: a `.prowl/handoff/` directory (or a project \
    containing one); a folder of `<TS>-<agent>.md` handoff files with YAML frontmatter (or \
    a project containing `.local/handoff/`); an agent-handoff bundle directory (with \
    `manifest.json`); a directory of such bundle directories";

/// Which layout `path` holds.
pub fn detect(path: &Path) -> Result<Format> {
    Ok(locate(path)?.format())
}

/// Read `path` and plan its bundles; nothing is written.
pub fn plan(path: &Path) -> Result<Plan> {
    match locate(path)? {
        Layout::Prowl(dir) => plan_prowl(&dir),
        Layout::Frontmatter(dir) => plan_frontmatter(&dir),
        Layout::AgentBundle(dir) => plan_agent_bundles(path, &[dir], false),
        Layout::AgentBundles(dirs) => plan_agent_bundles(path, &dirs, true),
    }
}

enum Layout {
    Prowl(PathBuf),
    Frontmatter(PathBuf),
    AgentBundle(PathBuf),
    AgentBundles(Vec<PathBuf>),
}

impl Layout {
    fn format(&self) -> Format {
        match self {
            Layout::Prowl(_) => Format::Prowl,
            Layout::Frontmatter(_) => Format::Frontmatter,
            Layout::AgentBundle(_) | Layout::AgentBundles(_) => Format::AgentBundle,
        }
    }
}

fn locate(path: &Path) -> Result<Layout> {
    let meta = fs::metadata(path).ctx("cannot read", path)?;
    if !meta.is_dir() {
        return Err(Error::usage(format!("{}: not a directory", path.display())).with_hint(LAYOUTS));
    }
    if path.join("manifest.json").is_file() {
        return Ok(Layout::AgentBundle(path.to_path_buf()));
    }
    let prowl = path.join(".prowl").join("handoff");
    if prowl.is_dir() {
        return Ok(Layout::Prowl(prowl));
    }
    if is_prowl_dir(path) {
        return Ok(Layout::Prowl(path.to_path_buf()));
    }
    let local = path.join(".local").join("handoff");
    if local.is_dir() {
        return Ok(Layout::Frontmatter(local));
    }
    let entries = list_dir(path)?;
    let bundles: Vec<PathBuf> = entries
        .iter()
        .filter(|e| e.kind == Kind::Dir && !e.hidden() && e.path.join("manifest.json").is_file())
        .map(|e| e.path.clone())
        .collect();
    if !bundles.is_empty() {
        for e in &entries {
            if e.kind == Kind::Dir && !e.hidden() && !bundles.contains(&e.path) {
                return Err(Error::usage(format!(
                    "{}: not an agent-handoff bundle (no manifest.json), beside bundle \
                     directories",
                    e.path.display()
                )));
            }
        }
        return Ok(Layout::AgentBundles(bundles));
    }
    for e in &entries {
        if e.kind == Kind::File && is_handoff_candidate(e)? {
            return Ok(Layout::Frontmatter(path.to_path_buf()));
        }
    }
    let what = if entries.is_empty() {
        "empty directory"
    } else {
        "no handoffs in a recognised layout"
    };
    Err(Error::usage(format!("{}: {what}", path.display())).with_hint(LAYOUTS))
}

/// A prowl handoff directory itself: `current.md`, or `archive/` beside `log.md` or
/// `context.md`.
fn is_prowl_dir(dir: &Path) -> bool {
    dir.join("current.md").is_file()
        || (dir.join("archive").is_dir()
            && (dir.join("log.md").is_file() || dir.join("context.md").is_file()))
}

/// A visible `.md` file that opens with a `---` line or is named `<TS>-<agent>.md`.
fn is_handoff_candidate(e: &Entry) -> Result<bool> {
    let Some(stem) = e.name.strip_suffix(".md") else {
        return Ok(false);
    };
    if e.hidden() {
        return Ok(false);
    }
    if name_timestamp(stem).is_some() {
        return Ok(true);
    }
    let bytes = read(&e.path)?;
    Ok(opens_frontmatter(&bytes))
}

fn opens_frontmatter(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    first.trim_ascii_end() == b"---"
}

// ---------------------------------------------------------------------------------------
// prowl

fn plan_prowl(dir: &Path) -> Result<Plan> {
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
fn objective_line(text: &str) -> String {
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

// ---------------------------------------------------------------------------------------
// frontmatter files

/// The parsed frontmatter of one handoff file, with what ordering needs.
struct FrontmatterFile {
    node: Node,
    bundle: PlannedBundle,
}

fn plan_frontmatter(dir: &Path) -> Result<Plan> {
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
        format: Format::Frontmatter,
        bundles,
    })
}

fn parse_frontmatter_file(
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
    let value: Yaml = serde_yaml_ng::from_str(&yaml).map_err(|err| {
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
        Yaml::Null => serde_yaml_ng::Mapping::new(),
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
        files: vec![("handoff.md".to_string(), bytes)],
        created,
        from,
        to,
        summary,
        note,
        metadata,
    };
    Ok(FrontmatterFile { node, bundle })
}

static KEY_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^(?:"([^"\\]*)"|'([^']*)'|([A-Za-z_][A-Za-z0-9_.\-]*))[ \t]*:(?:[ \t]|$)"#)
        .expect("valid key regex")
});

/// File lines of the top-level `key:` lines of a block mapping, for error messages only
/// (the YAML itself is parsed by serde_yaml_ng).
fn key_lines(lines: &[&str], first_line: usize) -> HashMap<String, Vec<usize>> {
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

static AT_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"at line (\d+) column (\d+)").expect("valid regex"));

/// Rewrite the `at line N column C` positions of a YAML error to file lines.
fn shift_yaml_lines(msg: &str, offset: usize) -> String {
    AT_LINE
        .replace_all(msg, |c: &regex::Captures| {
            let line = c[1].parse::<usize>().map_or(0, |n| n + offset);
            format!("at line {line} column {}", &c[2])
        })
        .into_owned()
}

fn yaml_scalar(v: &Yaml) -> Option<String> {
    match v {
        Yaml::Null => Some(String::new()),
        Yaml::Bool(b) => Some(b.to_string()),
        Yaml::Number(n) => Some(n.to_string()),
        Yaml::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// A scalar as text, or a list of scalars joined with `,`; `None` for anything nested.
fn yaml_flat_text(v: &Yaml) -> Option<String> {
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
fn yaml_id(v: &Yaml) -> Option<String> {
    match v {
        Yaml::String(s) => Some(s.trim().to_string()),
        Yaml::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// `parent`: null or an empty string (none), an id, or a list of ids.
fn yaml_parents(v: &Yaml) -> Option<Vec<String>> {
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

// ---------------------------------------------------------------------------------------
// agent-handoff bundles

fn plan_agent_bundles(input: &Path, dirs: &[PathBuf], several: bool) -> Result<Plan> {
    let mut nodes = Vec::with_capacity(dirs.len());
    let mut bundles = Vec::with_capacity(dirs.len());
    let mut linked = false;
    for dir in dirs {
        let (node, bundle, has_parent) = plan_agent_bundle(input, dir)?;
        linked |= has_parent;
        nodes.push(node);
        bundles.push(bundle);
    }
    if !several {
        // A lone bundle's parent is outside the plan: kept in metadata only.
        bundles[0].parents.clear();
        return Ok(Plan {
            format: Format::AgentBundle,
            bundles,
        });
    }
    if !linked {
        // No manifest names a parent: chain by creation time, then directory name.
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by(|&a, &b| {
            (nodes[a].created, &nodes[a].name).cmp(&(nodes[b].created, &nodes[b].name))
        });
        let node_refs: Vec<&Node> = nodes.iter().collect();
        check_unique_keys(&node_refs, "bundle")?;
        let mut previous: Option<String> = None;
        let mut slots: Vec<Option<PlannedBundle>> = bundles.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(order.len());
        for i in order {
            if let Some(mut b) = slots[i].take() {
                b.parents = previous.iter().cloned().collect();
                previous = Some(b.key.clone());
                out.push(b);
            }
        }
        return Ok(Plan {
            format: Format::AgentBundle,
            bundles: out,
        });
    }
    let node_refs: Vec<&Node> = nodes.iter().collect();
    let order = topological_order(&node_refs, "bundle")?;
    let mut slots: Vec<Option<PlannedBundle>> = bundles.into_iter().map(Some).collect();
    Ok(Plan {
        format: Format::AgentBundle,
        bundles: order.into_iter().filter_map(|i| slots[i].take()).collect(),
    })
}

/// One bundle directory: its node for ordering, its planned bundle, and whether its
/// manifest names a parent.
fn plan_agent_bundle(input: &Path, dir: &Path) -> Result<(Node, PlannedBundle, bool)> {
    let name = match dir.file_name() {
        Some(n) => n.to_string_lossy().into_owned(),
        None => fs::canonicalize(input)
            .ctx("cannot resolve", input)?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "bundle".to_string()),
    };
    let manifest_path = dir.join("manifest.json");
    let manifest_bytes = read_regular(&manifest_path)?;
    let manifest = Manifest::parse(&manifest_path, text(&manifest_path, &manifest_bytes)?)?;

    let mut metadata = import_metadata(Format::AgentBundle, &name);
    for (key, value, _) in &manifest.entries {
        if let Some(flat) = json_flat_text(value) {
            metadata.insert(format!("manifest.{key}"), flat);
        }
    }
    let string = |keys: &[&str]| -> Result<String> {
        match manifest.first(keys) {
            None => Ok(String::new()),
            Some((key, value, line)) => value.as_str().map(str::to_string).ok_or_else(|| {
                line_error(
                    &manifest_path,
                    line,
                    format!("manifest `{key}` must be a string"),
                )
            }),
        }
    };
    let key = match manifest.first(ID_KEYS) {
        None => name.clone(),
        Some((key, value, line)) => {
            json_id(value).filter(|id| !id.is_empty()).ok_or_else(|| {
                line_error(
                    &manifest_path,
                    line,
                    format!("manifest `{key}` must be a non-empty string"),
                )
            })?
        }
    };
    let (parents, parent_line) = match manifest.first(PARENT_KEYS) {
        None => (Vec::new(), 1),
        Some((key, value, line)) => {
            let parents = json_parents(value).ok_or_else(|| {
                line_error(
                    &manifest_path,
                    line,
                    format!("manifest `{key}` must be an id, a list of ids or null"),
                )
            })?;
            if let Some(dup) = first_duplicate(&parents) {
                return Err(line_error(
                    &manifest_path,
                    line,
                    format!("manifest `{key}` lists `{dup}` twice"),
                ));
            }
            (parents, line)
        }
    };
    let created = match manifest.first(CREATED_KEYS) {
        None => None,
        Some((key, value, line)) => {
            let parsed = value.as_str().and_then(|s| match full_timestamp(s) {
                Some(Ok(t)) => Some(t),
                _ => None,
            });
            Some(parsed.ok_or_else(|| {
                line_error(
                    &manifest_path,
                    line,
                    format!("manifest `{key}` must be an RFC 3339 time like 2024-05-01T10:00:00Z"),
                )
            })?)
        }
    };

    let mut files = Vec::new();
    collect_files(dir, "", &mut files)?;
    for (rel, bytes) in &files {
        let path = dir.join(rel);
        match rel.as_str() {
            "transcript.jsonl" => check_jsonl(&path, text(&path, bytes)?)?,
            "state.json" => check_json(&path, text(&path, bytes)?)?,
            _ => {}
        }
    }
    let has_parent = !parents.is_empty();
    let node = Node {
        key: key.clone(),
        parents: parents.clone(),
        created,
        name: name.clone(),
        file: manifest_path.clone(),
        key_line: manifest.first(ID_KEYS).map_or(1, |(_, _, l)| l),
        parent_line,
    };
    let bundle = PlannedBundle {
        key,
        parents,
        files,
        created,
        from: string(FROM_KEYS)?,
        to: string(TO_KEYS)?,
        summary: string(SUMMARY_KEYS)?,
        note: string(NOTE_KEYS)?,
        metadata,
    };
    Ok((node, bundle, has_parent))
}

/// A manifest's top-level entries in file order: key, value and the value's line.
struct Manifest {
    entries: Vec<(String, serde_json::Value, usize)>,
}

impl Manifest {
    fn parse(path: &Path, text: &str) -> Result<Self> {
        let raw: RawEntries = serde_json::from_str(text).map_err(|e| json_error(path, 0, &e))?;
        let mut entries: Vec<(String, serde_json::Value, usize)> = Vec::with_capacity(raw.0.len());
        for (key, raw) in raw.0 {
            let offset = (raw.get().as_ptr() as usize)
                .saturating_sub(text.as_ptr() as usize)
                .min(text.len());
            let line = text[..offset].matches('\n').count() + 1;
            if let Some((_, _, first)) = entries.iter().find(|(k, _, _)| *k == key) {
                return Err(line_error(
                    path,
                    line,
                    format!("duplicate manifest key `{key}` (first on line {first})"),
                ));
            }
            let value: serde_json::Value =
                serde_json::from_str(raw.get()).map_err(|e| json_error(path, line - 1, &e))?;
            entries.push((key, value, line));
        }
        Ok(Manifest { entries })
    }

    /// The first of `keys` present with a non-null value.
    fn first<'a>(&'a self, keys: &[&str]) -> Option<(&'a str, &'a serde_json::Value, usize)> {
        keys.iter().find_map(|want| {
            self.entries
                .iter()
                .find(|(k, v, _)| k == want && !v.is_null())
                .map(|(k, v, l)| (k.as_str(), v, *l))
        })
    }
}

/// The top-level object of a JSON document as borrowed raw values, duplicates kept.
struct RawEntries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for RawEntries<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawEntries<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    out.push(entry);
                }
                Ok(RawEntries(out))
            }
        }
        d.deserialize_map(V)
    }
}

static JSON_POSITION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r" at line \d+ column \d+$").expect("valid regex"));

/// A serde_json error as `path:line:column: invalid JSON: ...`, its line shifted by
/// `line_offset`.
fn json_error(path: &Path, line_offset: usize, err: &serde_json::Error) -> Error {
    let msg = err.to_string();
    let msg = JSON_POSITION.replace(&msg, "");
    let line = err.line().max(1) + line_offset;
    Error::usage(format!(
        "{}:{line}:{}: invalid JSON: {msg}",
        path.display(),
        err.column()
    ))
}

fn check_json(path: &Path, text: &str) -> Result<()> {
    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| json_error(path, 0, &e))?;
    Ok(())
}

/// Every non-blank line of a transcript must be a JSON object.
fn check_jsonl(path: &Path, text: &str) -> Result<()> {
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| json_error(path, i, &e))?;
        if !value.is_object() {
            return Err(line_error(
                path,
                i + 1,
                "transcript line is not a JSON object",
            ));
        }
    }
    Ok(())
}

fn json_scalar(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => Some(String::new()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// A scalar as text, or an array of scalars joined with `,`; `None` for objects and
/// nested arrays.
fn json_flat_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Array(items) => items
            .iter()
            .map(json_scalar)
            .collect::<Option<Vec<_>>>()
            .map(|p| p.join(",")),
        other => json_scalar(other),
    }
}

fn json_id(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.trim().to_string()),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

fn json_parents(v: &serde_json::Value) -> Option<Vec<String>> {
    match v {
        serde_json::Value::Null => Some(Vec::new()),
        serde_json::Value::String(s) if s.trim().is_empty() => Some(Vec::new()),
        serde_json::Value::Array(items) => items
            .iter()
            .map(|i| json_id(i).filter(|id| !id.is_empty()))
            .collect(),
        other => json_id(other).map(|id| vec![id]),
    }
}

// ---------------------------------------------------------------------------------------
// ordering

/// One bundle for ordering: its key, parents, and where to point errors.
struct Node {
    key: String,
    parents: Vec<String>,
    created: Option<SystemTime>,
    /// Tie-break after `created`: the file or directory name.
    name: String,
    file: PathBuf,
    key_line: usize,
    parent_line: usize,
}

fn check_unique_keys(nodes: &[&Node], what: &str) -> Result<HashMap<String, usize>> {
    let mut index: HashMap<String, usize> = HashMap::new();
    // Report the later file (by name) as the duplicate, whatever the listing order.
    let mut by_name: Vec<usize> = (0..nodes.len()).collect();
    by_name.sort_by(|&a, &b| nodes[a].name.cmp(&nodes[b].name));
    for i in by_name {
        let n = nodes[i];
        if let Some(&first) = index.get(&n.key) {
            let f = nodes[first];
            return Err(line_error(
                &n.file,
                n.key_line,
                format!(
                    "duplicate id `{}`: the {what} {}:{} has it too",
                    n.key,
                    f.file.display(),
                    f.key_line
                ),
            ));
        }
        index.insert(n.key.clone(), i);
    }
    Ok(index)
}

/// Parents before children; ties by creation time, then name. Refuses duplicate keys,
/// parents outside the set, and cycles.
fn topological_order(nodes: &[&Node], what: &str) -> Result<Vec<usize>> {
    let index = check_unique_keys(nodes, what)?;
    let mut pending = vec![0usize; nodes.len()];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for p in &n.parents {
            let Some(&pi) = index.get(p) else {
                return Err(line_error(
                    &n.file,
                    n.parent_line,
                    format!("parent `{p}` is not the id of any {what} here"),
                ));
            };
            pending[i] += 1;
            children[pi].push(i);
        }
    }
    let rank = |i: usize| (nodes[i].created, nodes[i].name.clone(), i);
    let mut ready: BTreeSet<(Option<SystemTime>, String, usize)> = (0..nodes.len())
        .filter(|&i| pending[i] == 0)
        .map(rank)
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some((_, _, i)) = ready.pop_first() {
        order.push(i);
        for &c in &children[i] {
            pending[c] -= 1;
            if pending[c] == 0 {
                ready.insert(rank(c));
            }
        }
    }
    if order.len() == nodes.len() {
        return Ok(order);
    }
    // Every node left has a parent left: walk parent links until one repeats.
    let Some(start) = (0..nodes.len())
        .filter(|&i| pending[i] > 0)
        .min_by_key(|&i| rank(i))
    else {
        return Ok(order);
    };
    let mut path = vec![start];
    let mut current = start;
    loop {
        let next = nodes[current]
            .parents
            .iter()
            .filter_map(|p| index.get(p).copied())
            .find(|&p| pending[p] > 0);
        let Some(next) = next else { break };
        if let Some(pos) = path.iter().position(|&p| p == next) {
            let cycle: Vec<&str> = path[pos..]
                .iter()
                .chain(std::iter::once(&next))
                .map(|&i| nodes[i].key.as_str())
                .collect();
            let n = nodes[next];
            return Err(line_error(
                &n.file,
                n.parent_line,
                format!(
                    "parent links form a cycle: {} (each names the next as its parent)",
                    cycle.join(" -> ")
                ),
            ));
        }
        path.push(next);
        current = next;
    }
    let n = nodes[start];
    Err(line_error(
        &n.file,
        n.parent_line,
        "parent links form a cycle",
    ))
}

fn first_duplicate(items: &[String]) -> Option<&str> {
    let mut seen = BTreeSet::new();
    items
        .iter()
        .find(|i| !seen.insert(i.as_str()))
        .map(String::as_str)
}

// ---------------------------------------------------------------------------------------
// timestamps in names and manifests

const TS_CORE: &str = concat!(
    r"(?P<y>\d{4})-?(?P<mo>\d{2})-?(?P<d>\d{2})",
    r"[T_ ](?P<h>\d{2})[-:]?(?P<mi>\d{2})[-:]?(?P<s>\d{2})",
    r"(?:[.,](?P<frac>\d{1,9}))?",
    r"(?P<zone>Z|[+-]\d{2}:\d{2})?",
);

static NAME_TS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"^{TS_CORE}-(?P<rest>.+)$")).expect("valid regex"));
static FULL_TS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"^{TS_CORE}$")).expect("valid regex"));

/// Split `<ts>-<rest>` (a file stem): `None` when it does not start with a timestamp,
/// `Some(Err)` when it does but the time is impossible.
fn name_timestamp(stem: &str) -> Option<std::result::Result<(SystemTime, &str), String>> {
    let c = NAME_TS.captures(stem)?;
    let rest = c.name("rest").map_or("", |m| m.as_str());
    Some(captured_time(&c).map(|t| (t, rest)))
}

fn full_timestamp(text: &str) -> Option<std::result::Result<SystemTime, String>> {
    let c = FULL_TS.captures(text.trim())?;
    Some(captured_time(&c))
}

/// Rebuild the captured parts as RFC 3339 UTC for humantime, then apply the offset.
fn captured_time(c: &regex::Captures) -> std::result::Result<SystemTime, String> {
    let part = |name: &str| c.name(name).map_or("", |m| m.as_str());
    let frac = c
        .name("frac")
        .map_or(String::new(), |m| format!(".{}", m.as_str()));
    let utc = format!(
        "{}-{}-{}T{}:{}:{}{frac}Z",
        part("y"),
        part("mo"),
        part("d"),
        part("h"),
        part("mi"),
        part("s")
    );
    let bad = || format!("timestamp `{}` is not a valid time", &c[0]);
    let local = humantime::parse_rfc3339_weak(&utc).map_err(|_| bad())?;
    let zone = part("zone");
    if zone.is_empty() || zone == "Z" {
        return Ok(local);
    }
    let (sign, hhmm) = zone.split_at(1);
    let (hh, mm) = hhmm.split_once(':').ok_or_else(bad)?;
    let hours: u64 = hh.parse().map_err(|_| bad())?;
    let minutes: u64 = mm.parse().map_err(|_| bad())?;
    if hours > 23 || minutes > 59 {
        return Err(bad());
    }
    let offset = Duration::from_secs(hours * 3600 + minutes * 60);
    let utc = if sign == "+" {
        local.checked_sub(offset)
    } else {
        local.checked_add(offset)
    };
    utc.ok_or_else(bad)
}

// ---------------------------------------------------------------------------------------
// files

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Link,
    Other,
}

struct Entry {
    name: String,
    path: PathBuf,
    kind: Kind,
}

impl Entry {
    fn hidden(&self) -> bool {
        self.name.starts_with('.')
    }

    fn require_file(&self) -> Result<()> {
        match self.kind {
            Kind::File => Ok(()),
            Kind::Link => Err(file_error(
                &self.path,
                "is a symbolic link; import does not follow links",
            )),
            _ => Err(file_error(&self.path, "not a regular file")),
        }
    }
}

/// A directory's entries sorted by name, symbolic links not followed.
fn list_dir(dir: &Path) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).ctx("cannot list", dir)? {
        let entry = entry.ctx("cannot list", dir)?;
        let path = entry.path();
        let Ok(name) = entry.file_name().into_string() else {
            return Err(file_error(&path, "file name is not UTF-8"));
        };
        let ft = entry.file_type().ctx("cannot read", &path)?;
        let kind = if ft.is_symlink() {
            Kind::Link
        } else if ft.is_dir() {
            Kind::Dir
        } else if ft.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        out.push(Entry { name, path, kind });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Every regular file under `dir`, as `prefix` + relative slash path, sorted.
fn collect_files(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    for e in list_dir(dir)? {
        let rel = format!("{prefix}{}", e.name);
        match e.kind {
            Kind::Dir => collect_files(&e.path, &format!("{rel}/"), out)?,
            _ => {
                e.require_file()?;
                out.push((rel, read(&e.path)?));
            }
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).ctx("cannot read", path)
}

/// Read a file that must be a regular file (not a link).
fn read_regular(path: &Path) -> Result<Vec<u8>> {
    let meta = fs::symlink_metadata(path).ctx("cannot read", path)?;
    if meta.file_type().is_symlink() {
        return Err(file_error(
            path,
            "is a symbolic link; import does not follow links",
        ));
    }
    if !meta.is_file() {
        return Err(file_error(path, "not a regular file"));
    }
    read(path)
}

/// The bytes as UTF-8 text without a leading byte-order mark.
fn text<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a str> {
    let s = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        line_error(path, line, "not UTF-8 text")
    })?;
    Ok(s.strip_prefix('\u{feff}').unwrap_or(s))
}

fn import_metadata(format: Format, source: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("import.format".to_string(), format.name().to_string()),
        ("import.source".to_string(), source.to_string()),
    ])
}

fn line_error(path: &Path, line: usize, msg: impl fmt::Display) -> Error {
    Error::usage(format!("{}:{line}: {msg}", path.display()))
}

fn file_error(path: &Path, msg: impl fmt::Display) -> Error {
    Error::usage(format!("{}: {msg}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn fixture(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/import")
            .join(rel)
    }

    fn at(rfc3339: &str) -> SystemTime {
        humantime::parse_rfc3339(rfc3339).unwrap()
    }

    fn names(b: &PlannedBundle) -> Vec<&str> {
        b.files.iter().map(|(n, _)| n.as_str()).collect()
    }

    fn file<'a>(b: &'a PlannedBundle, name: &str) -> &'a [u8] {
        &b.files.iter().find(|(n, _)| n == name).unwrap().1
    }

    fn keys(plan: &Plan) -> Vec<&str> {
        plan.bundles.iter().map(|b| b.key.as_str()).collect()
    }

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
        assert_eq!(
            file(review, "handoff.md"),
            fs::read(dir.join(name)).unwrap()
        );
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
        assert_eq!(m.len(), 9);
        assert_eq!(plan1.metadata["frontmatter.parent"], "");
    }

    #[test]
    fn agent_bundle_single() {
        let dir = fixture("agent-bundle");
        assert_eq!(detect(&dir).unwrap(), Format::AgentBundle);
        let plan = plan(&dir).unwrap();
        assert_eq!(plan.format, Format::AgentBundle);
        let [b] = &plan.bundles[..] else { panic!() };
        assert_eq!(b.key, "ah-20240710-0930-k2");
        assert!(b.parents.is_empty());
        assert_eq!(b.from, "claude-code");
        assert_eq!(b.to, "codex");
        assert_eq!(
            b.summary,
            "Config loader parses TOML and env overrides; wiring into main is left"
        );
        assert_eq!(b.note, "");
        assert_eq!(b.created, Some(at("2024-07-10T09:30:12Z")));
        assert_eq!(
            names(b),
            [
                "artifacts/test-output.txt",
                "handoff.md",
                "manifest.json",
                "state.json",
                "transcript.jsonl"
            ]
        );
        assert_eq!(
            file(b, "state.json"),
            fs::read(dir.join("state.json")).unwrap()
        );
        let m = &b.metadata;
        assert_eq!(m["import.format"], "agent-bundle");
        assert_eq!(m["import.source"], "agent-bundle");
        assert_eq!(m["manifest.id"], "ah-20240710-0930-k2");
        assert_eq!(m["manifest.version"], "1");
        assert_eq!(m["manifest.partial"], "false");
        assert_eq!(m["manifest.parent"], "");
        assert_eq!(m["manifest.token_budget"], "6000");
        assert_eq!(
            m["manifest.files"],
            "handoff.md,state.json,transcript.jsonl,artifacts/test-output.txt"
        );
        assert!(
            !m.contains_key("manifest.workspace"),
            "objects are not flattened"
        );
    }

    #[test]
    fn agent_bundles_linked_by_parent() {
        let dir = fixture("agent-bundles");
        assert_eq!(detect(&dir).unwrap(), Format::AgentBundle);
        let plan = plan(&dir).unwrap();
        // Directory names sort the other way: the parent link decides.
        assert_eq!(keys(&plan), ["ah-7f3a", "ah-1c9e"]);
        let [first, second] = &plan.bundles[..] else {
            panic!()
        };
        assert!(first.parents.is_empty());
        assert_eq!(second.parents, ["ah-7f3a"]);
        assert_eq!(
            (first.from.as_str(), first.to.as_str()),
            ("codex", "claude-code")
        );
        assert_eq!(first.metadata["import.source"], "ah-7f3a");
        assert_eq!(first.metadata["manifest.partial"], "true");
        assert_eq!(second.created, Some(at("2024-07-11T17:20:45Z")));
        assert_eq!(
            names(first),
            [
                "artifacts/repro.txt",
                "handoff.md",
                "manifest.json",
                "state.json",
                "transcript.jsonl"
            ]
        );
        assert_eq!(
            names(second),
            [
                "handoff.md",
                "manifest.json",
                "state.json",
                "transcript.jsonl"
            ]
        );
        // The single bundle alone: same content, no parent inside the plan.
        let alone = super::plan(&dir.join("ah-1c9e")).unwrap();
        assert!(alone.bundles[0].parents.is_empty());
        assert_eq!(alone.bundles[0].metadata, second.metadata);
    }

    fn write(dir: &Path, rel: &str, content: &str) {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    #[test]
    fn agent_bundles_aliases_and_chain_by_time() {
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            "b/manifest.json",
            r#"{"handoff_id": "late", "source_agent": "a", "target_agent": "b",
                "title": "second", "note": "n", "timestamp": "2024-01-02T12:00:00+02:00",
                "tags": ["x", 1, true], "nested": [[1]]}"#,
        );
        write(
            tmp.path(),
            "a/manifest.json",
            r#"{"bundle_id": "early", "from_agent": "c", "created": "2024-01-02T09:59:59Z"}"#,
        );
        let plan = plan(tmp.path()).unwrap();
        assert_eq!(keys(&plan), ["early", "late"]);
        let late = &plan.bundles[1];
        assert_eq!(late.parents, ["early"]);
        assert_eq!((late.from.as_str(), late.to.as_str()), ("a", "b"));
        assert_eq!((late.summary.as_str(), late.note.as_str()), ("second", "n"));
        assert_eq!(late.created, Some(at("2024-01-02T10:00:00Z")));
        assert_eq!(late.metadata["manifest.tags"], "x,1,true");
        assert!(!late.metadata.contains_key("manifest.nested"));
        assert_eq!(plan.bundles[0].from, "c");
    }

    #[test]
    fn name_timestamps() {
        let t = at("2024-05-01T10:00:00Z");
        for stem in [
            "2024-05-01T10-00-00-claude",
            "2024-05-01T10:00:00Z-claude",
            "2024-05-01T10-00-00Z-claude",
            "20240501T100000Z-claude",
            "2024-05-01T12:00:00+02:00-claude",
            "2024-05-01T09:30:00-00:30-claude",
        ] {
            assert_eq!(name_timestamp(stem), Some(Ok((t, "claude"))), "{stem}");
        }
        let frac = name_timestamp("2024-05-01T10-00-00.250-x")
            .unwrap()
            .unwrap();
        assert_eq!(frac.0, t + Duration::from_millis(250));
        assert_eq!(name_timestamp("yesterday-claude"), None);
        assert_eq!(name_timestamp("2024-05-01-claude"), None);
        assert!(matches!(
            name_timestamp("2024-13-01T10-00-00-claude"),
            Some(Err(_))
        ));
        assert!(t.duration_since(UNIX_EPOCH).is_ok());
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
    }

    #[test]
    fn empty_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let err = plan(tmp.path()).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Usage);
        let text = err.to_string();
        assert!(text.contains("empty directory"), "{text}");
        assert!(text.contains(".prowl/handoff/"), "{text}");
        assert!(text.contains("manifest.json"), "{text}");
    }

    #[test]
    fn symlinks_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "manifest.json", "{\"id\": \"x\"}");
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("leak.txt")).unwrap();
        let err = plan(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("leak.txt: is a symbolic link"), "{err}");
    }

    /// Every malformed case is refused as `usage`, naming the file and the line.
    #[test]
    fn bad_inputs() {
        let cases = [
            (
                "frontmatter-unterminated",
                "2024-05-01T10-00-00-claude.md:1: frontmatter opened here is never closed",
            ),
            (
                "frontmatter-yaml-syntax",
                "2024-05-01T10-00-00-claude.md:4: invalid YAML frontmatter: ",
            ),
            (
                "frontmatter-parent-type",
                "2024-05-01T10-00-00-claude.md:3: frontmatter `parent` must be an id, a list of ids or null",
            ),
            (
                "frontmatter-duplicate-id",
                "2024-05-01T11-00-00-codex.md:3: duplicate id `h1`",
            ),
            (
                "frontmatter-missing-id",
                "2024-05-01T10-00-00-claude.md:1: frontmatter has no `id`",
            ),
            (
                "frontmatter-unknown-parent",
                "2024-05-01T11-00-00-codex.md:4: parent `h9` is not the id of any handoff file",
            ),
            (
                "frontmatter-cycle",
                "2024-05-01T10-00-00-claude.md:3: parent links form a cycle: h1 -> h2 -> h1",
            ),
            (
                "manifest-invalid-json",
                "manifest.json:5:1: invalid JSON: trailing comma",
            ),
            (
                "transcript-not-object",
                "transcript.jsonl:3: transcript line is not a JSON object",
            ),
            (
                "prowl-archive-name",
                "archive/yesterday-claude-to-codex.md: archive file name has no parsable timestamp",
            ),
            ("unrecognized-layout", "no handoffs in a recognised layout"),
        ];
        for (case, want) in cases {
            let dir = fixture(&format!("bad/{case}"));
            let err = plan(&dir).unwrap_err();
            assert_eq!(err.kind, crate::error::ErrorKind::Usage, "{case}: {err}");
            let text = err.to_string();
            assert!(text.contains(want), "{case}: got {text:?}, want {want:?}");
            assert!(text.starts_with(&*dir.to_string_lossy()), "{case}: {text}");
        }
    }

    #[test]
    fn yaml_error_lines_are_file_lines() {
        let err = plan(&fixture("bad/frontmatter-yaml-syntax"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("at line 4 column"), "{err}");
    }

    #[test]
    fn duplicate_keys_are_located() {
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            "2024-01-01T00-00-00-a.md",
            "---\nid: a\nagent: x\nid: b\n---\n",
        );
        let err = plan(tmp.path()).unwrap_err().to_string();
        assert!(
            err.contains("-a.md:4: duplicate frontmatter key `id` (first on line 2)"),
            "{err}"
        );

        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            "manifest.json",
            "{\n\"id\": \"a\",\n\"id\": \"b\"\n}\n",
        );
        let err = plan(tmp.path()).unwrap_err().to_string();
        assert!(
            err.contains("manifest.json:3: duplicate manifest key `id` (first on line 2)"),
            "{err}"
        );

        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            "manifest.json",
            "{\n\"id\": \"a\",\n\"created_at\": 5\n}\n",
        );
        let err = plan(tmp.path()).unwrap_err().to_string();
        assert!(
            err.contains("manifest.json:3: manifest `created_at` must be an RFC 3339"),
            "{err}"
        );
    }
}
