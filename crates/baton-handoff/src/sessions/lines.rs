//! Reading a harness's session files: whole (cut at the last complete line, since the
//! harness may be appending), or only their first lines; their JSON lines, and the
//! fields and texts the harness readers take from them.

use std::fs;
use std::io::Read;
use std::path::Path;

use super::MAX_SESSION_BYTES;
use super::json::{self, LineError, MAX_LINE_BYTES};
use baton_error::{Error, ErrorKind, Result};

/// A session file opened for reading, and its size then: never through a symlink, never
/// waiting on a FIFO or a device (`O_NONBLOCK`), and only a regular file (checked on the
/// open descriptor, so nothing swapped in after a listing is read instead).
pub(crate) fn open_session(path: &Path) -> Result<(fs::File, u64)> {
    let file = baton_store::fsutil::open_regular(path).map_err(|e| {
        let symlink = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if symlink {
            Error::usage(format!(
                "transcript {} is a symbolic link; baton does not follow one",
                path.display()
            ))
            .with_hint("pass the path of the file it points to")
        } else if e.kind == ErrorKind::Usage {
            Error::usage(format!(
                "transcript {} is not a regular file (a FIFO, a device or a directory)",
                path.display()
            ))
            .with_hint(
                "pass a session file itself: baton reads only regular files, which cannot block it",
            )
        } else {
            e
        }
    })?;
    let size = file
        .metadata()
        .map_err(|e| Error::io("cannot read transcript", path, e))?
        .len();
    Ok((file, size))
}

/// A session file's bytes up to its last complete line: a harness may be appending to it
/// while we read. A final line without its newline is kept only if it parses whole. A
/// file over [`MAX_SESSION_BYTES`] is refused before anything is read.
pub fn read_complete(path: &Path) -> Result<Vec<u8>> {
    let (file, _) = open_session(path)?;
    read_complete_from(file, path)
}

/// [`read_complete`] of a file already open (`path` names it in messages), such as one
/// the MCP server opened beneath its workspace.
pub(super) fn read_complete_from(file: fs::File, path: &Path) -> Result<Vec<u8>> {
    let bytes = read_bounded_from(file, path)?;
    complete_lines(path, bytes)
}

/// A whole session file that is one JSON document (a Gemini CLI chat), not lines: never
/// cut, refused over [`MAX_SESSION_BYTES`] like any other.
pub(super) fn read_whole(path: &Path) -> Result<Vec<u8>> {
    let (file, _) = open_session(path)?;
    read_bounded_from(file, path)
}

/// Every byte of an open session file, refused over [`MAX_SESSION_BYTES`].
pub(super) fn read_bounded_from(file: fs::File, path: &Path) -> Result<Vec<u8>> {
    let size = file
        .metadata()
        .map_err(|e| Error::io("cannot read transcript", path, e))?
        .len();
    if size > MAX_SESSION_BYTES {
        return Err(too_large(path, size));
    }
    // Sized from the file, so a large session is read in a few calls, not in doubling
    // chunks each copied again (it may still grow while read: never past the limit).
    let mut bytes = Vec::with_capacity(size as usize + 1);
    file.take(MAX_SESSION_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("cannot read transcript", path, e))?;
    if bytes.len() as u64 > MAX_SESSION_BYTES {
        return Err(too_large(path, bytes.len() as u64));
    }
    Ok(bytes)
}

/// The start of a session file and the file's size: at least its first `lines` lines,
/// each complete (all of it, cut as [`read_complete`] cuts, when it has no more), so
/// that whatever is read from its first `lines` lines is what a whole read gives; but
/// never more than [`MAX_LINE_BYTES`], whatever the file's size (a line cut there is
/// left out).
pub(crate) fn read_head(path: &Path, lines: usize) -> Result<(Vec<u8>, u64)> {
    let err = |e| Error::io("cannot read transcript", path, e);
    let (mut file, size) = open_session(path)?;
    let mut bytes = Vec::new();
    let mut newlines = 0;
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => return Ok((complete_tail(bytes), size)),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err(e)),
        };
        newlines += chunk[..n].iter().filter(|&&b| b == b'\n').count();
        bytes.extend_from_slice(&chunk[..n]);
        if newlines > lines || bytes.len() > MAX_LINE_BYTES {
            let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            bytes.truncate(complete);
            return Ok((bytes, size));
        }
    }
}

