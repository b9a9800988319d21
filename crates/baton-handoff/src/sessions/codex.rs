//! Codex sessions: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, a `session_meta`
//! line then `response_item`, `event_msg`, `turn_context` and `compacted` lines (or, in a
//! legacy rollout, a header line then bare items: [`legacy`]), read into normalised
//! drafts; a sub-agent thread's drafts name its agent ([`subagents`]). Field meanings:
//! store-format/TRANSCRIPT.md.

mod items;
pub mod legacy;
pub mod subagents;

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::json::{Field, LineError, Raw, object, parse_object, text_of};
use super::skipped::Skipped;
use super::{Harness, SessionInfo, json_lines, line_error};
use crate::events::{self, Draft, Kind, Role};
use baton_error::Result;
use items::{Item, read_item};
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
/// start of as few rollouts as that takes ([`super::newest_described`]). A sub-agent
/// thread changed last while the session that spawned it runs gives that session (found
/// in the same workspace), whose handoff merges the thread in.
pub fn newest(codex_home: &Path, workspace: &Path) -> Option<SessionInfo> {
    let files = rollout_files(codex_home)
        .into_iter()
        .map(|(modified, path)| (modified, (modified, path)))
        .collect();
    let mut newest = super::newest_described(files, |(modified, path)| {
        describe(path, modified, Some(workspace), super::Count::NotLines)
    })?;
    for _ in 0..subagents::MAX_DEPTH {
        let Some(parent) = meta(&newest.path).and_then(|m| m.parent) else {
            break;
        };
        let listed = sessions(codex_home, Some(workspace), super::Count::NotLines).ok()?;
        let Some(session) = listed.into_iter().find(|s| s.session == parent) else {
            break;
        };
        newest = session;
    }
    Some(newest)
}

/// A workspace's sessions in `latest`'s order with what [`newest`] gives first: the
/// session a sub-agent thread listed first belongs to, when it is listed too.
pub(super) fn session_first(listed: &mut [SessionInfo]) {
    let mut first = 0;
    for _ in 0..subagents::MAX_DEPTH {
        let Some(parent) = listed
            .get(first)
            .and_then(|s| meta(&s.path))
            .and_then(|m| m.parent)
        else {
            break;
        };
        let Some(at) = listed.iter().position(|s| s.session == parent) else {
            break;
        };
        first = at;
    }
    if let Some(slice) = listed.get_mut(..=first) {
        slice.rotate_right(1);
    }
}

/// The rollouts under `codex_home/sessions`, each with its last change (seconds since
/// the epoch).
pub(super) fn rollout_files(codex_home: &Path) -> Vec<(u64, PathBuf)> {
    rollout_paths(codex_home)
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
    let Meta {
        id,
        cwd,
        started,
        bytes,
        ..
    } = meta(&path)?;
    if let Some(ws) = workspace
        && !cwd.as_deref().is_some_and(|cwd| super::same_dir(cwd, ws))
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
        cwd: cwd.unwrap_or_default(),
        started,
        lines,
        bytes,
        modified,
        path,
    })
}

