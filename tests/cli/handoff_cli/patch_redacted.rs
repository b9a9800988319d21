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