/// The non-blank complete lines of a session file, counted as read in small pieces (a
/// final line without its newline counted only if it parses whole, as
/// [`read_complete`] keeps it), and the file's size. A file over [`MAX_SESSION_BYTES`] is
/// not read: its count is `None`.
pub(crate) fn count_complete_lines(path: &Path) -> Result<(Option<usize>, u64)> {
    let err = |e| Error::io("cannot read transcript", path, e);
    let (file, size) = open_session(path)?;
    if size > MAX_SESSION_BYTES {
        return Ok((None, size));
    }
    let mut file = file.take(MAX_SESSION_BYTES);
    let mut count = 0;
    // The current line's bytes, while they stay within a line's limit.
    let mut line: Vec<u8> = Vec::new();
    let mut blank = true;
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err(e)),
        };
        for piece in chunk[..n].split_inclusive(|&b| b == b'\n') {
            blank &= piece.trim_ascii().is_empty();
            if piece.ends_with(b"\n") {
                count += usize::from(!blank);
                blank = true;
                line.clear();
            } else if line.len() + piece.len() <= MAX_LINE_BYTES {
                line.extend_from_slice(piece);
            }
        }
    }
    if !blank && serde_json::from_slice::<serde::de::IgnoredAny>(line.trim_ascii()).is_ok() {
        count += 1;
    }
    Ok((Some(count), size))
}

pub(crate) fn too_large(path: &Path, size: u64) -> Error {
    Error::usage(format!(
        "transcript {} is {} MiB, over the limit of {} MiB for a session file",
        path.display(),
        size.div_ceil(1 << 20),
        MAX_SESSION_BYTES >> 20
    ))
    .with_hint("pass a shorter session (HARNESS:SESSION; 'baton transcript sources' lists them) or a trimmed copy as --transcript FILE")
}

/// `bytes` up to the last complete line; a final line without its newline is kept only
/// if it parses whole.
pub(super) fn complete_lines(path: &Path, bytes: Vec<u8>) -> Result<Vec<u8>> {
    if bytes.len() as u64 > MAX_SESSION_BYTES {
        return Err(too_large(path, bytes.len() as u64));
    }
    Ok(complete_tail(bytes))
}

fn complete_tail(mut bytes: Vec<u8>) -> Vec<u8> {
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let tail = bytes[complete..].trim_ascii();
    if !tail.is_empty() && serde_json::from_slice::<serde::de::IgnoredAny>(tail).is_err() {
        bytes.truncate(complete);
    }
    bytes
}

/// The complete lines of a session file, numbered from 1, trimmed, blank lines skipped;
/// a line over [`MAX_LINE_BYTES`] is refused with the file and line.
pub(crate) fn json_lines<'a>(
    path: &'a Path,
    bytes: &'a [u8],
) -> impl Iterator<Item = Result<(usize, &'a [u8])>> + 'a {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.trim_ascii().is_empty())
        .map(move |(i, line)| {
            json::checked_line(line)
                .map(|l| (i + 1, l))
                .map_err(|e| line_error(path, i + 1, &e))
        })
}

/// The refusal of a session line: a limit, or a line that is no JSON object.
pub(crate) fn line_error(path: &Path, line: usize, e: &LineError) -> Error {
    if e.is_limit() {
        return Error::usage(format!("{} line {line}: {}", path.display(), e.describe()))
            .with_hint("baton cannot read this session; pass the file as --attach instead, or a copy without that line as --transcript FILE");
    }
    match e {
        LineError::NotObject => unexpected(path, line, "a line that is not a JSON object"),
        LineError::Json(err) => unexpected(path, line, &format!("invalid JSON ({err})")),
        _ => unexpected(path, line, &e.describe()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_of_a_session_is_read_to_a_line_limit_at_most() {
        // A first line, then 100 MiB without a newline (sparse): the head stops at the
        // line limit and keeps only the complete line.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.jsonl");
        fs::write(&path, "{\"cwd\":\"/w\"}\n").unwrap();
        let file = fs::File::options().write(true).open(&path).unwrap();
        file.set_len(100 << 20).unwrap();
        let (head, size) = read_head(&path, 200).unwrap();
        assert_eq!(head, b"{\"cwd\":\"/w\"}\n");
        assert_eq!(size, 100 << 20);
        // Over the session limit: read_complete refuses from the size, counting skips it.
        file.set_len(MAX_SESSION_BYTES + 1).unwrap();
        let err = read_complete(&path).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Usage);
        assert!(
            err.message.contains("over the limit of 256 MiB"),
            "{}",
            err.message
        );
        assert_eq!(
            count_complete_lines(&path).unwrap(),
            (None, MAX_SESSION_BYTES + 1)
        );
    }

    #[test]
    fn lines_are_counted_as_a_whole_read_keeps_them() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.jsonl");
        for (text, lines) in [
            ("{}\n\n  \n{}\n", 2),
            ("{}\n{\"a\":1}", 2),
            ("{}\n{\"a\":", 1),
            ("", 0),
        ] {
            fs::write(&path, text).unwrap();
            assert_eq!(
                count_complete_lines(&path).unwrap().0,
                Some(lines),
                "{text:?}"
            );
            let whole = read_complete(&path).unwrap();
            let counted = whole
                .split(|&b| b == b'\n')
                .filter(|l| !l.trim_ascii().is_empty())
                .count();
            assert_eq!(counted, lines, "{text:?}");
        }
    }
}
