//! Handoff CLI: invalid briefings, --no-brief, non-git workspaces.

use super::*;

// ---------------------------------------------------------------------------------------
// 4. Invalid briefings, --no-brief, non-git workspaces
// ---------------------------------------------------------------------------------------

/// The skeleton follows the error line, each heading on a line of its own.
fn assert_skeleton(err: &str) {
    let lines: Vec<&str> = err.lines().collect();
    for heading in SKELETON_LINES {
        assert!(
            lines[1..].contains(&heading),
            "skeleton line {heading:?} missing:\n{err}"
        );
    }
}

#[test]
fn invalid_briefings_are_refused_and_write_nothing() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    // A bundle already there, so "nothing written" covers refs and the log.
    let brief = env.path().join("good.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    ok(
        baton_in(&env, &ws, &["save", "--brief", &s(&brief)]),
        "save",
    );
    let all = "## Objective, ## Current State, ## Next Steps";
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "no headings",
            b"Objective: ship it. State: half done. Next: finish.\n".to_vec(),
            format!("error: briefing is missing sections: {all}; "),
        ),
        (
            "missing one section",
            b"# Handoff\n\n## Objective\n\nShip.\n\n## Current State\n\nHalf.\n".to_vec(),
            "error: briefing is missing sections: ## Next Steps; ".to_string(),
        ),
        (
            "empty section",
            b"# Handoff\n\n## Objective\n\nShip.\n\n## Current State\n\n## Next Steps\n\n1. Go.\n"
                .to_vec(),
            "error: briefing is missing sections: ## Current State (empty); ".to_string(),
        ),
        (
            "only preamble",
            b"Sure! Here is the handoff you asked for:\n\n".to_vec(),
            format!("error: briefing is missing sections: {all}; "),
        ),
        (
            "empty file",
            Vec::new(),
            format!("error: briefing is empty; it needs sections: {all}; "),
        ),
    ];
    for (what, bytes, first_line) in &cases {
        let path = env.path().join("bad.md");
        fs::write(&path, bytes).expect("write");
        let before = snapshot_files(&env.store());
        let out = baton_in(&env, &ws, &["save", "--brief", &s(&path)]);
        assert_eq!(code(&out), 2, "{what}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{what}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(err.starts_with(first_line.as_str()), "{what}:\n{err}");
        assert_skeleton(&err);
        assert_eq!(
            snapshot_files(&env.store()),
            before,
            "{what}: store changed"
        );
        // The same from stdin, and with --json: one document, the skeleton in the hint.
        let out = baton_stdin(&env, &ws, &["--json", "save", "--brief", "-"], bytes);
        assert_eq!(code(&out), 2, "{what} (stdin)");
        let d = doc(&out);
        assert_eq!(d["error"]["code"], "usage");
        assert!(
            d["error"]["hint"]
                .as_str()
                .unwrap_or_default()
                .contains("## Next Steps\n"),
            "{d}"
        );
        assert_eq!(
            snapshot_files(&env.store()),
            before,
            "{what}: store changed"
        );
    }

    // Not UTF-8 (a UTF-16 file, as some shells write): refused, nothing written.
    let path = env.path().join("utf16.md");
    let utf16: Vec<u8> = [0xff, 0xfe]
        .into_iter()
        .chain(VALID_BRIEF.encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    fs::write(&path, &utf16).expect("write");
    let before = snapshot_files(&env.store());
    let out = baton_in(&env, &ws, &["save", "--brief", &s(&path)]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).starts_with("error: the briefing is not UTF-8 text"));
    assert_eq!(snapshot_files(&env.store()), before);

    // Neither --brief nor --no-brief, and no DIR: a usage error naming both.
    let out = baton_in(&env, &ws, &["save"]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("--brief") && err.contains("--no-brief"),
        "{err}"
    );
    // Both at once: clap refuses.
    let out = baton_in(&env, &ws, &["save", "--brief", &s(&brief), "--no-brief"]);
    assert_eq!(code(&out), 2);
    // A missing briefing file: not found, named.
    let out = baton_in(&env, &ws, &["save", "--brief", "no-such-brief.md"]);
    assert_ne!(code(&out), 0);
    assert!(
        stderr(&out).contains("no-such-brief.md"),
        "{}",
        stderr(&out)
    );
    assert_eq!(snapshot_files(&env.store()), before);
}

