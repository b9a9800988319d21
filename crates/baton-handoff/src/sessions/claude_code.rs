//! Claude Code sessions: `<config>/projects/<encoded workspace>/<session>.jsonl`, one JSON
//! entry a line (`user`, `assistant`, `summary`, `system`, plus bookkeeping entries), read
//! into normalised drafts. Field meanings: store-format/TRANSCRIPT.md.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod blocks;
pub mod subagents;

use super::json::{Budget, Field, LineError, Raw, object, parse_object, text_of};
use super::skipped::Skipped;
use super::{Harness, SessionInfo, json_lines, line_error, unexpected};
use crate::events::{self, Draft, Kind, Role};
use baton_error::{Error, Result};
use blocks::{Voice, injected};
pub use subagents::Subagent;

/// Entries Claude Code writes for its own bookkeeping (undo snapshots, the input queue,
/// progress of running tools, titles): nothing an agent said. Known, so left out without
/// a note; other types without a message are left out and counted ([`Skipped`]).
const BOOKKEEPING: &[&str] = &[
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "custom-title",
    "tag",
];

/// The project directory names Claude Code has used for a workspace: every character
/// other than a letter or digit becomes `-` (older releases replaced only `/`).
fn encodings(workspace: &Path) -> Vec<String> {
    let text = workspace.to_string_lossy();
    let all: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let slashes = text.replace('/', "-");
    if all == slashes {
        vec![all]
    } else {
        vec![all, slashes]
    }
}

/// Sessions under `config/projects`; with `workspace`, only those recorded there.
pub fn sessions(
    config: &Path,
    workspace: Option<&Path>,
    count: super::Count,
) -> Result<Vec<SessionInfo>> {
    Ok(session_files(config, workspace)
        .into_iter()
        .filter_map(|file| describe(file, workspace, count))
        .collect())
}

/// The newest session recorded in `workspace`, as `latest` orders them, reading the
/// start of as few files as that takes ([`super::newest_described`]).
pub fn newest(config: &Path, workspace: &Path) -> Option<SessionInfo> {
    let files = session_files(config, Some(workspace))
        .into_iter()
        .map(|file| (file.modified, file))
        .collect();
    super::newest_described(files, |file| {
        describe(file, Some(workspace), super::Count::NotLines)
    })
}

/// A session file found by listing, before it is read.
struct SessionFile {
    path: PathBuf,
    name: String,
    /// Seconds since the epoch of its last change.
    modified: u64,
}

/// The session files of the workspace's project directories (or of every project).
fn session_files(config: &Path, workspace: Option<&Path>) -> Vec<SessionFile> {
    let projects = config.join("projects");
    let dirs: Vec<PathBuf> = match workspace {
        Some(ws) => encodings(ws)
            .into_iter()
            .map(|e| projects.join(e))
            .collect(),
        None => match fs::read_dir(&projects) {
            Ok(entries) => entries.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
            Err(_) => Vec::new(),
        },
    };
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            // agent-*.jsonl are sub-agent logs of a main session, not sessions to resume.
            if !name.ends_with(".jsonl") || name.starts_with("agent-") {
                continue;
            }
            // Not followed through a symlink, and never a FIFO or a device: only what
            // `open_session` will open.
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if !meta.file_type().is_file() {
                continue;
            }
            out.push(SessionFile {
                path,
                name,
                modified: super::seconds(meta.modified().ok()),
            });
        }
    }
    out
}

/// What the start of `file` says of its session (and, counting lines, how many it has,
/// counted as read); `None` for an unreadable file, one without a recorded working
/// directory, or one recorded elsewhere than `workspace`. A file over the size limit is
/// described all the same (its start is all that is read), so that `latest` can refuse
/// it rather than pass over it.
fn describe(
    file: SessionFile,
    workspace: Option<&Path>,
    count: super::Count,
) -> Option<SessionInfo> {
    // The header is in the first HEADER_LINES lines.
    let (head, bytes) = super::read_head(&file.path, HEADER_LINES).ok()?;
    let (cwd, started, session) = header(&head);
    let cwd = cwd?;
    if let Some(ws) = workspace
        && !super::same_dir(&cwd, ws)
    {
        return None;
    }
    let lines = match count {
        super::Count::Lines => super::count_complete_lines(&file.path).ok()?.0.unwrap_or(0),
        super::Count::NotLines => 0,
    };
    Some(SessionInfo {
        harness: Harness::ClaudeCode,
        session: session.unwrap_or_else(|| file.name.trim_end_matches(".jsonl").to_string()),
        cwd,
        started,
        lines,
        bytes,
        modified: file.modified,
        path: file.path,
    })
}

