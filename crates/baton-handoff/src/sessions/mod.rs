//! Agent harness sessions as transcript sources: `--transcript claude-code[:SESSION|latest]`,
//! `codex[:SESSION|latest]`, `gemini[:SESSION|latest]` or a FILE; finding a workspace's
//! sessions, reading them read-only (cut at the last complete line), and normalising them
//! into events.

pub mod claude_code;
pub mod codex;
pub mod gemini;
pub mod json;
mod key;
mod lines;
mod listing;
mod normalise;
pub mod skipped;

use std::fs;
use std::path::{Path, PathBuf};

use baton_store::transcript_cache::SessionStat;

use serde::Serialize;

use super::events;
use baton_error::{Error, Result};
use key::{ident_of, key_finish, key_start};
pub use lines::read_complete;
use lines::{count_complete_lines, modified, read_whole, seconds};
pub(crate) use lines::{json_lines, line_error, open_session, read_head, unexpected};
pub use listing::{Count, list};
use listing::{canonical, find_session, latest_too_large, newest_described, no_session, same_dir};
use normalise::{detect, normalise};

/// Largest session file baton reads (real ones run to tens of MB). A handoff holds the
/// file, its normalised transcript and the copies the secret scan makes of both, so its
/// memory is a few times this at most (docs/reliability.md, "Transcript limits").
pub const MAX_SESSION_BYTES: u64 = 256 << 20;
/// Largest `transcript.jsonl` baton writes or reads back: a normalised event can be a few
/// times longer than the short session line it came from.
pub const MAX_TRANSCRIPT_BYTES: u64 = 4 * MAX_SESSION_BYTES;
/// Shortest session id prefix accepted for `harness:SESSION`.
const MIN_PREFIX: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Harness {
    ClaudeCode,
    Codex,
    Gemini,
}

impl Harness {
    pub fn name(self) -> &'static str {
        match self {
            Harness::ClaudeCode => "claude-code",
            Harness::Codex => "codex",
            Harness::Gemini => "gemini",
        }
    }

    /// The harness as its makers write it, for notes.
    pub fn title(self) -> &'static str {
        match self {
            Harness::ClaudeCode => "Claude Code",
            Harness::Codex => "Codex",
            Harness::Gemini => "Gemini CLI",
        }
    }
}

/// The handoff's note on the entries a reader skipped, from the transcript's
/// `transcript.source` label (`claude-code:<session>`), or `None` when none were.
pub fn skipped_note(label: Option<&str>, skipped: &skipped::Skipped) -> Option<String> {
    let title = match label.map(Source::parse) {
        Some(Source::Session(harness, _)) => harness.title(),
        _ => "session",
    };
    skipped.note(title)
}

/// What `--transcript` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    /// A harness's session: `None` is `latest`.
    Session(Harness, Option<String>),
}

impl Source {
    /// `claude-code`, `codex` (each optionally `:SESSION` or `:latest`), else a file path
    /// (write `./codex` for a file of that name).
    pub fn parse(text: &str) -> Source {
        let (head, selector) = match text.split_once(':') {
            Some((head, sel)) => (head, Some(sel)),
            None => (text, None),
        };
        let harness = match head {
            "claude-code" => Harness::ClaudeCode,
            "codex" => Harness::Codex,
            "gemini" => Harness::Gemini,
            _ => return Source::File(PathBuf::from(text)),
        };
        let selector = selector
            .filter(|s| !s.is_empty() && *s != "latest")
            .map(str::to_string);
        Source::Session(harness, selector)
    }
}

/// Where the harnesses keep their sessions.
#[derive(Clone, Debug)]
pub struct Homes {
    /// `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
    pub claude: PathBuf,
    /// `$CODEX_HOME`, else `~/.codex`.
    pub codex: PathBuf,
    /// `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini` (Gemini CLI's `homedir()`).
    pub gemini: PathBuf,
}

impl Homes {
    pub fn from_env() -> Homes {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/nonexistent"));
        let var = |name: &str, default: PathBuf| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or(default)
        };
        Homes {
            claude: var("CLAUDE_CONFIG_DIR", home.join(".claude")),
            codex: var("CODEX_HOME", home.join(".codex")),
            gemini: var("GEMINI_CLI_HOME", home.clone()).join(".gemini"),
        }
    }
}

/// One session found on disk.
#[derive(Clone, Debug, Serialize)]
pub struct SessionInfo {
    pub harness: Harness,
    pub session: String,
    pub path: PathBuf,
    /// The first timestamp the session recorded.
    pub started: String,
    /// The working directory the session recorded.
    pub cwd: PathBuf,
    /// Complete lines in the file (not yet normalised); 0 when not counted (listing for
    /// `latest`, or a file over [`MAX_SESSION_BYTES`]).
    pub lines: usize,
    /// The file's size when it was listed.
    pub bytes: u64,
    /// Seconds since the epoch of the file's last change: what `latest` orders by.
    #[serde(skip)]
    pub modified: u64,
}

