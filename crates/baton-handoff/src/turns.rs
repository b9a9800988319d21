//! Recent turns for the kickoff: the last few turns of the outgoing session (a turn is a
//! prompt a person typed and what followed it; what came before the first prompt is the
//! session's opening, shown but not counted), rendered compactly within a byte budget,
//! newest kept first, with a provenance line of at most a quarter of the budget.

use std::collections::VecDeque;

use super::events::{Event, Kind, Role, Source};
use super::kickoff::{CUT, MAX_PATH_CHARS, shorten_path};

/// Turns shown at most.
pub const MAX_TURNS: usize = 6;
/// Bytes the section takes at most, and never less than this floor when it is shown.
pub const MAX_BYTES: usize = 8192;
pub const MIN_BYTES: usize = 256;
/// One message keeps at most this many bytes; a tool line at most `TOOL_LINE`.
const MESSAGE_BYTES: usize = 1200;
const TOOL_LINE: usize = 160;

/// The section's text, or `None` when the transcript holds no conversation.
pub fn render(events: &[Event], budget_bytes: usize, search_rev: &str) -> Option<String> {
    let mut recent = Recent::default();
    for e in events {
        recent.push(e);
    }
    recent.render(budget_bytes, search_rev)
}

/// What [`Recent::render`] needs of a transcript, taken from its events one at a time:
/// the first event's source, how many turns there are, and the last [`MAX_TURNS`] turns,
/// each rendered and kept to a little over [`MAX_BYTES`] (never more is shown). Memory
/// does not grow with the transcript.
#[derive(Default)]
pub struct Recent {
    first: Option<Source>,
    total: usize,
    /// What came before the first prompt (a slash command's work, a session resumed).
    opening: Option<Turn>,
    turns: VecDeque<Turn>,
}

/// One turn (a user message and what followed it), rendered.
#[derive(Default)]
struct Turn {
    /// Its lines, stopped once longer than [`MAX_BYTES`] (the section cuts it there).
    text: String,
    /// The last time recorded in it ("" for none).
    last_time: String,
}

impl Recent {
    /// Take the next event of the transcript. Reasoning and the harness's own notes
    /// (among them the user entries the harness wrote: command output, notifications,
    /// compact summaries) are left out of the turns; what was said and done stays; each
    /// prompt a person typed (a user message of no sub-agent) starts a turn.
    pub fn push(&mut self, e: &Event) {
        if self.first.is_none() {
            self.first = Some(e.source.clone());
        }
        if matches!(e.kind, Kind::Reasoning | Kind::System) {
            return;
        }
        let starts = e.role == Role::User && e.kind == Kind::Message && e.source.agent.is_none();
        if starts {
            self.total += 1;
            if self.turns.len() == MAX_TURNS {
                self.turns.pop_front();
            }
            self.turns.push_back(Turn::default());
        }
        let turn = match self.turns.back_mut() {
            Some(turn) => turn,
            None => self.opening.get_or_insert_with(|| Turn {
                text: "(before the first prompt)\n".to_string(),
                last_time: String::new(),
            }),
        };
        if turn.text.len() <= MAX_BYTES {
            turn.text.push_str(&render_event(e));
        }
        if !e.time.is_empty() {
            turn.last_time.clone_from(&e.time);
        }
    }

