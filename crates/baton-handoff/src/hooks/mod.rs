//! The harness hooks baton installs so checkpoints happen without anyone asking: Claude
//! Code's `settings.json` hooks (`claude.rs`) and Codex's `notify` program in `config.toml`
//! (`codex.rs`). This module owns what is shared: the options, the command line the hooks
//! run, the install record that tells baton's entries from a user's edits, and reading and
//! writing a configuration file without disturbing it.
//!
//! It only writes configuration: the command the hooks run is `baton checkpoint --hook`.

mod claude;
mod codex;
mod json;

use std::fs;
use std::io::{ErrorKind as IoKind, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use baton_error::{Error, IoContext, Result};
use baton_store::fsutil;

pub use crate::skill::{Harness, Places, Scope};

/// Every hook line baton writes starts with this; an entry whose command starts with it
/// is baton's (and, unless the install record says baton wrote it as it is, an edit).
pub const HOOK_PREFIX: &str = "baton checkpoint --hook";
/// The harness's limit on one run of the hook, in seconds (Claude Code's `timeout`):
/// well above the bound `baton checkpoint` keeps itself to (10 s by default).
pub const HOOK_TIMEOUT_SECS: u64 = 30;
/// Beside the configuration file: which entries baton wrote, with their hashes.
const RECORD_FILE: &str = ".baton-hooks.json";
const RECORD_FORMAT: u32 = 1;
/// Largest configuration file baton reads; anything bigger is not ours to edit.
const MAX_FILE: u64 = 4 << 20;

/// What `baton hooks install` is asked to hook.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Claude Code: also checkpoint at `Stop` (after every answer).
    pub on_stop: bool,
    /// Claude Code: a `SessionStart` hook that gives a new session the latest kickoff.
    pub resume: bool,
    /// `--push TARGET` in the hook line.
    pub push: Option<String>,
    /// `--store PATH` in the hook line (absolute).
    pub store: Option<PathBuf>,
}

/// How the hooks of one harness and scope stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    NotInstalled,
    /// Every baton entry is as baton wrote it (per the install record).
    Installed,
    /// A baton entry was changed or removed by hand, or has no record: kept unless --force.
    Edited,
    /// The configuration file cannot be read or parsed (`problem` says why).
    Unreadable,
}

/// One hooked event as found in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// As baton wrote it.
    Recorded,
    /// Baton's command, but not as baton wrote it (or with no install record).
    Edited,
    /// Recorded as installed, but no longer in the file.
    Missing,
}

#[derive(Clone, Debug, Serialize)]
pub struct EventStatus {
    pub event: String,
    pub state: EntryState,
}

#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub harness: Harness,
    pub scope: Scope,
    pub file: PathBuf,
    pub state: State,
    /// Baton's entries, one per hooked event.
    pub events: Vec<EventStatus>,
    /// The command line the (first) baton entry runs.
    pub command: Option<String>,
    /// Why the file could not be read, or what else holds the one slot baton needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl Status {
    /// Nothing of baton's found yet in `file`.
    pub(crate) fn not_installed(harness: Harness, scope: Scope, file: &std::path::Path) -> Status {
        Status {
            harness,
            scope,
            file: file.to_path_buf(),
            state: State::NotInstalled,
            events: Vec::new(),
            command: None,
            problem: None,
        }
    }

    /// The file could not be read as settings: why.
    pub(crate) fn unreadable(mut self, why: String) -> Status {
        self.state = State::Unreadable;
        self.problem = Some(why);
        self
    }
}

/// What install or remove did to one event's entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Installed,
    Updated,
    Unchanged,
    Removed,
    NotInstalled,
}

#[derive(Clone, Debug, Serialize)]
pub struct Change {
    pub event: String,
    pub action: Action,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub harness: Harness,
    pub scope: Scope,
    pub file: PathBuf,
    /// The hook line (install), as the harness will run it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub changes: Vec<Change>,
    /// Whether the configuration file was written (false: it already said so).
    pub written: bool,
    /// Codex: the `notify` value `--force` replaced (Codex runs one notify program).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
}

/// The configuration file the hooks go in.
pub fn config_path(places: &Places, harness: Harness, scope: Scope) -> Result<PathBuf> {
    match (harness, scope) {
        (Harness::ClaudeCode, Scope::User) => Ok(places.claude_dir.join("settings.json")),
        (Harness::ClaudeCode, Scope::Project) => Ok(places.project.join(".claude/settings.json")),
        (Harness::Codex, Scope::User) => Ok(places.codex_home.join("config.toml")),
        (Harness::Codex, Scope::Project) => Err(codex::project_scope_refused()),
    }
}

/// The file to change, refusing a project scope that is really the user's own settings
/// (at home, outside any git work tree, `.claude/settings.json` is the user scope's file).
fn project_path(places: &Places, harness: Harness, scope: Scope) -> Result<PathBuf> {
    let path = config_path(places, harness, scope)?;
    if scope == Scope::Project && path == config_path(places, harness, Scope::User)? {
        return Err(Error::usage(format!(
            "there is no project here: {} is outside any git work tree, and its {} is the \
             user settings",
            places.project.display(),
            path.display()
        ))
        .with_hint("run it inside the project's git work tree, or use --scope user"));
    }
    Ok(path)
}