/// A transcript ready for a bundle.
pub struct Loaded {
    /// `transcript.jsonl`: normalised events, or a plain FILE's lines as given.
    pub jsonl: Vec<u8>,
    /// The session file itself (redacted like everything else), kept as an attachment.
    pub raw: Option<(String, Vec<u8>)>,
    /// `claude-code:<session>` and the like, for the bundle's metadata.
    pub label: Option<String>,
    pub events: usize,
    /// The tool pairing of the events (empty for a plain FILE).
    pub pairing: events::Pairing,
    /// Entries of types this baton does not know, left out (any harness's reader).
    pub skipped: skipped::Skipped,
    /// Further attachments of the session (Claude Code's sub-agent logs, redacted like
    /// `raw`), each as (path under `attachments/`, bytes).
    pub more_raw: Vec<(String, Vec<u8>)>,
    /// One line each for the handoff's notes, besides the skipped entries'.
    pub notes: Vec<String>,
}

/// Resolve `--transcript` and read it into what a bundle keeps.
pub fn load(homes: &Homes, source: &Source, workspace: &Path) -> Result<Loaded> {
    read_source(homes, source, workspace)?.load()
}

/// A transcript source resolved and read, before anything is made of it.
pub struct SessionFile {
    /// The harness whose format the file is in; `None` for a plain JSON-lines FILE.
    harness: Option<Harness>,
    path: PathBuf,
    bytes: Vec<u8>,
    /// The session id asked for or found while listing.
    session: Option<String>,
    /// The file's metadata just before it was read.
    stat: Option<SessionStat>,
    /// A Claude Code session's sub-agent logs (none for a FILE the MCP server opened:
    /// nothing is opened beside it).
    subagents: claude_code::subagents::Found,
    /// The sub-agent threads (Codex) or logs (Gemini CLI) of the session, read: merged
    /// into its events.
    threads: Vec<(PathBuf, Vec<u8>)>,
    /// The BLAKE3 of `bytes`, once hashed (by [`SessionFile::key_of`] on the way).
    digest: std::sync::OnceLock<blake3::Hash>,
}

/// Resolve `--transcript` and read the file (cut at its last complete line).
pub fn read_source(homes: &Homes, source: &Source, workspace: &Path) -> Result<SessionFile> {
    resolve_source(homes, source, workspace)?.read()
}

/// A `--transcript` source resolved to its file, not read yet.
pub struct ResolvedSession {
    /// `None` for a plain FILE, whose format is told from its bytes.
    harness: Option<Harness>,
    path: PathBuf,
    session: Option<String>,
    /// The file already opened (beneath a workspace, by the MCP server): read from it,
    /// never opened again by `path`.
    opened: Option<fs::File>,
    /// See [`SessionFile::threads`].
    threads: Vec<PathBuf>,
}

/// Resolve `--transcript` to its file (listing reads only the start of each session).
pub fn resolve_source(homes: &Homes, source: &Source, workspace: &Path) -> Result<ResolvedSession> {
    let (harness, path, session) = match source {
        Source::File(path) => (None, path.clone(), None),
        Source::Session(harness, None) => {
            // Only the newest is read whole (by `read`); the listing reads the start of
            // as few others as it can.
            let canonical_workspace = canonical(workspace);
            let newest = match harness {
                Harness::ClaudeCode => claude_code::newest(&homes.claude, &canonical_workspace),
                Harness::Codex => codex::newest(&homes.codex, &canonical_workspace),
                Harness::Gemini => gemini::newest(&homes.gemini, &canonical_workspace),
            };
            let info = newest.ok_or_else(|| no_session(homes, *harness, workspace))?;
            if info.bytes > MAX_SESSION_BYTES {
                // Never a silent fall back on an older session: the one asked for is this.
                return Err(latest_too_large(*harness, &info));
            }
            (Some(*harness), info.path, Some(info.session))
        }
        Source::Session(harness, Some(wanted)) => {
            let info = find_session(homes, *harness, wanted)?;
            (Some(*harness), info.path, Some(info.session))
        }
    };
    let threads = match (harness, &session) {
        (Some(Harness::Codex), Some(id)) => {
            let room = MAX_SESSION_BYTES.saturating_sub(size_now(&path));
            codex::subagents::children(&homes.codex, id, &path, room)
        }
        (Some(Harness::Gemini), Some(id)) => {
            let room = MAX_SESSION_BYTES.saturating_sub(size_now(&path));
            gemini::subagents::logs(&path, id, room)
        }
        _ => Vec::new(),
    };
    Ok(ResolvedSession {
        harness,
        path,
        session,
        opened: None,
        threads,
    })
}

