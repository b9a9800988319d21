//! Handoff CLI: kickoff papercuts of issue 29: the sender inferred from the transcript's
//! harness, every briefing section on the kickoff, and `handoff` without a briefing flag
//! answered with the skeleton.

use super::budget::kickoff_text;
use super::import::fixture;
use super::transcripts::plant_session;
use super::*;

/// A workspace with a store in it, and a valid briefing file beside it.
fn workspace(env: &Env) -> (PathBuf, PathBuf) {
    let ws = fs::canonicalize(git_init(&env.path().join("ws"))).expect("canonical");
    commit(&ws, "README", "hello\n", "first");
    ok(baton_in(env, &ws, &["init"]), "init");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("brief");
    (ws, brief)
}

// ---------------------------------------------------------------------------------------
// 1. --from inferred from the transcript's harness
// ---------------------------------------------------------------------------------------

#[test]
fn from_is_the_transcripts_harness_unless_given() {
    let env = Env::new();
    let (ws, brief) = workspace(&env);
    let other = env.path().join("other");
    let sessions = [
        ("fixtures/transcripts/claude-code/main.jsonl", "claude-code"),
        ("fixtures/transcripts/codex/rollout-main.jsonl", "codex"),
    ];
    for (fixture, harness) in sessions {
        let session = env.path().join(format!("{harness}.jsonl"));
        plant_session(fixture, &session, &ws, &other, 1);
        let out = baton_in(
            &env,
            &ws,
            &[
                "--json",
                "handoff",
                "--to",
                "qodercli",
                "--brief",
                &s(&brief),
                "--transcript",
                &s(&session),
            ],
        );
        let saved = doc(&out);
        assert_eq!(code(&out), 0, "{saved}");
        let id = saved["bundle"].as_str().expect("bundle id").to_string();

        // The bundle's manifest, the log line and the kickoff all name the harness.
        let show = json_in(&env, &ws, &["show", &id]);
        assert_eq!(show["from"], harness, "{show}");
        let log = ok(baton_in(&env, &ws, &["log", "-n", "1"]), "log");
        assert!(
            log.contains(&format!("Handoff: {harness} -> qodercli")),
            "{log}"
        );
        let resume = ok(baton_in(&env, &ws, &["resume", &id]), "resume");
        assert!(
            resume.contains(&format!("from {harness} to qodercli, saved")),
            "{resume}"
        );

        // An explicit --from wins over the harness.
        let out = baton_in(
            &env,
            &ws,
            &[
                "--json",
                "handoff",
                "--from",
                "alice",
                "--to",
                "qodercli",
                "--brief",
                &s(&brief),
                "--transcript",
                &s(&session),
            ],
        );
        let saved = doc(&out);
        assert_eq!(code(&out), 0, "{saved}");
        let show = json_in(&env, &ws, &["show", saved["bundle"].as_str().expect("id")]);
        assert_eq!(show["from"], "alice", "{show}");
    }

    // No transcript and no --from: no sender is made up.
    let out = baton_in(
        &env,
        &ws,
        &[
            "--json",
            "handoff",
            "--to",
            "qodercli",
            "--brief",
            &s(&brief),
        ],
    );
    let saved = doc(&out);
    assert_eq!(code(&out), 0, "{saved}");
    let show = json_in(&env, &ws, &["show", saved["bundle"].as_str().expect("id")]);
    assert_eq!(show["from"], "", "{show}");
}

// ---------------------------------------------------------------------------------------
// 3. `handoff` with neither --brief nor --no-brief: the skeleton, as for a bad briefing
// ---------------------------------------------------------------------------------------

