//! Handoff CLI: a kickoff that keeps its promises (issue 12).

use super::budget::budget_fixture;
use super::budget::kickoff_text;
use super::import::field;
use super::import::fixture;
use super::import::import_fixture;
use super::import::meta;
use super::*;

// ---------------------------------------------------------------------------------------
// Issue 12: a kickoff that keeps its promises
// ---------------------------------------------------------------------------------------

#[test]
fn the_note_is_shown_by_log_and_resume() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("a.txt", b"a\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let note = "ran the suite twice; second run flaky";
    ok(
        baton_in(
            &env,
            &ws,
            &["save", "--brief", &s(&brief), "--note", note, &s(&ws)],
        ),
        "save",
    );
    let log = ok(baton_in(&env, env.path(), &["log"]), "log");
    assert!(log.contains(&format!("Note: {note}")), "{log}");
    let log = json_ok(&env, &["log"]);
    assert_eq!(log["bundles"][0]["note"], note, "{log}");
    let kickoff = ok(baton_in(&env, &ws, &["resume"]), "resume");
    let header = kickoff.split("\n## ").next().unwrap_or("");
    assert!(header.contains(&format!("Note: {note}")), "{kickoff}");
    let resume = json_ok(&env, &["resume"]);
    let header = resume["kickoff"]["header"]["text"]
        .as_str()
        .expect("header");
    assert!(header.contains(note), "{resume}");
}

#[test]
fn a_budget_below_the_floor_is_refused() {
    let (env, ws, _) = budget_fixture();
    let before = snapshot_files(&env.store());
    for budget in ["0", "10", "99"] {
        let out = baton_in(&env, &ws, &["resume", "--budget", budget]);
        assert_eq!(code(&out), 2, "budget {budget}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("below the floor of 100"), "{err}");
        assert!(stdout(&out).is_empty(), "nothing printed: {}", stdout(&out));
    }
    let err = common::json_err(&env, &["resume", "--budget", "50"], 2);
    assert_eq!(err["code"], "usage", "{err}");
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "the store is unchanged"
    );
    // The floor itself renders the header and a Next Steps line ending in its pointer.
    let k = json_in(&env, &ws, &["resume", "--budget", "100"]);
    assert!(k["kickoff"]["tokens"].as_u64().unwrap() <= 100, "{k}");
    let text = kickoff_text(&k);
    assert!(text.starts_with("# Handoff "), "{text}");
    assert!(text.contains("## Next Steps\n1. Step 1"), "{text}");
    assert!(text.contains("full text: baton cat "), "{text}");
}

#[test]
fn a_no_brief_kickoff_points_at_the_last_briefing() {
    let env = Env::new();
    env.init();
    let repo = git_init(&env.path().join("repo"));
    commit(&repo, "f.txt", "f\n", "one");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let first = ok(
        baton_in(&env, &repo, &["save", "--brief", &s(&brief)]),
        "save",
    )
    .trim()
    .to_string();
    ok(baton_in(&env, &repo, &["save", "--no-brief"]), "save");
    ok(baton_in(&env, &repo, &["save", "--no-brief"]), "save");
    let kickoff = ok(baton_in(&env, &repo, &["resume"]), "resume");
    let rev = &first[..12];
    let expected = format!(
        "## Next Steps\n(no briefing in this handoff; the last one is in {rev}: baton cat {rev}:handoff.md)\nFrom {rev}:\n1. Finish it.\n"
    );
    assert!(kickoff.contains(&expected), "{kickoff}");
    assert!(!kickoff.contains("(not in this handoff)"), "{kickoff}");
    assert!(
        kickoff.contains(&format!("## Current State\nFrom {rev}:\nHalf done.")),
        "{kickoff}"
    );
    // The pointer can be run as printed.
    assert_eq!(cat(&env, &format!("{rev}:handoff.md")), VALID_BRIEF);
}

#[test]
fn importing_the_same_directory_twice_adds_nothing() {
    for rel in ["prowl", "frontmatter", "agent-bundles"] {
        let env = Env::new();
        env.init();
        let first = json_ok(&env, &["import-handoff", &fixture(rel)]);
        let count = first["bundles"].as_array().map(Vec::len);
        let head = json_ok(&env, &["show", "current"])["id"].clone();
        let log = json_ok(&env, &["log"])["bundles"].as_array().map(Vec::len);
        let out = baton_in(&env, env.path(), &["import-handoff", &fixture(rel)]);
        let text = ok(out, "second import");
        assert!(
            text.starts_with("0 handoffs imported (already imported: "),
            "{rel}: {text}"
        );
        let again = json_ok(&env, &["import-handoff", &fixture(rel)]);
        assert_eq!(again["bundles"].as_array().map(Vec::len), Some(0), "{rel}");
        assert_eq!(
            again["already_imported"].as_array().map(Vec::len),
            count,
            "{rel}"
        );
        assert_eq!(json_ok(&env, &["show", "current"])["id"], head, "{rel}");
        assert_eq!(
            json_ok(&env, &["log"])["bundles"].as_array().map(Vec::len),
            log,
            "{rel}"
        );
    }
}

