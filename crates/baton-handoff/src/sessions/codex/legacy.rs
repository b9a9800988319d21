//! Legacy Codex rollouts, written before the `session_meta` line (Codex CLI up to about
//! 0.3x, mid 2025): a header line `{"id", "timestamp", "instructions", "git"}` (the
//! recorder's `SessionMeta`, flattened with its git info), then each response item as a
//! bare line (`{"type":"message",...}`) and `{"record_type":"state"}` snapshots. Read
//! into the same drafts as a current rollout (never `encrypted_content`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::super::json::{Field, LineError, Raw, parse_object, text_of};
use super::super::{json_lines, line_error};
use super::items::{self, Item, read_item};
use super::{Meta, Rollout};
use crate::events::{self, Draft};
use baton_error::Result;

/// Lines of a legacy rollout looked through for the working directory its first
/// `<environment_context>` names (the header has none).
const CWD_LINES: usize = 50;

/// The header line's fields baton reads.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Header<'a> {
    #[serde(rename = "type", borrow)]
    kind: Raw<'a>,
    #[serde(borrow)]
    payload: Raw<'a>,
    #[serde(borrow)]
    id: Field<'a>,
    #[serde(borrow)]
    timestamp: Field<'a>,
    /// Always written (`null` when none): what tells the header from any other line.
    #[serde(borrow)]
    instructions: Raw<'a>,
    #[serde(borrow)]
    cwd: Field<'a>,
}

impl Header<'_> {
    fn is_header(&self) -> bool {
        self.kind.0.is_none()
            && self.payload.0.is_none()
            && self.instructions.0.is_some()
            && self.timestamp.as_str().is_some()
    }
}

fn header(line: &[u8]) -> Option<Header<'_>> {
    parse_object::<Header>(line).ok().filter(Header::is_header)
}

/// Whether `bytes` start as a legacy rollout does.
pub fn is_legacy(bytes: &[u8]) -> bool {
    bytes
        .split(|&b| b == b'\n')
        .map(<[u8]>::trim_ascii)
        .find(|l| !l.is_empty())
        .and_then(header)
        .is_some()
}

/// The session id of a legacy rollout: its header's, else the uuid its file name ends
/// with (`rollout-<time>-<uuid>.jsonl`).
fn id_of(path: &Path, header: &Header) -> Option<String> {
    if let Some(id) = header.id.as_str().filter(|id| !id.is_empty()) {
        return Some(id.to_string());
    }
    let stem = path.file_stem()?.to_str()?;
    let start = stem.len().checked_sub(36)?;
    let id = stem.get(start..)?;
    (id.bytes().filter(|&b| b == b'-').count() == 4).then(|| id.to_string())
}

/// [`super::meta`] of a legacy rollout whose first line is `first`.
pub(super) fn meta(path: &Path, first: &[u8], bytes: u64) -> Option<Meta> {
    let header = header(first)?;
    let id = id_of(path, &header)?;
    let cwd = match header.cwd.as_str() {
        Some(cwd) => Some(PathBuf::from(cwd)),
        None => environment_cwd(path),
    };
    Some(Meta {
        id,
        cwd,
        started: header.timestamp.or_empty().to_string(),
        bytes,
        parent: None,
    })
}

/// The `<cwd>` of the first `<environment_context>` user message in the rollout's first
/// lines.
fn environment_cwd(path: &Path) -> Option<PathBuf> {
    let (head, _) = super::super::read_head(path, CWD_LINES).ok()?;
    for line in head.split(|&b| b == b'\n').take(CWD_LINES) {
        let Ok(item) = parse_object::<Item>(line.trim_ascii()) else {
            continue;
        };
        if item.kind.as_str() != Some("message") {
            continue;
        }
        let text = item_text(line.trim_ascii())?;
        if let Some(rest) = text.trim_start().strip_prefix("<environment_context>")
            && let Some((_, after)) = rest.split_once("<cwd>")
            && let Some((cwd, _)) = after.split_once("</cwd>")
        {
            return Some(PathBuf::from(cwd.trim()));
        }
    }
    None
}

fn item_text(line: &[u8]) -> Option<String> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Message<'a> {
        #[serde(borrow)]
        content: Raw<'a>,
    }
    let message: Message = parse_object(line).ok()?;
    text_of(message.content.0, &Default::default()).ok()
}

/// Normalise a legacy rollout one line at a time (see [`super::read_each`]).
pub fn read_each(
    path: &Path,
    bytes: &[u8],
    each: &mut dyn FnMut(Draft) -> Result<()>,
) -> Result<Rollout> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Record<'a> {
        #[serde(borrow)]
        record_type: Raw<'a>,
        #[serde(borrow)]
        timestamp: Field<'a>,
    }
    let mut out = Rollout::default();
    let mut first = true;
    for item in json_lines(path, bytes) {
        let (line, raw) = item?;
        let fail = |e: LineError| line_error(path, line, &e);
        if std::mem::take(&mut first) {
            let header: Header = parse_object(raw).map_err(fail)?;
            out.session = id_of(path, &header);
            continue;
        }
        let record: Record = parse_object(raw).map_err(fail)?;
        if record.record_type.0.is_some() {
            // State snapshots: the recorder's own bookkeeping.
            continue;
        }
        let item: Item = parse_object(raw).map_err(fail)?;
        let time = record.timestamp.or_empty().to_string();
        let draft = match read_item(path, line, &item, time, &mut out.skipped)? {
            items::Read::Draft(d) | items::Read::User(d) => d,
            items::Read::None => continue,
        };
        if events::keeps(&draft) {
            each(draft)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Kind, Role};

    #[test]
    fn a_legacy_rollout_is_normalised_without_its_encrypted_reasoning() {
        let bytes = std::fs::read(
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join("fixtures/transcripts/codex/legacy-rollout-2025-08.jsonl"),
        )
        .unwrap();
        assert!(is_legacy(&bytes));
        let mut drafts = Vec::new();
        let rollout = read_each(Path::new("r.jsonl"), &bytes, &mut |d| {
            drafts.push(d);
            Ok(())
        })
        .unwrap();
        assert_eq!(
            rollout.session.as_deref(),
            Some("5973b6c0-94b8-487b-a530-2aeb6098ae0e")
        );
        assert!(rollout.skipped.is_empty());
        let shape: Vec<_> = drafts.iter().map(|d| (d.role, d.kind)).collect();
        assert_eq!(
            shape,
            vec![
                (Role::User, Kind::Message),
                (Role::Assistant, Kind::Reasoning),
                (Role::Assistant, Kind::ToolCall),
                (Role::Tool, Kind::ToolResult),
                (Role::Assistant, Kind::ToolCall),
                (Role::Tool, Kind::ToolResult),
                (Role::Assistant, Kind::Message),
            ]
        );
        assert!(drafts.iter().all(|d| !d.text.contains("gAAAA")));
    }

    #[test]
    fn a_header_without_an_id_takes_the_file_s_uuid() {
        let header: Header = parse_object(br#"{"timestamp":"t","instructions":null}"#).unwrap();
        let path =
            Path::new("/s/rollout-2025-08-20T10-15-02-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl");
        assert_eq!(
            id_of(path, &header).as_deref(),
            Some("5973b6c0-94b8-487b-a530-2aeb6098ae0e")
        );
        assert!(!is_legacy(br#"{"type":"session_meta","payload":{}}"#));
        assert!(
            !is_legacy(br#"{"id":"x","timestamp":"t"}"#),
            "no instructions key"
        );
    }
}