#[test]
fn non_utf8_briefing_also_offers_the_skeleton() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let path = env.path().join("latin1.md");
    fs::write(&path, b"# Handoff\n\n## Objective\n\nCaf\xe9\n").expect("write");
    let out = baton_in(&env, &ws, &["save", "--brief", &s(&path)]);
    assert_eq!(code(&out), 2);
    assert_skeleton(&stderr(&out));
}

#[test]
fn no_brief_and_non_git_workspaces() {
    let env = Env::new();
    env.init();
    // --no-brief in a git repository: evidence, no handoff.md.
    let repo = git_init(&env.path().join("repo"));
    commit(&repo, "f.txt", "f\n", "one");
    fs::write(repo.join("f.txt"), "changed\n").expect("write");
    let saved = json_in(&env, &repo, &["save", "--no-brief", "--from", "ci"]);
    let files = bundle_files(&env, "current");
    assert!(!files.contains_key("handoff.md"), "{files:?}");
    for path in [
        "context.md",
        "evidence/evidence.json",
        "evidence/unstaged.patch",
    ] {
        assert!(files.contains_key(path), "{path} missing: {files:?}");
    }
    assert!(
        !files.contains_key("evidence/staged.patch"),
        "empty patch stored"
    );
    let evidence: Value =
        serde_json::from_str(&cat(&env, "current:evidence/evidence.json")).expect("json");
    assert_eq!(
        evidence["git"]["unstaged"],
        json!([{ "path": "f.txt", "status": "modified" }])
    );
    assert_eq!(evidence["partial"], json!(["no upstream"]));
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["summary"], "", "no briefing, no --summary: no summary");
    assert_eq!(show["metadata"]["kind"], "handoff");
    assert_eq!(show["metadata"]["evidence.partial"], "no upstream");
    assert_eq!(saved["partial"], json!(["no upstream"]));
    // The kickoff of a handoff without briefing says so, and still compares.
    let kickoff = ok(baton_in(&env, &repo, &["resume"]), "resume");
    assert!(
        kickoff.contains("## Next Steps\n(not in this handoff)"),
        "{kickoff}"
    );
    assert!(kickoff.contains("- HEAD: same"), "{kickoff}");

    // A directory that is not a git repository, named as DIR: an explicitly partial
    // capture, and the save succeeds.
    let plain = env.write_tree("plain", &[("notes.txt", b"n\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let out = baton_in(
        &env,
        env.path(),
        &["save", "--brief", &s(&brief), &s(&plain)],
    );
    let id = ok(out.clone(), "save").trim().to_string();
    assert_eq!(id.len(), 64);
    assert!(
        stderr(&out).contains("note: partial workspace evidence: not a git repository"),
        "{}",
        stderr(&out)
    );
    let evidence: Value =
        serde_json::from_str(&cat(&env, "current:evidence/evidence.json")).expect("json");
    assert_eq!(evidence["partial"], json!(["not a git repository"]));
    assert_eq!(evidence["git"], Value::Null);
    assert_eq!(evidence["workspace"], canonical(&plain).as_str());
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["metadata"]["evidence.partial"], "not a git repository");
    assert_eq!(show["summary"], "Ship the thing.");
    let files = bundle_files(&env, "current");
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["context.md", "evidence/evidence.json", "handoff.md"]
    );
    let context = cat(&env, "current:context.md");
    assert!(
        context.contains("**Partial capture:** not a git repository."),
        "{context}"
    );
    assert!(
        context.contains("No git repository was captured."),
        "{context}"
    );
}