    /// The section's text, or `None` when the transcript holds no conversation.
    pub fn render(&self, budget_bytes: usize, search_rev: &str) -> Option<String> {
        let budget = budget_bytes.clamp(MIN_BYTES, MAX_BYTES);
        let first = self.first.as_ref()?;
        // The opening is shown while the first turn is.
        let opening = self
            .opening
            .as_ref()
            .filter(|_| self.total == self.turns.len());
        let shown: Vec<&Turn> = opening.into_iter().chain(&self.turns).collect();
        let last_time = shown.last()?.last_time.as_str();
        let ending = if last_time.is_empty() {
            String::new()
        } else {
            format!(", ending {last_time}")
        };
        let mut provenance = if self.total == 0 {
            format!(
                "No prompt typed in {} session {}{ending}; what it holds; the rest: baton search {search_rev} QUERY\n",
                first.harness, first.session,
            )
        } else {
            format!(
                "Last {} of {} turns of {} session {}{ending}; the rest: baton search {search_rev} QUERY\n",
                self.turns.len(),
                self.total,
                first.harness,
                first.session,
            )
        };
        provenance = cut_bytes(&provenance, budget / 4);

        // Newest turn first into the budget, then printed in session order.
        let mut room = budget.saturating_sub(provenance.len());
        let mut kept: Vec<String> = Vec::new();
        for turn in shown.iter().rev() {
            let text = &turn.text;
            if text.len() <= room {
                room -= text.len();
                kept.push(text.clone());
            } else {
                if room > 64 {
                    kept.push(format!("{}\n", cut_bytes(text, room - 1).trim_end()));
                }
                break;
            }
        }
        if kept.is_empty() {
            return None;
        }
        kept.reverse();
        Some(format!("{provenance}{}", kept.concat()))
    }
}

/// One event's line of its turn.
fn render_event(e: &Event) -> String {
    let agent = e
        .source
        .agent
        .as_deref()
        .map(|a| format!("[sub-agent {a}] "))
        .unwrap_or_default();
    let tool = e.tool.as_deref().unwrap_or("tool");
    let line = match (e.role, e.kind) {
        (_, Kind::Other) => format!(
            "  - {agent}{}: {}",
            clean(e.harness_type.as_deref().unwrap_or("other"), TOOL_LINE),
            clean(&e.text, TOOL_LINE)
        ),
        (Role::User, _) => format!("- user: {agent}{}", clean(&e.text, MESSAGE_BYTES)),
        (_, Kind::ToolCall) => format!("  - {agent}call {tool}: {}", clean(&e.text, TOOL_LINE)),
        (_, Kind::ToolResult) => {
            format!("  - {agent}result {tool}: {}", clean(&e.text, TOOL_LINE))
        }
        _ => format!("- assistant: {agent}{}", clean(&e.text, MESSAGE_BYTES)),
    };
    format!("{line}\n")
}

/// One line: control characters and line breaks become spaces, runs of space fold, long
/// paths are cut in the middle, and the whole is cut to `max` bytes. Built only as far as
/// the cut, whatever the text's length.
fn clean(text: &str, max: usize) -> String {
    let mut out = String::new();
    let words = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty());
    for w in words {
        if out.len() > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        if w.contains('/') && w.chars().count() > MAX_PATH_CHARS {
            out.push_str(&shorten_path(w, MAX_PATH_CHARS));
        } else {
            // No more of a long word than the cut can show.
            let mut end = (max + 1).saturating_sub(out.len()).min(w.len());
            while !w.is_char_boundary(end) {
                end += 1;
            }
            out.push_str(&w[..end]);
        }
    }
    cut_bytes(&out, max)
}