/// The scopes `harness` can be hooked in from here: Codex has only the user's; Claude
/// Code's project scope is left out where it would be the user's own settings file.
pub fn scopes(places: &Places, harness: Harness) -> Vec<Scope> {
    Scope::ALL
        .into_iter()
        .filter(|s| project_path(places, harness, *s).is_ok())
        .collect()
}

pub fn install(
    places: &Places,
    harness: Harness,
    scope: Scope,
    options: &Options,
    force: bool,
) -> Result<Report> {
    check_options(harness, options)?;
    let path = project_path(places, harness, scope)?;
    match harness {
        Harness::ClaudeCode => claude::install(&path, harness, scope, options, force),
        Harness::Codex => codex::install(&path, scope, options, force),
    }
}

pub fn remove(places: &Places, harness: Harness, scope: Scope, force: bool) -> Result<Report> {
    let path = project_path(places, harness, scope)?;
    match harness {
        Harness::ClaudeCode => claude::remove(&path, harness, scope, force),
        Harness::Codex => codex::remove(&path, scope, force),
    }
}

pub fn status(places: &Places, harness: Harness, scope: Scope) -> Result<Status> {
    let path = project_path(places, harness, scope)?;
    Ok(match harness {
        Harness::ClaudeCode => claude::status(&path, harness, scope),
        Harness::Codex => codex::status(&path, scope),
    })
}

fn check_options(harness: Harness, options: &Options) -> Result<()> {
    if harness == Harness::Codex && (options.on_stop || options.resume) {
        let (flag, why) = if options.on_stop {
            ("--on-stop", "Codex's notify already runs after every turn")
        } else {
            (
                "--resume",
                "Codex has no hook that feeds a new session its context",
            )
        };
        return Err(Error::usage(format!("{flag} is for Claude Code: {why}"))
            .with_hint(format!("drop {flag}, or use --harness claude-code")));
    }
    if let Some(push) = &options.push
        && (push.is_empty() || push.chars().any(char::is_control))
    {
        return Err(
            Error::usage("the --push target name is empty or has control characters")
                .with_hint("name a target as 'baton target list' shows it"),
        );
    }
    if let Some(store) = &options.store {
        if store
            .to_str()
            .is_none_or(|s| s.chars().any(char::is_control))
        {
            return Err(Error::usage(format!(
                "the store path {} is not UTF-8 text without control characters, so no hook \
                 line can carry it",
                store.display()
            ))
            .with_hint("move the store to a plainer path, or leave --store out"));
        }
        if !store.is_absolute() {
            return Err(Error::internal("the hook's --store path is not absolute"));
        }
    }
    Ok(())
}

/// The program and arguments a hook runs (Codex appends the event's JSON to them).
pub fn hook_argv(harness: Harness, options: &Options) -> Vec<String> {
    let mut argv: Vec<String> = ["baton", "checkpoint", "--hook", harness.name()]
        .map(String::from)
        .to_vec();
    if let Some(push) = &options.push {
        argv.extend(["--push".to_string(), push.clone()]);
    }
    if let Some(store) = &options.store {
        argv.extend(["--store".to_string(), store.to_string_lossy().into_owned()]);
    }
    argv
}

/// `argv` as one POSIX shell line (Claude Code runs a hook's `command` through a shell).
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// What baton wrote into one configuration file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    format: u32,
    baton_version: String,
    harness: String,
    file: PathBuf,
    command: String,
    /// Whether baton created the file (remove deletes it again when nothing else is left).
    #[serde(default)]
    created_file: bool,
    entries: Vec<RecordedEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RecordedEntry {
    event: String,
    /// BLAKE3 of the entry's canonical form (sorted keys, compact).
    hash: String,
}

impl Record {
    fn hash_of(&self, event: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.event == event)
            .map(|e| e.hash.as_str())
    }
}

fn record_path(config: &Path) -> PathBuf {
    config.parent().unwrap_or(Path::new(".")).join(RECORD_FILE)
}

/// The record of `harness`'s hooks beside `config`, if there is a readable one. A damaged
/// record only makes baton's entries count as edited, which is the safe side. Its `file`
/// is information only: a project's record committed beside its settings holds the path
/// of the checkout that wrote it, and still tells baton's entries apart in every other.
fn read_record(config: &Path, harness: Harness) -> Option<Record> {
    let bytes = fs::read(record_path(config)).ok()?;
    let record: Record = serde_json::from_slice(&bytes).ok()?;
    (record.format == RECORD_FORMAT && record.harness == harness.name()).then_some(record)
}

fn write_record(config: &Path, record: &Record) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(record)
        .map_err(|e| Error::internal(format!("cannot encode the hooks install record: {e}")))?;
    bytes.push(b'\n');
    let path = record_path(config);
    if fs::read(&path).ok().as_deref() == Some(bytes.as_slice()) {
        return Ok(());
    }
    fsutil::write_atomic(&path, &bytes)
}

