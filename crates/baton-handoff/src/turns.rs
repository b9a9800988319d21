//! Recent turns for the kickoff: the last few turns of the outgoing session (a turn is a
//! prompt a person typed and what followed it; what came before the first prompt is the
//! session's opening, shown but not counted), rendered compactly within a byte budget,
//! newest kept first, with a provenance line of at most a quarter of the budget. Read from
//! a stored transcript, only the lines that may start a turn are parsed as they come; the
//! others wait, unparsed, until it is known whether their turn is one of those shown.

use std::collections::VecDeque;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::events::{Event, Kind, Role, Source};
use super::kickoff::{CUT, MAX_PATH_CHARS, shorten_path};
use super::transcript::parse_event;

/// Turns shown at most.
pub const MAX_TURNS: usize = 6;
/// Bytes the section takes at most, and never less than this floor when it is shown.
pub const MAX_BYTES: usize = 8192;
pub const MIN_BYTES: usize = 256;
/// One message keeps at most this many bytes; a tool line at most `TOOL_LINE`.
const MESSAGE_BYTES: usize = 1200;
const TOOL_LINE: usize = 160;
/// Unparsed lines a turn holds at most; past this its lines are parsed as they come, so
/// memory stays bounded whatever the tool output.
const PENDING_BYTES: usize = 1 << 20;

/// A line with neither of these cannot hold a user message: its role would be the JSON
/// string `"user"`, written as such or with an escape.
static USER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"user\""));
static ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));

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
/// each rendered and kept to a little over [`MAX_BYTES`] (never more is shown), or held
/// as lines still to parse ([`Recent::push_line`]). Memory does not grow with the
/// transcript.
#[derive(Default)]
pub struct Recent {
    first: Option<Source>,
    total: usize,
    /// What came before the first prompt (a slash command's work, a session resumed).
    opening: Option<Turn>,
    /// Lines before the first prompt, not parsed yet.
    opening_lines: Vec<u8>,
    turns: VecDeque<Turn>,
}

/// One turn (a user message and what followed it), rendered.
#[derive(Default)]
struct Turn {
    /// Its lines, stopped once longer than [`MAX_BYTES`] (the section cuts it there).
    text: String,
    /// The last time recorded in it ("" for none).
    last_time: String,
    /// Transcript lines of it after those in `text`, not parsed yet, each ended by `\n`.
    pending: Vec<u8>,
}

impl Turn {
    /// Add an event that starts no turn; reasoning and the harness's notes are left out.
    fn add(&mut self, e: &Event) {
        if matches!(e.kind, Kind::Reasoning | Kind::System) {
            return;
        }
        if self.text.len() <= MAX_BYTES {
            self.text.push_str(&render_event(e));
        }
        if !e.time.is_empty() {
            self.last_time.clone_from(&e.time);
        }
    }

    /// Parse and add the lines held.
    fn settle(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for line in pending.split(|b| *b == b'\n') {
            if let Some(e) = parse_event(line) {
                self.add(&e);
            }
        }
    }
}

/// Hold `line` in `held`, unless that would hold [`PENDING_BYTES`] or more (`false`).
fn hold(held: &mut Vec<u8>, line: &[u8]) -> bool {
    if held.len() + line.len() >= PENDING_BYTES {
        return false;
    }
    held.extend_from_slice(line);
    held.push(b'\n');
    true
}

/// Whether a transcript event starts a turn: a prompt a person typed.
fn starts_turn(e: &Event) -> bool {
    e.role == Role::User && e.kind == Kind::Message && e.source.agent.is_none()
}

