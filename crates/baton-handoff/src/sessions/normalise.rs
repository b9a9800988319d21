//! A harness's session normalised into `transcript.jsonl` (two passes over its lines, no
//! line's drafts kept past it), and which harness wrote a FILE.

use std::collections::HashMap;
use std::path::Path;

use super::skipped::Skipped;
use super::{Harness, Loaded, MAX_TRANSCRIPT_BYTES, claude_code, codex, gemini, json};
use crate::events::{self, Draft, Kind};
use baton_error::{Error, Result};

/// Normalise a session in two passes over its lines, so that no line's drafts are kept
/// past it: the first finds the session id and every call's tool (a result can come
/// before its call), the second writes each event to `transcript.jsonl` as it is made.
/// A Claude Code session's sub-agent logs are read with it (their events among its own).
pub(super) fn normalise(
    harness: Harness,
    path: &Path,
    bytes: Vec<u8>,
    session: Option<String>,
    subagents: claude_code::subagents::Found,
    threads: &[(std::path::PathBuf, Vec<u8>)],
) -> Result<Loaded> {
    // Each reader gives the session id it found and the entries it skipped.
    let read = |each: &mut dyn FnMut(Draft) -> Result<()>| -> Result<(Option<String>, Skipped)> {
        match harness {
            Harness::ClaudeCode => claude_code::read_each(path, &bytes, &subagents.files, each)
                .map(|l| (l.session, l.skipped)),
            Harness::Codex => codex::subagents::read_merged(path, &bytes, threads, each)
                .map(|r| (r.session, r.skipped)),
            Harness::Gemini => gemini::subagents::read_merged(path, &bytes, threads, each)
                .map(|c| (c.session, c.skipped)),
        }
    };
    let mut tools = HashMap::new();
    let (found_session, skipped) = read(&mut |d| {
        if let (Kind::ToolCall, Some(id), Some(tool)) = (d.kind, d.call_id, d.tool) {
            tools.insert(id, tool);
        }
        Ok(())
    })?;
    let session = session.or(found_session).unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let mut finisher = events::Finisher::new(harness.name(), &session, tools, 0);
    let mut jsonl = Vec::new();
    let mut pairing = events::Pairing::default();
    let mut count = 0;
    read(&mut |d| {
        let event = finisher.event(d);
        pairing.add(std::slice::from_ref(&event));
        events::write_jsonl(&mut jsonl, &event);
        count += 1;
        if jsonl.len() as u64 > MAX_TRANSCRIPT_BYTES {
            return Err(transcript_too_large(path));
        }
        Ok(())
    })?;
    // Grown by doubling: give back the slack before the scan copies it.
    jsonl.shrink_to_fit();
    let safe = safe_name(&session);
    let dir = format!("transcript/{}-{safe}", harness.name());
    let notes = subagents.note().into_iter().collect();
    let more_raw = subagents
        .files
        .into_iter()
        .map(|sub| {
            (
                format!("{dir}/subagents/{}.jsonl", safe_name(&sub.name)),
                sub.bytes,
            )
        })
        .collect();
    // A Gemini CLI chat document is one JSON value, not lines.
    let ext = match harness {
        Harness::Gemini if gemini::is_document(&bytes) => "json",
        _ => "jsonl",
    };
    Ok(Loaded {
        jsonl,
        raw: Some((format!("{dir}.{ext}"), bytes)),
        label: Some(format!("{}:{session}", harness.name())),
        events: count,
        pairing,
        skipped,
        more_raw,
        notes,
    })
}

/// `name` for an attachment's path: letters, digits and `-` kept, anything else `_`.
fn safe_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn transcript_too_large(path: &Path) -> Error {
    Error::usage(format!(
        "the transcript normalised from {} would be over the limit of {} MiB for transcript.jsonl",
        path.display(),
        MAX_TRANSCRIPT_BYTES >> 20
    ))
    .with_hint("pass a shorter session (HARNESS:SESSION; 'baton transcript sources' lists them) or a trimmed copy as --transcript FILE")
}

/// A FILE in a harness's own format is normalised like a session found by name.
pub(super) fn detect(bytes: &[u8]) -> Option<Harness> {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct First<'a> {
        #[serde(rename = "type", borrow)]
        kind: json::Field<'a>,
        #[serde(borrow)]
        payload: json::Raw<'a>,
        #[serde(rename = "sessionId", borrow)]
        session_id: json::Raw<'a>,
        #[serde(rename = "leafUuid", borrow)]
        leaf_uuid: json::Raw<'a>,
        #[serde(rename = "parentUuid", borrow)]
        parent_uuid: json::Raw<'a>,
        #[serde(borrow)]
        uuid: json::Raw<'a>,
    }
    let mut lines = bytes
        .split(|&b| b == b'\n')
        .map(<[u8]>::trim_ascii)
        .filter(|l| !l.is_empty());
    let first = json::checked_line(lines.next()?).ok()?;
    let Ok(first_line) = json::parse_object::<First>(first) else {
        // A Gemini CLI chat document spans many lines.
        return gemini::is_document(bytes).then_some(Harness::Gemini);
    };
    if first_line.kind.as_str() == Some("session_meta") && first_line.payload.0.is_some() {
        return Some(Harness::Codex);
    }
    if codex::legacy::is_legacy(bytes) {
        return Some(Harness::Codex);
    }
    if gemini::is_log_start(first) {
        return Some(Harness::Gemini);
    }
    let claude_shape = |entry: &First| {
        entry.session_id.0.is_some()
            || entry.leaf_uuid.0.is_some()
            || (entry.parent_uuid.0.is_some() && entry.uuid.0.is_some())
    };
    // Claude Code may open a session with bookkeeping that names no session (undo
    // snapshots): the first lines are looked at, each a JSON object, until one has the
    // shape of an entry.
    if claude_shape(&first_line) {
        return Some(Harness::ClaudeCode);
    }
    lines
        .take(CLAUDE_LOOK_LINES)
        .map(|l| json::parse_object::<First>(json::checked_line(l).ok()?).ok())
        .map_while(|entry| entry)
        .any(|entry| claude_shape(&entry))
        .then_some(Harness::ClaudeCode)
}

/// Lines after the first that [`detect`] looks at for a Claude Code entry.
const CLAUDE_LOOK_LINES: usize = 20;
