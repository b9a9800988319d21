//! Handoff CLI: kickoff budget degradation snapshots.

use super::*;

// ---------------------------------------------------------------------------------------
// 5. Kickoff budget degradation snapshots
// ---------------------------------------------------------------------------------------

const BUDGETS: [usize; 4] = [150, 300, 600, 2000];

/// A briefing with long sections; every line is distinct so that cuts are visible.
fn long_briefing() -> String {
    let mut text = String::from("# Handoff: streaming CSV export\n\n## Objective\n\n");
    for i in 1..=6 {
        text.push_str(&format!(
            "Objective line {i}: export monthly reports as CSV without loading every row into memory.\n"
        ));
    }
    text.push_str("\n## Current State\n\n");
    for i in 1..=12 {
        text.push_str(&format!(
            "- State {i}: the endpoint streams rows in pages of 500; page {i} was checked by hand.\n"
        ));
    }
    text.push_str("\n## Next Steps\n\n");
    for i in 1..=10 {
        text.push_str(&format!(
            "{i}. Step {i}: emit the columns in on-screen order and re-run the export test suite.\n"
        ));
    }
    text.push_str("\n## Open Questions\n\nShould empty reports produce a header row?\n");
    text
}

/// The long attachment path inside the bundle.
const LONG_DIR: &str =
    "a-rather-long-directory-name-for-generated-reports/and-another-deeply-nested-level";

/// Save the budget fixture: a fixed non-git workspace, fixed --from/--to/--summary, the
/// long briefing and an attachment with a path over 72 characters. Returns (env, ws, id).
pub(super) fn budget_fixture() -> (Env, PathBuf, String) {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("README.txt", b"not a git repository\n")]);
    let attach = env.write_tree(
        "reports",
        &[(
            &format!("{LONG_DIR}/monthly-export-notes.txt"),
            b"Notes on the export format.\n",
        )],
    );
    let brief = env.path().join("brief.md");
    fs::write(&brief, long_briefing()).expect("write");
    let out = baton_in(
        &env,
        &ws,
        &[
            "save",
            "--brief",
            &s(&brief),
            "--from",
            "planner",
            "--to",
            "implementer",
            "--summary",
            "Stream the CSV export and fix the column order",
            "--attach",
            &s(&attach),
        ],
    );
    let id = ok(out, "save").trim().to_string();
    (env, ws, id)
}

/// The kickoff as text, rebuilt from `resume --json`.
pub(super) fn kickoff_text(resume: &Value) -> String {
    let k = &resume["kickoff"];
    let mut text = k["header"]["text"].as_str().expect("header").to_string();
    for section in k["sections"].as_array().expect("sections") {
        text.push_str(&format!(
            "\n## {}\n{}",
            section["title"].as_str().expect("title"),
            section["text"].as_str().expect("text")
        ));
    }
    text
}