fn remove_record(config: &Path) -> Result<()> {
    let path = record_path(config);
    match fs::remove_file(&path) {
        Err(e) if e.kind() == IoKind::NotFound => Ok(()),
        other => other.ctx("cannot remove", &path),
    }
}

fn new_record(harness: Harness, config: &Path, command: String, created_file: bool) -> Record {
    Record {
        format: RECORD_FORMAT,
        baton_version: env!("CARGO_PKG_VERSION").to_string(),
        harness: harness.name().to_string(),
        file: config.to_path_buf(),
        command,
        created_file,
        entries: Vec::new(),
    }
}

/// A configuration file as read: where its bytes really are (a symlink is followed, so a
/// dotfiles link stays a link), the bytes, and the mode to keep.
struct Loaded {
    real: PathBuf,
    bytes: Option<Vec<u8>>,
    mode: Option<u32>,
}

fn load(path: &Path) -> Result<Loaded> {
    let meta = match fs::symlink_metadata(path) {
        Err(e) if e.kind() == IoKind::NotFound => {
            return Ok(Loaded {
                real: path.to_path_buf(),
                bytes: None,
                mode: None,
            });
        }
        Err(e) => return Err(Error::io("cannot read", path, e)),
        Ok(meta) => meta,
    };
    let real = if meta.file_type().is_symlink() {
        fs::canonicalize(path).ctx("cannot follow the symlink", path)?
    } else {
        path.to_path_buf()
    };
    let meta = fs::metadata(&real).ctx("cannot read", &real)?;
    if !meta.is_file() {
        return Err(Error::usage(format!(
            "{} is not a regular file, so baton leaves it alone",
            path.display()
        ))
        .with_hint("move it away and run the command again"));
    }
    let bytes = fsutil::read_limited(&real, MAX_FILE)?;
    Ok(Loaded {
        real,
        bytes: Some(bytes),
        mode: Some(meta.permissions().mode() & 0o7777),
    })
}

/// Atomically replace the file `loaded` was read from with `bytes` (temp file, fsync,
/// rename), keeping its mode (a new file is 0600, its new directories 0700). Refused
/// when the file changed since it was read, so an edit made meanwhile is never lost.
fn store_file(path: &Path, loaded: &Loaded, bytes: &[u8]) -> Result<()> {
    let dir = loaded.real.parent().unwrap_or(Path::new("."));
    fs::DirBuilder::new()
        .recursive(true)
        .mode(fsutil::DIR_MODE)
        .create(dir)
        .ctx("cannot create directory", dir)?;
    let mut temp = fsutil::temp_file_in(dir)?;
    temp.write_all(bytes).ctx("cannot write", temp.path())?;
    let mode = loaded.mode.unwrap_or(fsutil::FILE_MODE);
    temp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))
        .ctx("cannot set permissions of", temp.path())?;
    let now = match fs::read(&loaded.real) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == IoKind::NotFound => None,
        Err(e) => return Err(Error::io("cannot read", &loaded.real, e)),
    };
    if now != loaded.bytes {
        return Err(Error::conflict(format!(
            "{} changed while baton was editing it, so baton did not write it",
            path.display()
        ))
        .with_hint("run the command again"));
    }
    fsutil::publish(temp, &loaded.real, true)
}

fn delete_file(loaded: &Loaded) -> Result<()> {
    match fs::remove_file(&loaded.real) {
        Err(e) if e.kind() == IoKind::NotFound => Ok(()),
        other => other.ctx("cannot remove", &loaded.real),
    }
}

fn refuse_edited(path: &Path, what: &str, removing: bool) -> Error {
    let (doing, force) = if removing {
        ("remove", "remove it anyway")
    } else {
        ("replace", "replace it")
    };
    Error::conflict(format!(
        "{}: {what} was changed since baton installed it, so baton will not {doing} it",
        path.display()
    ))
    .with_hint(format!(
        "keep your edit, or run the command again with --force to {force}"
    ))
}

fn refuse_unparsable(path: &Path, what: &str, detail: &str) -> Error {
    Error::usage(format!(
        "{} is not valid {what} ({detail}), so baton leaves it as it is",
        path.display()
    ))
    .with_hint("fix the file (or move it away), then run the command again")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_lines_quote_what_the_shell_would_split() {
        let options = Options {
            push: Some("my box".into()),
            store: Some("/home/me/it's/.baton".into()),
            ..Options::default()
        };
        let argv = hook_argv(Harness::ClaudeCode, &options);
        assert_eq!(
            shell_line(&argv),
            r"baton checkpoint --hook claude-code --push 'my box' --store '/home/me/it'\''s/.baton'"
        );
        assert!(shell_line(&argv).starts_with(HOOK_PREFIX));
        assert_eq!(
            hook_argv(Harness::Codex, &Options::default()),
            ["baton", "checkpoint", "--hook", "codex"]
        );
    }
}
