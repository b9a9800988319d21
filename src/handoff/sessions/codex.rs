//! Codex sessions: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, a `session_meta`
//! line then `response_item`, `event_msg`, `turn_context` and `compacted` lines, read into
//! normalised drafts. Field meanings: store-format/TRANSCRIPT.md.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::json::{Budget, Field, LineError, Raw, elements, object, parse_object, text_of};
use super::{Harness, SessionInfo, json_lines, line_error, unexpected};
use crate::error::Result;
use crate::handoff::events::{self, Draft, Kind, Role};

/// Text Codex puts in user messages itself (environment and instruction preambles).
const PREAMBLES: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
];

/// `response_item` payloads that hold nothing to search or read back.
const SILENT_ITEMS: &[&str] = &["ghost_snapshot", "compaction"];

/// Sessions under `codex_home/sessions`; with `workspace`, only those recorded there.
pub fn sessions(
    codex_home: &Path,
    workspace: Option<&Path>,
    count: super::Count,
) -> Result<Vec<SessionInfo>> {
    Ok(rollout_files(codex_home)
        .into_iter()
        .filter_map(|(modified, path)| describe(path, modified, workspace, count))
        .collect())
}

/// The newest session recorded in `workspace`, as `latest` orders them, reading the
/// start of as few rollouts as that takes ([`super::newest_described`]).
pub fn newest(codex_home: &Path, workspace: &Path) -> Option<SessionInfo> {
    let files = rollout_files(codex_home)
        .into_iter()
        .map(|(modified, path)| (modified, (modified, path)))
        .collect();
    super::newest_described(files, |(modified, path)| {
        describe(path, modified, Some(workspace), super::Count::NotLines)
    })
}

/// The rollouts under `codex_home/sessions`, each with its last change (seconds since
/// the epoch).
fn rollout_files(codex_home: &Path) -> Vec<(u64, PathBuf)> {
    let mut files = Vec::new();
    collect_rollouts(&codex_home.join("sessions"), 0, &mut files);
    files
        .into_iter()
        .map(|path| (super::modified(&path), path))
        .collect()
}

/// What the first line of the rollout at `path` says of its session; `None` for one
/// without it or recorded elsewhere than `workspace`.
fn describe(
    path: PathBuf,
    modified: u64,
    workspace: Option<&Path>,
    count: super::Count,
) -> Option<SessionInfo> {
    let (id, cwd, started, bytes) = meta(&path)?;
    if let Some(ws) = workspace
        && !super::same_dir(&cwd, ws)
    {
        return None;
    }
    let lines = match count {
        super::Count::Lines => {
            super::count_complete_lines(&path).map_or(0, |(n, _)| n.unwrap_or(0))
        }
        super::Count::NotLines => 0,
    };
    Some(SessionInfo {
        harness: Harness::Codex,
        session: id,
        cwd,
        started,
        lines,
        bytes,
        modified,
        path,
    })
}

/// `rollout-*.jsonl` files below `dir` (YYYY/MM/DD, so at most three levels down).
fn collect_rollouts(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(|e| e.ok()) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth < 3 {
            collect_rollouts(&path, depth + 1, out);
        } else if kind.is_file() && name.starts_with("rollout-") && name.ends_with(".jsonl") {
            out.push(path);
        }
    }
}

/// The session id, working directory and start time from the first line, and the
/// file's size.
fn meta(path: &Path) -> Option<(String, PathBuf, String, u64)> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Meta<'a> {
        #[serde(rename = "type", borrow)]
        kind: Field<'a>,
        #[serde(borrow)]
        timestamp: Field<'a>,
        #[serde(borrow)]
        payload: Raw<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Payload<'a> {
        #[serde(borrow)]
        id: Field<'a>,
        #[serde(borrow)]
        cwd: Field<'a>,
        #[serde(borrow)]
        timestamp: Field<'a>,
    }
    // A session_meta line carries the instructions: read at most one line's limit.
    let (head, size) = super::read_head(path, 0).ok()?;
    let first = head.split(|&b| b == b'\n').next()?.trim_ascii();
    let line: Meta = parse_object(first).ok()?;
    if line.kind.as_str() != Some("session_meta") {
        return None;
    }
    let payload: Payload = object(Some(line.payload.0?)).ok()?;
    let id = payload.id.as_str()?.to_string();
    let cwd = PathBuf::from(payload.cwd.as_str()?);
    let started = payload
        .timestamp
        .as_str()
        .or(line.timestamp.as_str())
        .unwrap_or_default()
        .to_string();
    Some((id, cwd, started, size))
}

/// One rollout line: the fields baton reads, the rest skipped unbuilt.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Field<'a>,
    #[serde(borrow)]
    timestamp: Field<'a>,
    #[serde(borrow)]
    payload: Raw<'a>,
}