/// Replace what differs from run to run: the bundle id, the save time, and the sizes of
/// the two files that hold the (temporary) workspace path.
fn normalize_kickoff(text: &str, id: &str, created: &str) -> String {
    let mut text = text
        .replace(id, "<BUNDLE>")
        .replace(&id[..12], "<ID>")
        .replace(created, "<TIME>");
    for marker in ["context.md (", "evidence/evidence.json ("] {
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find(marker) {
            out.push_str(&rest[..i + marker.len()]);
            rest = &rest[i + marker.len()..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 {
                out.push_str("<N>");
            }
            rest = &rest[digits..];
        }
        out.push_str(rest);
        text = out;
    }
    text
}

#[test]
fn kickoff_degrades_by_budget_like_the_snapshots() {
    let (env, ws, id) = budget_fixture();
    let created = json_ok(&env, &["show", &id])["created"]
        .as_str()
        .expect("created")
        .to_string();
    let order = [
        "Next Steps",
        "Risks / Watch Out",
        "Open Questions",
        "Suggested Prompt For Next Agent",
        "Recent turns",
        "Current State",
        "Objective",
        "Workspace",
        "Files",
        "Left out to fit the budget",
    ];
    let ws_arg = s(&ws);
    let mut previous_tokens = 0;
    for budget in BUDGETS {
        let b = budget.to_string();
        let args = ["resume", "--budget", &b, "--workspace", &ws_arg];
        let resume = json_ok(&env, &args);
        // The same run twice gives the same output, in JSON and as text.
        assert_eq!(
            resume,
            json_ok(&env, &args),
            "budget {budget}: not deterministic"
        );
        let human = ok(baton_in(&env, env.path(), &args), "resume");
        assert_eq!(human, ok(baton_in(&env, env.path(), &args), "resume"));
        let text = kickoff_text(&resume);
        assert_eq!(human.trim_end(), text.trim_end(), "text and JSON differ");

        let k = &resume["kickoff"];
        let tokens = k["tokens"].as_u64().expect("tokens") as usize;
        assert_eq!(k["budget"], budget);
        assert!(tokens <= budget, "budget {budget}: {tokens} tokens");
        assert!(tokens >= previous_tokens, "a bigger budget gave less");
        previous_tokens = tokens;
        let header_tokens = k["header"]["tokens"].as_u64().expect("tokens") as usize;
        assert!(
            header_tokens <= budget / 4,
            "budget {budget}: header {header_tokens}"
        );
        let estimate = text.chars().count().div_ceil(4);
        assert!(
            estimate <= tokens,
            "budget {budget}: the text is {estimate} tokens"
        );
        let sections = k["sections"].as_array().expect("sections");
        let titles: Vec<&str> = sections
            .iter()
            .map(|s| s["title"].as_str().unwrap())
            .collect();
        // Sections keep their page order; Next Steps is always there.
        let positions: Vec<usize> = titles
            .iter()
            .map(|t| order.iter().position(|o| o == t).expect("known title"))
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{titles:?}");
        assert_eq!(titles.first(), Some(&"Next Steps"), "budget {budget}");
        // Sections are dropped whole from the bottom of the page before Next Steps is cut:
        // at most one section is cut, the last one kept, and Next Steps only when it is
        // the only one left. What was dropped is named, with a pointer, in "Left out".
        let truncated: Vec<bool> = sections
            .iter()
            .map(|s| s["truncated"].as_bool().expect("truncated"))
            .collect();
        let content = titles
            .iter()
            .filter(|t| **t != "Left out to fit the budget")
            .count();
        if let Some(first_cut) = truncated.iter().position(|t| *t) {
            assert_eq!(
                first_cut,
                content - 1,
                "budget {budget}: {titles:?} {truncated:?}"
            );
        }
        if truncated[0] {
            assert_eq!(
                content, 1,
                "budget {budget}: Next Steps cut before {titles:?}"
            );
        }
        // This briefing has no Risks, Suggested Prompt or transcript: the sections it
        // has are dropped from the end of the page first.
        let present: Vec<&str> = order
            .iter()
            .copied()
            .filter(|t| {
                !matches!(
                    *t,
                    "Risks / Watch Out"
                        | "Suggested Prompt For Next Agent"
                        | "Recent turns"
                        | "Left out to fit the budget"
                )
            })
            .collect();
        assert!(
            titles[..content] == present[..content],
            "sections are dropped from the end first: {titles:?}"
        );
        if content < present.len() {
            assert_eq!(titles.last(), Some(&"Left out to fit the budget"));
            let left = sections.last().unwrap()["text"].as_str().unwrap();
            for t in &present[content..] {
                assert!(
                    left.contains(t),
                    "budget {budget}: {t} not named in {left:?}"
                );
            }
        } else {
            assert_eq!(titles.len(), content, "nothing left out at {budget}");
        }
        // Every cut ends in a pointer to the full text, and every pointer resolves.
        for s in sections {
            let t = s["text"].as_str().unwrap();
            if s["truncated"] == true {
                assert!(
                    t.trim_end().ends_with(']'),
                    "a cut ends in a pointer: {t:?}"
                );
                assert!(t.contains("full text: baton "), "{t:?}");
            }
        }
        if k["header"]["truncated"] == true {
            let h = k["header"]["text"].as_str().unwrap();
            assert!(h.contains("full text: baton show "), "{h:?}");
        }
        for rev in text
            .split("baton cat ")
            .skip(1)
            .chain(text.split("baton show ").skip(1))
            .chain(text.split("baton search ").skip(1))
            .map(|rest| rest.split([':', ' ', ']', '\n']).next().unwrap_or(""))
        {
            assert!(rev.len() >= 8, "a pointer's REV is short: {rev:?}");
            ok(baton_in(&env, env.path(), &["show", rev]), rev);
        }
        match budget {
            2000 => {
                assert!(
                    truncated.iter().all(|t| !t),
                    "all fits in 2000: {truncated:?}"
                );
                assert_eq!(titles, present);
            }
            600 => {
                assert!(!truncated[0], "Next Steps is whole at 600");
                assert!(
                    titles.last() == Some(&"Left out to fit the budget"),
                    "{titles:?}"
                );
            }
            _ => {}
        }

        // The long attachment path is cut in the middle, keeping both ends.
        if budget == 2000 {
            let files = sections.iter().find(|s| s["title"] == "Files").unwrap();
            let files = files["text"].as_str().unwrap();
            let line = files
                .lines()
                .find(|l| l.contains("monthly-export-notes.txt"))
                .expect("the attachment is listed");
            assert!(
                line.starts_with("- attachments/reports/a-rather-long"),
                "{line}"
            );
            assert!(line.contains('…'), "{line}");
            let listed = line.split(" (").next().expect("listed path");
            assert!(!listed.contains(LONG_DIR), "{line}");
            let shown = line
                .trim_start_matches("- ")
                .split(" (")
                .next()
                .expect("path");
            assert_eq!(shown.chars().count(), 72, "{shown}");
            // Every pointer to a path that was not cut works as printed.
            for l in files.lines().filter(|l| !l.contains('…')) {
                let spec = l.rsplit(": baton cat ").next().expect("pointer");
                cat(&env, spec);
            }
        }

        let normalized = normalize_kickoff(&text, &id, &created);
        common::snapshot::assert_text_snapshot(
            &format!("resume_budget_{budget}"),
            &normalized,
            &format!("kickoff at budget {budget}"),
        );
    }
}

#[test]
fn every_kickoff_pointer_can_be_run_as_printed() {
    let (env, ws, _) = budget_fixture();
    let resume = json_ok(&env, &["resume", "--workspace", &s(&ws)]);
    let files = resume["kickoff"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["title"] == "Files")
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    for line in files.lines() {
        let spec = line.rsplit(": baton cat ").next().expect("pointer");
        let out = baton_in(&env, env.path(), &["cat", spec]);
        assert!(out.status.success(), "{line}: {}", stderr(&out));
    }
}