#[test]
fn a_replaced_prowl_briefing_is_not_an_agent() {
    let env = Env::new();
    env.init();
    let dir = env.path().join("proj/.prowl/handoff");
    fs::create_dir_all(dir.join("archive")).expect("mkdir");
    fs::write(
        dir.join("log.md"),
        "2024-05-01T09:00:00Z handoff ann -> bob (current.md)\n\
         2024-05-01T12:00:00Z handoff bob -> cy (current.md)\n",
    )
    .expect("write");
    fs::write(
        dir.join("archive/2024-05-01T12-00-00Z-replaced-current.md"),
        "## Objective\nold\n",
    )
    .expect("write");
    fs::write(dir.join("current.md"), "## Objective\nnew\n").expect("write");
    json_ok(&env, &["import-handoff", &s(&env.path().join("proj"))]);
    let old = json_ok(&env, &["show", "current~1"]);
    assert_eq!((field(&old, "from"), field(&old, "to")), ("ann", "bob"));
    let new = json_ok(&env, &["show", "current"]);
    assert_eq!((field(&new, "from"), field(&new, "to")), ("bob", "cy"));
    assert_eq!(field(&new, "created"), "2024-05-01T12:00:00Z");
}

#[test]
fn frontmatter_status_and_next_task_lead_the_kickoff() {
    let (env, _, _) = import_fixture("frontmatter");
    // review-4: `status: blocked`, a `## Blockers` section, a `next_task`.
    let text = ok(baton_in(&env, env.path(), &["resume"]), "resume");
    assert!(text.contains("\nStatus: blocked\n"), "{text}");
    let blockers = text.find("## Blockers\n- The CSV puts `memo` last");
    let next = text.find(
        "## Next Steps\nEmit columns in the on-screen order (date, account, memo, debit, credit)\n",
    );
    assert!(blockers.is_some() && next.is_some(), "{text}");
    assert!(blockers < next, "Blockers first: {text}");
    assert!(text.find("\n## ") == blockers.map(|b| b - 1), "{text}");
    assert!(!text.contains("(no briefing in this handoff"), "{text}");
    assert!(!text.contains("Note: Emit columns"), "said once: {text}");
    let log = ok(baton_in(&env, env.path(), &["log"]), "log");
    assert!(log.contains("Status:  blocked"), "{log}");
    let json = json_ok(&env, &["log"]);
    assert_eq!(json["bundles"][0]["status"], "blocked");

    // needs_discussion: the open question comes first.
    let env = Env::new();
    env.init();
    let dir = env.path().join("handoffs");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(
        dir.join("2024-06-03T09-00-00-planner.md"),
        "---\nid: q1\nstatus: needs_discussion\nquestion: Keep the v1 API or break it?\n\
         next_task: Decide with the team\n---\n\n## Context\nTwo options.\n",
    )
    .expect("write");
    json_ok(&env, &["import-handoff", &s(&dir)]);
    let text = ok(baton_in(&env, env.path(), &["resume"]), "resume");
    assert!(text.contains("\nStatus: needs_discussion\n"), "{text}");
    let question = text.find("## Open Questions\nKeep the v1 API or break it?\n");
    let next = text.find("## Next Steps\nDecide with the team\n");
    assert!(question.is_some() && next.is_some(), "{text}");
    assert!(question < next, "question first: {text}");
}

