//! The content blocks of one Claude Code message: text, reasoning, tool calls and results
//! normalised; a block of a type this baton does not know kept as an event of kind `other`
//! (store-format/TRANSCRIPT.md, "Unknown entries").

use std::path::Path;

use serde::Deserialize;

use super::super::json::{self, Budget, Field, LineError, Raw, elements, object, text_of};
use super::super::line_error;
use crate::events::{Draft, Kind, Role};
use baton_error::Result;

/// One content block of a message.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Block<'a> {
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

/// How a message's text is to be taken: said by its author, or written by the harness in
/// the user's name (never the start of a turn).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Voice {
    Said,
    Injected,
}

/// User texts the harness writes itself: slash-command echoes and output, task
/// notifications, interruption marks, the summary that continues a compacted session.
const INJECTED: &[&str] = &[
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<task-notification>",
    "<system-reminder>",
    "[Request interrupted",
    "This session is being continued from a previous conversation",
];

/// Whether a user text is one the harness wrote (see [`INJECTED`]).
pub(super) fn injected(text: &str) -> bool {
    let text = text.trim_start();
    INJECTED.iter().any(|p| text.starts_with(p))
}

/// The drafts of a message's content blocks, in order. `voice` is the message's; a user
/// text that [`injected`] names, or any text of a user message that carries a tool
/// result, is the harness's (kind `system`).
pub(super) fn drafts(
    path: &Path,
    line: usize,
    blocks: &serde_json::value::RawValue,
    role: Role,
    voice: Voice,
    budget: &Budget,
    draft: &dyn Fn(Role, Kind, String) -> Draft,
) -> Result<Vec<Draft>> {
    let fail = |e: LineError| line_error(path, line, &e);
    let blocks: Vec<Block> = elements(blocks, budget)
        .map_err(fail)?
        .unwrap_or_default()
        .into_iter()
        .map(|b| object(Some(b)))
        .collect::<std::result::Result<_, _>>()
        .map_err(fail)?;
    let with_result = blocks
        .iter()
        .any(|b| b.kind.as_str() == Some("tool_result"));
    let harness_voice = role == Role::User && (voice == Voice::Injected || with_result);
    let mut out = Vec::new();
    // Adjacent text blocks, joined where a secret runs across them.
    let mut texts = Vec::new();
    for block in &blocks {
        if block.kind.as_str() == Some("text") {
            let text = block.text.or_empty().to_string();
            let kind = if harness_voice || (role == Role::User && injected(&text)) {
                Kind::System
            } else {
                Kind::Message
            };
            texts.push(draft(role, kind, text));
            continue;
        }
        out.extend(join_split_secrets(std::mem::take(&mut texts)));
        out.push(read_block(path, line, block, role, budget, draft)?);
    }
    out.extend(join_split_secrets(texts));
    Ok(out)
}

/// The drafts of adjacent text blocks of one message, each kept apart but where a secret
/// runs from one block into the next: those are one draft, their texts joined as
/// written, so that the scan of the transcript sees the secret whole (a key cut between
/// two blocks otherwise kept the part in the second block).
fn join_split_secrets(run: Vec<Draft>) -> Vec<Draft> {
    let texts: Vec<&str> = run.iter().map(|d| d.text.as_str()).collect();
    let across = crate::secrets::secret_across(&texts);
    let mut out: Vec<Draft> = Vec::with_capacity(run.len());
    for (i, draft) in run.into_iter().enumerate() {
        match out.last_mut() {
            Some(last) if i > 0 && across[i - 1] => last.text.push_str(&draft.text),
            _ => out.push(draft),
        }
    }
    out
}

/// The draft of a block other than `text`.
fn read_block(
    path: &Path,
    line: usize,
    block: &Block,
    role: Role,
    budget: &Budget,
    draft: &dyn Fn(Role, Kind, String) -> Draft,
) -> Result<Draft> {
    let fail = |e: LineError| line_error(path, line, &e);
    let input = |raw: Raw| -> Result<String> {
        Ok(match raw.0 {
            Some(raw) => json::value(raw, budget).map_err(fail)?.to_string(),
            None => String::new(),
        })
    };
    Ok(match block.kind.or_empty() {
        "thinking" => draft(
            Role::Assistant,
            Kind::Reasoning,
            block.thinking.or_empty().to_string(),
        ),
        "tool_use" => {
            let mut d = draft(Role::Assistant, Kind::ToolCall, input(Raw(block.input.0))?);
            d.tool = block.name.as_str().map(str::to_string);
            d.call_id = block.id.as_str().map(str::to_string);
            d
        }
        "tool_result" => {
            let text = text_of(block.content.0, budget).map_err(fail)?;
            let mut d = draft(Role::Tool, Kind::ToolResult, text);
            d.call_id = block.tool_use_id.as_str().map(str::to_string);
            d
        }
        // Anything else (server tools and their results, images, documents, encrypted
        // reasoning, whatever a later release adds): its type, and whatever text it holds
        // in the fields Claude Code's blocks use for text. Never an encrypted or binary
        // payload: those are in other fields.
        other => {
            let text = match (block.text.as_str(), block.content.0) {
                (Some(text), _) => text.to_string(),
                (None, Some(content)) if content.get().starts_with(['"', '[']) => {
                    text_of(Some(content), budget).map_err(fail)?
                }
                _ => input(Raw(block.input.0))?,
            };
            let mut d = draft(role, Kind::Other, text);
            d.harness_type = Some(other.to_string());
            d
        }
    })
}
