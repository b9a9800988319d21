//! Import: turn handoffs written by other tools into a plan of bundles, parents first.
//!
//! Three layouts found in the field are recognised (design notes, section 5):
//!
//! - **prowl**: a `.prowl/handoff/` directory (PATH is the project root holding it, or the
//!   directory itself). Each `archive/<ts>-<from>-to-<to>.md` briefing becomes a bundle, in
//!   timestamp order, then `current.md`; each bundle's parent is the one before it. An
//!   `archive/<ts>-replaced-current.md` is the briefing `current.md` held until the
//!   transition at `<ts>` (it sorts before it; from/to/created from the `log.md` line
//!   before `<ts>`). Every bundle holds its briefing as `handoff.md`; the last one also
//!   `context.md` and `log.md`; a `sessions/<ts>-*` excerpt goes to the first bundle
//!   created at or after `<ts>` (else the last), its header fields (agent, session,
//!   confidence, transcript path, ...) into that bundle's metadata as
//!   `prowl.session.<name>.<field>`. `from`/`to` come from the archive file
//!   name, for `current.md` from the last `log.md` transition line (`<time> [handoff]
//!   <from> -> <to>`, `→` too, as a list item or not; one that names a transition but
//!   cannot be read is a [`Plan::warnings`] entry); the summary is the first line of
//!   the `## Objective` section; `created` is the file-name (or log line) timestamp.
//! - **frontmatter**: a folder of `<TS>-<agent>.md` files with flat YAML frontmatter
//!   (PATH is the folder, or a project holding `.local/handoff/`). Each file is a bundle
//!   whose `handoff.md` is what follows the frontmatter, byte for byte (the frontmatter
//!   lives in metadata, and export writes it back from there); parents come from
//!   `parent` (an id, a list of ids
//!   in the given order, or null); `from` = `agent` (else the agent in the file name),
//!   `to` = `next_agent`, `summary` = `summary`, `note` = `next_task`, `created` = the file
//!   name's timestamp. Every frontmatter key is kept as `frontmatter.<key>` (lists joined
//!   with `,`, null as the empty string). `status` is kept as given, not checked; it and
//!   the next task, blocker and question are also kept under [`STATUS`] and friends.
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
//! `%Y-%m-%dT%H-%M-%S` (seconds may be missing, as in prowl's `2026-11-20T1000`), or an
//! RFC 3339-like variant (`2024-05-01T10:00:00Z`,
//! `20240501T100000Z`, fractional seconds, `Z` or a `+hh:mm` offset; no zone means UTC).

mod agent_bundle;
mod apply;
mod frontmatter;
mod fsread;
mod order;
mod prowl;
mod prowl_text;
pub mod state;
mod timestamp;

pub use self::apply::{Applied, Imported, Skipped, apply, scrub};

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use baton_error::{Error, IoContext, Result};

pub use self::agent_bundle::MANIFEST_FIELDS;
use self::agent_bundle::*;
use self::frontmatter::*;
use self::fsread::*;
use self::order::*;
use self::prowl::*;
use self::timestamp::*;

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
    /// What was read past without failing the import (`path:line: message`): a prowl
    /// `log.md` line that names a transition but cannot be read.
    pub warnings: Vec<String>,
}

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
    let mut plan = match locate(path)? {
        Layout::Prowl(dir) => plan_prowl(&dir)?,
        Layout::Frontmatter(dir) => plan_frontmatter(&dir)?,
        Layout::AgentBundle(dir) => plan_agent_bundles(path, &[dir], false)?,
        Layout::AgentBundles(dirs) => plan_agent_bundles(path, &dirs, true)?,
    };
    add_fingerprints(&mut plan);
    Ok(plan)
}

/// The time a handoff file's name (`<TS>-<rest>`, without `.md`) starts with, as import
/// reads it; `None` when it has none.
pub(crate) fn file_name_time(stem: &str) -> Option<SystemTime> {
    name_timestamp(stem)?.ok().map(|(t, _)| t)
}

