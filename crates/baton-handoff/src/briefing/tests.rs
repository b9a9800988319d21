//! Tests of briefing parsing, validation and normalisation.

use super::*;
use baton_error::ErrorKind;

const GOOD: &str = "# Handoff: parser rewrite

## Objective

Replace the hand-written tokenizer with a table-driven one. Keep the public API.

## Current State

Lexer done, parser half done.

## Next Steps

1. Finish `parse_expr`.
2. Run the fuzzer.
";

fn err(raw: &str) -> Error {
    match Briefing::parse(raw) {
        Ok(b) => panic!("accepted: {b:?}"),
        Err(e) => e,
    }
}

#[test]
fn clean_briefing_is_kept_byte_for_byte() {
    let b = Briefing::parse(GOOD).expect("valid");
    assert_eq!(b.text, GOOD);
    let titles: Vec<&str> = b.sections.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(titles, ["Objective", "Current State", "Next Steps"]);
    assert_eq!(
        b.section("next steps"),
        Some("1. Finish `parse_expr`.\n2. Run the fuzzer.")
    );
    assert_eq!(
        b.summary_line(),
        "Replace the hand-written tokenizer with a table-driven one."
    );
}

#[test]
fn skeleton_is_valid() {
    let b = Briefing::parse(skeleton()).expect("skeleton must parse");
    assert_eq!(b.text, skeleton());
    assert!(!b.summary_line().is_empty());
}

#[test]
fn bom_crlf_and_trailing_whitespace() {
    let raw = format!("\u{feff}{}   \r\n\r\n\r\n", GOOD.replace('\n', "  \r\n"));
    assert_eq!(Briefing::parse(&raw).expect("valid").text, GOOD);
    let old_mac = GOOD.replace('\n', "\r");
    assert_eq!(Briefing::parse(&old_mac).expect("valid").text, GOOD);
}

#[test]
fn chat_preamble_is_stripped() {
    let raw = format!("Sure! Here is the handoff:\n\n{GOOD}");
    assert_eq!(Briefing::parse(&raw).expect("valid").text, GOOD);
}

#[test]
fn wrapping_fence_is_stripped() {
    for (open, close) in [
        ("```markdown", "```"),
        ("```md", "```"),
        ("```", "```"),
        ("~~~", "~~~"),
        ("````markdown", "````"),
    ] {
        let raw = format!("{open}\n{GOOD}{close}\n");
        assert_eq!(Briefing::parse(&raw).expect(open).text, GOOD, "{open}");
        let chatty = format!(
            "Sure! Here is the handoff:\n\n{open}\n{GOOD}{close}\n\nLet me know if you need more."
        );
        assert_eq!(Briefing::parse(&chatty).expect(open).text, GOOD, "{open}");
    }
    // An answer cut off before the closing fence still yields the document, even when
    // it ends in a code block of its own.
    let cut = format!("```markdown\n{GOOD}");
    assert_eq!(Briefing::parse(&cut).expect("valid").text, GOOD);
    let cut = format!("```markdown\n{GOOD}```bash\nls\n```\n");
    assert_eq!(
        Briefing::parse(&cut).expect("valid").text,
        format!("{GOOD}```bash\nls\n```\n")
    );
}

#[test]
fn wrapping_fence_with_code_blocks_inside() {
    let doc = "## Objective\n\nShip it.\n\n## Current State\n\n```bash\n## not a heading\nmake\n```\n\n## Next Steps\n\n```\nmake test\n```\n";
    let raw = format!("Here you go:\n```markdown\n{doc}```\nAnything else?\n");
    let b = Briefing::parse(&raw).expect("valid");
    assert_eq!(b.text, doc);
    assert_eq!(b.section("Next Steps"), Some("```\nmake test\n```"));
}

#[test]
fn code_block_in_preamble_is_not_the_document() {
    let raw = format!("I ran:\n```bash\n# install\nnpm ci\n```\nThe handoff:\n\n{GOOD}");
    assert_eq!(Briefing::parse(&raw).expect("valid").text, GOOD);
}

#[test]
fn heading_inside_fenced_code_is_not_a_section() {
    let raw =
        "## Objective\n\nFix CI.\n\n## Current State\n\n```markdown\n## Next Steps\nfake\n```\n";
    let e = err(raw);
    assert_eq!(e.message, "briefing is missing sections: ## Next Steps");
    let raw = format!("{raw}\n## Next Steps\n\nRetry.\n");
    let b = Briefing::parse(&raw).expect("valid");
    assert_eq!(
        b.section("Current State"),
        Some("```markdown\n## Next Steps\nfake\n```")
    );
    assert_eq!(b.section("Next Steps"), Some("Retry."));
}

