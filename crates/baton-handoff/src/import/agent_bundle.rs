//! Import of agent-handoff bundle directories (`manifest.json`, `handoff.md`, `state.json`).

use super::*;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;

use baton_error::{Error, IoContext, Result};

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
pub(super) const ID_KEYS: &[&str] = &["id", "bundle_id", "handoff_id"];
pub(super) const PARENT_KEYS: &[&str] = &["parent", "parents", "parent_id"];
pub(super) const FROM_KEYS: &[&str] = &[
    "from",
    "from_agent",
    "source_agent",
    "agent",
    "source.harness",
    "source.agent",
];
pub(super) const TO_KEYS: &[&str] = &[
    "to",
    "to_agent",
    "target_agent",
    "next_agent",
    "target_harness",
    "target.harness",
];
pub(super) const SUMMARY_KEYS: &[&str] = &["summary", "title"];
pub(super) const NOTE_KEYS: &[&str] = &["note"];
pub(super) const CREATED_KEYS: &[&str] = &["created", "created_at", "timestamp"];

pub(super) fn plan_agent_bundles(input: &Path, dirs: &[PathBuf], several: bool) -> Result<Plan> {
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
            warnings: Vec::new(),
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
            warnings: Vec::new(),
            format: Format::AgentBundle,
            bundles: out,
        });
    }
    let node_refs: Vec<&Node> = nodes.iter().collect();
    let order = topological_order(&node_refs, "bundle")?;
    let mut slots: Vec<Option<PlannedBundle>> = bundles.into_iter().map(Some).collect();
    Ok(Plan {
        warnings: Vec::new(),
        format: Format::AgentBundle,
        bundles: order.into_iter().filter_map(|i| slots[i].take()).collect(),
    })
}

/// One bundle directory: its node for ordering, its planned bundle, and whether its
/// manifest names a parent.
pub(super) fn plan_agent_bundle(input: &Path, dir: &Path) -> Result<(Node, PlannedBundle, bool)> {
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
    // The bundle's own status and completeness: `capture.status` (else `status`);
    // `partial: true` or a `partial` status marks an incomplete capture.
    let status = match manifest.first(&["capture.status", "status"]) {
        None => String::new(),
        Some((_, value, _)) => json_scalar(value).unwrap_or_default(),
    };
    let partial = manifest
        .first(&["partial", "capture.partial"])
        .and_then(|(_, v, _)| v.as_bool())
        .unwrap_or(false)
        || status.eq_ignore_ascii_case("partial");
    if !status.is_empty() {
        metadata.insert(STATUS.to_string(), status);
    }
    if partial {
        metadata.insert(PARTIAL.to_string(), "true".to_string());
    }
    let mut summary = string(SUMMARY_KEYS)?;
    if summary.is_empty()
        && let Some((_, bytes)) = files.iter().find(|(p, _)| p == "handoff.md")
    {
        summary = objective_line(text(&dir.join("handoff.md"), bytes)?);
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
        summary,
        note: string(NOTE_KEYS)?,
        metadata,
    };
    Ok((node, bundle, has_parent))
}

/// A manifest's top-level entries in file order: key, value and the value's line.
pub(super) struct Manifest {
    pub(super) entries: Vec<(String, serde_json::Value, usize)>,
}

impl Manifest {
    pub(super) fn parse(path: &Path, text: &str) -> Result<Self> {
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

    /// The first of `keys` present with a non-null value; `a.b` names the member `b` of
    /// the object `a` (its line is that of `a`).
    pub(super) fn first<'a, 'k>(
        &'a self,
        keys: &[&'k str],
    ) -> Option<(&'k str, &'a serde_json::Value, usize)> {
        keys.iter().find_map(|want| {
            let mut path = want.split('.');
            let top = path.next()?;
            let (_, value, line) = self.entries.iter().find(|(k, _, _)| k == top)?;
            let value = path.try_fold(value, |v, member| v.get(member))?;
            (!value.is_null()).then_some((*want, value, *line))
        })
    }
}

/// The top-level object of a JSON document as borrowed raw values, duplicates kept.
pub(super) struct RawEntries<'a>(Vec<(String, &'a RawValue)>);

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

pub(super) static JSON_POSITION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r" at line \d+ column \d+$").expect("valid regex"));

/// A serde_json error as `path:line:column: invalid JSON: ...`, its line shifted by
/// `line_offset`.
pub(super) fn json_error(path: &Path, line_offset: usize, err: &serde_json::Error) -> Error {
    let msg = err.to_string();
    let msg = JSON_POSITION.replace(&msg, "");
    let line = err.line().max(1) + line_offset;
    Error::usage(format!(
        "{}:{line}:{}: invalid JSON: {msg}",
        path.display(),
        err.column()
    ))
}

pub(super) fn check_json(path: &Path, text: &str) -> Result<()> {
    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| json_error(path, 0, &e))?;
    Ok(())
}

/// Every non-blank line of a transcript must be a JSON object.
pub(super) fn check_jsonl(path: &Path, text: &str) -> Result<()> {
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

pub(super) fn json_scalar(v: &serde_json::Value) -> Option<String> {
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
pub(super) fn json_flat_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Array(items) => items
            .iter()
            .map(json_scalar)
            .collect::<Option<Vec<_>>>()
            .map(|p| p.join(",")),
        other => json_scalar(other),
    }
}

pub(super) fn json_id(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.trim().to_string()),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

pub(super) fn json_parents(v: &serde_json::Value) -> Option<Vec<String>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::test_util::*;
    use std::collections::BTreeMap;

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
        // Same metadata but the fingerprint, which covers the parent too.
        let without = |m: &BTreeMap<String, String>| {
            let mut m = m.clone();
            m.remove(FINGERPRINT);
            m
        };
        assert_eq!(
            without(&alone.bundles[0].metadata),
            without(&second.metadata)
        );
        assert_ne!(alone.bundles[0].metadata, second.metadata);
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
}
