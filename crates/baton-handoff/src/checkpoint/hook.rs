//! What a harness's hook hands `baton checkpoint --hook`: Claude Code's hook JSON on
//! stdin (`session_id`, `transcript_path`, `cwd`, `hook_event_name`, and per event
//! `trigger`, `reason` or `source`), or Codex's `notify` JSON, its last argument
//! (`type`, `thread-id`, `turn-id`, `cwd`, ...). Unknown fields are ignored; a field of
//! the wrong type is as good as absent.

use std::path::PathBuf;

use baton_error::{Error, Result};
use serde_json::Value;

/// The most hook input read: Codex's carries the turn's messages, which baton does not
/// need; anything longer is refused (logged), never read without bound.
pub const MAX_INPUT: u64 = 4 << 20;

/// The harness whose hook called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookHarness {
    ClaudeCode,
    Codex,
}

impl HookHarness {
    pub fn parse(name: &str) -> Result<HookHarness> {
        match name {
            "claude-code" => Ok(HookHarness::ClaudeCode),
            "codex" => Ok(HookHarness::Codex),
            other => Err(Error::usage(format!(
                "--hook {}: not a harness baton has hooks for",
                other.escape_debug()
            ))
            .with_hint("give --hook claude-code or --hook codex")),
        }
    }

    /// The harness's name as `--hook` and `--transcript` spell it.
    pub fn name(self) -> &'static str {
        match self {
            HookHarness::ClaudeCode => "claude-code",
            HookHarness::Codex => "codex",
        }
    }
}

/// One hook call, as far as baton reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookEvent {
    pub harness: HookHarness,
    /// `PreCompact`, `SessionEnd`, `Stop`, `SessionStart` (Claude Code's
    /// `hook_event_name`), `agent-turn-complete` (Codex's `type`); `unknown` when absent.
    pub event: String,
    /// Claude Code's `session_id`, Codex's `thread-id`.
    pub session: Option<String>,
    /// Claude Code's `transcript_path`.
    pub transcript_path: Option<PathBuf>,
    /// The session's working directory: the workspace checkpointed.
    pub cwd: Option<PathBuf>,
    /// PreCompact's `trigger` (manual, auto), SessionEnd's `reason`, SessionStart's
    /// `source` (startup, resume, clear, compact).
    pub detail: Option<String>,
}

/// Parse the hook input `raw` of `harness`.
pub fn parse(harness: HookHarness, raw: &[u8]) -> Result<HookEvent> {
    if raw.len() as u64 > MAX_INPUT {
        return Err(Error::usage(format!(
            "the {} hook input is {} bytes, more than the {MAX_INPUT} baton reads",
            harness.name(),
            raw.len()
        ))
        .with_hint("check the hook command line in the harness's configuration"));
    }
    let value: Value = serde_json::from_slice(raw).map_err(|e| {
        Error::usage(format!(
            "the {} hook input is not JSON: {e}",
            harness.name()
        ))
        .with_hint(match harness {
            HookHarness::ClaudeCode => "Claude Code hooks pipe a JSON object on stdin",
            HookHarness::Codex => "Codex's notify passes one JSON argument, last",
        })
    })?;
    if !value.is_object() {
        return Err(Error::usage(format!(
            "the {} hook input is JSON but not an object",
            harness.name()
        ))
        .with_hint("check the hook command line in the harness's configuration"));
    }
    let text = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let path = |key: &str| text(key).map(|t| expand_home(&t));
    Ok(match harness {
        HookHarness::ClaudeCode => HookEvent {
            harness,
            event: text("hook_event_name").unwrap_or_else(|| "unknown".into()),
            session: text("session_id"),
            transcript_path: path("transcript_path"),
            cwd: path("cwd"),
            detail: text("trigger")
                .or_else(|| text("reason"))
                .or_else(|| text("source")),
        },
        HookHarness::Codex => HookEvent {
            harness,
            event: text("type").unwrap_or_else(|| "unknown".into()),
            session: text("thread-id"),
            transcript_path: None,
            cwd: path("cwd"),
            detail: None,
        },
    })
}

