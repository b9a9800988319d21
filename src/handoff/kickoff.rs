//! The kickoff: what the receiving agent reads first, fitted to a token budget.
//!
//! Order on the page: header (provenance, and the handoff's status when it has one),
//! Blockers when the status is `blocked` / Open Questions when it is `needs_discussion`,
//! Next Steps, then the briefing's Risks / Watch
//! Out, Open Questions and Suggested Prompt For Next Agent (when it has them), Recent
//! turns of the session, Current State, Objective, the workspace comparison, pointers to
//! the full files. Page order is priority order: when the whole does not fit, sections
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
    pub objective: Option<String>,
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
        question(false),
        optional(
            "Suggested Prompt For Next Agent",
            &suggested_prompt,
            &handoff_ptr,
        ),
        optional("Recent turns", &input.recent_turns, &search_ptr),
        Some(("Current State", current_state, handoff_ptr.clone())),
        Some(("Objective", objective, handoff_ptr.clone())),
        Some((
            "Workspace",
            workspace,
            format!("baton cat {short}:context.md"),
        )),
        Some(("Files", pointers, format!("baton show {short}"))),
    ]
    .into_iter()
    .flatten()
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
mod tests {
    use super::*;

    fn input(long: usize) -> KickoffInput {
        KickoffInput {
            bundle: "0123456789abcdef".repeat(4),
            created: "2026-11-29T12:00:00Z".into(),
            merge_parents: Vec::new(),
            from: "claude".into(),
            to: "codex".into(),
            summary: "Ship the parser".into(),
            note: String::new(),
            status: String::new(),
            blockers: None,
            warnings: Vec::new(),
            in_progress: None,
            next_steps: Some("1. Write the grammar.\n".repeat(long)),
            briefing_from: None,
            current_state: Some("Tokenizer done and tested.\n".repeat(long)),
            objective: Some("A parser for the config language.\n".repeat(long)),
            risks: None,
            open_questions: None,
            suggested_prompt: None,
            recent_turns: None,
            workspace: vec!["same repository (root commit)".into(), "HEAD: same".into()],
            files: vec![
                ("handoff.md".into(), 100),
                (
                    format!(
                        "attachments/{}/deep/file.txt",
                        "very-long-directory-name".repeat(5)
                    ),
                    10,
                ),
            ],
            redacted_patches: Vec::new(),
        }
    }

    #[test]
    fn a_redacted_patch_says_it_does_not_apply() {
        let mut i = input(1);
        i.files.push(("evidence/unstaged.patch".into(), 300));
        i.files.push(("evidence/staged.patch".into(), 200));
        i.redacted_patches = vec!["evidence/unstaged.patch".into()];
        let text = render(&i, 100_000).text();
        let line = |name: &str| {
            text.lines()
                .find(|l| l.contains(name))
                .unwrap_or_default()
                .to_string()
        };
        assert!(
            line("unstaged.patch").ends_with("(patch redacted: does not apply as-is)"),
            "{text}"
        );
        assert!(
            !line("evidence/staged.patch").contains("redacted"),
            "{text}"
        );
    }

    #[test]
    fn everything_fits_in_a_large_budget() {
        let k = render(&input(1), 2000);
        assert!(k.sections.iter().all(|s| !s.truncated));
        let titles: Vec<&str> = k.sections.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Next Steps",
                "Current State",
                "Objective",
                "Workspace",
                "Files"
            ]
        );
        assert!(k.tokens <= 2000);
        assert!(k.text().contains(CUT), "the long path is cut in the middle");
    }

    #[test]
    fn low_priority_shrinks_first_and_budget_holds() {
        for budget in [120, 200, 400, 800, 2000] {
            let k = render(&input(40), budget);
            assert!(k.tokens <= budget, "budget {budget}: {} tokens", k.tokens);
            assert!(k.header.tokens <= budget / 4 + 1, "header within a quarter");
            let next = k
                .sections
                .iter()
                .find(|s| s.title == "Next Steps")
                .expect("next steps kept");
            // Next Steps is cut only once every other section is dropped whole.
            if next.truncated {
                assert!(
                    k.sections
                        .iter()
                        .all(|s| s.title == "Next Steps" || s.title == LEFT_OUT),
                    "budget {budget}"
                );
            }
            // At most one section is cut, the last one kept before "Left out".
            let content: Vec<_> = k.sections.iter().filter(|s| s.title != LEFT_OUT).collect();
            for s in &content[..content.len() - 1] {
                assert!(!s.truncated, "{} cut at {budget}", s.title);
            }
        }
    }

    #[test]
    fn a_merge_names_both_parents_in_the_header() {
        let mut merge = input(1);
        merge.merge_parents = vec!["aaaaaaaaaaaa".into(), "bbbbbbbbbbbb".into()];
        let k = render(&merge, 2000);
        assert!(
            k.header
                .text
                .contains("Merge of: aaaaaaaaaaaa and bbbbbbbbbbbb\n"),
            "{}",
            k.header.text
        );
        let mut plain = input(1);
        plain.merge_parents = vec!["aaaaaaaaaaaa".into()];
        assert!(!render(&plain, 2000).header.text.contains("Merge"));
    }

    #[test]
    fn warnings_top_the_header_and_stay_one_line_each() {
        let mut warned = input(1);
        warned.warnings = vec!["Warning: not the handoff's repository (at /x\n# fake)".into()];
        warned.in_progress = Some("rebase of feature onto 1a2b3c4d5e6f".into());
        let k = render(&warned, 2000);
        let lines: Vec<&str> = k.header.text.lines().collect();
        assert!(lines[0].starts_with("# Handoff "), "{}", k.header.text);
        assert_eq!(
            lines[1],
            "Warning: not the handoff's repository (at /x # fake)"
        );
        assert!(
            k.header
                .text
                .contains("\nIn progress: rebase of feature onto 1a2b3c4d5e6f\n")
        );
    }

    #[test]
    fn same_input_same_output() {
        assert_eq!(render(&input(30), 500), render(&input(30), 500));
    }

    #[test]
    fn shorten_path_keeps_both_ends() {
        let p = format!("a/{}/z.txt", "m".repeat(100));
        let s = shorten_path(&p, 20);
        assert_eq!(s.chars().count(), 20);
        assert!(s.starts_with("a/") && s.ends_with("z.txt") && s.contains(CUT));
        assert_eq!(shorten_path("short", 20), "short");
    }

    #[test]
    fn a_status_puts_its_section_first() {
        let mut blocked = input(1);
        blocked.status = "blocked".into();
        let k = render(&blocked, 4000);
        assert!(
            k.header.text.contains("Status: blocked\n"),
            "{}",
            k.header.text
        );
        assert_eq!(k.sections[0].title, "Blockers");
        assert!(k.sections[0].text.contains("names no blocker"));
        assert_eq!(k.sections[1].title, "Next Steps");

        let mut discuss = input(1);
        discuss.status = "needs-discussion".into();
        discuss.open_questions = Some("Keep v1?\n".into());
        let k = render(&discuss, 4000);
        let titles: Vec<&str> = k.sections.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(&titles[..2], ["Open Questions", "Next Steps"]);
        assert_eq!(titles.iter().filter(|t| **t == "Open Questions").count(), 1);

        // No status: the page order is unchanged.
        let k = render(&input(1), 4000);
        assert_eq!(k.sections[0].title, "Next Steps");
        assert!(!k.header.text.contains("Status:"));
    }
}