#[test]
fn missing_and_empty_sections() {
    let e = err("# Notes\n\n## Objective\n\nDo it.\n\n## Next Steps\n   \n\t\n");
    assert_eq!(e.kind, ErrorKind::Usage);
    assert_eq!(
        e.message,
        "briefing is missing sections: ## Current State, ## Next Steps (empty)"
    );
    assert!(!e.message.contains('\n'));
    let hint = e.hint.expect("hint");
    assert!(hint.contains(skeleton()), "{hint}");

    let e = err("Sure, I updated the files.\n");
    assert_eq!(
        e.message,
        "briefing is missing sections: ## Objective, ## Current State, ## Next Steps"
    );
    // A level-3 heading is not a section.
    let e = err(&GOOD.replace("## Next Steps", "### Next Steps"));
    assert_eq!(
        e.message,
        "briefing is missing sections: ## Next Steps (found `### Next Steps`: use `## Next Steps`)"
    );
}

#[test]
fn a_level_one_heading_gets_the_fix_in_the_message() {
    let e = err(&GOOD.replace("## Objective", "# Objective"));
    assert_eq!(
        e.message,
        "briefing is missing sections: ## Objective (found `# Objective`: use `## Objective`)"
    );
    assert!(!e.message.contains('\n'));
}

#[test]
fn empty_input_is_invalid() {
    for raw in ["", "  \n\t\r\n", "\u{feff}", "```markdown\n```\n"] {
        let e = err(raw);
        assert_eq!(e.kind, ErrorKind::Usage);
        assert!(!e.message.contains('\n'));
        assert!(e.hint.is_some_and(|h| h.contains(skeleton())));
    }
}

#[test]
fn titles_match_loosely() {
    let raw = "## OBJECTIVE:\n\nA.\n\n## current state\n\nB.\n\n## Next  Steps :\n\nC.\n";
    let b = Briefing::parse(raw).expect("valid");
    let titles: Vec<&str> = b.sections.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(titles, ["OBJECTIVE", "current state", "Next  Steps"]);
    assert_eq!(b.section("objective"), Some("A."));
}

#[test]
fn optional_sections_are_kept_in_order() {
    let raw = "# H\n\n## Objective\n\nO.\n\n## What Has Been Done\n\nW.\n\n## Current State\n\nC.\n\n\
                   ## Risks/Watch Out\n\nR.\n\n## Next Steps\n\nN.\n\n## Extra Notes\n\nE.\n\n\
                   ## Open Questions\n\nQ.\n\n## Suggested Prompt For Next Agent\n\nP.\n";
    let b = Briefing::parse(raw).expect("valid");
    let titles: Vec<&str> = b.sections.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Objective",
            "What Has Been Done",
            "Current State",
            "Risks/Watch Out",
            "Next Steps",
            "Extra Notes",
            "Open Questions",
            "Suggested Prompt For Next Agent"
        ]
    );
    for optional in OPTIONAL_SECTIONS {
        assert!(b.section(optional).is_some(), "{optional}");
    }
    assert_eq!(b.section("Risks / Watch Out"), Some("R."));
    assert_eq!(b.text, raw);
}

#[test]
fn section_body_keeps_subheadings_and_ends_at_h1() {
    let raw = "## Objective\n\nO.\n\n### Detail\n\nD.\n\n## Current State\n\nC.\n\n## Next Steps\n\nN.\n\n# Appendix\n\nA.\n";
    let b = Briefing::parse(raw).expect("valid");
    assert_eq!(b.section("Objective"), Some("O.\n\n### Detail\n\nD."));
    assert_eq!(b.section("Next Steps"), Some("N."));
}

#[test]
fn quoted_or_listed_heading_is_body() {
    let raw = "## Objective\n\nO.\n\n> ## Current State\n> quoted\n\n- ## Next Steps\n";
    assert_eq!(
        err(raw).message,
        "briefing is missing sections: ## Current State, ## Next Steps"
    );
}

#[test]
fn summary_line_variants() {
    let with = |objective: &str| {
        let raw =
            format!("## Objective\n\n{objective}\n\n## Current State\n\nC\n\n## Next Steps\n\nN\n");
        Briefing::parse(&raw).expect("valid").summary_line()
    };
    assert_eq!(
        with("- **Port** the CLI to clap v4, e.g. derive. Then test."),
        "Port the CLI to clap v4, e.g. derive."
    );
    assert_eq!(with("Fix the flaky test\nin sync"), "Fix the flaky test");
    assert_eq!(with("1. Make v1.2 build! Soon."), "Make v1.2 build!");
    let long = "word ".repeat(60);
    let s = with(&long);
    assert!(s.chars().count() <= 120, "{s}");
    assert!(s.ends_with("word…"), "{s}");
    let unbroken = "x".repeat(300);
    let s = with(&unbroken);
    assert_eq!(s.chars().count(), 120);
    let wide = "é".repeat(300);
    assert_eq!(with(&wide).chars().count(), 120);
}

#[test]
fn setext_heading_is_body() {
    let raw = "## Objective\n\nO.\n\nNot a section\n---\n\n## Current State\n\nC.\n\n## Next Steps\n\nN.\n";
    let b = Briefing::parse(raw).expect("valid");
    assert_eq!(b.sections.len(), 3);
    assert_eq!(b.section("Objective"), Some("O.\n\nNot a section\n---"));
}
