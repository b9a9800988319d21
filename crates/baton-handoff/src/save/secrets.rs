//! The secrets of a save outside file contents: entry names, symlink targets and the
//! manifest's fields (`--summary`, `--note`, `--meta`, `--from`, `--to`), scanned as a
//! handoff scans them and handled under the same `--secrets` mode as the contents
//! (refused, replaced, or stored and reported), and every report of any of them: kinds
//! and places, never a value (a path is shown with its own secrets redacted).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::secrets::{self, files::Found};
use baton_error::{Error, ErrorKind, Result};
use baton_format::text::terminal_safe;
use baton_store::snapshot::{Collision, Names, Node};

/// Where a secret was found, besides a file's contents.
#[derive(Clone, Debug)]
pub enum Place {
    /// The name of the entry at this (display) path.
    Name(String),
    /// The target of the symlink at this (display) path.
    Target(String),
    /// A flag: `--summary`, `--meta KEY` (the key as shown).
    Field(String),
}

/// One place and what was found there.
#[derive(Clone, Debug)]
pub struct Finding {
    pub place: Place,
    pub counts: BTreeMap<&'static str, u64>,
}

/// The manifest's fields: as given, and (from [`scan_fields`]) as they will be stored.
#[derive(Clone, Debug, Default)]
pub struct Fields {
    pub summary: String,
    pub note: String,
    pub from: String,
    pub to: String,
    pub metadata: BTreeMap<String, String>,
}

/// What the names of a snapshot held.
pub struct NameFindings {
    pub findings: Vec<Finding>,
    /// The entries (on disk) whose own name held a secret: under `redact`, nothing below
    /// them goes into the stat cache, whose entries are named by path.
    pub flagged: Vec<PathBuf>,
}

/// `text` with its secrets replaced, and what was found; `None` when clean.
fn scrub(text: &[u8]) -> Option<secrets::Redaction> {
    if secrets::clean_at_a_glance(text) {
        return None;
    }
    let r = secrets::redact(text);
    (!r.counts.is_empty()).then_some(r)
}