/// `~/REST` as `$HOME/REST` (some documented examples write the transcript path so); any
/// other text as it is.
fn expand_home(text: &str) -> PathBuf {
    match (text.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) if !home.is_empty() => PathBuf::from(home).join(rest),
        _ => PathBuf::from(text),
    }
}

impl HookEvent {
    /// The bundle's note: "checkpoint: PreCompact (auto) from claude-code".
    pub fn note(&self) -> String {
        let event: String = self
            .event
            .chars()
            .filter(|c| !c.is_control())
            .take(64)
            .collect();
        match &self.detail {
            Some(detail) => {
                let detail: String = detail
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(64)
                    .collect();
                format!(
                    "checkpoint: {event} ({detail}) from {}",
                    self.harness.name()
                )
            }
            None => format!("checkpoint: {event} from {}", self.harness.name()),
        }
    }

    /// A Claude Code `SessionStart`: answered with the workspace's latest kickoff, not
    /// with a checkpoint.
    pub fn is_session_start(&self) -> bool {
        self.harness == HookHarness::ClaudeCode && self.event == "SessionStart"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_precompact_from_the_docs() {
        let raw = br#"{"session_id":"abc123","transcript_path":"/home/u/.claude/projects/-w/abc123.jsonl","cwd":"/w","permission_mode":"default","hook_event_name":"PreCompact","trigger":"auto","custom_instructions":""}"#;
        let event = parse(HookHarness::ClaudeCode, raw).unwrap();
        assert_eq!(event.event, "PreCompact");
        assert_eq!(event.session.as_deref(), Some("abc123"));
        assert_eq!(event.cwd, Some(PathBuf::from("/w")));
        assert_eq!(
            event.note(),
            "checkpoint: PreCompact (auto) from claude-code"
        );
        assert!(!event.is_session_start());
    }

    #[test]
    fn codex_notify_from_the_docs() {
        let raw = br#"{"type":"agent-turn-complete","thread-id":"b5f6c1c2-1111-2222-3333-444455556666","turn-id":"12345","cwd":"/w","input-messages":["Rename `foo` to `bar`."],"last-assistant-message":"Rename complete."}"#;
        let event = parse(HookHarness::Codex, raw).unwrap();
        assert_eq!(event.event, "agent-turn-complete");
        assert_eq!(
            event.session.as_deref(),
            Some("b5f6c1c2-1111-2222-3333-444455556666")
        );
        assert_eq!(event.note(), "checkpoint: agent-turn-complete from codex");
    }

    #[test]
    fn a_home_relative_transcript_path_is_expanded() {
        let raw = br#"{"transcript_path":"~/.claude/projects/x/s.jsonl","hook_event_name":"Stop"}"#;
        let event = parse(HookHarness::ClaudeCode, raw).unwrap();
        let path = event.transcript_path.unwrap();
        match std::env::var_os("HOME") {
            Some(home) if !home.is_empty() => {
                assert_eq!(path, PathBuf::from(home).join(".claude/projects/x/s.jsonl"));
            }
            _ => assert_eq!(path, PathBuf::from("~/.claude/projects/x/s.jsonl")),
        }
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        for raw in [&b"not json"[..], b"[1,2]", b""] {
            let err = parse(HookHarness::ClaudeCode, raw).unwrap_err();
            assert_eq!(err.kind, baton_error::ErrorKind::Usage, "{raw:?}");
        }
        assert!(HookHarness::parse("gemini").is_err());
    }

    #[test]
    fn wrong_types_are_absent_and_control_characters_leave_the_note() {
        let raw = br#"{"hook_event_name":"Stop\u001b[2J","session_id":7,"cwd":["x"]}"#;
        let event = parse(HookHarness::ClaudeCode, raw).unwrap();
        assert_eq!(event.session, None);
        assert_eq!(event.cwd, None);
        assert_eq!(event.note(), "checkpoint: Stop[2J from claude-code");
    }
}