/// At most `max` bytes, cut on a character boundary and marked.
fn cut_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(CUT.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Draft, finish};

    fn draft(role: Role, kind: Kind, text: &str) -> Draft {
        Draft {
            time: "2026-01-01T00:00:00Z".into(),
            agent: None,
            role,
            kind,
            text: text.into(),
            tool: (kind == Kind::ToolCall).then(|| "Bash".to_string()),
            call_id: None,
            harness_type: None,
        }
    }

    fn session(turns: usize, words: usize) -> Vec<Event> {
        let mut drafts = Vec::new();
        for i in 0..turns {
            drafts.push(draft(Role::User, Kind::Message, &format!("question {i}")));
            drafts.push(draft(Role::Assistant, Kind::Reasoning, "thinking"));
            drafts.push(draft(Role::Assistant, Kind::ToolCall, "cargo test"));
            drafts.push(draft(
                Role::Assistant,
                Kind::Message,
                &"answer ".repeat(words),
            ));
        }
        finish("claude-code", "s1", drafts)
    }

    #[test]
    fn the_last_six_turns_in_order_without_reasoning() {
        let text = render(&session(9, 3), MAX_BYTES, "abcd1234").unwrap();
        assert!(text.starts_with("Last 6 of 9 turns of claude-code session s1"));
        assert!(!text.contains("question 2") && text.contains("question 3"));
        assert!(text.find("question 3") < text.find("question 8"));
        assert!(!text.contains("thinking"));
        assert!(text.contains("  - call Bash: cargo test"));
    }

    #[test]
    fn the_budget_holds_keeps_the_newest_and_has_a_floor() {
        let events = session(6, 400);
        for budget in [0, 100, 256, 1000, 3000, 8192, 100_000] {
            let text = render(&events, budget, "abcd1234").unwrap();
            let limit = budget.clamp(MIN_BYTES, MAX_BYTES);
            assert!(text.len() <= limit, "{budget}: {} bytes", text.len());
            assert!(
                text.contains("question 5"),
                "{budget}: the newest turn is kept"
            );
        }
    }

    #[test]
    fn long_paths_are_cut_in_the_middle_and_controls_removed() {
        let path = format!("/src/{}/main.rs", "deep/".repeat(30));
        let events = finish(
            "codex",
            "c",
            vec![draft(
                Role::User,
                Kind::Message,
                &format!("look at {path}\x1b[2J now"),
            )],
        );
        let text = render(&events, MAX_BYTES, "r").unwrap();
        assert!(text.contains(CUT) && text.contains("main.rs") && !text.contains('\x1b'));
    }

    #[test]
    fn a_turn_begins_only_at_a_prompt_a_person_typed() {
        let mut sub = draft(
            Role::User,
            Kind::Message,
            "the parent's prompt to a sub-agent",
        );
        sub.agent = Some("a1".into());
        let events = finish(
            "claude-code",
            "s1",
            vec![
                draft(
                    Role::User,
                    Kind::System,
                    "<command-name>/review</command-name>",
                ),
                draft(
                    Role::Assistant,
                    Kind::Message,
                    "reviewing as the command asks",
                ),
                draft(Role::User, Kind::Message, "first prompt"),
                sub,
                draft(Role::Tool, Kind::ToolResult, "tool output"),
                draft(
                    Role::User,
                    Kind::System,
                    "<task-notification>done</task-notification>",
                ),
                draft(
                    Role::User,
                    Kind::System,
                    "This session is being continued from ...",
                ),
                draft(Role::User, Kind::Message, "second prompt"),
                draft(Role::Assistant, Kind::Message, "the last answer"),
            ],
        );
        let text = render(&events, MAX_BYTES, "r").unwrap();
        assert!(
            text.starts_with("Last 2 of 2 turns of claude-code session s1"),
            "{text}"
        );
        assert!(
            text.contains("(before the first prompt)\n- assistant: reviewing"),
            "{text}"
        );
        assert!(
            !text.contains("task-notification") && !text.contains("continued"),
            "{text}"
        );
        // Past the turns shown, the opening goes with the first turn.
        let mut drafts = vec![draft(Role::Assistant, Kind::Message, "opening words")];
        for i in 0..8 {
            drafts.push(draft(Role::User, Kind::Message, &format!("prompt {i}")));
        }
        let text = render(&finish("c", "s", drafts), MAX_BYTES, "r").unwrap();
        assert!(text.starts_with("Last 6 of 8 turns"), "{text}");
        assert!(!text.contains("opening words"), "{text}");
        // No prompt at all: what the session holds, and no turn counted.
        let events = finish(
            "codex",
            "s2",
            vec![draft(
                Role::Assistant,
                Kind::Message,
                "work without a prompt",
            )],
        );
        let text = render(&events, MAX_BYTES, "r").unwrap();
        assert!(
            text.starts_with("No prompt typed in codex session s2"),
            "{text}"
        );
        assert!(text.contains("work without a prompt"), "{text}");
    }
}
