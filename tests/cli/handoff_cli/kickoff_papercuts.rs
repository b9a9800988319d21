//! Handoff CLI: kickoff papercuts of issue 29: the sender inferred from the transcript's
//! harness.

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
        &["--json", "handoff", "--to", "qodercli", "--brief", &s(&brief)],
    );
    let saved = doc(&out);
    assert_eq!(code(&out), 0, "{saved}");
    let show = json_in(&env, &ws, &["show", saved["bundle"].as_str().expect("id")]);
    assert_eq!(show["from"], "", "{show}");
}