/// How many lines of a session its header is looked for in.
const HEADER_LINES: usize = 200;

/// The first recorded working directory, timestamp and session id (in the first
/// [`HEADER_LINES`] lines; a line that is not a JSON object is passed over).
fn header(bytes: &[u8]) -> (Option<PathBuf>, String, Option<String>) {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Head<'a> {
        #[serde(borrow)]
        cwd: Field<'a>,
        #[serde(borrow)]
        timestamp: Field<'a>,
        #[serde(rename = "sessionId", borrow)]
        session_id: Field<'a>,
    }
    let (mut cwd, mut started, mut session) = (None, String::new(), None);
    for line in bytes.split(|&b| b == b'\n').take(HEADER_LINES) {
        let Ok(head) = parse_object::<Head>(line.trim_ascii()) else {
            continue;
        };
        if cwd.is_none() {
            cwd = head.cwd.as_str().map(PathBuf::from);
        }
        if started.is_empty() {
            started = head.timestamp.or_empty().to_string();
        }
        if session.is_none() {
            session = head.session_id.as_str().map(str::to_string);
        }
        if cwd.is_some() && !started.is_empty() && session.is_some() {
            break;
        }
    }
    (cwd, started, session)
}

/// One Claude Code entry: the fields baton reads, the rest skipped unbuilt.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Entry<'a> {
    #[serde(rename = "type", borrow)]
    kind: Field<'a>,
    #[serde(rename = "sessionId", borrow)]
    session_id: Field<'a>,
    #[serde(borrow)]
    timestamp: Field<'a>,
    #[serde(rename = "isMeta", borrow)]
    is_meta: Field<'a>,
    #[serde(rename = "isSidechain", borrow)]
    is_sidechain: Field<'a>,
    #[serde(rename = "isCompactSummary", borrow)]
    is_compact_summary: Field<'a>,
    #[serde(rename = "agentId", borrow)]
    agent_id: Field<'a>,
    #[serde(borrow)]
    message: Raw<'a>,
    #[serde(borrow)]
    summary: Field<'a>,
    #[serde(borrow)]
    content: Raw<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Message<'a> {
    #[serde(borrow)]
    content: Raw<'a>,
}

/// What a read of session lines gives besides its drafts.
#[derive(Debug)]
pub struct Lines {
    /// The first session id recorded.
    pub session: Option<String>,
    /// Entries of types this baton does not know, which carried no message.
    pub skipped: Skipped,
    /// Lines read, and how many of them were entries of a type this baton knows.
    lines: usize,
    known: usize,
}

/// Normalise lines of a session (a whole file, or the lines appended to one): the
/// drafts in file order, and what [`Lines`] says of them.
pub fn read(path: &Path, bytes: &[u8]) -> Result<(Lines, Vec<Draft>)> {
    let mut out = Vec::new();
    let lines = read_lines(path, bytes, None, &mut |d| {
        out.push(d);
        Ok(())
    })?;
    Ok((lines, out))
}

/// Normalise a session file one line at a time, handing each draft to `each` (none with
/// nothing to keep, see [`events::keeps`]), its sub-agents' drafts put among them by
/// time. A file of lines none of which is an entry Claude Code writes is refused: it
/// is no Claude Code session.
pub fn read_each(
    path: &Path,
    bytes: &[u8],
    subagents: &[Subagent],
    each: &mut dyn FnMut(Draft) -> Result<()>,
) -> Result<Lines> {
    let mut merge = subagents::Merge::default();
    let mut skipped = Skipped::default();
    for sub in subagents {
        let mut queue = std::collections::VecDeque::new();
        let lines = read_lines(&sub.path, &sub.bytes, Some(sub.agent()), &mut |d| {
            queue.push_back(d);
            Ok(())
        })?;
        skipped.extend(&lines.skipped);
        merge.push(queue);
    }
    let mut lines = read_lines(path, bytes, None, &mut |d| {
        if !d.time.is_empty() {
            merge.before(&d.time, each)?;
        }
        each(d)
    })?;
    merge.rest(each)?;
    if lines.lines > 0 && lines.known == 0 {
        return Err(Error::usage(format!(
            "{} is not a Claude Code session: none of its {} lines is an entry Claude Code writes (user, assistant, summary, system)",
            path.display(),
            lines.lines
        ))
        .with_hint("pass the session file itself (~/.claude/projects/<workspace>/<session>.jsonl), or the file as --attach"));
    }
    lines.skipped.extend(&skipped);
    Ok(lines)
}

