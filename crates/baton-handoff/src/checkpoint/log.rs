//! `checkpoint.log`: one JSON line per hook call (time, harness, event, session,
//! outcome, bundle or error), appended durably under an exclusive `flock` of the file and
//! bounded: past [`ROTATE_AT`] bytes it is rewritten (atomically) to its last
//! [`KEEP_LINES`] lines, at most [`KEEP_BYTES`] of them. Local to one store (SPEC 5.3); with no store, a fallback file
//! under `$XDG_STATE_HOME/baton/` (else `~/.local/state/baton/`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use baton_error::{Error, IoContext, Result};
use baton_store::fsutil;

/// The log is rewritten to its last [`KEEP_LINES`] lines once it is larger than this.
pub const ROTATE_AT: u64 = 1 << 20;
/// Lines kept by a rotation.
pub const KEEP_LINES: usize = 1000;
/// Bytes kept by a rotation at most (half of [`ROTATE_AT`], so that rotations are rare).
pub const KEEP_BYTES: usize = 512 << 10;
/// The longest error or note text kept in a line (characters).
const MAX_TEXT: usize = 600;

/// One line of the log.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LogLine {
    /// RFC 3339, seconds.
    pub time: String,
    pub harness: String,
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// `saved`, `unchanged`, `context`, `no-context`, `failed`, `gave-up`, `queued`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// How the session was taken (`cached`, `appended`, `whole`): a checkpoint of a long
    /// session is cheap only when it is not `whole`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
}

impl LogLine {
    /// A line for `outcome` now.
    pub fn now(harness: &str, event: &str, outcome: &str) -> LogLine {
        LogLine {
            time: baton_format::bundle::format_time(std::time::SystemTime::now()),
            harness: harness.to_string(),
            event: event.to_string(),
            outcome: outcome.to_string(),
            ..LogLine::default()
        }
    }
}

/// The log of the store at `store_root`.
pub fn path_in(store_root: &Path) -> PathBuf {
    store_root.join(baton_format::layout::CHECKPOINT_LOG)
}

/// The log used when there is no store: `$XDG_STATE_HOME/baton/checkpoint.log`, else
/// `$HOME/.local/state/baton/checkpoint.log`; `None` without either.
pub fn fallback_path() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|home| home.join(".local/state"))
        })?;
    Some(
        state
            .join("baton")
            .join(baton_format::layout::CHECKPOINT_LOG),
    )
}

fn clip(text: Option<String>) -> Option<String> {
    text.map(|t| {
        let one_line = t.replace(['\n', '\r'], " ");
        if one_line.chars().count() > MAX_TEXT {
            let mut cut: String = one_line.chars().take(MAX_TEXT).collect();
            cut.push('…');
            cut
        } else {
            one_line
        }
    })
}

/// Append `line` to the log at `path` (created 0600, its directory 0700 when it is the
/// fallback's), durably; rotate it when it has grown past [`ROTATE_AT`].
pub fn append(path: &Path, mut line: LogLine) -> Result<()> {
    line.error = clip(line.error);
    line.note = clip(line.note);
    let mut text = serde_json::to_string(&line)
        .map_err(|e| Error::internal(format!("cannot encode a checkpoint log line: {e}")))?;
    text.push('\n');
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.exists() {
        fsutil::create_dir_all_private(dir)?;
    }
    let file = open_locked(path)?;
    (&file)
        .write_all(text.as_bytes())
        .ctx("cannot append to", path)?;
    file.sync_data().ctx("cannot fsync", path)?;
    let len = file.metadata().ctx("cannot stat", path)?.len();
    if len > ROTATE_AT {
        rotate(path)?;
    }
    // The lock goes with the file.
    Ok(())
}

/// The log opened for appending and locked, the file at `path` now (a rotation by
/// another process between the open and the lock replaces it: opened again then).
fn open_locked(path: &Path) -> Result<File> {
    for _ in 0..8 {
        let created = !path.exists();
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .ctx("cannot open", path)?;
        if created && let Some(dir) = path.parent() {
            fsutil::fsync_dir(dir)?;
        }
        file.lock().ctx("cannot lock", path)?;
        let ours = file.metadata().ctx("cannot stat", path)?;
        match std::fs::metadata(path) {
            Ok(now) if now.ino() == ours.ino() && now.dev() == ours.dev() => return Ok(file),
            _ => continue,
        }
    }
    Err(Error::other(format!(
        "cannot lock {}: it was replaced again and again",
        path.display()
    ))
    .with_hint("another process keeps rewriting the checkpoint log; try again"))
}

/// Rewrite the log (under its lock) to its last [`KEEP_LINES`] lines, within
/// [`KEEP_BYTES`].
fn rotate(path: &Path) -> Result<()> {
    let bytes = std::fs::read(path).ctx("cannot read", path)?;
    let mut keep: Vec<&[u8]> = Vec::new();
    let mut size = 0;
    for line in bytes.rsplit(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if keep.len() == KEEP_LINES || size + line.len() + 1 > KEEP_BYTES {
            break;
        }
        size += line.len() + 1;
        keep.push(line);
    }
    let mut out = Vec::with_capacity(size);
    for line in keep.iter().rev() {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    fsutil::write_atomic(path, &out)
}

/// The log's lines, oldest first (a line that does not parse is skipped); none when
/// the file is absent.
pub fn read(path: &Path) -> Result<Vec<LogLine>> {
    let bytes = match fsutil::read_limited(path, 4 * ROTATE_AT) {
        Ok(bytes) => bytes,
        Err(e) if e.kind == baton_error::ErrorKind::NotFound || !path.exists() => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    Ok(bytes
        .split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn appends_private_lines_and_reads_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/checkpoint.log");
        let mut line = LogLine::now("codex", "agent-turn-complete", "failed");
        line.error = Some("first\nsecond".into());
        append(&path, line).unwrap();
        append(&path, LogLine::now("claude-code", "Stop", "unchanged")).unwrap();
        let lines = read(&path).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].error.as_deref(), Some("first second"));
        assert_eq!(lines[1].outcome, "unchanged");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(read(&dir.path().join("absent")).unwrap().is_empty());
    }

    #[test]
    fn rotation_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint.log");
        let mut line = LogLine::now("codex", "agent-turn-complete", "failed");
        line.error = Some("x".repeat(500));
        let n = (ROTATE_AT / 500) as usize + 10;
        for i in 0..n {
            let mut one = line.clone();
            one.session = Some(format!("s{i}"));
            append(&path, one).unwrap();
        }
        let lines = read(&path).unwrap();
        assert!(lines.len() <= 2 * KEEP_LINES, "{}", lines.len());
        assert!(std::fs::metadata(&path).unwrap().len() <= ROTATE_AT);
        // A rotation happened, and kept whole lines only.
        assert!(lines.len() < n, "{} of {n}", lines.len());
        assert_eq!(lines[0].error.as_deref().map(str::len), Some(500));
        let last = format!("s{}", n - 1);
        assert_eq!(
            lines.last().unwrap().session.as_deref(),
            Some(last.as_str())
        );
    }
}
