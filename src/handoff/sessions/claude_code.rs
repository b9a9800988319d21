//! Claude Code sessions: `<config>/projects/<encoded workspace>/<session>.jsonl`, one JSON
//! entry a line (`user`, `assistant`, `summary`, `system`, plus bookkeeping entries), read
//! into normalised drafts. Field meanings: store-format/TRANSCRIPT.md.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::json::{self, Budget, Field, LineError, Raw, elements, object, parse_object, text_of};
use super::{Harness, SessionInfo, json_lines, line_error, unexpected};
use crate::error::Result;
use crate::handoff::events::{self, Draft, Kind, Role};

/// Entries Claude Code writes for its own bookkeeping (undo snapshots, the input queue,
/// progress of running tools, titles): nothing an agent said. Known, so not refused.
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

/// One content block of a message.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Field<'a>,
    #[serde(borrow)]
    text: Field<'a>,
    #[serde(borrow)]
    thinking: Field<'a>,
    #[serde(borrow)]
    input: Raw<'a>,
    #[serde(borrow)]
    name: Field<'a>,
    #[serde(borrow)]
    id: Field<'a>,
    #[serde(borrow)]
    content: Raw<'a>,
    #[serde(borrow)]
    tool_use_id: Field<'a>,
}

/// Normalise a session file: (its session id, the drafts in file order).
pub fn read(path: &Path, bytes: &[u8]) -> Result<(Option<String>, Vec<Draft>)> {
    let mut out = Vec::new();
    let session = read_each(path, bytes, &mut |d| {
        out.push(d);
        Ok(())
    })?;
    Ok((session, out))
}

/// Normalise a session file one line at a time, handing each draft to `each` (none with
/// nothing to keep, see [`events::keeps`]); returns the session id.
pub fn read_each(
    path: &Path,
    bytes: &[u8],
    each: &mut dyn FnMut(Draft) -> Result<()>,
) -> Result<Option<String>> {
    let mut session = None;
    for item in json_lines(path, bytes) {
        let (line, raw) = item?;
        let budget = Budget::default();
        let fail = |e: LineError| line_error(path, line, &e);
        let entry: Entry = parse_object(raw).map_err(fail)?;
        if session.is_none() {
            session = entry.session_id.as_str().map(str::to_string);
        }
        for draft in entry_drafts(path, line, &entry, &budget)? {
            if events::keeps(&draft) {
                each(draft)?;
            }
        }
    }
    Ok(session)
}

/// The drafts of adjacent text blocks of one message, each kept apart but where a secret
/// runs from one block into the next: those are one draft, their texts joined as
/// written, so that the scan of the transcript sees the secret whole (a key cut between
/// two blocks otherwise kept the part in the second block).
fn join_split_secrets(run: Vec<Draft>) -> Vec<Draft> {
    let texts: Vec<&str> = run.iter().map(|d| d.text.as_str()).collect();
    let across = crate::handoff::secrets::secret_across(&texts);
    let mut out: Vec<Draft> = Vec::with_capacity(run.len());
    for (i, draft) in run.into_iter().enumerate() {
        match out.last_mut() {
            Some(last) if i > 0 && across[i - 1] => last.text.push_str(&draft.text),
            _ => out.push(draft),
        }
    }
    out
}

/// The drafts of one entry.
fn entry_drafts(path: &Path, line: usize, entry: &Entry, budget: &Budget) -> Result<Vec<Draft>> {
    let fail = |e: LineError| line_error(path, line, &e);
    let kind = entry.kind.or_empty();
    let time = entry.timestamp.or_empty();
    let agent = sidechain(entry);
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
                return Ok(out);
            }
            let message = entry.message.0.ok_or_else(|| {
                unexpected(path, line, &format!("'{kind}' entry without a message"))
            })?;
            let role = if kind == "user" {
                Role::User
            } else {
                Role::Assistant
            };
            let content = object::<Message>(Some(message)).map_err(fail)?.content.0;
            match content {
                Some(text) if text.get().starts_with('"') => {
                    let text: String =
                        serde_json::from_str(text.get()).map_err(|e| fail(LineError::Json(e)))?;
                    out.push(draft(role, Kind::Message, text));
                }
                Some(blocks) if blocks.get().starts_with('[') => {
                    // Adjacent text blocks, joined where a secret runs across them.
                    let mut texts = Vec::new();
                    for block in elements(blocks, budget).map_err(fail)?.unwrap_or_default() {
                        let block: Block = object(Some(block)).map_err(fail)?;
                        let next = read_block(path, line, &block, role, budget, &draft)?;
                        if block.kind.as_str() == Some("text") {
                            texts.extend(next);
                            continue;
                        }
                        out.extend(join_split_secrets(std::mem::take(&mut texts)));
                        out.extend(next);
                    }
                    out.extend(join_split_secrets(texts));
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
            return Err(unexpected(
                path,
                line,
                &format!("Claude Code entry type '{other}'"),
            ));
        }
    }
    Ok(out)
}