#[test]
fn a_nested_agent_bundle_manifest_maps_to_the_bundle_and_its_state_to_evidence() {
    let env = Env::new();
    env.init();
    let dir = env.path().join("bundle");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(
        dir.join("manifest.json"),
        r#"{"handoff_id": "h-42", "source": {"harness": "claude-code"},
            "target_harness": "codex", "capture": {"status": "partial"},
            "created_at": "2024-07-10T09:30:12Z"}"#,
    )
    .expect("write");
    fs::write(
        dir.join("handoff.md"),
        "# Handoff\n\n## Objective\nShip the exporter.\n\n## Next Steps\n1. Test it.\n",
    )
    .expect("write");
    fs::write(
        dir.join("state.json"),
        r#"{"git": {"branch": "feat/export", "head": "abc1234", "dirty": ["src/a.rs"]}}"#,
    )
    .expect("write");
    json_ok(&env, &["import-handoff", &s(&dir)]);
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(
        (field(&show, "from"), field(&show, "to")),
        ("claude-code", "codex")
    );
    assert_eq!(
        field(&show, "summary"),
        "Ship the exporter.",
        "the Objective"
    );
    assert_eq!(meta(&show, "handoff.status"), "partial");
    assert_eq!(meta(&show, "handoff.partial"), "true");
    assert_eq!(meta(&show, "manifest.handoff_id"), "h-42");

    let repo = git_init(&env.path().join("repo"));
    commit(&repo, "f.txt", "f\n", "one");
    let resume = json_in(&env, &repo, &["resume"]);
    let ws = &resume["workspace"];
    assert_eq!(ws["captured_branch"], "feat/export", "{ws}");
    assert_eq!(ws["captured_uncommitted"], true, "{ws}");
    let text = kickoff_text(&resume);
    assert!(text.contains("Status: partial"), "{text}");
    // The imported briefing's sections are read even though it lacks baton's required ones.
    assert!(text.contains("## Next Steps\n1. Test it.\n"), "{text}");
    assert!(
        !text.contains("no workspace evidence in this handoff"),
        "{text}"
    );

    // `partial: true` beside a status: both shown, and a blocked status still leads.
    fs::write(
        dir.join("manifest.json"),
        r#"{"id": "h-43", "status": "blocked", "partial": true}"#,
    )
    .expect("write");
    fs::write(
        dir.join("handoff.md"),
        "## Objective\nShip it.\n\n## Blockers\nNo credentials.\n",
    )
    .expect("write");
    json_ok(&env, &["import-handoff", &s(&dir)]);
    let text = kickoff_text(&json_in(&env, &repo, &["resume"]));
    assert!(
        text.contains("Status: blocked (partial capture)\n"),
        "{text}"
    );
    assert!(text.contains("## Blockers\nNo credentials.\n"), "{text}");
}

/// (from, to, status, created, handoff.md body without any frontmatter) of each bundle of
/// a store's first-parent history, oldest first.
fn chain_summary(env: &Env) -> Vec<(String, String, String, String, String)> {
    let mut out = Vec::new();
    let mut rev = json_ok(env, &["show", "current"])["id"]
        .as_str()
        .map(str::to_string);
    while let Some(id) = rev {
        let show = json_ok(env, &["show", &id]);
        let text = cat(env, &format!("{id}:handoff.md"));
        let body = match text
            .strip_prefix("---\n")
            .and_then(|t| t.split_once("\n---\n"))
        {
            Some((_, rest)) => rest.trim_start_matches('\n').to_string(),
            None => text,
        };
        out.push((
            field(&show, "from").to_string(),
            field(&show, "to").to_string(),
            meta(&show, "handoff.status").to_string(),
            field(&show, "created").to_string(),
            body,
        ));
        rev = show["parents"][0].as_str().map(str::to_string);
    }
    out.reverse();
    out
}

#[test]
fn export_handoff_round_trips_through_import() {
    // The frontmatter fixture's history has a merge: all 4 bundles are exported, 3 of
    // them on the first-parent chain compared here.
    for (rel, format, length, exported) in [
        ("prowl", "prowl", 3, 3),
        ("frontmatter", "frontmatter", 3, 4),
    ] {
        let (env, _, _) = import_fixture(rel);
        let before = chain_summary(&env);
        assert_eq!(before.len(), length, "{rel}");
        let dir = env.path().join(format!("out-{format}"));
        let out = json_ok(
            &env,
            &[
                "export-handoff",
                "current",
                "--format",
                format,
                &s(&dir),
                "--history",
            ],
        );
        assert_eq!(
            out["bundles"].as_array().map(Vec::len),
            Some(exported),
            "{out}"
        );
        let fresh = Env::new();
        fresh.init();
        json_ok(&fresh, &["import-handoff", &s(&dir)]);
        assert_eq!(chain_summary(&fresh), before, "{rel} as {format}");

        // Without --history: the one bundle.
        let one = env.path().join(format!("one-{format}"));
        let out = json_ok(
            &env,
            &["export-handoff", "current", "--format", format, &s(&one)],
        );
        assert_eq!(out["bundles"].as_array().map(Vec::len), Some(1), "{out}");
        // A non-empty directory is refused, and left as it was.
        let again = baton_in(
            &env,
            env.path(),
            &["export-handoff", "current", "--format", format, &s(&one)],
        );
        assert_eq!(code(&again), 2, "{}", stderr(&again));
        assert!(
            stderr(&again).contains("directory is not empty"),
            "{}",
            stderr(&again)
        );
    }
    // The blocked status survives the frontmatter round trip.
    let (env, _, _) = import_fixture("frontmatter");
    assert_eq!(
        chain_summary(&env).last().map(|c| c.2.as_str()),
        Some("blocked")
    );
}
