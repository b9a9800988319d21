//! Gemini CLI sessions: `<home>/.gemini/tmp/<project>/chats/session-*.json` (one JSON
//! document `{sessionId, projectHash, startTime, lastUpdated, messages}`) or, since Gemini
//! CLI recorded chats as a log, `session-*.jsonl` (a metadata line, then message records,
//! `$set` updates and `$rewindTo` marks), read into normalised drafts. `<project>` is the
//! sha256 of the project root, or a short name whose `.project_root` file holds the root.
//! Field meanings: store-format/TRANSCRIPT.md ("From Gemini CLI").

mod log;
pub mod subagents;

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use super::json::{Budget, Field, LineError, Raw, elements, object, parse_object, text_of};
use super::skipped::Skipped;
use super::{Harness, MAX_SESSION_BYTES, SessionInfo, json_lines, line_error};
use crate::events::{self, Draft, Kind, Role};
use baton_error::Result;

/// User messages Gemini CLI adds itself (context it injects for the model): `system`,
/// never a turn (`isIgnoredUserContent` in gemini-cli).
const INJECTED: &[&str] = &["<session_context>", "<hook_context>"];

/// The session file's fields baton reads: a whole document, or a log's metadata line.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Doc<'a> {
    #[serde(rename = "sessionId", borrow)]
    session_id: Field<'a>,
    #[serde(rename = "projectHash", borrow)]
    project_hash: Field<'a>,
    #[serde(rename = "startTime", borrow)]
    start_time: Field<'a>,
    #[serde(borrow)]
    messages: Raw<'a>,
}

/// One record of a session log (`.jsonl`): a message, or a change to what came before.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Record<'a> {
    #[serde(borrow)]
    id: Field<'a>,
    #[serde(rename = "$rewindTo", borrow)]
    rewind_to: Field<'a>,
    #[serde(rename = "$set", borrow)]
    set: Raw<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Message<'a> {
    #[serde(rename = "type", borrow)]
    kind: Field<'a>,
    #[serde(borrow)]
    timestamp: Field<'a>,
    #[serde(borrow)]
    content: Raw<'a>,
    #[serde(rename = "toolCalls", borrow)]
    tool_calls: Raw<'a>,
    #[serde(borrow)]
    thoughts: Raw<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ToolCall<'a> {
    #[serde(borrow)]
    id: Field<'a>,
    #[serde(borrow)]
    name: Field<'a>,
    #[serde(borrow)]
    args: Raw<'a>,
    #[serde(borrow)]
    result: Raw<'a>,
    #[serde(borrow)]
    timestamp: Field<'a>,
}

/// A part of a message's content or of a tool's result (the Gemini API's `Part`).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Part<'a> {
    #[serde(borrow)]
    text: Field<'a>,
    #[serde(borrow)]
    thought: Field<'a>,
    #[serde(rename = "functionResponse", borrow)]
    function_response: Raw<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct FunctionResponse<'a> {
    #[serde(borrow)]
    response: Raw<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Response<'a> {
    #[serde(borrow)]
    output: Raw<'a>,
    #[serde(borrow)]
    error: Raw<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Thought<'a> {
    #[serde(borrow)]
    subject: Field<'a>,
    #[serde(borrow)]
    description: Field<'a>,
    #[serde(borrow)]
    timestamp: Field<'a>,
}