/// The sub-agent an entry came from, when it is sidechain work.
fn sidechain(entry: &Entry) -> Option<String> {
    if !entry.is_sidechain.is_true() {
        return None;
    }
    Some(entry.agent_id.as_str().unwrap_or("sidechain").to_string())
}

fn read_block(
    path: &Path,
    line: usize,
    block: &Block,
    role: Role,
    budget: &Budget,
    draft: &dyn Fn(Role, Kind, String) -> Draft,
) -> Result<Option<Draft>> {
    let fail = |e: LineError| line_error(path, line, &e);
    let kind = block.kind.or_empty();
    Ok(match kind {
        "text" => Some(draft(
            role,
            Kind::Message,
            block.text.or_empty().to_string(),
        )),
        "thinking" => Some(draft(
            Role::Assistant,
            Kind::Reasoning,
            block.thinking.or_empty().to_string(),
        )),
        "tool_use" => {
            let input = match block.input.0 {
                Some(raw) => json::value(raw, budget).map_err(fail)?.to_string(),
                None => String::new(),
            };
            let mut d = draft(Role::Assistant, Kind::ToolCall, input);
            d.tool = block.name.as_str().map(str::to_string);
            d.call_id = block.id.as_str().map(str::to_string);
            Some(d)
        }
        "tool_result" => {
            let text = text_of(block.content.0, budget).map_err(fail)?;
            let mut d = draft(Role::Tool, Kind::ToolResult, text);
            d.call_id = block.tool_use_id.as_str().map(str::to_string);
            Some(d)
        }
        // Encrypted reasoning, and pictures or documents that have no text to keep.
        "redacted_thinking" | "image" | "document" => None,
        other => {
            return Err(unexpected(
                path,
                line,
                &format!("Claude Code content block '{other}'"),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_session_is_the_first_of_the_whole_listing() {
        use super::super::Count;
        let tmp = tempfile::tempdir().unwrap();
        let ws = Path::new("/w/proj");
        let dir = tmp.path().join("projects").join(&encodings(ws)[0]);
        fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, line: String, secs: u64| {
            super::super::test_support::write_dated(&dir.join(name), &line, secs);
        };
        let session = |cwd: &str, started: &str, id: &str| {
            format!(r#"{{"cwd":"{cwd}","timestamp":"{started}","sessionId":"{id}"}}"#)
        };
        let newest_id = || {
            let all = sessions(tmp.path(), Some(ws), Count::NotLines).unwrap();
            super::super::test_support::newest_of_listing(all, newest(tmp.path(), ws))
        };
        assert_eq!(newest_id(), None);
        write("a.jsonl", session("/w/proj", "2026-01-01", "a"), 100);
        assert_eq!(newest_id().as_deref(), Some("a"));
        // Newer, in the same project directory, but recorded in another workspace.
        write("b.jsonl", session("/w-proj", "2026-01-02", "b"), 300);
        assert_eq!(newest_id().as_deref(), Some("a"));
        write("c.jsonl", session("/w/proj", "2026-01-03", "c"), 200);
        assert_eq!(newest_id().as_deref(), Some("c"));
        // The same time: the later start wins, then the greater id.
        write("d.jsonl", session("/w/proj", "2026-01-04", "d"), 200);
        write("e.jsonl", session("/w/proj", "2026-01-01", "e"), 200);
        assert_eq!(newest_id().as_deref(), Some("d"));
        write("f.jsonl", session("/w/proj", "2026-01-04", "f"), 200);
        assert_eq!(newest_id().as_deref(), Some("f"));
        // Newer files that are no session of it: a sub-agent log, another name, no
        // recorded directory, an unreadable start.
        write("agent-x.jsonl", session("/w/proj", "2026-02-01", "x"), 900);
        write("notes.txt", session("/w/proj", "2026-02-01", "n"), 900);
        write(
            "g.jsonl",
            r#"{"timestamp":"2026-02-01","sessionId":"g"}"#.into(),
            900,
        );
        write("h.jsonl", "not json".into(), 900);
        assert_eq!(newest_id().as_deref(), Some("f"));
        write("i.jsonl", session("/w/proj", "2026-01-01", "i"), 901);
        assert_eq!(newest_id().as_deref(), Some("i"));
    }

    #[test]
    fn workspace_paths_encode_as_claude_code_names_them() {
        assert_eq!(
            encodings(Path::new("/home/u/my_proj.v2")),
            vec![
                "-home-u-my-proj-v2".to_string(),
                "-home-u-my_proj.v2".to_string()
            ]
        );
        assert_eq!(
            encodings(Path::new("/srv/app")),
            vec!["-srv-app".to_string()]
        );
    }

    #[test]
    fn calls_results_reasoning_and_sidechains_are_normalised() {
        let jsonl = br#"{"type":"summary","summary":"Fix the parser","leafUuid":"l1"}
{"type":"user","sessionId":"s-1","uuid":"u1","parentUuid":null,"cwd":"/w","timestamp":"2026-01-01T00:00:00Z","isSidechain":false,"message":{"role":"user","content":"Why does the test fail?"}}
{"type":"assistant","sessionId":"s-1","uuid":"u2","parentUuid":"u1","timestamp":"2026-01-01T00:00:01Z","isSidechain":false,"message":{"role":"assistant","content":[{"type":"thinking","thinking":"Look at the parser.","signature":"x"},{"type":"redacted_thinking","data":"opaque"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"cargo test"}}]}}
{"type":"user","sessionId":"s-1","uuid":"u3","parentUuid":"u2","timestamp":"2026-01-01T00:00:02Z","isSidechain":false,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"1 failed"}]}]}}
{"type":"user","sessionId":"s-1","uuid":"u4","isMeta":true,"message":{"role":"user","content":"Caveat: injected"}}
{"type":"assistant","sessionId":"s-1","uuid":"u5","isSidechain":true,"agentId":"a7","message":{"role":"assistant","content":[{"type":"text","text":"sub-agent report"}]}}
{"type":"file-history-snapshot","messageId":"m","snapshot":{}}
"#;
        let (session, drafts) = read(Path::new("s.jsonl"), jsonl).unwrap();
        assert_eq!(session.as_deref(), Some("s-1"));
        let events = crate::handoff::events::finish("claude-code", "s-1", drafts);
        let kinds: Vec<_> = events.iter().map(|e| (e.role, e.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (Role::System, Kind::System),
                (Role::User, Kind::Message),
                (Role::Assistant, Kind::Reasoning),
                (Role::Assistant, Kind::ToolCall),
                (Role::Tool, Kind::ToolResult),
                (Role::Assistant, Kind::Message),
            ]
        );
        assert_eq!(events[3].tool.as_deref(), Some("Bash"));
        assert_eq!(
            events[4].tool.as_deref(),
            Some("Bash"),
            "result paired with its call"
        );
        assert_eq!(events[4].call_id.as_deref(), Some("toolu_1"));
        assert_eq!(events[4].text, "1 failed");
        assert_eq!(events[5].source.agent.as_deref(), Some("a7"));
        assert!(
            events
                .iter()
                .all(|e| !e.text.contains("opaque") && !e.text.contains("Caveat"))
        );
    }

    #[test]
    fn an_unknown_entry_type_is_refused_with_file_and_line() {
        let jsonl = b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n{\"type\":\"hologram\"}\n";
        let err = read(Path::new("/x/s.jsonl"), jsonl).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Usage);
        assert!(err.message.contains("/x/s.jsonl line 2"), "{}", err.message);
        assert!(err.message.contains("'hologram'"), "{}", err.message);
    }
}
