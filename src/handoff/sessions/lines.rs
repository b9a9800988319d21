//! Reading a harness's session files: whole (cut at the last complete line, since the
//! harness may be appending), or only their first lines; their JSON lines, and the
//! fields and texts the harness readers take from them.

use std::fs;
use std::io::Read;
use std::path::Path;

use super::MAX_SESSION_BYTES;
use crate::error::{Error, Result};

/// A session file's bytes up to its last complete line: a harness may be appending to it
/// while we read. A final line without its newline is kept only if it parses whole.
pub fn read_complete(path: &Path) -> Result<Vec<u8>> {
    let file = fs::File::open(path).map_err(|e| Error::io("cannot read transcript", path, e))?;
    // Sized from the file, so a large session is read in a few calls, not in doubling
    // chunks each copied again (it may still grow while read).
    let size = file
        .metadata()
        .map_or(0, |m| m.len())
        .min(MAX_SESSION_BYTES);
    let mut bytes = Vec::with_capacity(size as usize + 1);
    file.take(MAX_SESSION_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("cannot read transcript", path, e))?;
    complete_lines(path, bytes)
}

/// The start of a session file: at least its first `lines` lines, each complete (all of
/// it, cut as [`read_complete`] cuts, when it has no more), so that whatever is read
/// from its first `lines` lines is what a whole read gives.
pub(crate) fn read_head(path: &Path, lines: usize) -> Result<Vec<u8>> {
    let err = |e| Error::io("cannot read transcript", path, e);
    let mut file = fs::File::open(path).map_err(err)?;
    if file.metadata().map_err(err)?.len() > MAX_SESSION_BYTES {
        return Err(too_large(path));
    }
    let mut bytes = Vec::new();
    let mut newlines = 0;
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => return complete_lines(path, bytes),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err(e)),
        };
        newlines += chunk[..n].iter().filter(|&&b| b == b'\n').count();
        bytes.extend_from_slice(&chunk[..n]);
        if bytes.len() as u64 > MAX_SESSION_BYTES {
            return Err(too_large(path));
        }
        if newlines > lines {
            let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            bytes.truncate(complete);
            return Ok(bytes);
        }
    }
}

fn too_large(path: &Path) -> Error {
    Error::usage(format!(
        "transcript {} is larger than {} MiB",
        path.display(),
        MAX_SESSION_BYTES >> 20
    ))
    .with_hint("attach it with --attach instead")
}

/// `bytes` up to the last complete line; a final line without its newline is kept only
/// if it parses whole.
fn complete_lines(path: &Path, mut bytes: Vec<u8>) -> Result<Vec<u8>> {
    if bytes.len() as u64 > MAX_SESSION_BYTES {
        return Err(too_large(path));
    }
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let tail = bytes[complete..].trim_ascii();
    if !tail.is_empty() && serde_json::from_slice::<serde_json::Value>(tail).is_err() {
        bytes.truncate(complete);
    }
    Ok(bytes)
}

/// The complete JSON lines of a session file, numbered from 1, blank lines skipped; a
/// line that is not a JSON object is refused with the file and line.
pub(crate) fn json_lines<'a>(
    path: &'a Path,
    bytes: &'a [u8],
) -> impl Iterator<Item = Result<(usize, serde_json::Value)>> + 'a {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.trim_ascii().is_empty())
        .map(
            move |(i, line)| match serde_json::from_slice(line.trim_ascii()) {
                Ok(v @ serde_json::Value::Object(_)) => Ok((i + 1, v)),
                Ok(_) => Err(unexpected(path, i + 1, "a line that is not a JSON object")),
                Err(e) => Err(unexpected(path, i + 1, &format!("invalid JSON ({e})"))),
            },
        )
}

/// The refusal of a schema baton does not know: never guessed at.
pub(crate) fn unexpected(path: &Path, line: usize, what: &str) -> Error {
    Error::usage(format!(
        "{} line {line}: unexpected {what}",
        path.display()
    ))
    .with_hint("this session format is not one baton knows; pass the file as --attach instead, or report the line")
}

/// Seconds since the epoch of a file's last change, 0 when unknown.
pub(super) fn modified(path: &Path) -> u64 {
    seconds(fs::metadata(path).and_then(|m| m.modified()).ok())
}

/// Seconds since the epoch of `time` (0 when unknown).
pub(super) fn seconds(time: Option<std::time::SystemTime>) -> u64 {
    time.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

/// Count of complete lines, for listings.
pub(super) fn count_lines(bytes: &[u8]) -> usize {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .count()
}

/// The text of a string, or of an array of `{type, text}` blocks joined by blank lines.
pub(crate) fn text_of(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => {
            let parts: Vec<&str> = items
                .iter()
                .filter_map(|i| i.get("text").and_then(|t| t.as_str()).or(i.as_str()))
                .collect();
            // Blocks apart, but joined as written where a secret runs across them, so
            // that the scan sees it whole.
            let across = crate::handoff::secrets::secret_across(&parts);
            let mut text = String::new();
            for (i, part) in parts.iter().enumerate() {
                if i > 0 && !across[i - 1] {
                    text.push_str("\n\n");
                }
                text.push_str(part);
            }
            text
        }
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

pub(crate) fn str_field<'a>(value: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(|v| v.as_str())
}
