//! The store's log (SPEC 9): one line per ref move, appended (and fsynced) before the
//! move is published, read whole, as a stream, or from its end; a torn last line is an
//! append a crash interrupted, never committed.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::SystemTime;

use super::Store;
use super::refs::MoveReason;
use baton_error::{Error, IoContext, Result};
use baton_format::bundle::format_time;
use baton_format::names::RefName;
use baton_format::{LogEntry, ObjectId, layout};

impl Store {
    /// The log line recording a move of `name` from `old` to `new`, by this user on this
    /// host now; free text sealed in an encrypted store.
    pub fn log_entry(
        &self,
        name: &RefName,
        old: Option<ObjectId>,
        new: Option<ObjectId>,
        reason: &MoveReason,
    ) -> Result<LogEntry> {
        let seal = |t: String| self.objects.envelope().seal_text(&t);
        let host = hostname::get()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(LogEntry {
            time: format_time(SystemTime::now()),
            ref_name: name.as_string(),
            old,
            new,
            action: reason.action.clone(),
            from: seal(reason.from.clone())?,
            to: seal(reason.to.clone())?,
            host: seal(host)?,
            user: seal(current_user())?,
        })
    }

    /// Add every id the log names to `roots`; returns the number of lines.
    pub(crate) fn log_roots(
        &self,
        roots: &mut std::collections::BTreeSet<ObjectId>,
    ) -> Result<u64> {
        self.for_each_log_entry(|entry| {
            roots.extend(entry.old);
            roots.extend(entry.new);
            Ok(())
        })
    }

    fn log_path(&self) -> PathBuf {
        self.root.join(layout::LOG)
    }

    pub(crate) fn append_log(&self, entry: &LogEntry) -> Result<()> {
        let path = self.log_path();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .ctx("cannot open log", &path)?;
        // A last line without its newline is a write that a crash interrupted: it was
        // never committed (a line counts once its newline is durable), so it is cut off
        // before the next line goes in. Committed lines are never touched.
        let (committed, len) = committed_length(&mut file).ctx("cannot read", &path)?;
        if committed != len {
            file.set_len(committed)
                .ctx("cannot cut the torn tail of", &path)?;
            file.sync_data().ctx("cannot fsync", &path)?;
        }
        // One write call per line: with O_APPEND the kernel never interleaves lines.
        file.write_all(&entry.encode_line())
            .ctx("cannot append to", &path)?;
        file.sync_data().ctx("cannot fsync", &path)
    }

    /// The last `max` committed lines of the log, oldest first, read backwards from its
    /// end: `log --audit -n 20` costs the same in a log of ten lines or of a million.
    /// Only those lines are decoded (full `verify` checks every line); if one is damaged,
    /// the whole log is read so the error names its line number.
    pub fn read_log_tail(&self, max: usize) -> Result<Vec<LogEntry>> {
        let path = self.log_path();
        let mut file = fs::File::open(&path).ctx("cannot open log", &path)?;
        let (committed, _) = committed_length(&mut file).ctx("cannot read", &path)?;
        // Read chunks backwards until `max` newlines precede the committed end (or the
        // start of the file is reached).
        let mut start = committed;
        let mut tail: Vec<u8> = Vec::new();
        let chunk_len = 64u64 << 10;
        while start > 0 && tail.iter().filter(|&&b| b == b'\n').count() <= max {
            let from = start.saturating_sub(chunk_len);
            let mut chunk = vec![0u8; (start - from) as usize];
            file.seek(SeekFrom::Start(from)).ctx("cannot read", &path)?;
            file.read_exact(&mut chunk).ctx("cannot read", &path)?;
            chunk.extend_from_slice(&tail);
            tail = chunk;
            start = from;
        }
        let mut lines: Vec<&[u8]> = tail.split(|&b| b == b'\n').collect();
        lines.pop(); // after the last newline: nothing (the committed end)
        if start > 0 {
            lines.remove(0); // a partial line: the chunk began inside it
        }
        let skip = lines.len().saturating_sub(max);
        let mut out = Vec::with_capacity(lines.len() - skip);
        for line in &lines[skip..] {
            match LogEntry::decode_line(line, 0) {
                Ok(entry) => out.push(entry),
                Err(_) => {
                    // Read it all (as a stream) so the error names the line.
                    let mut last = std::collections::VecDeque::with_capacity(max.min(1 << 16));
                    self.for_each_log_entry(|entry| {
                        if max > 0 {
                            if last.len() == max {
                                last.pop_front();
                            }
                            last.push_back(entry);
                        }
                        Ok(())
                    })?;
                    return Ok(last.into_iter().collect());
                }
            }
        }
        Ok(out)
    }