/// Every rollout file under `codex_home`'s sessions, unstatted.
pub(super) fn rollout_paths(codex_home: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect_rollouts(&codex_home.join("sessions"), 0, &mut files);
    files
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

/// What the start of a rollout says of its session.
pub(super) struct Meta {
    pub id: String,
    /// `None` for a legacy rollout that names no working directory in its first lines.
    pub cwd: Option<PathBuf>,
    pub started: String,
    /// The file's size.
    pub bytes: u64,
    /// The thread that spawned this one, for a sub-agent thread.
    pub parent: Option<String>,
}

/// The `session_meta` payload fields baton reads.
#[derive(Deserialize, Default)]
#[serde(default)]
struct MetaPayload<'a> {
    #[serde(borrow)]
    id: Field<'a>,
    #[serde(borrow)]
    cwd: Field<'a>,
    #[serde(borrow)]
    timestamp: Field<'a>,
    #[serde(borrow)]
    source: Raw<'a>,
    #[serde(borrow)]
    agent_nickname: Field<'a>,
    #[serde(borrow)]
    agent_role: Field<'a>,
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

/// The session id, working directory, start time and parent thread from the first
/// line (or lines, for a legacy rollout), and the file's size.
pub(super) fn meta(path: &Path) -> Option<Meta> {
    // A session_meta line carries the instructions: read at most one line's limit.
    let (head, bytes) = super::read_head(path, 0).ok()?;
    let first = head.split(|&b| b == b'\n').next()?.trim_ascii();
    let line: Line = parse_object(first).ok()?;
    if line.kind.as_str() != Some("session_meta") {
        return legacy::meta(path, first, bytes);
    }
    let payload: MetaPayload = object(Some(line.payload.0?)).ok()?;
    let id = payload.id.as_str()?.to_string();
    let cwd = PathBuf::from(payload.cwd.as_str()?);
    let started = payload
        .timestamp
        .as_str()
        .or(line.timestamp.as_str())
        .unwrap_or_default()
        .to_string();
    let parent = subagents::Spawn::of(payload.source.0).and_then(|s| s.parent);
    Some(Meta {
        id,
        cwd: Some(cwd),
        started,
        bytes,
        parent,
    })
}

/// What reading a rollout found besides its drafts.
#[derive(Debug, Default)]
pub struct Rollout {
    /// The session id its first line gives.
    pub session: Option<String>,
    /// Lines and items of types this baton does not know, left out.
    pub skipped: Skipped,
}

/// Normalise a rollout: (its session id, the drafts in file order).
pub fn read(path: &Path, bytes: &[u8]) -> Result<(Option<String>, Vec<Draft>)> {
    let mut out = Vec::new();
    let rollout = read_each(path, bytes, &mut |d| {
        out.push(d);
        Ok(())
    })?;
    Ok((rollout.session, out))
}

/// Normalise a rollout one line at a time, handing each draft to `each` (none with
/// nothing to keep, see [`events::keeps`]).
///
/// A user message is a prompt (`user` `message`, a turn) unless Codex wrote it itself:
/// a preamble is dropped, an injected message (an aborted turn, a shell command) is
/// `system`, and, in a rollout where Codex echoes typed input as `event_msg`
/// `user_message` lines, so is every user message no such line follows (the only
/// way to tell them apart where their text was redacted).
pub fn read_each(
    path: &Path,
    bytes: &[u8],
    each: &mut dyn FnMut(Draft) -> Result<()>,
) -> Result<Rollout> {
    if legacy::is_legacy(bytes) {
        return legacy::read_each(path, bytes, each);
    }
    let echoes = has_echoes(bytes);
    let mut out = Rollout::default();
    let mut agent: Option<String> = None;
    let mut pending: Option<Draft> = None;
    let mut emit = |mut d: Draft, agent: &Option<String>| -> Result<()> {
        if events::keeps(&d) {
            d.agent.clone_from(agent);
            each(d)?;
        }
        Ok(())
    };
    for item in json_lines(path, bytes) {
        let (line, raw) = item?;
        let fail = |e: LineError| line_error(path, line, &e);
        let entry: Line = parse_object(raw).map_err(fail)?;
        let time = entry.timestamp.or_empty().to_string();
        let payload: Item = object(entry.payload.0).map_err(fail)?;
        let kind = entry.kind.or_empty();
        let echo = kind == "event_msg" && payload.kind.as_str() == Some("user_message");
        // A user message waits for the line that tells whether Codex echoed it.
        if (echo || matches!(kind, "response_item" | "compacted"))
            && let Some(mut d) = pending.take()
        {
            if echoes && !echo {
                d.kind = Kind::System;
            }
            emit(d, &agent)?;
        }
        let draft = match kind {
            "session_meta" => {
                if out.session.is_none() {
                    out.session = payload.id.as_str().map(str::to_string);
                    let meta: MetaPayload = object(entry.payload.0).map_err(fail)?;
                    agent = subagents::Spawn::of(meta.source.0)
                        .map(|s| s.name(meta.agent_nickname.as_str(), meta.agent_role.as_str()));
                }
                None
            }
            "response_item" => match read_item(path, line, &payload, time, &mut out.skipped)? {
                items::Read::Draft(d) => Some(d),
                items::Read::User(d) => {
                    pending = Some(d);
                    None
                }
                items::Read::None => None,
            },
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
            other => unknown_line(path, line, other, &entry, time, &mut out.skipped)?,
        };
        if let Some(d) = draft {
            emit(d, &agent)?;
        }
    }
    // The last line: its echo may not be written yet (Codex writes it just after), so the
    // text alone decides.
    if let Some(d) = pending.take() {
        emit(d, &agent)?;
    }
    Ok(out)
}

/// A line of a type this baton does not know: kind `other` when its payload holds a
/// message, else counted in `skipped` and left out.
fn unknown_line(
    path: &Path,
    line: usize,
    kind: &str,
    entry: &Line,
    time: String,
    skipped: &mut Skipped,
) -> Result<Option<Draft>> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Payload<'a> {
        #[serde(borrow)]
        message: Raw<'a>,
    }
    let fail = |e: LineError| line_error(path, line, &e);
    let payload: Payload = object(entry.payload.0).map_err(fail)?;
    let text = text_of(payload.message.0, &Default::default()).map_err(fail)?;
    let name = if kind.is_empty() { "(no type)" } else { kind };
    if text.trim().is_empty() {
        skipped.add(name);
        return Ok(None);
    }
    Ok(Some(Draft {
        time,
        agent: None,
        role: Role::System,
        kind: Kind::Other,
        text,
        tool: None,
        call_id: None,
        harness_type: Some(name.to_string()),
    }))
}