/// A line's payload: a `response_item`, or the fields of the other lines read.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Item<'a> {
    #[serde(rename = "type", borrow)]
    kind: Field<'a>,
    #[serde(borrow)]
    id: Field<'a>,
    #[serde(borrow)]
    message: Field<'a>,
    #[serde(borrow)]
    role: Field<'a>,
    #[serde(borrow)]
    content: Raw<'a>,
    #[serde(borrow)]
    name: Field<'a>,
    #[serde(borrow)]
    arguments: Field<'a>,
    #[serde(borrow)]
    input: Field<'a>,
    #[serde(borrow)]
    call_id: Field<'a>,
    #[serde(borrow)]
    action: Raw<'a>,
    #[serde(borrow)]
    output: Raw<'a>,
    #[serde(borrow)]
    summary: Raw<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Action<'a> {
    #[serde(borrow)]
    command: Raw<'a>,
    #[serde(borrow)]
    query: Raw<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Output<'a> {
    #[serde(borrow)]
    content: Raw<'a>,
}

/// Normalise a rollout: (its session id, the drafts in file order).
pub fn read(path: &Path, bytes: &[u8]) -> Result<(Option<String>, Vec<Draft>)> {
    let mut out = Vec::new();
    let session = read_each(path, bytes, &mut |d| {
        out.push(d);
        Ok(())
    })?;
    Ok((session, out))
}

/// Normalise a rollout one line at a time, handing each draft to `each` (none with
/// nothing to keep, see [`events::keeps`]); returns the session id.
pub fn read_each(
    path: &Path,
    bytes: &[u8],
    each: &mut dyn FnMut(Draft) -> Result<()>,
) -> Result<Option<String>> {
    let mut session = None;
    for item in json_lines(path, bytes) {
        let (line, raw) = item?;
        let fail = |e: LineError| line_error(path, line, &e);
        let entry: Line = parse_object(raw).map_err(fail)?;
        let time = entry.timestamp.or_empty().to_string();
        let payload: Item = object(entry.payload.0).map_err(fail)?;
        let draft = match entry.kind.or_empty() {
            "session_meta" => {
                session = payload.id.as_str().map(str::to_string);
                None
            }
            "response_item" => read_item(path, line, &payload, time, &Budget::default())?,
            "compacted" => Some(Draft {
                time,
                agent: None,
                role: Role::System,
                kind: Kind::System,
                text: payload.message.or_empty().to_string(),
                tool: None,
                call_id: None,
                harness_type: None,
            }),
            // event_msg repeats the user and agent messages of response_item lines for
            // the UI; turn_context is per-turn configuration. Neither adds a word said.
            "event_msg" | "turn_context" => None,
            other => {
                return Err(unexpected(
                    path,
                    line,
                    &format!("Codex line type '{other}'"),
                ));
            }
        };
        if let Some(draft) = draft.filter(events::keeps) {
            each(draft)?;
        }
    }
    Ok(session)
}

