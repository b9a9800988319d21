//! Handoff CLI: baton skill, the skill file in a harness's configuration.

use super::*;

// ---------------------------------------------------------------------------------------
// baton skill: the skill file in a harness's configuration
// ---------------------------------------------------------------------------------------

#[test]
fn skill_install_is_idempotent_and_never_overwrites_an_edit_without_force() {
    let env = Env::new();
    let claude = env.path().join("claude-config");
    let run = |args: &[&str]| {
        let out = env
            .cmd()
            .env("CLAUDE_CONFIG_DIR", &claude)
            .args(args)
            .output()
            .expect("run baton");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code(), doc)
    };
    let skill = claude.join("skills/baton/SKILL.md");
    let (code, doc) = run(&["--json", "skill", "install", "--harness", "claude-code"]);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(doc["changes"][0]["action"], "installed", "{doc}");
    let text = fs::read_to_string(&skill).expect("SKILL.md written under CLAUDE_CONFIG_DIR");
    assert!(
        text.starts_with("---\nname: baton\ndescription: "),
        "{text}"
    );
    assert!(text.contains("--transcript claude-code:latest"), "{text}");
    assert!(text.contains("baton resume"), "{text}");
    let mode = fs::metadata(&skill).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let (code, doc) = run(&["--json", "skill", "install", "--harness", "claude-code"]);
    assert_eq!(
        (code, &doc["changes"][0]["action"]),
        (Some(0), &json!("unchanged"))
    );
    let (_, doc) = run(&["--json", "skill", "status", "--harness", "claude-code"]);
    assert_eq!(doc["skills"][0]["state"], "current", "{doc}");
    assert_eq!(doc["skills"][1]["state"], "absent", "{doc}");

    let edited = format!("{text}\nMy own note.\n");
    fs::write(&skill, &edited).unwrap();
    let (_, doc) = run(&[
        "--json",
        "skill",
        "status",
        "--harness",
        "claude-code",
        "--scope",
        "user",
    ]);
    assert_eq!(doc["skills"][0]["state"], "modified", "{doc}");
    for args in [
        &["--json", "skill", "install", "--harness", "claude-code"][..],
        &["--json", "skill", "remove", "--harness", "claude-code"][..],
    ] {
        let (code, doc) = run(args);
        assert_eq!(code, Some(5), "{args:?}: {doc}");
        assert!(
            doc["error"]["hint"].as_str().unwrap().contains("--force"),
            "{doc}"
        );
        assert_eq!(
            fs::read_to_string(&skill).unwrap(),
            edited,
            "{args:?} touched the edit"
        );
    }
    let (code, doc) = run(&[
        "--json",
        "skill",
        "install",
        "--harness",
        "claude-code",
        "--force",
    ]);
    assert_eq!(
        (code, &doc["changes"][0]["action"]),
        (Some(0), &json!("updated"))
    );
    assert_eq!(fs::read_to_string(&skill).unwrap(), text);

    let (code, doc) = run(&["--json", "skill", "remove", "--harness", "claude-code"]);
    assert_eq!(
        (code, &doc["changes"][0]["action"]),
        (Some(0), &json!("removed"))
    );
    assert!(
        !claude.join("skills/baton").exists(),
        "the skill directory stays behind"
    );
}

#[test]
fn codex_skill_and_agents_md_section_install_into_the_project_and_come_out_cleanly() {
    let env = Env::new();
    let project = git_init(&env.path().join("proj"));
    let sub = project.join("src/deep");
    fs::create_dir_all(&sub).unwrap();
    let agents = project.join("AGENTS.md");
    let rules = "# Project rules\n\nRun the tests before you commit.\n";
    fs::write(&agents, rules).unwrap();
    let run = |args: &[&str]| {
        let out = env
            .cmd()
            .current_dir(&sub)
            .args(args)
            .output()
            .expect("run baton");
        assert!(
            out.status.success(),
            "baton {args:?}: {}",
            common::text(&out)
        );
    };
    // From a subdirectory: the project is the top of the work tree.
    run(&[
        "skill",
        "install",
        "--harness",
        "codex",
        "--scope",
        "project",
        "--agents-md",
    ]);
    let skill = fs::read_to_string(project.join(".agents/skills/baton/SKILL.md")).unwrap();
    assert!(skill.contains("--transcript codex:latest"), "{skill}");
    let with_section = fs::read_to_string(&agents).unwrap();
    assert!(with_section.starts_with(rules), "{with_section}");
    assert!(with_section.contains("baton resume"), "{with_section}");
    run(&[
        "skill",
        "install",
        "--harness",
        "codex",
        "--scope",
        "project",
        "--agents-md",
    ]);
    assert_eq!(
        fs::read_to_string(&agents).unwrap(),
        with_section,
        "not idempotent"
    );

    run(&[
        "skill",
        "remove",
        "--harness",
        "codex",
        "--scope",
        "project",
    ]);
    assert_eq!(fs::read_to_string(&agents).unwrap(), rules);
    assert!(!project.join(".agents/skills/baton").exists());
    // Nothing went to the user's own Codex home.
    assert!(!env.path().join(".codex").exists());
}
