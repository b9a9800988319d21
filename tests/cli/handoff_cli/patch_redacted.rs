//! Handoff CLI: a patch whose secrets were redacted says so (issue 29), and the presence
//! comparison still finds its changes in the work tree they came from.

use super::*;

#[test]
fn a_redacted_patch_says_so_in_evidence_and_kickoff_and_still_compares() {
    let env = Env::new();
    env.init();
    let work = git_init(&env.path().join("work"));
    commit(&work, "settings.py", "DEBUG = True\n", "first");
    commit(&work, "README.md", "# app\n", "second");
    // An unstaged change that adds a secret, and a staged one that holds none.
    let secret = "Corr3ct-H0rse-Battery-9";
    fs::write(
        work.join("settings.py"),
        format!("DEBUG = True\nDB_PASSWORD = \"{secret}\"\n"),
    )
    .expect("write");
    fs::write(work.join("README.md"), "# app\n\nRun it.\n").expect("write");
    git(&work, &["add", "README.md"]);

    let saved = json_in(&env, &work, &["save", "--no-brief", "--from", "ci"]);
    assert!(
        saved.to_string().contains("password_assignment"),
        "the save reports the redaction: {saved}"
    );
    let evidence: Value =
        serde_json::from_str(&cat(&env, "current:evidence/evidence.json")).expect("json");
    let git_ev = &evidence["git"];
    assert_eq!(git_ev["unstaged_patch_redacted"], true, "{git_ev}");
    assert!(git_ev.get("staged_patch_redacted").is_none(), "{git_ev}");
    let patch = cat(&env, "current:evidence/unstaged.patch");
    assert!(!patch.contains(secret), "{patch}");
    assert!(patch.contains("[REDACTED:password_assignment]"), "{patch}");

    // context.md, the readable page of the evidence, says so too.
    let context = cat(&env, "current:context.md");
    let patch_line = |name: &str| {
        context
            .lines()
            .find(|l| l.starts_with(&format!("- {name}:")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        patch_line("unstaged.patch").ends_with("(patch redacted: does not apply as-is)"),
        "{context}"
    );
    assert!(
        !patch_line("staged.patch").contains("redacted"),
        "{context}"
    );

    let kickoff = ok(baton_in(&env, &work, &["resume"]), "resume");
    let line = |name: &str| {
        kickoff
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        line("evidence/unstaged.patch").ends_with("(patch redacted: does not apply as-is)"),
        "{kickoff}"
    );
    assert!(
        !line("evidence/staged.patch").contains("redacted"),
        "{kickoff}"
    );
    // The per-file hashes were taken before redaction: the work tree the changes came
    // from still holds them all.
    assert!(
        kickoff.contains("uncommitted changes: the captured ones are present here (2 of 2 files)"),
        "{kickoff}"
    );
}

#[test]
fn a_redacted_patch_of_a_repository_below_a_workspace_folder_says_so_too() {
    let env = Env::new();
    env.init();
    let work = env.path().join("work");
    let api = git_init(&work.join("api"));
    commit(&api, "settings.py", "DEBUG = True\n", "api: first");
    fs::write(
        api.join("settings.py"),
        "DEBUG = True\nDB_PASSWORD = \"Corr3ct-H0rse-Battery-9\"\n",
    )
    .expect("write");
    let web = git_init(&work.join("web"));
    commit(&web, "app.js", "let x = 1;\n", "web: first");
    fs::write(web.join("app.js"), "let x = 2;\n").expect("write");
    json_in(&env, &work, &["save", "--no-brief", "--from", "ci"]);

    let evidence: Value =
        serde_json::from_str(&cat(&env, "current:evidence/evidence.json")).expect("json");
    let repos = &evidence["repositories"];
    assert_eq!(
        repos["api"]["git"]["unstaged_patch_redacted"], true,
        "{evidence}"
    );
    assert!(
        repos["web"]["git"].get("unstaged_patch_redacted").is_none(),
        "{evidence}"
    );
    let context = cat(&env, "current:context.md");
    assert!(
        context.contains(
            "in `evidence/repos/api/unstaged.patch` (patch redacted: does not apply as-is)"
        ),
        "{context}"
    );
    let kickoff = ok(baton_in(&env, &work, &["resume"]), "resume");
    let line = |path: &str| {
        kickoff
            .lines()
            .find(|l| l.contains(path))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        line("evidence/repos/api/unstaged.patch")
            .ends_with("(patch redacted: does not apply as-is)"),
        "{kickoff}"
    );
    assert!(
        !line("evidence/repos/web/unstaged.patch").contains("redacted"),
        "{kickoff}"
    );
}