fn read_item(
    path: &Path,
    line: usize,
    item: &Item,
    time: String,
    budget: &Budget,
) -> Result<Option<Draft>> {
    let fail = |e: LineError| line_error(path, line, &e);
    let draft = |role, kind, text: String, tool: Option<&str>, call: Option<&str>| Draft {
        time: time.clone(),
        agent: None,
        role,
        kind,
        text,
        tool: tool.map(str::to_string),
        call_id: call.map(str::to_string),
        harness_type: None,
    };
    let call_id = item.call_id.as_str();
    Ok(match item.kind.or_empty() {
        "message" => {
            let text = text_of(item.content.0, budget).map_err(fail)?;
            let role = match item.role.or_empty() {
                "user" if PREAMBLES.iter().any(|p| text.trim_start().starts_with(p)) => {
                    return Ok(None);
                }
                "user" => Role::User,
                "assistant" => Role::Assistant,
                // developer/system messages are the harness's own instructions.
                "developer" | "system" => return Ok(None),
                other => {
                    return Err(unexpected(
                        path,
                        line,
                        &format!("Codex message role '{other}'"),
                    ));
                }
            };
            Some(draft(role, Kind::Message, text, None, None))
        }
        "function_call" => Some(draft(
            Role::Assistant,
            Kind::ToolCall,
            item.arguments.or_empty().to_string(),
            item.name.as_str(),
            call_id,
        )),
        "custom_tool_call" => Some(draft(
            Role::Assistant,
            Kind::ToolCall,
            item.input.or_empty().to_string(),
            item.name.as_str(),
            call_id,
        )),
        "local_shell_call" => {
            let action: Action = object(item.action.0).map_err(fail)?;
            let command = match action.command.0 {
                None => String::new(),
                Some(raw) => match elements(raw, budget).map_err(fail)? {
                    Some(parts) => {
                        let mut words = Vec::new();
                        for part in parts.iter().filter(|p| p.get().starts_with('"')) {
                            words.push(
                                serde_json::from_str::<String>(part.get())
                                    .map_err(|e| fail(LineError::Json(e)))?,
                            );
                        }
                        words.join(" ")
                    }
                    None => text_of(Some(raw), budget).map_err(fail)?,
                },
            };
            Some(draft(
                Role::Assistant,
                Kind::ToolCall,
                command,
                Some("local_shell"),
                call_id,
            ))
        }
        "web_search_call" => {
            let action: Action = object(item.action.0).map_err(fail)?;
            let query = match action.query.0 {
                Some(raw) => text_of(Some(raw), budget).map_err(fail)?,
                None => String::new(),
            };
            Some(draft(
                Role::Assistant,
                Kind::ToolCall,
                query,
                Some("web_search"),
                call_id,
            ))
        }
        "function_call_output" | "custom_tool_call_output" => {
            let output = match item.output.0 {
                Some(raw) if raw.get().starts_with('{') => {
                    let output: Output = object(Some(raw)).map_err(fail)?;
                    text_of(output.content.0, budget).map_err(fail)?
                }
                other => text_of(other, budget).map_err(fail)?,
            };
            Some(draft(Role::Tool, Kind::ToolResult, output, None, call_id))
        }
        "reasoning" => {
            // Only the readable summary: encrypted_content is never kept.
            let summary = text_of(item.summary.0, budget).map_err(fail)?;
            (!summary.is_empty())
                .then(|| draft(Role::Assistant, Kind::Reasoning, summary, None, None))
        }
        other if SILENT_ITEMS.contains(&other) => None,
        other => {
            return Err(unexpected(
                path,
                line,
                &format!("Codex response item '{other}'"),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_rollout_is_the_first_of_the_whole_listing() {
        use super::super::Count;
        let tmp = tempfile::tempdir().unwrap();
        let ws = Path::new("/w/proj");
        let write = |day: &str, name: &str, cwd: &str, id: &str, secs: u64| {
            let dir = tmp.path().join("sessions/2026/01").join(day);
            fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("rollout-{name}.jsonl"));
            let line = format!(
                r#"{{"type":"session_meta","payload":{{"id":"{id}","cwd":"{cwd}","timestamp":"2026-01-{day}"}}}}"#
            );
            super::super::test_support::write_dated(&path, &line, secs);
        };
        let newest_id = || {
            let all = sessions(tmp.path(), Some(ws), Count::NotLines).unwrap();
            super::super::test_support::newest_of_listing(all, newest(tmp.path(), ws))
        };
        assert_eq!(newest_id(), None);
        write("01", "a", "/w/proj", "a", 100);
        write("02", "b", "/elsewhere", "b", 300);
        assert_eq!(newest_id().as_deref(), Some("a"));
        write("02", "c", "/w/proj", "c", 200);
        write("03", "d", "/w/proj", "d", 200);
        assert_eq!(
            newest_id().as_deref(),
            Some("d"),
            "same time: the later start"
        );
        write("04", "e", "/w/proj", "e", 50);
        assert_eq!(newest_id().as_deref(), Some("d"));
    }

    #[test]
    fn rollouts_drop_preambles_duplicates_and_encrypted_reasoning() {
        let jsonl = br#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"c-1","timestamp":"2026-01-01T00:00:00Z","cwd":"/w","cli_version":"0.60.0"}}
{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>"}]}}
{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>cwd</environment_context>"}]}}
{"timestamp":"2026-01-01T00:00:01Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Add a flag"}]}}
{"timestamp":"2026-01-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"Add a flag"}}
{"timestamp":"2026-01-01T00:00:01Z","type":"turn_context","payload":{"cwd":"/w","model":"m"}}
{"timestamp":"2026-01-01T00:00:02Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"Plan the flag"}],"encrypted_content":"gAAAAsecret"}}
{"timestamp":"2026-01-01T00:00:03Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_1"}}
{"timestamp":"2026-01-01T00:00:04Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"src\n"}}
{"timestamp":"2026-01-01T00:00:05Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}}
"#;
        let (session, drafts) = read(Path::new("r.jsonl"), jsonl).unwrap();
        assert_eq!(session.as_deref(), Some("c-1"));
        let events = crate::handoff::events::finish("codex", "c-1", drafts);
        let texts: Vec<_> = events.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "Add a flag",
                "Plan the flag",
                "{\"command\":[\"ls\"]}",
                "src\n",
                "Done."
            ]
        );
        assert_eq!(
            events[3].tool.as_deref(),
            Some("shell"),
            "result paired with its call"
        );
        assert_eq!(events[3].role, Role::Tool);
    }

    #[test]
    fn an_unknown_item_is_refused_with_file_and_line() {
        let jsonl = b"{\"type\":\"session_meta\",\"payload\":{\"id\":\"c\",\"cwd\":\"/w\"}}\n{\"type\":\"response_item\",\"payload\":{\"type\":\"teleport\"}}\n";
        let err = read(Path::new("/r.jsonl"), jsonl).unwrap_err();
        assert!(err.message.contains("/r.jsonl line 2"), "{}", err.message);
        assert!(err.message.contains("'teleport'"), "{}", err.message);
    }
}
