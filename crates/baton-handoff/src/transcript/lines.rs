//! The lines of a transcript: each checked against the line limits (`sessions::json`),
//! whether given as input (usage errors) or read back from the store line by line as it
//! is decompressed (integrity errors), never held whole.

use std::cell::RefCell;

use crate::sessions::MAX_TRANSCRIPT_BYTES;
use crate::sessions::json::{self, Budget, LineError};
use baton_error::{Error, ErrorKind, Result};
use baton_format::TreeEntry;
use baton_store::Store;

/// Check that every non-empty line is a JSON object within the line limits; return how
/// many there are. For input given to this baton: a refusal is a usage error.
pub fn validate(jsonl: &[u8]) -> Result<usize> {
    let mut count = 0;
    for (i, raw) in jsonl.split(|&b| b == b'\n').enumerate() {
        match check_line(raw, None) {
            Ok(false) => {}
            Ok(true) => count += 1,
            Err(e) => return Err(line_error(i + 1, &e, ErrorKind::Usage)),
        }
    }
    Ok(count)
}

/// Whether `raw` is a line (not blank), after checking that it is a JSON object within
/// the line limits, walked without being built; `strings` collects its string values.
pub(super) fn check_line(
    raw: &[u8],
    strings: Option<&RefCell<String>>,
) -> std::result::Result<bool, LineError> {
    let line = json::checked_line(raw)?;
    if line.is_empty() {
        return Ok(false);
    }
    if line.first() != Some(&b'{') {
        return Err(
            match serde_json::from_slice::<serde::de::IgnoredAny>(line) {
                Ok(_) => LineError::NotObject,
                Err(e) => LineError::Json(e),
            },
        );
    }
    json::walk(line, &Budget::default(), strings)?;
    Ok(true)
}

/// The refusal of line `line` of a transcript: `kind` usage for input, integrity for a
/// stored one.
pub(super) fn line_error(line: usize, e: &LineError, kind: ErrorKind) -> Error {
    let message = match e {
        LineError::NotObject => format!("transcript.jsonl line {line}: not a JSON object"),
        LineError::Json(err) if !e.is_limit() => {
            format!("transcript.jsonl line {line}: not valid JSON: {err}")
        }
        other => format!("transcript.jsonl line {line}: {}", other.describe()),
    };
    let error = Error::new(kind, message);
    match (kind, e.is_limit()) {
        (ErrorKind::Usage, true) => error.with_hint(
            "baton keeps transcript lines within these limits; split the line or pass the file as --attach",
        ),
        (_, true) => error.with_hint(
            "this baton reads stored transcripts within these limits only (docs/reliability.md, Transcript limits): the bundle was not made by it, or was crafted",
        ),
        _ => error,
    }
}

/// Hand every line of the stored `transcript.jsonl` `entry` (1-based, without its
/// newline) to `each` as it is decompressed, holding one line at a time: the whole is
/// never in memory. Refused (integrity) when its declared size is over
/// [`MAX_TRANSCRIPT_BYTES`] (before anything is read) or a line is over
/// [`json::MAX_LINE_BYTES`]. The object's hash is checked at its end: a caller shows
/// nothing of what it saw before this returns `Ok`.
pub fn read_stored(
    store: &Store,
    entry: &TreeEntry,
    each: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    if entry.size > MAX_TRANSCRIPT_BYTES {
        return Err(Error::integrity(format!(
            "transcript.jsonl is {} MiB, over the limit of {} MiB for a transcript",
            entry.size.div_ceil(1 << 20),
            MAX_TRANSCRIPT_BYTES >> 20
        ))
        .with_hint("this baton reads stored transcripts within these limits only (docs/reliability.md, Transcript limits): the bundle was not made by it, or was crafted"));
    }
    let mut sink = LineSink {
        line: Vec::new(),
        number: 0,
        each,
        failed: None,
    };
    let copied = store
        .objects
        .copy_to(&entry.id, Some(entry.size), &mut sink);
    if let Some(e) = sink.failed.take() {
        return Err(e);
    }
    copied?;
    if !sink.line.is_empty() {
        sink.number += 1;
        (sink.each)(sink.number, &sink.line)?;
    }
    Ok(())
}

/// Splits what is written to it into lines for [`read_stored`].
struct LineSink<'f> {
    line: Vec<u8>,
    number: usize,
    each: &'f mut dyn FnMut(usize, &[u8]) -> Result<()>,
    /// Why it stopped taking bytes: reported instead of the write error it caused.
    failed: Option<Error>,
}

impl std::io::Write for LineSink<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let stop = |sink: &mut Self, e: Error| {
            sink.failed = Some(e);
            Err(std::io::Error::other("transcript line refused"))
        };
        let mut rest = bytes;
        while !rest.is_empty() {
            let end = memchr::memchr(b'\n', rest);
            let body = &rest[..end.unwrap_or(rest.len())];
            if self.line.len() + body.len() > json::MAX_LINE_BYTES {
                let e = LineError::TooLong(self.line.len() + body.len());
                return stop(self, line_error(self.number + 1, &e, ErrorKind::Integrity));
            }
            let Some(end) = end else {
                self.line.extend_from_slice(body);
                break;
            };
            self.number += 1;
            // A line wholly inside this write is handed on where it is, not copied.
            let done = if self.line.is_empty() {
                (self.each)(self.number, body)
            } else {
                self.line.extend_from_slice(body);
                let done = (self.each)(self.number, &self.line);
                self.line.clear();
                done
            };
            if let Err(e) = done {
                return stop(self, e);
            }
            rest = &rest[end + 1..];
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