fn lossy(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// `path` below `dir` for a message: `/`-separated, each component with its secrets
/// replaced (a name that is a key would otherwise be shown in its own refusal).
pub fn display_path(dir: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(dir).unwrap_or(path);
    rel.iter()
        .map(|part| {
            let part = part.to_string_lossy();
            match scrub(part.as_bytes()) {
                Some(r) => lossy(r.bytes),
                None => part.into_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Scan every entry name and symlink target below `node` (the snapshot of `dir`); with
/// `redact`, store them redacted. Two entries that would then share a name are refused.
pub fn scan_names(node: &mut Node, dir: &Path, redact: bool) -> Result<NameFindings> {
    struct Scan<'a> {
        dir: &'a Path,
        redact: bool,
        out: NameFindings,
    }
    impl Names for Scan<'_> {
        fn name(&mut self, path: &Path, name: &str) -> Option<String> {
            let r = scrub(name.as_bytes())?;
            self.out.flagged.push(path.to_path_buf());
            self.out.findings.push(Finding {
                place: Place::Name(display_path(self.dir, path)),
                counts: r.counts,
            });
            self.redact.then(|| lossy(r.bytes))
        }
        fn target(&mut self, path: &Path, target: &[u8]) -> Option<Vec<u8>> {
            let r = scrub(target)?;
            self.out.findings.push(Finding {
                place: Place::Target(display_path(self.dir, path)),
                counts: r.counts,
            });
            self.redact.then_some(r.bytes)
        }
    }
    let mut scan = Scan {
        dir,
        redact,
        out: NameFindings {
            findings: Vec::new(),
            flagged: Vec::new(),
        },
    };
    if all_clean(node) {
        return Ok(scan.out);
    }
    node.rewrite_names(&mut scan)
        .map_err(|Collision { dir: at, name }| {
            let within = match display_path(dir, &at) {
                shown if shown.is_empty() => "the directory".to_string(),
                shown => terminal_safe(&shown).into_owned(),
            };
            Error::new(
                ErrorKind::Security,
                format!(
                    "refusing to save: with their secrets redacted, two entries of {within} would both be named {}",
                    terminal_safe(&name)
                ),
            )
            .with_hint("rename one of them, or save with --secrets block or --secrets allow")
        })?;
    Ok(scan.out)
}

/// Whether every name and symlink target below `node` is clean, by one scan of them all,
/// one a line: no rule matches across a line end (a key block that would, from one name
/// into another, is a finding, and then each is scanned alone), so a clean whole proves
/// every line clean. One with a line end or a backslash (an escape, which a JSON layer
/// may read differently alone) is scanned alone. A snapshot of 20,000 files has as many
/// names, and scanning each on its own took a save of 16,480 files about 4% longer.
fn all_clean(node: &mut Node) -> bool {
    struct Collect {
        lines: Vec<u8>,
        clean: bool,
    }
    impl Names for Collect {
        fn name(&mut self, _: &Path, name: &str) -> Option<String> {
            self.target(Path::new(""), name.as_bytes());
            None
        }
        fn target(&mut self, _: &Path, text: &[u8]) -> Option<Vec<u8>> {
            if text.iter().any(|b| matches!(b, b'\n' | b'\\')) {
                self.clean &= scrub(text).is_none();
            } else {
                self.lines.extend_from_slice(text);
                self.lines.push(b'\n');
            }
            None
        }
    }
    let mut all = Collect {
        lines: Vec::new(),
        clean: true,
    };
    // Nothing is renamed, so no two names can collide.
    let _ = node.rewrite_names(&mut all);
    all.clean && scrub(&all.lines).is_none()
}

/// The manifest's `fields`, scanned; with `redact`, redacted.
pub fn scan_fields(fields: Fields, redact: bool) -> Result<(Fields, Vec<Finding>)> {
    let Fields {
        summary,
        note,
        from,
        to,
        metadata,
    } = fields;
    let mut findings = Vec::new();
    let mut field = |flag: String, text: &str| -> String {
        let Some(r) = scrub(text.as_bytes()) else {
            return text.to_string();
        };
        findings.push(Finding {
            place: Place::Field(flag),
            counts: r.counts,
        });
        if redact {
            lossy(r.bytes)
        } else {
            text.to_string()
        }
    };
    let summary = field("--summary".into(), &summary);
    let note = field("--note".into(), &note);
    let mut stored = BTreeMap::new();
    for (key, value) in metadata {
        let shown = match scrub(key.as_bytes()) {
            Some(r) => lossy(r.bytes),
            None => key.clone(),
        };
        let label = format!("--meta {}", terminal_safe(&shown));
        let new_key = field(label.clone(), &key);
        let new_value = field(label, &value);
        if stored.insert(new_key, new_value).is_some() {
            return Err(Error::new(
                ErrorKind::Security,
                format!("refusing to save: with their secrets redacted, two --meta keys would both be {shown}"),
            )
            .with_hint("rename one of them, or save with --secrets block or --secrets allow"));
        }
    }
    let from = field("--from".into(), &from);
    let to = field("--to".into(), &to);
    Ok((
        Fields {
            summary,
            note,
            from,
            to,
            metadata: stored,
        },
        findings,
    ))
}

impl Place {
    /// How a message names it.
    fn describe(&self) -> String {
        match self {
            Place::Name(path) => format!("the name of {}", terminal_safe(path)),
            Place::Target(path) => format!("the target of symlink {}", terminal_safe(path)),
            Place::Field(flag) => flag.clone(),
        }
    }
}

/// At most this many places are named in a refusal or note.
const MAX_LISTED: usize = 10;

/// The files (by path) and places, up to [`MAX_LISTED`], then "and N more".
pub fn list(dir: &Path, files: &[Found], places: &[Finding]) -> String {
    let all: Vec<String> = files
        .iter()
        .map(|f| terminal_safe(&display_path(dir, &f.path)).into_owned())
        .chain(places.iter().map(|p| p.place.describe()))
        .collect();
    let mut text = all
        .iter()
        .take(MAX_LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if all.len() > MAX_LISTED {
        text.push_str(&format!(" and {} more", all.len() - MAX_LISTED));
    }
    text
}

/// The refusal of a snapshot under `--secrets block` whose names or fields (and maybe
/// files) hold secrets: kinds and places.
pub fn refusal(dir: &Path, files: &[Found], places: &[Finding]) -> Error {
    let mut kinds: Vec<&str> = secrets::files::all_kinds(files);
    kinds.extend(places.iter().flat_map(|p| p.counts.keys().copied()));
    kinds.sort_unstable();
    kinds.dedup();
    let count = files.len() + places.len();
    let within = if count == 1 {
        String::new()
    } else {
        format!("{count} places: ")
    };
    Error::new(
        ErrorKind::Security,
        format!(
            "refusing to save: secrets ({}) in {within}{}",
            kinds.join(", "),
            list(dir, files, places)
        ),
    )
    .with_hint(
        "remove or rename them, or save with --secrets redact (placeholders) or --secrets allow (as they are)",
    )
}

/// The report of `secrets.redacted` / `secrets.allowed`: for each kind, how many files
/// and names and which fields ("github_token (1 file, 2 file names, --summary)").
pub fn describe(files: &[Found], places: &[Finding]) -> String {
    let mut by_kind: BTreeMap<&str, (u64, u64, u64, Vec<String>)> = BTreeMap::new();
    for f in files {
        for kind in f.kinds() {
            by_kind.entry(kind).or_default().0 += 1;
        }
    }
    for p in places {
        for kind in p.counts.keys() {
            let entry = by_kind.entry(kind).or_default();
            match &p.place {
                Place::Name(_) => entry.1 += 1,
                Place::Target(_) => entry.2 += 1,
                Place::Field(flag) if !entry.3.contains(flag) => entry.3.push(flag.clone()),
                Place::Field(_) => {}
            }
        }
    }
    let counted = |n: u64, one: &str, many: &str| {
        (n > 0).then(|| format!("{n} {}", if n == 1 { one } else { many }))
    };
    by_kind
        .into_iter()
        .map(|(kind, (files, names, targets, fields))| {
            let parts: Vec<String> = [
                counted(files, "file", "files"),
                counted(names, "file name", "file names"),
                counted(targets, "symlink target", "symlink targets"),
            ]
            .into_iter()
            .flatten()
            .chain(fields)
            .collect();
            format!("{kind} ({})", parts.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `--json` entries of every finding: `in` says where (`contents`, `name`,
/// `symlink_target`, or the flag), `path` which entry.
pub fn json_entries(dir: &Path, files: &[Found], places: &[Finding]) -> Vec<Value> {
    let mut out: Vec<Value> = files
        .iter()
        .map(
            |f| json!({ "in": "contents", "path": display_path(dir, &f.path), "kinds": f.kinds() }),
        )
        .collect();
    for p in places {
        let kinds: Vec<&str> = p.counts.keys().copied().collect();
        out.push(match &p.place {
            Place::Name(path) => json!({ "in": "name", "path": path, "kinds": kinds }),
            Place::Target(path) => json!({ "in": "symlink_target", "path": path, "kinds": kinds }),
            Place::Field(flag) => json!({ "in": flag, "kinds": kinds }),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_store::snapshot::{self, Ignores};

    /// The names of `files` (and one symlink to `target`) in a fresh directory, scanned.
    fn findings(files: &[&str], target: &str) -> Vec<String> {
        let tmp = tempfile::tempdir().unwrap();
        for name in files {
            std::fs::write(tmp.path().join(name), b"clean\n").unwrap();
        }
        std::os::unix::fs::symlink(target, tmp.path().join("link")).unwrap();
        let mut node = snapshot::scan(tmp.path(), None, Ignores::Off).unwrap();
        let found = scan_names(&mut node.tree, tmp.path(), false).unwrap();
        found.findings.iter().map(|f| f.place.describe()).collect()
    }

    #[test]
    fn the_one_scan_of_all_names_misses_none_a_scan_of_each_finds() {
        let token = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8";
        assert!(findings(&["a.txt", "b.rs", "package.json"], "../a.txt").is_empty());
        // A JSON string with an escape is decoded only as a whole input, a name with a
        // line end is one line of the joined names: each is scanned alone.
        let quoted = format!("\"\\u0067{}\"", &token[1..]);
        let split = format!("x\n{token}");
        for (names, target) in [
            (vec!["plain.txt", quoted.as_str()], "plain.txt".to_string()),
            (vec!["plain.txt", split.as_str()], "plain.txt".to_string()),
            (vec!["plain.txt"], format!("/keys/{token}")),
        ] {
            let got = findings(&names, &target);
            assert_eq!(got.len(), 1, "{names:?} -> {target}: {got:?}");
            assert!(!got[0].contains(&token[4..]), "{got:?}");
        }
    }
}