/// [`read`] handing each draft to `each`; `agent`: the sub-agent whose log this is.
fn read_lines(
    path: &Path,
    bytes: &[u8],
    agent: Option<&str>,
    each: &mut dyn FnMut(Draft) -> Result<()>,
) -> Result<Lines> {
    let mut out = Lines {
        session: None,
        skipped: Skipped::default(),
        lines: 0,
        known: 0,
    };
    for item in json_lines(path, bytes) {
        let (line, raw) = item?;
        out.lines += 1;
        let budget = Budget::default();
        let fail = |e: LineError| line_error(path, line, &e);
        let entry: Entry = parse_object(raw).map_err(fail)?;
        if out.session.is_none() {
            out.session = entry.session_id.as_str().map(str::to_string);
        }
        let Some(drafts) = entry_drafts(path, line, &entry, agent, &budget)? else {
            out.skipped.add(entry.kind.as_str().unwrap_or("(no type)"));
            continue;
        };
        out.known += 1;
        for draft in drafts {
            if events::keeps(&draft) {
                each(draft)?;
            }
        }
    }
    Ok(out)
}

/// The drafts of one entry; `None` for an entry of a type this baton does not know that
/// carries no message (skipped, and counted by the caller).
fn entry_drafts(
    path: &Path,
    line: usize,
    entry: &Entry,
    agent: Option<&str>,
    budget: &Budget,
) -> Result<Option<Vec<Draft>>> {
    let fail = |e: LineError| line_error(path, line, &e);
    let kind = entry.kind.or_empty();
    let time = entry.timestamp.or_empty();
    let agent = match agent {
        Some(name) => Some(entry.agent_id.as_str().unwrap_or(name).to_string()),
        None => sidechain(entry),
    };
    let draft = |role, kind, text: String| Draft {
        time: time.to_string(),
        agent: agent.clone(),
        role,
        kind,
        text,
        tool: None,
        call_id: None,
        harness_type: None,
    };
    let mut out = Vec::new();
    match kind {
        "user" | "assistant" => {
            // isMeta entries are what the harness injected (caveats, command echoes).
            if entry.is_meta.is_true() {
                return Ok(Some(out));
            }
            let message = entry.message.0.ok_or_else(|| {
                unexpected(path, line, &format!("'{kind}' entry without a message"))
            })?;
            let role = if kind == "user" {
                Role::User
            } else {
                Role::Assistant
            };
            let voice = if entry.is_compact_summary.is_true() {
                Voice::Injected
            } else {
                Voice::Said
            };
            let content = object::<Message>(Some(message)).map_err(fail)?.content.0;
            match content {
                Some(text) if text.get().starts_with('"') => {
                    let text: String =
                        serde_json::from_str(text.get()).map_err(|e| fail(LineError::Json(e)))?;
                    let said =
                        role == Role::Assistant || (voice == Voice::Said && !injected(&text));
                    let kind = if said { Kind::Message } else { Kind::System };
                    out.push(draft(role, kind, text));
                }
                Some(content) if content.get().starts_with('[') => {
                    out = blocks::drafts(path, line, content, role, voice, budget, &draft)?;
                }
                _ => {
                    return Err(unexpected(
                        path,
                        line,
                        "message content (neither text nor blocks)",
                    ));
                }
            }
        }
        "summary" => {
            let text = entry.summary.or_empty().to_string();
            out.push(draft(Role::System, Kind::System, text));
        }
        "system" => {
            let text = text_of(entry.content.0, budget).map_err(fail)?;
            out.push(draft(Role::System, Kind::System, text));
        }
        other if BOOKKEEPING.contains(&other) => {}
        other => {
            // A type this baton does not know: skipped, unless it carries a message,
            // whose text is kept under the entry's type.
            let Some(message) = entry.message.0 else {
                return Ok(None);
            };
            let content = object::<Message>(Some(message)).map_err(fail)?.content.0;
            let text = match content {
                Some(c) if c.get().starts_with(['"', '[']) => {
                    text_of(Some(c), budget).map_err(fail)?
                }
                _ => String::new(),
            };
            let mut d = draft(Role::System, Kind::Other, text);
            d.harness_type = Some(other.to_string());
            out.push(d);
        }
    }
    Ok(Some(out))
}

/// The sub-agent an entry came from, when it is sidechain work.
fn sidechain(entry: &Entry) -> Option<String> {
    if !entry.is_sidechain.is_true() {
        return None;
    }
    Some(entry.agent_id.as_str().unwrap_or("sidechain").to_string())
}

#[cfg(test)]
mod tests;
