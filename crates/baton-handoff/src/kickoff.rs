//! The kickoff: what the receiving agent reads first, fitted to a token budget.
//!
//! Order on the page: header (provenance, and the handoff's status when it has one),
//! Blockers when the status is `blocked` / Open Questions when it is `needs_discussion`,
//! Next Steps, then the briefing's Risks / Watch
//! Out, Open Questions and Suggested Prompt For Next Agent (when it has them), Recent
//! turns of the session, Current State, What Has Been Done, Objective, every other
//! section of the briefing in its order (`Context`, `Acceptance Criteria`, ...), the
//! workspace comparison, pointers to the full files. Page order is priority order: when the whole does not fit, sections
//! are dropped whole from the bottom of the page up and named, with the commands that
//! print them, in a last "Left out" section; only the last section kept may be cut, Next
//! Steps only once it is alone; every cut ends in a pointer to the full text; the header
//! never takes more than a quarter of the budget, and long paths are cut in the middle.
//! Pure function of its input: same input, same output.

use serde::Serialize;

pub use super::transcript::estimate_tokens;

/// Marker put where text was cut.
pub const CUT: &str = "…";
/// Paths longer than this many characters are cut in the middle.
pub const MAX_PATH_CHARS: usize = 72;
/// The smallest budget a kickoff is rendered for: room for the header and a Next Steps
/// line ending in its pointer. `resume` refuses less (exit 2).
pub const MIN_BUDGET: usize = 100;
/// The title of the section that names the sections dropped to fit the budget.
pub const LEFT_OUT: &str = "Left out to fit the budget";
/// The briefing sections the kickoff shows by name (from [`KickoffInput`]'s fields); any
/// other section of the briefing comes in [`KickoffInput::more`].
pub const PLACED_SECTIONS: [&str; 8] = [
    "Blockers",
    "Next Steps",
    "Risks / Watch Out",
    "Open Questions",
    "Suggested Prompt For Next Agent",
    "Current State",
    "What Has Been Done",
    "Objective",
];
/// Every shrunk section keeps at least its title and this many tokens of body.
const MIN_BODY_TOKENS: usize = 12;