/// Metadata keys of what an imported handoff says about itself, whatever its format:
/// `resume` and `log` read them (status shown; `blocked` puts the blocker first,
/// `needs_discussion` the open question; the next task is the kickoff's Next Steps when
/// the handoff has no `## Next Steps`).
pub const STATUS: &str = "handoff.status";
pub const NEXT_TASK: &str = "handoff.next_task";
pub const BLOCKER: &str = "handoff.blocker";
pub const QUESTION: &str = "handoff.question";
/// `true` when the source says its capture is incomplete (an agent-handoff manifest's
/// `partial`, or a `partial` capture status).
pub const PARTIAL: &str = "handoff.partial";

/// The body of the first `##`-or-deeper Markdown section titled one of `titles`
/// (case-insensitive), up to the next heading of the same or a higher level; trimmed,
/// `None` when absent or blank.
pub(crate) fn markdown_section(text: &str, titles: &[&str]) -> Option<String> {
    let mut lines = text.lines();
    let mut level = 0;
    for line in lines.by_ref() {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes >= 2
            && titles
                .iter()
                .any(|t| line[hashes..].trim().eq_ignore_ascii_case(t))
        {
            level = hashes;
            break;
        }
    }
    if level == 0 {
        return None;
    }
    let mut body = Vec::new();
    for line in lines {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes > 0 && hashes <= level && line[hashes..].starts_with(' ') {
            break;
        }
        body.push(line);
    }
    let body = body.join("\n").trim().to_string();
    (!body.is_empty()).then_some(body)
}

/// Metadata key of a bundle's source fingerprint: a digest of everything the plan took
/// from the input for it (and its parents' fingerprints), so a second import of the same
/// input can be recognised whatever the store's state.
pub const FINGERPRINT: &str = "import.fingerprint";

fn add_fingerprints(plan: &mut Plan) {
    let mut done: HashMap<String, String> = HashMap::new();
    for b in &mut plan.bundles {
        let mut bytes = Vec::new();
        let mut field = |part: &[u8]| {
            bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
            bytes.extend_from_slice(part);
        };
        field(plan.format.name().as_bytes());
        for text in [&b.key, &b.from, &b.to, &b.summary, &b.note] {
            field(text.as_bytes());
        }
        let created = b.created.map(baton_format::bundle::format_time);
        field(created.unwrap_or_default().as_bytes());
        for (k, v) in &b.metadata {
            field(k.as_bytes());
            field(v.as_bytes());
        }
        for (path, content) in &b.files {
            field(path.as_bytes());
            field(content);
        }
        for p in &b.parents {
            field(done.get(p).map_or(p.as_bytes(), |f| f.as_bytes()));
        }
        let fp = baton_format::ObjectId::of(&bytes).to_string();
        done.insert(b.key.clone(), fp.clone());
        b.metadata.insert(FINGERPRINT.to_string(), fp);
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
pub(crate) mod test_util {
    use super::*;
    use std::fs;

    pub(crate) fn fixture(rel: &str) -> PathBuf {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("fixtures/import")
            .join(rel)
    }

    pub(crate) fn at(rfc3339: &str) -> SystemTime {
        humantime::parse_rfc3339(rfc3339).unwrap()
    }

    pub(crate) fn names(b: &PlannedBundle) -> Vec<&str> {
        b.files.iter().map(|(n, _)| n.as_str()).collect()
    }

    pub(crate) fn file<'a>(b: &'a PlannedBundle, name: &str) -> &'a [u8] {
        &b.files.iter().find(|(n, _)| n == name).unwrap().1
    }

    pub(crate) fn keys(plan: &Plan) -> Vec<&str> {
        plan.bundles.iter().map(|b| b.key.as_str()).collect()
    }

    pub(crate) fn write(dir: &Path, rel: &str, content: &str) {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::test_util::*;

    #[test]
    fn empty_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let err = plan(tmp.path()).unwrap_err();
        assert_eq!(err.kind, baton_error::ErrorKind::Usage);
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
            assert_eq!(err.kind, baton_error::ErrorKind::Usage, "{case}: {err}");
            let text = err.to_string();
            assert!(text.contains(want), "{case}: got {text:?}, want {want:?}");
            assert!(text.starts_with(&*dir.to_string_lossy()), "{case}: {text}");
        }
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