/// A file's size now (0 when unknown).
fn size_now(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

/// A session file's bytes cut at its last complete line, except a Gemini CLI chat
/// document, which is rewritten whole, never appended to (its sub-agent documents too).
fn complete(harness: Option<Harness>, path: &Path, raw: Vec<u8>) -> Result<Vec<u8>> {
    if harness == Some(Harness::Gemini) && gemini::is_document(&raw) {
        return Ok(raw);
    }
    lines::complete_lines(path, raw)
}

impl ResolvedSession {
    /// A plain FILE transcript already opened (`path` names it in messages and keys).
    /// The session file this names.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn opened(path: PathBuf, file: fs::File) -> ResolvedSession {
        ResolvedSession {
            harness: None,
            path,
            session: None,
            opened: Some(file),
            threads: Vec::new(),
        }
    }

    /// Read the file (cut at its last complete line).
    pub fn read(self) -> Result<SessionFile> {
        let opened = self.opened.is_some();
        let (stat, raw) = match self.opened {
            Some(file) => (
                SessionStat::of_open(&file).ok(),
                lines::read_bounded_from(file, &self.path)?,
            ),
            None => (SessionStat::take(&self.path).ok(), read_whole(&self.path)?),
        };
        let harness = self.harness.or_else(|| detect(&raw));
        let subagents = match harness {
            Some(Harness::ClaudeCode) if !opened => claude_code::subagents::find(&self.path),
            _ => Default::default(),
        };
        let bytes = complete(harness, &self.path, raw)?;
        let mut threads = Vec::new();
        for thread in self.threads {
            // A thread gone or grown past the limit since it was listed is left out, as
            // one not found would be.
            if let Ok(bytes) = read_whole(&thread).and_then(|raw| complete(harness, &thread, raw)) {
                threads.push((thread, bytes));
            }
        }
        Ok(SessionFile {
            harness,
            path: self.path,
            bytes,
            session: self.session,
            stat,
            subagents,
            threads,
            digest: std::sync::OnceLock::new(),
        })
    }

    /// The file's metadata now, and when it was taken: call just before reading the file.
    pub fn session_stat(&self) -> Result<SessionStat> {
        match &self.opened {
            Some(file) => SessionStat::of_open(file),
            None => SessionStat::take(&self.path),
        }
        .map_err(|e| Error::io("cannot read transcript", &self.path, e))
    }

    /// [`SessionFile::ident`] of this file, known before reading it.
    pub fn ident(&self) -> Option<String> {
        ident_of(self.harness, self.session.as_deref(), &self.path)
    }

    /// [`SessionFile::key_of`] of the file's first `len` bytes, hashed as they are read
    /// in small pieces, so that a session unchanged since the last handoff is never held
    /// in memory whole. `None` if the file is shorter now, or for a plain FILE.
    pub fn key_of_streamed(&self, len: u64) -> Result<Option<String>> {
        let Some(harness) = self.harness.filter(|_| self.threads.is_empty()) else {
            return Ok(None);
        };
        use std::io::Read;
        let err = |e| Error::io("cannot read transcript", &self.path, e);
        let mut file = open_session(&self.path)?.0.take(len);
        let mut hasher = blake3::Hasher::new();
        hasher.update_reader(&mut file).map_err(err)?;
        if file.limit() != 0 {
            return Ok(None); // shorter now
        }
        let digest = hasher.finalize();
        let hasher = key_start(harness, self.session.as_deref(), &self.path, &digest, len);
        Ok(Some(key_finish(hasher, self.session.is_some())))
    }
}

impl SessionFile {
    /// A hash of everything [`SessionFile::load`] of a harness's session depends on (the
    /// harness, the session id, the path and every byte of the file; the build is in the
    /// secret policy the caller pairs it with), so equal keys mean equal results. `None`
    /// for a plain FILE, which is kept as it is.
    pub fn key(&self) -> Option<String> {
        self.key_of(self.bytes.len())
    }