pub struct KickoffInput {
    pub bundle: String,
    pub created: String,
    /// A merge's parents (ids as printed); empty or one for a plain handoff.
    pub merge_parents: Vec<String>,
    pub from: String,
    pub to: String,
    pub summary: String,
    /// The save's `--note`, shown in the header.
    pub note: String,
    /// The handoff's own status (an imported `status`), shown in the header; `blocked`
    /// puts Blockers first on the page, `needs_discussion` the Open Questions.
    pub status: String,
    /// What blocks the work, shown (first) when the status is `blocked`.
    pub blockers: Option<String>,
    /// Warning lines put at the top of the header (an unrelated or diverged workspace).
    pub warnings: Vec<String>,
    /// The operation the captured workspace was in the middle of, described.
    pub in_progress: Option<String>,
    pub next_steps: Option<String>,
    /// When this handoff has no briefing: the nearest first-parent ancestor that has one
    /// (its id); the briefing sections above are then that ancestor's.
    pub briefing_from: Option<String>,
    pub current_state: Option<String>,
    /// The briefing's What Has Been Done.
    pub done: Option<String>,
    pub objective: Option<String>,
    /// The briefing's other sections (title, body), in its order: none is left out.
    pub more: Vec<(String, String)>,
    pub risks: Option<String>,
    pub open_questions: Option<String>,
    pub suggested_prompt: Option<String>,
    /// The last turns of the session (see `turns`), when the transcript has any.
    pub recent_turns: Option<String>,
    /// Lines describing how the live workspace relates to the captured one.
    pub workspace: Vec<String>,
    /// Files of the bundle (path, size), for pointers.
    pub files: Vec<(String, u64)>,
    /// The paths among `files` of patches whose secrets were redacted: their pointers
    /// say the patch does not apply as it is.
    pub redacted_patches: Vec<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct KickoffSection {
    pub title: String,
    pub text: String,
    pub tokens: usize,
    pub truncated: bool,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Kickoff {
    pub budget: usize,
    pub tokens: usize,
    pub header: KickoffSection,
    pub sections: Vec<KickoffSection>,
}

impl Kickoff {
    pub fn text(&self) -> String {
        let mut out = self.header.text.clone();
        for s in &self.sections {
            out.push_str(&format!("\n## {}\n{}", s.title, s.text));
        }
        out
    }
}

/// Cut a path in the middle so that it has at most `max` characters.
pub fn shorten_path(path: &str, max: usize) -> String {
    let chars: Vec<char> = path.chars().collect();
    if chars.len() <= max || max < 5 {
        return path.to_string();
    }
    let keep = max - 1;
    let head = keep / 2;
    let tail = keep - head;
    let mut out: String = chars[..head].iter().collect();
    out.push_str(CUT);
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// Keep whole lines of `text` while they fit in `tokens`, then part of the next line,
/// then a marker pointing at the full text. `None` when not even the marker fits.
fn truncate(text: &str, tokens: usize, pointer: &str) -> Option<(String, bool)> {
    if estimate_tokens(text) <= tokens {
        return Some((text.to_string(), false));
    }
    let long = format!("\n{CUT} [cut to fit the budget; full text: {pointer}]\n");
    let marker = if estimate_tokens(&long) * 2 <= tokens {
        long
    } else {
        format!("\n{CUT} [full text: {pointer}]\n")
    };
    if estimate_tokens(&marker) > tokens {
        return None;
    }
    // Characters of kept text plus the marker's rounded-up share never exceed the budget.
    let room = (tokens - estimate_tokens(&marker)) * 4;
    let mut out = String::new();
    let mut used = 0;
    for line in text.lines() {
        let len = line.chars().count() + 1;
        if used + len <= room {
            out.push_str(line);
            out.push('\n');
            used += len;
        } else {
            let left = room - used;
            if left > 8 {
                out.extend(line.chars().take(left - 1));
                out.push_str(CUT);
            }
            break;
        }
    }
    let kept = out.trim_end();
    // A line cut in the middle already ends in the marker's `…`: the pointer follows it.
    if let Some(cut) = kept.strip_suffix(CUT)
        && !marker.contains("cut to fit")
    {
        return Some((format!("{cut}{}", &marker[1..]), true));
    }
    if kept.is_empty() {
        return Some((marker[1..].to_string(), true));
    }
    Some((format!("{kept}{marker}"), true))
}

/// The "Left out" section: the sections dropped to fit, grouped by the command that
/// prints them in full, in page order.
fn left_out(dropped: &[(&str, String, String)]) -> String {
    let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
    for (title, _, pointer) in dropped {
        match groups.iter_mut().find(|(_, p)| p == pointer) {
            Some((titles, _)) => titles.push(title),
            None => groups.push((vec![title], pointer)),
        }
    }
    groups
        .iter()
        .map(|(titles, pointer)| format!("- {}: {pointer}\n", titles.join(", ")))
        .collect()
}

/// The transcript and the raw session files behind it: pointed at by search.
fn is_transcript(path: &str) -> bool {
    path == "transcript.jsonl" || path.starts_with("attachments/transcript/")
}

pub fn render(input: &KickoffInput, budget: usize) -> Kickoff {
    let short = input.bundle.chars().take(12).collect::<String>();
    let handoff_ptr = format!("baton cat {short}:handoff.md");

    // The header: provenance, capped at a quarter of the budget.
    let who = match (input.from.as_str(), input.to.as_str()) {
        ("", "") => "unknown sender".to_string(),
        (f, "") => format!("from {f}"),
        ("", t) => format!("to {t}"),
        (f, t) => format!("from {f} to {t}"),
    };
    let mut header_text = format!("# Handoff {short}\n");
    // One header line each, whatever the evidence they came from holds.
    let one_line = |text: &str| -> String {
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    };
    for line in &input.warnings {
        header_text.push_str(&format!("{}\n", one_line(line)));
    }
    header_text.push_str(&format!("{who}, saved {}\n", input.created));
    if input.merge_parents.len() > 1 {
        header_text.push_str(&format!(
            "Merge of: {}\n",
            input.merge_parents.join(" and ")
        ));
    }
    if let Some(op) = &input.in_progress {
        header_text.push_str(&format!("In progress: {}\n", one_line(op)));
    }
    if !input.summary.is_empty() {
        header_text.push_str(&format!(
            "Summary: {}\n",
            input.summary.lines().next().unwrap_or("")
        ));
    }
    if !input.status.is_empty() {
        header_text.push_str(&format!("Status: {}\n", input.status));
    }
    for line in input.note.lines().filter(|l| !l.trim().is_empty()) {
        header_text.push_str(&format!("Note: {line}\n"));
    }
    let (header_text, header_cut) = truncate(
        &header_text,
        (budget / 4).max(8),
        &format!("baton show {short}"),
    )
    .unwrap_or_default();
    let header = KickoffSection {
        title: "header".into(),
        tokens: estimate_tokens(&header_text),
        text: header_text,
        truncated: header_cut,
    };

    // Sections in page order, with their priority (0 = shrinks last).
    let missing = |s: &Option<String>| {
        s.clone()
            .unwrap_or_else(|| "(not in this handoff)\n".to_string())
    };
    // No briefing here: the briefing sections come from the nearest ancestor that has
    // one, said first and labelled with its id.
    let inherited = input.briefing_from.as_ref().map(|id| {
        let rev: String = id.chars().take(12).collect();
        (
            format!("(no briefing in this handoff; the last one is in {rev}: baton cat {rev}:handoff.md)\n"),
            format!("baton cat {rev}:handoff.md"),
            rev,
        )
    });
    let handoff_ptr = match &inherited {
        Some((_, ptr, _)) => ptr.clone(),
        None => handoff_ptr,
    };
    let next_steps = match (&inherited, &input.next_steps) {
        (Some((line, _, rev)), Some(steps)) => format!("{line}From {rev}:\n{steps}"),
        (Some((line, _, _)), None) => line.clone(),
        (None, steps) => missing(steps),
    };
    let from_ancestor = |text: &Option<String>| match (&inherited, text) {
        (Some((_, _, rev)), Some(t)) => Some(format!("From {rev}:\n{t}")),
        (_, t) => t.clone(),
    };
    let (risks, open_questions, suggested_prompt) = (
        from_ancestor(&input.risks),
        from_ancestor(&input.open_questions),
        from_ancestor(&input.suggested_prompt),
    );
    let (current_state, objective) = (
        missing(&from_ancestor(&input.current_state)),
        missing(&from_ancestor(&input.objective)),
    );
    let done = from_ancestor(&input.done);
    let more = input
        .more
        .iter()
        .filter_map(|(title, body)| {
            from_ancestor(&Some(body.clone())).map(|t| (title.as_str(), t, handoff_ptr.clone()))
        })
        .collect::<Vec<_>>();
    let mut pointers = String::new();
    for (path, size) in &input.files {
        // The listed path may be cut in the middle; the command keeps the whole path so
        // that it can be run as printed. A transcript is searched, never printed whole.
        let command = if is_transcript(path) {
            format!("baton search {short} QUERY")
        } else {
            format!("baton cat {short}:{path}")
        };
        let redacted = if input.redacted_patches.contains(path) {
            format!(" ({})", super::evidence::PATCH_REDACTED)
        } else {
            String::new()
        };
        pointers.push_str(&format!(
            "- {} ({size} bytes): {command}{redacted}\n",
            shorten_path(path, MAX_PATH_CHARS),
        ));
    }
    let workspace = if input.workspace.is_empty() {
        "(no workspace comparison)\n".to_string()
    } else {
        input.workspace.iter().map(|l| format!("- {l}\n")).collect()
    };
    let search_ptr = format!("baton search {short} QUERY");
    let optional = |title: &'static str, text: &Option<String>, pointer: &str| {
        text.clone().map(|t| (title, t, pointer.to_string()))
    };
    // A blocked handoff says what blocks it first; one that needs discussion, the
    // question. Either leads the page, so it is the last thing cut.
    // The first word: `blocked (partial capture)` is blocked.
    let status = input
        .status
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
        .replace('-', "_");
    let blocked = (status == "blocked").then(|| {
        let text = input
            .blockers
            .clone()
            .unwrap_or_else(|| "(status: blocked; this handoff names no blocker)\n".to_string());
        ("Blockers", text, handoff_ptr.clone())
    });
    // Blockers named without that status are still shown, below the risks.
    let named_blockers = match &blocked {
        None => input.blockers.clone(),
        Some(_) => None,
    };
    let discuss = status == "needs_discussion";
    let question = |first: bool| {
        if first != discuss {
            return None;
        }
        let text = open_questions.clone().or_else(|| {
            first.then(|| "(status: needs_discussion; this handoff names no question)\n".into())
        });
        text.map(|t| ("Open Questions", t, handoff_ptr.clone()))
    };
    let parts: Vec<(&str, String, String)> = [
        blocked,
        question(true),
        Some(("Next Steps", next_steps, handoff_ptr.clone())),
        optional("Risks / Watch Out", &risks, &handoff_ptr),
        optional("Blockers", &named_blockers, &handoff_ptr),
        question(false),
        optional(
            "Suggested Prompt For Next Agent",
            &suggested_prompt,
            &handoff_ptr,
        ),
        optional("Recent turns", &input.recent_turns, &search_ptr),
        Some(("Current State", current_state, handoff_ptr.clone())),
        optional("What Has Been Done", &done, &handoff_ptr),
        Some(("Objective", objective, handoff_ptr.clone())),
    ]
    .into_iter()
    .flatten()
    .chain(more)
    .chain([
        (
            "Workspace",
            workspace,
            format!("baton cat {short}:context.md"),
        ),
        ("Files", pointers, format!("baton show {short}")),
    ])
    .collect();

    // Keep the longest run of sections from the top of the page that fits, the last of
    // them possibly cut; the ones below are dropped whole and named in "Left out" with
    // the commands that print them. Next Steps is cut only when it is the only one left.
    let title_cost = |t: &str| estimate_tokens(&format!("\n## {t}\n"));
    let available = budget.saturating_sub(header.tokens);
    let needs: Vec<usize> = parts
        .iter()
        .map(|(t, body, _)| title_cost(t) + estimate_tokens(body))
        .collect();
    let section = |title: &str, text: String, truncated: bool| KickoffSection {
        title: title.into(),
        tokens: estimate_tokens(&text) + title_cost(title),
        text,
        truncated,
    };
    let mut sections = Vec::new();
    for keep in (1..=parts.len()).rev() {
        let omitted = left_out(&parts[keep..]);
        let omit_cost = if omitted.is_empty() {
            0
        } else {
            title_cost(LEFT_OUT) + estimate_tokens(&omitted)
        };
        let room = available.saturating_sub(omit_cost);
        let before: usize = needs[..keep - 1].iter().sum();
        let (title, body, pointer) = &parts[keep - 1];
        let last = if before + needs[keep - 1] <= room {
            Some((body.clone(), false))
        } else {
            let body_room = room.saturating_sub(before + title_cost(title));
            // A lower section is kept cut only with some of its text besides the pointer.
            let enough = keep == 1 || body_room >= MIN_BODY_TOKENS + estimate_tokens(pointer) + 8;
            truncate(body, body_room, pointer).filter(|_| enough)
        };
        let Some((text, truncated)) = last else {
            if keep > 1 {
                continue;
            }
            break;
        };
        for (title, body, _) in &parts[..keep - 1] {
            sections.push(section(title, body.clone(), false));
        }
        sections.push(section(title, text, truncated));
        if !omitted.is_empty() {
            sections.push(section(LEFT_OUT, omitted, false));
        }
        break;
    }
    let tokens = header.tokens + sections.iter().map(|s| s.tokens).sum::<usize>();
    Kickoff {
        budget,
        tokens,
        header,
        sections,
    }
}

#[cfg(test)]
mod tests;