    /// Whether the log ends in an interrupted (uncommitted) partial line.
    pub(crate) fn log_has_torn_tail(&self) -> Result<bool> {
        let path = self.log_path();
        let mut file = fs::File::open(&path).ctx("cannot open log", &path)?;
        let (committed, len) = committed_length(&mut file).ctx("cannot read", &path)?;
        Ok(committed != len)
    }

    /// The whole log, oldest first. A damaged line is an integrity error naming it; a
    /// torn last line (an interrupted append, never committed) is left out. Holds every
    /// line: only for callers that show them all (`log --audit`); others stream.
    pub fn read_log(&self) -> Result<Vec<LogEntry>> {
        let mut entries = Vec::new();
        self.for_each_log_entry(|entry| {
            entries.push(entry);
            Ok(())
        })?;
        Ok(entries)
    }

    /// Check every committed line of the log; returns their number.
    pub fn check_log(&self) -> Result<u64> {
        self.for_each_log_entry(|_| Ok(()))
    }

    /// Decode the committed lines of the log one at a time, oldest first, into `f`:
    /// memory stays at one line (at most `MAX_LOG_LINE`) whatever the log's size. A
    /// damaged line is an integrity error naming it; a torn last line is left out.
    /// Returns the number of lines.
    pub(crate) fn for_each_log_entry(
        &self,
        mut f: impl FnMut(LogEntry) -> Result<()>,
    ) -> Result<u64> {
        let path = self.log_path();
        let mut file = fs::File::open(&path).ctx("cannot read log", &path)?;
        let (committed, _) = committed_length(&mut file).ctx("cannot read log", &path)?;
        file.seek(SeekFrom::Start(0))
            .ctx("cannot read log", &path)?;
        let mut reader = std::io::BufReader::with_capacity(256 << 10, file.take(committed));
        let mut line = Vec::new();
        let mut line_no = 0u64;
        loop {
            line.clear();
            let n = (&mut reader)
                .take(MAX_LOG_LINE + 1)
                .read_until(b'\n', &mut line)
                .ctx("cannot read log", &path)?;
            if n == 0 {
                return Ok(line_no);
            }
            line_no += 1;
            let hint = "the log is never rewritten by baton; repair it by hand from a backup";
            let Some(text) = line.strip_suffix(b"\n") else {
                return Err(Error::integrity(format!(
                    "log line {line_no} is damaged: longer than {MAX_LOG_LINE} bytes"
                ))
                .with_hint(hint));
            };
            f(LogEntry::decode_line(text, line_no as usize).map_err(|e| e.with_hint(hint))?)?;
        }
    }
}

/// Longest log line read (a ref generation, which holds one line, is read up to 64 KiB).
pub(crate) const MAX_LOG_LINE: u64 = 1 << 20;

/// The length of the log up to and including its last newline, and its full length.
fn committed_length(file: &mut fs::File) -> std::io::Result<(u64, u64)> {
    let len = file.metadata()?.len();
    let mut end = len;
    let mut buf = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok((start + i as u64 + 1, len));
        }
        end = start;
    }
    Ok((0, len))
}

/// The login name for the audit log: `$USER`, else the password database, else the uid.
pub fn current_user() -> String {
    use super::login_name;
    login_name::from_env()
        .or_else(login_name::from_passwd)
        .unwrap_or_else(|| format!("uid{}", login_name::uid()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_tail_is_the_end_of_the_log() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::init(&tmp.path().join("s")).unwrap();
        assert!(store.read_log_tail(5).unwrap().is_empty());
        let mut text = Vec::new();
        for i in 0..1500u32 {
            let reason = MoveReason {
                action: format!("test-{i}"),
                ..MoveReason::default()
            };
            let id = baton_format::ObjectId::of(&i.to_be_bytes());
            let entry = store
                .log_entry(&RefName::Current, None, Some(id), &reason)
                .unwrap();
            text.extend(entry.encode_line());
        }
        // A torn last line is not part of the log.
        text.extend_from_slice(b"{\"time\":");
        fs::write(store.root().join("log"), &text).unwrap();
        let all = store.read_log().unwrap();
        assert_eq!(all.len(), 1500);
        for max in [0, 1, 2, 20, 199, 200, 201, 1499, 1500, 1501, 5000] {
            let tail = store.read_log_tail(max).unwrap();
            assert_eq!(tail, all[all.len().saturating_sub(max)..].to_vec(), "{max}");
        }
    }
}