/// The opening's first line.
fn opening() -> Turn {
    Turn {
        text: "(before the first prompt)\n".to_string(),
        ..Turn::default()
    }
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
        if starts_turn(e) {
            self.total += 1;
            if self.turns.len() == MAX_TURNS {
                self.turns.pop_front();
            }
            self.turns.push_back(Turn::default());
            if self.total > MAX_TURNS {
                // The opening is shown only with the first turn.
                self.opening = None;
                self.opening_lines = Vec::new();
            }
        }
        match self.turns.back_mut() {
            Some(turn) => turn.add(e),
            None => self.opening.get_or_insert_with(opening).add(e),
        }
    }

    /// Take the next line of a normalised transcript (`transcript.jsonl`): the same as
    /// [`Recent::push`] of its event, if it is one, but only a line that may start a turn
    /// is parsed now; any other is held with its turn and parsed only if that turn is
    /// still shown at the end (most of a long session never is).
    pub fn push_line(&mut self, line: &[u8]) {
        let line = line.trim_ascii();
        if line.is_empty() {
            return;
        }
        if self.first.is_none() || USER.find(line).is_some() || ESCAPE.find(line).is_some() {
            let Some(e) = parse_event(line) else {
                return;
            };
            if self.first.is_none() || starts_turn(&e) {
                // Nothing is held yet before the first event; a new turn holds nothing.
                self.push(&e);
                return;
            }
        }
        match self.turns.back_mut() {
            Some(turn) => {
                if !hold(&mut turn.pending, line) {
                    // Too much held: what is held and this line are parsed now, in order.
                    turn.settle();
                    if let Some(e) = parse_event(line) {
                        turn.add(&e);
                    }
                }
            }
            None => {
                if !hold(&mut self.opening_lines, line) {
                    self.settle_opening();
                    if let Some(e) = parse_event(line) {
                        self.push(&e);
                    }
                }
            }
        }
    }

    /// Parse and add the lines held before the first prompt.
    fn settle_opening(&mut self) {
        let held = std::mem::take(&mut self.opening_lines);
        for line in held.split(|b| *b == b'\n') {
            if let Some(e) = parse_event(line)
                && !matches!(e.kind, Kind::Reasoning | Kind::System)
            {
                self.opening.get_or_insert_with(opening).add(&e);
            }
        }
    }

    /// The section's text, or `None` when the transcript holds no conversation.
    pub fn render(&mut self, budget_bytes: usize, search_rev: &str) -> Option<String> {
        self.settle_opening();
        for turn in &mut self.turns {
            turn.settle();
        }
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

    /// The section from the transcript's lines, as resume reads them.
    fn from_lines(jsonl: &[u8], budget: usize) -> Option<String> {
        let mut recent = Recent::default();
        for line in jsonl.split(|b| *b == b'\n') {
            recent.push_line(line);
        }
        recent.render(budget, "r")
    }

    #[test]
    fn read_line_by_line_it_is_the_section_of_the_events() {
        let mut sub = draft(Role::User, Kind::Message, "to the sub-agent");
        sub.agent = Some("a1".into());
        let huge = "x".repeat(PENDING_BYTES / 3);
        let shapes: Vec<Vec<Draft>> = vec![
            // Openings: a command, reasoning and words with an escape; only reasoning; none.
            vec![
                draft(
                    Role::User,
                    Kind::System,
                    "<command-name>/review</command-name>",
                ),
                draft(Role::Assistant, Kind::Reasoning, "hmm"),
                draft(Role::Assistant, Kind::Message, "opening \u{1b}[1m words"),
            ],
            vec![draft(Role::Assistant, Kind::Reasoning, "only thinking")],
            vec![],
        ];
        for (k, opening) in shapes.into_iter().enumerate() {
            for prompts in [0, 1, 5, 6, 7, 13] {
                let mut drafts = opening.clone();
                for i in 0..prompts {
                    drafts.push(draft(
                        Role::User,
                        Kind::Message,
                        &format!("prompt {i} \"user\""),
                    ));
                    drafts.push(draft(Role::Assistant, Kind::ToolCall, "cargo test"));
                    drafts.push(draft(
                        Role::Tool,
                        Kind::ToolResult,
                        &format!("out {i}\u{7}"),
                    ));
                    if i % 3 == 1 {
                        drafts.push(sub.clone());
                        // Enough held to be parsed before the end of the turn.
                        for _ in 0..4 {
                            drafts.push(draft(Role::Tool, Kind::ToolResult, &huge));
                        }
                    }
                    drafts.push(draft(
                        Role::Assistant,
                        Kind::Message,
                        &format!("answer {i}"),
                    ));
                }
                let events = finish("claude-code", "s1", drafts);
                let mut jsonl = b"not an event\n\n".to_vec();
                jsonl.extend(crate::events::to_jsonl(&events));
                for budget in [MIN_BYTES, 2000, MAX_BYTES] {
                    assert_eq!(
                        from_lines(&jsonl, budget),
                        render(&events, budget, "r"),
                        "shape {k}, {prompts} prompts, budget {budget}"
                    );
                }
            }
        }
    }
}