/// The project directories of `workspace` under `gemini/tmp`: named by the sha256 of its
/// path, or holding a `.project_root` that names it.
fn project_dirs(gemini: &Path, workspace: &Path) -> Vec<PathBuf> {
    let tmp = gemini.join("tmp");
    let mut dirs = Vec::new();
    let canonical = super::canonical(workspace);
    for path in [workspace, canonical.as_path()] {
        let hash = hex(&Sha256::digest(path.as_os_str().as_encoded_bytes()));
        let dir = tmp.join(hash);
        if dir.is_dir() && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    for entry in fs::read_dir(&tmp)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
    {
        let dir = entry.path();
        let Ok(root) = fs::read_to_string(dir.join(".project_root")) else {
            continue;
        };
        if super::same_dir(Path::new(root.trim()), &canonical) && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The session files (`chats/session-*.json` and `.jsonl`) of `workspace`, or of every
/// project, each with its last change.
fn session_files(gemini: &Path, workspace: Option<&Path>) -> Vec<(u64, PathBuf)> {
    let dirs = match workspace {
        Some(ws) => project_dirs(gemini, ws),
        None => fs::read_dir(gemini.join("tmp"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect(),
    };
    let mut files = Vec::new();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(dir.join("chats")) else {
            continue;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if is_file
                && name.starts_with("session-")
                && (name.ends_with(".json") || name.ends_with(".jsonl"))
            {
                let path = entry.path();
                files.push((super::modified(&path), path));
            }
        }
    }
    files
}

/// Sessions of `workspace` (every project's without one).
pub fn sessions(
    gemini: &Path,
    workspace: Option<&Path>,
    count: super::Count,
) -> Result<Vec<SessionInfo>> {
    Ok(session_files(gemini, workspace)
        .into_iter()
        .filter_map(|(modified, path)| describe(path, modified, workspace, count))
        .collect())
}

/// The newest session of `workspace`, as `latest` orders them.
pub fn newest(gemini: &Path, workspace: &Path) -> Option<SessionInfo> {
    let files = session_files(gemini, Some(workspace))
        .into_iter()
        .map(|(modified, path)| (modified, (modified, path)))
        .collect();
    super::newest_described(files, |(modified, path)| {
        describe(path, modified, Some(workspace), super::Count::NotLines)
    })
}

/// What a session file says of itself. A document is read whole to find it (one over
/// [`MAX_SESSION_BYTES`] is named by its file: Gemini CLI puts the id's first 8
/// characters in it).
fn describe(
    path: PathBuf,
    modified: u64,
    workspace: Option<&Path>,
    count: super::Count,
) -> Option<SessionInfo> {
    let (head, bytes) = super::read_head(&path, 0).ok()?;
    let first = head
        .split(|&b| b == b'\n')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    let (id, started, messages) = match parse_object::<Doc>(first) {
        Ok(doc) if doc.session_id.as_str().is_some() && doc.messages.0.is_none() => {
            let lines = match count {
                super::Count::Lines => {
                    super::count_complete_lines(&path).map_or(0, |(n, _)| n.unwrap_or(0))
                }
                super::Count::NotLines => 0,
            };
            (
                doc.session_id.or_empty().to_string(),
                doc.start_time.or_empty().to_string(),
                lines,
            )
        }
        _ if bytes > MAX_SESSION_BYTES => {
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            (stem, String::new(), 0)
        }
        _ => {
            let whole = super::read_whole(&path).ok()?;
            let doc: Doc = parse_object(whole.trim_ascii()).ok()?;
            let messages = doc
                .messages
                .0
                .and_then(|m| elements(m, &Budget::default()).ok().flatten())
                .map_or(0, |m| m.len());
            (
                doc.session_id.as_str()?.to_string(),
                doc.start_time.or_empty().to_string(),
                messages,
            )
        }
    };
    // The project directory was matched; a session names no cwd of its own.
    let cwd = workspace.map(Path::to_path_buf).unwrap_or_default();
    Some(SessionInfo {
        harness: Harness::Gemini,
        session: id,
        cwd,
        started,
        lines: messages,
        bytes,
        modified,
        path,
    })
}

/// Whether `bytes` are a whole Gemini CLI session document (not a log).
pub fn is_document(bytes: &[u8]) -> bool {
    parse_object::<Doc>(bytes.trim_ascii()).is_ok_and(|d| {
        d.session_id.as_str().is_some()
            && d.project_hash.as_str().is_some()
            && d.messages.0.is_some()
    })
}

/// Whether `line` is a session log's metadata line.
pub fn is_log_start(line: &[u8]) -> bool {
    parse_object::<Doc>(line)
        .is_ok_and(|d| d.session_id.as_str().is_some() && d.project_hash.as_str().is_some())
}

/// What reading a session found besides its drafts.
#[derive(Debug, Default)]
pub struct Chat {
    pub session: Option<String>,
    pub skipped: Skipped,
}

/// Normalise a session file (a document or a log), handing each draft to `each`.
pub fn read_each(
    path: &Path,
    bytes: &[u8],
    each: &mut dyn FnMut(Draft) -> Result<()>,
) -> Result<Chat> {
    let mut chat = Chat::default();
    let fail = |line, e: LineError| line_error(path, line, &e);
    // A document's messages, or a log's final messages (each the last record of its id,
    // in the place of its first; a rewind drops a message and those after it).
    let mut messages: Vec<(&RawValue, usize)> = Vec::new();
    if is_document(bytes) {
        let doc: Doc = parse_object(bytes.trim_ascii()).map_err(|e| fail(1, e))?;
        chat.session = doc.session_id.as_str().map(str::to_string);
        let list = doc.messages.0.map(|m| elements(m, &Budget::default()));
        for m in list
            .transpose()
            .map_err(|e| fail(1, e))?
            .flatten()
            .unwrap_or_default()
        {
            messages.push((m, 1));
        }
    } else {
        let mut log = log::Log::default();
        for item in json_lines(path, bytes) {
            let (line, raw) = item?;
            log.record(path, line, raw, &mut chat)?;
        }
        messages = log.messages;
    }
    for (raw, line) in messages {
        read_message(raw, &mut chat.skipped, &mut |d| {
            if events::keeps(&d) {
                each(d)?;
            }
            Ok(())
        })
        .map_err(|e| e.at(path, line))?;
    }
    Ok(chat)
}

/// Why a message was not read, before the file and line are known.
enum MessageError {
    Line(LineError),
    Each(baton_error::Error),
}

impl MessageError {
    fn at(self, path: &Path, line: usize) -> baton_error::Error {
        match self {
            MessageError::Line(e) => line_error(path, line, &e),
            MessageError::Each(e) => e,
        }
    }
}

impl From<LineError> for MessageError {
    fn from(e: LineError) -> Self {
        MessageError::Line(e)
    }
}

/// The drafts of one message: a prompt, a reply (its thoughts first, then its text, then
/// each tool call with its result), or a note of the CLI's own.
fn read_message(
    raw: &RawValue,
    skipped: &mut Skipped,
    each: &mut dyn FnMut(Draft) -> Result<()>,
) -> std::result::Result<(), MessageError> {
    let budget = Budget::default();
    let m: Message = object(Some(raw))?;
    let time = m.timestamp.or_empty().to_string();
    let draft = |role, kind, text: String| Draft {
        time: time.clone(),
        agent: None,
        role,
        kind,
        text,
        tool: None,
        call_id: None,
        harness_type: None,
    };
    let mut out = Vec::new();
    match m.kind.or_empty() {
        "user" => {
            let (text, _) = content_text(m.content, &budget)?;
            let injected = INJECTED.iter().any(|p| text.trim_start().starts_with(p));
            let kind = if injected {
                Kind::System
            } else {
                Kind::Message
            };
            out.push(draft(Role::User, kind, text));
        }
        "gemini" => {
            let (text, thought_parts) = content_text(m.content, &budget)?;
            let mut thoughts = Vec::new();
            for t in m
                .thoughts
                .0
                .map(|t| elements(t, &budget))
                .transpose()?
                .flatten()
                .unwrap_or_default()
            {
                let t: Thought = object(Some(t))?;
                let text = match (t.subject.as_str(), t.description.or_empty()) {
                    (Some(s), d) if !s.is_empty() => format!("**{s}** {d}"),
                    (_, d) => d.to_string(),
                };
                thoughts.push(Draft {
                    time: t
                        .timestamp
                        .as_str()
                        .map_or_else(|| time.clone(), str::to_string),
                    ..draft(Role::Assistant, Kind::Reasoning, text)
                });
            }
            if thoughts.is_empty() && !thought_parts.is_empty() {
                thoughts.push(draft(Role::Assistant, Kind::Reasoning, thought_parts));
            }
            out.extend(thoughts);
            out.push(draft(Role::Assistant, Kind::Message, text));
            for call in m
                .tool_calls
                .0
                .map(|c| elements(c, &budget))
                .transpose()?
                .flatten()
                .unwrap_or_default()
            {
                let call: ToolCall = object(Some(call))?;
                let call_time = call
                    .timestamp
                    .as_str()
                    .map_or_else(|| time.clone(), str::to_string);
                let id = call.id.as_str().map(str::to_string);
                let args = match call.args.0 {
                    Some(raw) => super::json::value(raw, &budget)?.to_string(),
                    None => String::new(),
                };
                out.push(Draft {
                    time: call_time.clone(),
                    tool: call.name.as_str().map(str::to_string),
                    call_id: id.clone(),
                    ..draft(Role::Assistant, Kind::ToolCall, args)
                });
                if let Some(result) = call.result.0.filter(|r| r.get() != "null") {
                    out.push(Draft {
                        time: call_time,
                        call_id: id,
                        ..draft(Role::Tool, Kind::ToolResult, result_text(result, &budget)?)
                    });
                }
            }
        }
        "info" | "error" | "warning" => {
            let (text, _) = content_text(m.content, &budget)?;
            out.push(draft(Role::System, Kind::System, text));
        }
        other => {
            let (text, _) = content_text(m.content, &budget)?;
            let name = if other.is_empty() { "(no type)" } else { other };
            if text.trim().is_empty() {
                skipped.add(name);
            } else {
                out.push(Draft {
                    harness_type: Some(name.to_string()),
                    ..draft(Role::System, Kind::Other, text)
                });
            }
        }
    }
    for d in out {
        each(d).map_err(MessageError::Each)?;
    }
    Ok(())
}

/// A content's text (a string, a part, or a list of them) and, apart, the text of its
/// thought parts; function calls and responses in it are read from `toolCalls`.
fn content_text(content: Raw, budget: &Budget) -> std::result::Result<(String, String), LineError> {
    let Some(raw) = content.0 else {
        return Ok((String::new(), String::new()));
    };
    if raw.get().starts_with('"') {
        return Ok((text_of(Some(raw), budget)?, String::new()));
    }
    let parts = match elements(raw, budget)? {
        Some(parts) => parts,
        None if raw.get().starts_with('{') => vec![raw],
        None => return Ok((String::new(), String::new())),
    };
    let (mut text, mut thoughts) = (Vec::new(), Vec::new());
    for part in parts {
        if part.get().starts_with('"') {
            text.push(text_of(Some(part), budget)?);
            continue;
        }
        let p: Part = object(Some(part))?;
        if let Some(t) = p.text.as_str() {
            if p.thought.is_true() {
                thoughts.push(t.to_string());
            } else {
                text.push(t.to_string());
            }
        }
    }
    Ok((text.join("\n\n"), thoughts.join("\n\n")))
}

/// A tool's result: each part's `functionResponse.response` output (or error), or its
/// text.
fn result_text(result: &RawValue, budget: &Budget) -> std::result::Result<String, LineError> {
    let parts = match elements(result, budget)? {
        Some(parts) => parts,
        None => vec![result],
    };
    let mut texts = Vec::new();
    for part in parts {
        if !part.get().starts_with('{') {
            texts.push(text_of(Some(part), budget)?);
            continue;
        }
        let p: Part = object(Some(part))?;
        if let Some(t) = p.text.as_str() {
            texts.push(t.to_string());
        }
        if let Some(fr) = p.function_response.0 {
            let fr: FunctionResponse = object(Some(fr))?;
            let response: Response = object(fr.response.0)?;
            let text = match (response.output.0, response.error.0) {
                (Some(out), _) => text_of(Some(out), budget)?,
                (None, Some(err)) => text_of(Some(err), budget)?,
                (None, None) => text_of(fr.response.0, budget)?,
            };
            texts.push(text);
        }
    }
    Ok(texts.join("\n\n"))
}

#[cfg(test)]
mod tests;