    /// [`SessionFile::key`] of the file's first `len` bytes (what the key of the file was
    /// when it was that long).
    pub fn key_of(&self, len: usize) -> Option<String> {
        let harness = self.harness?;
        if len > self.bytes.len() {
            return None;
        }
        // Which sub-agent logs were left out is not in the key: such a session is
        // normalised every time.
        if self.subagents.left_out > 0 {
            return None;
        }
        let digest = if len == self.bytes.len() {
            *self.digest()
        } else {
            let (first, whole) = key::digests(&self.bytes, len);
            let _ = self.digest.set(whole);
            first
        };
        let mut hasher = key_start(
            harness,
            self.session.as_deref(),
            &self.path,
            &digest,
            len as u64,
        );
        for sub in &self.subagents.files {
            key::update_part(&mut hasher, sub.name.as_bytes());
            key::update_part(&mut hasher, &sub.bytes);
        }
        // The sub-agent threads merged in: their paths and bytes.
        for (path, bytes) in &self.threads {
            use std::os::unix::ffi::OsStrExt;
            key::update_part(&mut hasher, path.as_os_str().as_bytes());
            key::update_part(&mut hasher, bytes);
        }
        Some(key_finish(hasher, self.session.is_some()))
    }

    /// Which session file this is, whatever its length: a hash of the harness, the
    /// session id and the path. `None` unless it is a Claude Code session named by id or
    /// found as `latest` (the only ones whose appended lines are normalised on their own,
    /// see [`SessionFile::normalise_appended`]).
    pub fn ident(&self) -> Option<String> {
        ident_of(self.harness, self.session.as_deref(), &self.path)
    }

    /// The file's metadata just before it was read.
    pub fn stat(&self) -> Option<SessionStat> {
        self.stat
    }

    /// The BLAKE3 of the file's bytes: the id of their blob.
    pub fn digest(&self) -> &blake3::Hash {
        self.digest.get_or_init(|| key::digest(&self.bytes))
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The file's bytes, given up.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The events of the lines after the first `len` bytes (a line boundary) of a
    /// session whose first `len` bytes normalised to `before` events with `prior`'s
    /// pairing: the transcript lines to append and the pairing of those events. `None`
    /// whenever they would not be exactly what normalising the whole file adds after
    /// those events (not an [`SessionFile::ident`] session, `len` not at a line end, a
    /// line the reader refuses, which a whole read reports with its line number, or a
    /// call that would pair an earlier event differently). The entries those lines
    /// skipped come last.
    pub fn normalise_appended(
        &self,
        len: usize,
        before: u64,
        prior: &events::Pairing,
    ) -> Option<(Vec<u8>, events::Pairing, u64, skipped::Skipped)> {
        self.ident()?;
        let session = self.session.as_deref()?;
        if len == 0 || self.bytes.get(len - 1) != Some(&b'\n') {
            return None;
        }
        let tail = self.bytes.get(len..)?;
        // Claude Code's reader keeps no state from line to line but the first session
        // id, which does not matter here (the id named or listed wins).
        let (lines, drafts) = claude_code::read(&self.path, tail).ok()?;
        if prior.touched_by(&drafts) {
            return None;
        }
        let events =
            events::finish_after(Harness::ClaudeCode.name(), session, drafts, before, prior);
        let mut pairing = prior.clone();
        pairing.add(&events);
        Some((
            events::to_jsonl(&events),
            pairing,
            events.len() as u64,
            lines.skipped,
        ))
    }

    /// Normalise a harness's session into events (a plain FILE is only validated).
    pub fn load(self) -> Result<Loaded> {
        let Some(harness) = self.harness else {
            let events = super::transcript::validate(&self.bytes).map_err(|e| Error {
                message: format!("{}: {}", self.path.display(), e.message),
                ..e
            })?;
            return Ok(Loaded {
                jsonl: self.bytes,
                raw: None,
                label: None,
                events,
                pairing: events::Pairing::default(),
                skipped: skipped::Skipped::default(),
                more_raw: Vec::new(),
                notes: Vec::new(),
            });
        };
        normalise(
            harness,
            &self.path,
            self.bytes,
            self.session,
            self.subagents,
            &self.threads,
        )
    }
}

/// What the `latest` tests of each harness share.
#[cfg(test)]
pub(super) mod test_support {
    use std::path::Path;

    use super::SessionInfo;

    /// Write `line` as the whole file at `path`, last changed `secs` after the epoch.
    pub fn write_dated(path: &Path, line: &str, secs: u64) {
        std::fs::write(path, format!("{line}\n")).unwrap();
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(time).unwrap();
    }

    /// The id of `newest`, after checking that it is the first of the whole `listing` in
    /// `latest`'s order.
    pub fn newest_of_listing(
        mut listing: Vec<SessionInfo>,
        newest: Option<SessionInfo>,
    ) -> Option<String> {
        super::listing::sort_latest_first(&mut listing);
        let first = listing.into_iter().next().map(|s| s.session);
        let newest = newest.map(|s| s.session);
        assert_eq!(newest, first, "as the whole listing sorted");
        newest
    }
}
