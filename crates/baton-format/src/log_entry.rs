//! Lines of the append-only audit log: one JSON object per ref move.

use serde::{Deserialize, Serialize};

use super::{ObjectId, from_canonical_json, to_canonical_json};
use baton_error::{ErrorKind, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogEntry {
    /// RFC 3339 UTC, whole seconds.
    pub time: String,
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// The value the ref held before the move (`null` when it did not exist).
    pub old: Option<ObjectId>,
    /// The value after the move (`null` when the ref was deleted).
    pub new: Option<ObjectId>,
    /// What moved it: `save`, `push`, `pull`, `clone`, `import`, ...
    pub action: String,
    pub from: String,
    pub to: String,
    pub host: String,
    pub user: String,
}

impl LogEntry {
    /// One line, newline included.
    pub fn encode_line(&self) -> Vec<u8> {
        let mut line = to_canonical_json(self);
        line.push(b'\n');
        line
    }

    /// Decode one line (without its newline). `line_no` is 1-based, for the message.
    pub fn decode_line(bytes: &[u8], line_no: usize) -> Result<Self> {
        let entry: LogEntry = from_canonical_json("log line", bytes).map_err(|e| {
            e.recast(
                ErrorKind::Integrity,
                format!("log line {line_no} is damaged"),
            )
        })?;
        super::bundle::parse_time(&entry.time)
            .map_err(|e| e.recast(ErrorKind::Integrity, format!("log line {line_no}")))?;
        super::names::RefName::parse(&entry.ref_name)
            .map_err(|e| e.recast(ErrorKind::Integrity, format!("log line {line_no}")))?;
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_round_trip() {
        let entry = LogEntry {
            time: "2026-11-29T21:26:12Z".into(),
            ref_name: "current".into(),
            old: None,
            new: Some(ObjectId::of(b"b")),
            action: "save".into(),
            from: "a".into(),
            to: "b".into(),
            host: "h".into(),
            user: "u".into(),
        };
        let line = entry.encode_line();
        assert_eq!(*line.last().unwrap(), b'\n');
        assert_eq!(
            LogEntry::decode_line(&line[..line.len() - 1], 1).unwrap(),
            entry
        );
        let err = LogEntry::decode_line(b"{\"time\":", 7).unwrap_err();
        assert!(err.message.contains("line 7"), "{}", err.message);
    }
}