#[test]
fn handoff_without_a_briefing_flag_prints_the_skeleton() {
    let env = Env::new();
    let (ws, _) = workspace(&env);
    let before = snapshot_files(&ws.join(".baton"));
    let bad = env.path().join("bad.md");
    fs::write(&bad, "# Handoff\n\n## Objective\n\nShip.\n").expect("write");
    let refused = baton_in(&env, &ws, &["save", "--brief", &s(&bad)]);
    assert_eq!(code(&refused), 2, "{}", stderr(&refused));
    let skeleton_of = |err: &str| err.split_once('\n').map(|(_, rest)| rest.to_string());
    let expected = skeleton_of(&stderr(&refused)).expect("a skeleton after the error line");
    assert!(
        expected.contains("--brief - <<'EOF'\n# Handoff\n") && expected.contains("\nEOF"),
        "the skeleton is a heredoc:\n{expected}"
    );

    let out = baton_in(&env, &ws, &["handoff", "--to", "codex"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    let err = stderr(&out);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error: a handoff needs a briefing: --brief FILE")
            && first.contains("--no-brief"),
        "one error line first:\n{err}"
    );
    assert!(!err.contains("Usage:"), "not clap's usage error:\n{err}");
    assert_eq!(skeleton_of(&err), Some(expected.clone()), "{err}");
    assert_eq!(
        snapshot_files(&ws.join(".baton")),
        before,
        "store unchanged"
    );

    // --json: one document, the error with the skeleton in its hint.
    let out = baton_in(&env, &ws, &["--json", "handoff", "--to", "codex"]);
    assert_eq!(code(&out), 2);
    let d = doc(&out);
    assert_eq!(d["ok"], false, "{d}");
    assert_eq!(d["error"]["code"], "usage", "{d}");
    assert_eq!(d["error"]["exit_code"], 2, "{d}");
    let hint = d["error"]["hint"].as_str().expect("hint");
    assert!(
        hint.contains("<<'EOF'\n# Handoff\n\n## Objective\n") && hint.contains("## Next Steps\n"),
        "{hint}"
    );
    assert_eq!(
        snapshot_files(&ws.join(".baton")),
        before,
        "store unchanged"
    );

    // Both flags at once stays clap's refusal.
    let brief = env.path().join("brief.md");
    let out = baton_in(
        &env,
        &ws,
        &[
            "handoff",
            "--to",
            "codex",
            "--brief",
            &s(&brief),
            "--no-brief",
        ],
    );
    assert_eq!(code(&out), 2);
}

// ---------------------------------------------------------------------------------------
// 2. Every section of the briefing reaches the kickoff
// ---------------------------------------------------------------------------------------

#[test]
fn every_briefing_section_reaches_the_kickoff() {
    let env = Env::new();
    let (ws, _) = workspace(&env);
    let brief = env.path().join("full.md");
    fs::write(
        &brief,
        "# Handoff\n\n## Objective\n\nShip the parser.\n\n## Context\n\nThe old parser is \
         regex based.\n\n## What Has Been Done\n\n- Lexer written and tested.\n\n\
         ## Current State\n\nParser half done.\n\n## Next Steps\n\n1. Finish the grammar.\n\n\
         ## Acceptance Criteria\n\n- All golden tests pass.\n\n## Notes\n\nAsk Bob about \
         unicode.\n",
    )
    .expect("write");
    ok(
        baton_in(&env, &ws, &["save", "--brief", &s(&brief), "--to", "codex"]),
        "save",
    );
    let text = kickoff_text(&json_in(&env, &ws, &["resume"]));
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not on the kickoff:\n{text}"))
    };
    // Known sections in the kickoff's order, the others after them in the briefing's.
    let order = [
        at("## Next Steps\n1. Finish the grammar.\n"),
        at("## Current State\nParser half done.\n"),
        at("## What Has Been Done\n- Lexer written and tested.\n"),
        at("## Objective\nShip the parser.\n"),
        at("## Context\nThe old parser is regex based.\n"),
        at("## Acceptance Criteria\n- All golden tests pass.\n"),
        at("## Notes\nAsk Bob about unicode.\n"),
        at("## Workspace\n"),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "order:\n{text}");
    assert!(!text.contains("(not in this handoff)"), "{text}");

    // A small budget drops the lowest sections whole, named with the command to read them.
    let small = kickoff_text(&json_in(&env, &ws, &["resume", "--budget", "150"]));
    assert!(small.contains("## Left out to fit the budget\n"), "{small}");
    assert!(small.contains("Notes"), "{small}");
    assert!(small.contains(": baton cat "), "{small}");

    // A frontmatter handoff: its Context, Output and Acceptance Criteria reach the page;
    // only the Current State it really lacks is "not in this handoff".
    let env = Env::new();
    env.init();
    let dir = env.path().join("handoffs");
    fs::create_dir_all(&dir).expect("mkdir");
    let planner = "2024-06-03T09-00-00-planner.md";
    fs::copy(
        Path::new(&fixture("frontmatter")).join(planner),
        dir.join(planner),
    )
    .expect("copy");
    json_ok(&env, &["import-handoff", &s(&dir)]);
    let text = kickoff_text(&json_ok(&env, &["resume"]));
    for needle in [
        "## Next Steps\nImplement GET /reports/{id}/export.csv with streaming output\n",
        "## Context\nUsers need to export monthly reports as CSV.",
        "## Output\n- API: `GET /reports/{id}/export.csv`",
        "## Acceptance Criteria\n- A 200k-row report exports in under 5 s with constant memory.\n",
        "## Current State\n(not in this handoff)\n",
    ] {
        assert!(
            text.contains(needle),
            "{needle:?} not on the kickoff:\n{text}"
        );
    }
    assert_eq!(text.matches("(not in this handoff)").count(), 2, "{text}");

    // A heading with a colon is the section it names, as in a briefing of baton's own.
    let env = Env::new();
    env.init();
    let dir = env.path().join("handoffs");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(
        dir.join("2024-06-03T09-00-00-planner.md"),
        "---\nid: c1\nagent: planner\nnext_task: Ship\n---\n\n## Current State:\nHalf done.\n\n\
         ## Notes\nAsk Bob.\n",
    )
    .expect("write");
    json_ok(&env, &["import-handoff", &s(&dir)]);
    let text = kickoff_text(&json_ok(&env, &["resume"]));
    assert!(text.contains("## Current State\nHalf done.\n"), "{text}");
    assert!(text.contains("## Notes\nAsk Bob.\n"), "{text}");
    assert!(!text.contains("## Current State:"), "{text}");
}
