//! The kickoff's unit tests: page order, budgets, headers.

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
        done: None,
        objective: Some("A parser for the config language.\n".repeat(long)),
        more: Vec::new(),
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
fn every_briefing_section_reaches_the_page() {
    let mut full = input(1);
    full.done = Some("Lexer written.\n".into());
    full.blockers = Some("No credentials.\n".into());
    full.more = vec![
        ("Context".into(), "Reports reach 200k rows.\n".into()),
        ("Acceptance Criteria".into(), "Constant memory.\n".into()),
    ];
    let k = render(&full, 4000);
    let titles: Vec<&str> = k.sections.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Next Steps",
            "Blockers",
            "Current State",
            "What Has Been Done",
            "Objective",
            "Context",
            "Acceptance Criteria",
            "Workspace",
            "Files"
        ]
    );
    assert!(k.text().contains("## Context\nReports reach 200k rows.\n"));
    // Too small for all: the lowest are dropped whole and named with their pointer.
    let k = render(&full, 100);
    assert!(k.tokens <= 100);
    let left = k
        .sections
        .iter()
        .find(|s| s.title == LEFT_OUT)
        .expect("left out");
    assert!(
        left.text
            .contains("Objective, Context, Acceptance Criteria: baton cat 0123456789ab:handoff.md"),
        "{}",
        left.text
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
