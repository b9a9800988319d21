//! Codex response items (a rollout's `response_item` payloads, and the bare lines of a
//! legacy rollout) read into drafts: messages, tool calls and results, reasoning
//! summaries, and items of a type this baton does not know (kind `other`).

use std::path::Path;

use serde::Deserialize;

use super::super::json::{Budget, Field, LineError, Raw, elements, object, text_of};
use super::super::line_error;
use super::super::skipped::Skipped;
use crate::events::{Draft, Kind, Role};
use baton_error::Result;

/// Text Codex puts in user messages itself, large and repeated in every rollout: the
/// environment and instruction preambles. Dropped.
const PREAMBLES: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
];

/// Other user messages Codex injects (an interrupted turn, a `!cmd` shell command and its
/// output, a skill's text, plugin hints): kept as `system`, never a turn. The markers
/// Codex itself uses to tell them from typed input (`is_contextual_user_message` in
/// codex-rs).
const INJECTED: &[&str] = &[
    "<turn_aborted>",
    "<skills_instructions>",
    "<user_shell_command>",
    "<skill>",
    "<recommended_plugins>",
    "<subagent_notification>",
    "<collaboration_mode>",
];

/// `response_item` payloads that hold nothing to search or read back.
const SILENT_ITEMS: &[&str] = &["ghost_snapshot", "compaction"];

/// A response item: the fields baton reads, the rest skipped unbuilt.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Item<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Field<'a>,
    #[serde(borrow)]
    pub id: Field<'a>,
    #[serde(borrow)]
    pub message: Field<'a>,
    #[serde(borrow)]
    role: Field<'a>,
    #[serde(borrow)]
    content: Raw<'a>,
    #[serde(borrow)]
    text: Raw<'a>,
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

/// What one response item became.
pub(super) enum Read {
    Draft(Draft),
    /// A user message as the harness recorded it: typed, or injected (see [`typed`]).
    User(Draft),
    /// Nothing to keep.
    None,
}

/// Whether a user message's text is one a person (or an exec caller) gave, not one
/// Codex wrote itself: `Some(false)` for injected text kept as `system`, `None` for a
/// preamble dropped.
pub(super) fn typed(text: &str) -> Option<bool> {
    let start = text.trim_start();
    if PREAMBLES.iter().any(|p| start.starts_with(p)) {
        return None;
    }
    Some(!INJECTED.iter().any(|p| start.starts_with(p)))
}

/// Read one response item at `line` of `path`; an item of a type this baton does not
/// know is kind `other` when it carries text, else counted in `skipped`.
pub(super) fn read_item(
    path: &Path,
    line: usize,
    item: &Item,
    time: String,
    skipped: &mut Skipped,
) -> Result<Read> {
    let budget = &Budget::default();
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
    let kind = item.kind.or_empty();
    Ok(Read::Draft(match kind {
        "message" => {
            let text = text_of(item.content.0, budget).map_err(fail)?;
            match item.role.or_empty() {
                "user" => {
                    return Ok(match typed(&text) {
                        None => Read::None,
                        Some(true) => {
                            Read::User(draft(Role::User, Kind::Message, text, None, None))
                        }
                        Some(false) => {
                            Read::Draft(draft(Role::User, Kind::System, text, None, None))
                        }
                    });
                }
                "assistant" => draft(Role::Assistant, Kind::Message, text, None, None),
                // developer/system messages are the harness's own instructions.
                "developer" | "system" => return Ok(Read::None),
                other => Draft {
                    harness_type: Some(format!("message:{other}")),
                    ..draft(Role::System, Kind::Other, text, None, None)
                },
            }
        }
        "function_call" => draft(
            Role::Assistant,
            Kind::ToolCall,
            item.arguments.or_empty().to_string(),
            item.name.as_str(),
            call_id,
        ),
        "custom_tool_call" => draft(
            Role::Assistant,
            Kind::ToolCall,
            item.input.or_empty().to_string(),
            item.name.as_str(),
            call_id,
        ),
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
            draft(
                Role::Assistant,
                Kind::ToolCall,
                command,
                Some("local_shell"),
                call_id,
            )
        }
        "web_search_call" => {
            let action: Action = object(item.action.0).map_err(fail)?;
            let query = match action.query.0 {
                Some(raw) => text_of(Some(raw), budget).map_err(fail)?,
                None => String::new(),
            };
            draft(
                Role::Assistant,
                Kind::ToolCall,
                query,
                Some("web_search"),
                call_id,
            )
        }
        "function_call_output" | "custom_tool_call_output" => {
            let output = output_text(item.output, budget).map_err(fail)?;
            draft(Role::Tool, Kind::ToolResult, output, None, call_id)
        }
        "reasoning" => {
            // Only the readable summary: encrypted_content is never kept.
            let summary = text_of(item.summary.0, budget).map_err(fail)?;
            if summary.is_empty() {
                return Ok(Read::None);
            }
            draft(Role::Assistant, Kind::Reasoning, summary, None, None)
        }
        other if SILENT_ITEMS.contains(&other) => return Ok(Read::None),
        other => {
            let text = any_text(item, budget).map_err(fail)?;
            if text.trim().is_empty() {
                skipped.add(if other.is_empty() { "(no type)" } else { other });
                return Ok(Read::None);
            }
            Draft {
                harness_type: Some(other.to_string()),
                ..draft(
                    Role::Assistant,
                    Kind::Other,
                    text,
                    item.name.as_str(),
                    call_id,
                )
            }
        }
    }))
}

/// A tool output: a string, or `{content}` (text blocks or a string).
fn output_text(output: Raw, budget: &Budget) -> std::result::Result<String, LineError> {
    match output.0 {
        Some(raw) if raw.get().starts_with('{') => {
            let output: Output = object(Some(raw))?;
            text_of(output.content.0, budget)
        }
        other => text_of(other, budget),
    }
}

/// The text an item of an unknown type carries, in the fields Codex items keep text in
/// (never `encrypted_content`, which this does not read).
fn any_text(item: &Item, budget: &Budget) -> std::result::Result<String, LineError> {
    let mut parts = Vec::new();
    for raw in [item.content, item.text, item.summary] {
        let text = text_of(raw.0, budget)?;
        if !text.trim().is_empty() {
            parts.push(text);
        }
    }
    for field in [&item.message, &item.arguments, &item.input] {
        if let Some(text) = field.as_str().filter(|t| !t.trim().is_empty()) {
            parts.push(text.to_string());
        }
    }
    let output = output_text(item.output, budget)?;
    if !output.trim().is_empty() {
        parts.push(output);
    }
    Ok(parts.join("\n\n"))
}