/// Whether the rollout echoes typed input as `event_msg` `user_message` lines (Codex
/// has since the `session_meta` format; only lines that mention it are parsed).
fn has_echoes(bytes: &[u8]) -> bool {
    let finder = memchr::memmem::Finder::new(b"\"user_message\"");
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| finder.find(l).is_some())
        .any(|l| {
            parse_object::<Line>(l.trim_ascii()).is_ok_and(|line| {
                line.kind.as_str() == Some("event_msg")
                    && object::<Item>(line.payload.0)
                        .is_ok_and(|p| p.kind.as_str() == Some("user_message"))
            })
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
        let events = crate::events::finish("codex", "c-1", drafts);
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
    fn unknown_lines_and_items_are_skipped_or_kept_as_other_never_refused() {
        let jsonl = br#"{"type":"session_meta","payload":{"id":"c","cwd":"/w"}}
{"type":"response_item","payload":{"type":"teleport"}}
{"type":"world_state","payload":{"ordinal":3}}
{"type":"response_item","payload":{"type":"agent_message","content":[{"type":"output_text","text":"Beamed up"}]}}
{"type":"future_note","payload":{"message":"a note"}}
{"type":"response_item","payload":{"type":"teleport"}}
"#;
        let mut drafts = Vec::new();
        let rollout = read_each(Path::new("/r.jsonl"), jsonl, &mut |d| {
            drafts.push(d);
            Ok(())
        })
        .unwrap();
        assert_eq!(
            rollout.skipped.note("Codex").unwrap(),
            "skipped 3 Codex entries of types this baton does not know: teleport (2), world_state (1)"
        );
        let kept: Vec<_> = drafts
            .iter()
            .map(|d| (d.kind, d.harness_type.as_deref(), d.text.as_str()))
            .collect();
        assert_eq!(
            kept,
            vec![
                (Kind::Other, Some("agent_message"), "Beamed up"),
                (Kind::Other, Some("future_note"), "a note"),
            ]
        );
        // A line that is no JSON object is still refused, with file and line.
        let err = read(
            Path::new("/r.jsonl"),
            b"{\"type\":\"session_meta\",\"payload\":{}}\n[1]\n",
        )
        .unwrap_err();
        assert!(err.message.contains("/r.jsonl line 2"), "{}", err.message);
    }

    #[test]
    fn only_prompts_a_person_typed_are_user_messages() {
        // Codex echoes typed input as event_msg user_message: a user message it does not
        // echo is its own (here redacted, so its text cannot tell); <turn_aborted> is
        // injected whatever the file.
        let jsonl = br#"{"type":"session_meta","payload":{"id":"c","cwd":"/w"}}
{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"[REDACTED len=3019]"}]}}
{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Fix the test"}]}}
{"type":"turn_context","payload":{}}
{"type":"event_msg","payload":{"type":"user_message","message":"Fix the test"}}
{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<turn_aborted>\ninterrupted"}]}}
{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x"}]}}
{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Now the docs"}]}}
{"type":"event_msg","payload":{"type":"user_message","message":"Now the docs"}}
{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Just typed"}]}}
"#;
        let (_, drafts) = read(Path::new("r.jsonl"), jsonl).unwrap();
        let shape: Vec<_> = drafts
            .iter()
            .map(|d| (d.role, d.kind, d.text.as_str()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (Role::User, Kind::System, "[REDACTED len=3019]"),
                (Role::User, Kind::Message, "Fix the test"),
                (Role::User, Kind::System, "<turn_aborted>\ninterrupted"),
                (Role::User, Kind::Message, "Now the docs"),
                // The last line, its echo not written yet: the text decides.
                (Role::User, Kind::Message, "Just typed"),
            ]
        );
        // Without echoes (an older rollout), the text alone decides.
        let older: Vec<u8> = jsonl
            .split(|&b| b == b'\n')
            .filter(|l| !l.windows(12).any(|w| w == b"user_message"))
            .flat_map(|l| l.iter().copied().chain([b'\n']))
            .collect();
        let (_, drafts) = read(Path::new("r.jsonl"), &older).unwrap();
        let prompts = drafts.iter().filter(|d| d.kind == Kind::Message).count();
        assert_eq!(prompts, 4, "{drafts:?}");
    }

    #[test]
    fn a_sub_agent_thread_names_its_agent_on_every_event() {
        let jsonl = br#"{"type":"session_meta","payload":{"id":"child","cwd":"/w","source":{"subagent":{"thread_spawn":{"parent_thread_id":"parent","depth":1,"agent_nickname":"Anscombe","agent_role":"explorer"}}}}}
{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Review it"}]}}
{"type":"event_msg","payload":{"type":"user_message","message":"Review it"}}
{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"None."}]}}
"#;
        let (_, drafts) = read(Path::new("r.jsonl"), jsonl).unwrap();
        assert_eq!(drafts.len(), 2);
        assert!(
            drafts
                .iter()
                .all(|d| d.agent.as_deref() == Some("Anscombe (explorer)")),
            "{drafts:?}"
        );
        let review = br#"{"type":"session_meta","payload":{"id":"r","cwd":"/w","source":{"subagent":"review"}}}
{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}}
"#;
        let (_, drafts) = read(Path::new("r.jsonl"), review).unwrap();
        assert_eq!(drafts[0].agent.as_deref(), Some("review"));
    }
}
