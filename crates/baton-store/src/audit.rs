//! The audit trail of a store: its own log merged with the ref generations other stores
//! published into it (each push writes one, SPEC 8.4), oldest first. A store that only
//! receives pushes has an empty log and a generation per push.

use std::collections::HashSet;

use super::{Store, fsutil};
use baton_error::{Error, Result};
use baton_format::LogEntry;
use baton_format::names::{RefName, generation_name};

impl Store {
    /// Every ref move this store knows of, oldest first: the log, plus each generation of
    /// every ref that the log does not hold (moves made by pushes into this store). With
    /// `max`, only the newest `max` (the log's tail and each ref's newest generations are
    /// read, nothing older).
    pub fn audit_trail(&self, max: Option<usize>) -> Result<Vec<LogEntry>> {
        let log = match max {
            Some(max) => self.read_log_tail(max)?,
            None => self.read_log()?,
        };
        let mut generations = Vec::new();
        for name in self.ref_names()? {
            generations.extend(self.ref_history_tail(&name, max)?);
        }
        Ok(newest(merge_audit(log, generations), max))
    }

    /// The newest `max` generations of `name` (all of them without `max`), oldest first.
    pub(crate) fn ref_history_tail(
        &self,
        name: &RefName,
        max: Option<usize>,
    ) -> Result<Vec<LogEntry>> {
        let Some(max) = max else {
            return self.ref_history(name);
        };
        let Some(newest) = self.ref_generation(name)? else {
            return Ok(vec![]);
        };
        let dir = self.ref_dir(name);
        let mut out = vec![newest.entry];
        let mut number = newest.number;
        while out.len() < max && number > 1 {
            number -= 1;
            let path = dir.join(generation_name(number));
            if !path.exists() {
                break; // pruned by hand: the older moves are gone
            }
            let bytes = fsutil::read_limited(&path, 64 << 10)?;
            out.push(decode_generation(
                name,
                &path.display().to_string(),
                &bytes,
            )?);
        }
        out.truncate(max);
        out.reverse();
        Ok(out)
    }
}

/// A ref generation file's one log line; damage names the ref and the file.
pub fn decode_generation(name: &RefName, path: &str, bytes: &[u8]) -> Result<LogEntry> {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    LogEntry::decode_line(line, 1).map_err(|e| {
        Error::integrity(format!(
            "ref '{}' is damaged ({path}): {}",
            name.as_string(),
            e.message
        ))
    })
}

/// The committed lines of a log file's bytes (a torn last line, never committed, is left
/// out); a damaged line is an integrity error naming it.
pub fn decode_log(bytes: &[u8]) -> Result<Vec<LogEntry>> {
    let committed = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if committed == 0 {
        return Ok(vec![]);
    }
    bytes[..committed - 1]
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| LogEntry::decode_line(line, i + 1))
        .collect()
}

/// The log and the ref generations as one trail, oldest first. A generation the log
/// also holds (a move made here writes the same line to both) appears once. The log
/// keeps its own order; each generation goes in before the first log line that is not
/// older than it. Generations are only ever published by a no-clobber rename, so a push
/// that lost a race left no generation: its move is never shown.
pub fn merge_audit(log: Vec<LogEntry>, generations: Vec<LogEntry>) -> Vec<LogEntry> {
    let logged: HashSet<Vec<u8>> = log.iter().map(LogEntry::encode_line).collect();
    let mut extra: Vec<LogEntry> = generations
        .into_iter()
        .filter(|g| !logged.contains(&g.encode_line()))
        .collect();
    // Times are RFC 3339 UTC in one fixed form: the strings sort as the instants do.
    extra.sort_by(|a, b| a.time.cmp(&b.time));
    let mut out = Vec::with_capacity(log.len() + extra.len());
    let mut extra = extra.into_iter().peekable();
    for entry in log {
        while let Some(g) = extra.next_if(|g| g.time <= entry.time) {
            out.push(g);
        }
        out.push(entry);
    }
    out.extend(extra);
    out
}

/// The last `max` entries (all without `max`).
pub fn newest(mut entries: Vec<LogEntry>, max: Option<usize>) -> Vec<LogEntry> {
    let skip = entries.len().saturating_sub(max.unwrap_or(usize::MAX));
    entries.drain(..skip);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time: &str, action: &str) -> LogEntry {
        LogEntry {
            time: format!("2026-12-01T00:00:{time}Z"),
            ref_name: "current".into(),
            old: None,
            new: None,
            action: action.into(),
            from: String::new(),
            to: String::new(),
            host: "h".into(),
            user: "u".into(),
        }
    }

    #[test]
    fn generations_merge_into_the_log_by_time_once() {
        let log = vec![entry("01", "save"), entry("05", "save")];
        let generations = vec![
            entry("05", "save"),
            entry("03", "push"),
            entry("09", "push"),
        ];
        let actions: Vec<String> = merge_audit(log, generations)
            .into_iter()
            .map(|e| format!("{}:{}", &e.time[17..19], e.action))
            .collect();
        assert_eq!(actions, ["01:save", "03:push", "05:save", "09:push"]);
    }

    #[test]
    fn a_log_file_decodes_without_its_torn_tail() {
        let mut bytes = entry("01", "save").encode_line();
        bytes.extend(entry("02", "push").encode_line());
        bytes.extend_from_slice(b"{\"time\":");
        let entries = decode_log(&bytes).unwrap();
        assert_eq!(entries.len(), 2);
        assert!(decode_log(b"").unwrap().is_empty());
        assert!(decode_log(b"garbage\n").is_err());
    }
}
