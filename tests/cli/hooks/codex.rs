//! Codex: baton's `notify` in a config.toml whose comments, tables and layout must survive.

use super::*;

const CONFIG: &str = r#"# Codex settings (hand-written)
model = "gpt-5-codex"   # the default model
approval_policy = "on-request"

[tui]
# desktop notifications for approvals
notifications = true

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[projects."/home/me/work"]
trust_level = "trusted"
"#;

const NOTIFY: &str = r#"notify = ["baton", "checkpoint", "--hook", "codex"]"#;

fn config(env: &Env) -> PathBuf {
    env.path().join(".codex/config.toml")
}

#[test]
fn install_keeps_comments_and_tables_is_idempotent_and_remove_restores_the_bytes() {
    let env = Env::new();
    let path = write(&config(&env), CONFIG);
    let doc = hooks_ok(&env, &["install", "--harness", "codex"]);
    assert_eq!(
        actions(&doc),
        pairs(&[("agent-turn-complete", "installed")])
    );
    assert_eq!(doc["command"], "baton checkpoint --hook codex", "{doc}");
    let text = fs::read_to_string(&path).unwrap();
    // A top-level key, so before the first table; every other line as it was.
    let expected = CONFIG.replace(
        "approval_policy = \"on-request\"\n",
        &format!("approval_policy = \"on-request\"\n{NOTIFY}\n"),
    );
    assert_eq!(text, expected);

    let doc = hooks_ok(&env, &["install", "--harness", "codex"]);
    assert_eq!(
        (doc["written"].clone(), actions(&doc)),
        (false.into(), pairs(&[("agent-turn-complete", "unchanged")]))
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    let status = hooks_ok(&env, &["status", "--harness", "codex"]);
    let user = status_of(&status, "codex", "user");
    assert_eq!(user["state"], "installed", "{status}");
    assert_eq!(user["events"][0]["event"], "agent-turn-complete");
    assert_eq!(
        status["hooks"].as_array().unwrap().len(),
        1,
        "Codex has no project scope to list: {status}"
    );

    hooks_ok(&env, &["remove", "--harness", "codex"]);
    assert_eq!(fs::read_to_string(&path).unwrap(), CONFIG);
    assert!(!env.path().join(".codex/.baton-hooks.json").exists());
}

#[test]
fn another_notify_program_is_refused_without_force_and_reported_when_replaced() {
    let env = Env::new();
    let home = env.path().join("codex-home");
    let path = write(
        &home.join("config.toml"),
        &CONFIG.replace(
            "approval_policy = \"on-request\"\n",
            "approval_policy = \"on-request\"\nnotify = [\"python3\", \"/home/me/notify.py\"] # desktop ping\n",
        ),
    );
    let before = fs::read_to_string(&path).unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["--json", "hooks"];
        all.extend_from_slice(args);
        let out = env
            .cmd()
            .env("CODEX_HOME", &home)
            .args(&all)
            .output()
            .expect("run baton");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        (out.status.code(), doc)
    };
    let (code, doc) = run(&["install", "--harness", "codex"]);
    assert_eq!(code, Some(5), "{doc}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(r#"notify = ["python3", "/home/me/notify.py"]"#),
        "{doc}"
    );
    assert!(message.contains("only one notify program"), "{doc}");
    assert!(
        doc["error"]["hint"].as_str().unwrap().contains("--force"),
        "{doc}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), before);
    let (_, status) = run(&["status", "--harness", "codex"]);
    let user = status_of(&status, "codex", "user");
    assert_eq!(user["state"], "not_installed", "{status}");
    assert!(
        user["problem"].as_str().unwrap().contains("python3"),
        "{status}"
    );
    // Not baton's, so remove leaves it.
    let (code, doc) = run(&["remove", "--harness", "codex"]);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(
        actions(&doc),
        pairs(&[("agent-turn-complete", "not_installed")])
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), before);

    let (code, doc) = run(&[
        "install",
        "--harness",
        "codex",
        "--push",
        "devbox",
        "--force",
    ]);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(
        doc["replaced"], r#"["python3", "/home/me/notify.py"]"#,
        "{doc}"
    );
    let text = fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(
            "notify = [\"baton\", \"checkpoint\", \"--hook\", \"codex\", \"--push\", \"devbox\"] # desktop ping\n"
        ),
        "{text}"
    );
    assert!(
        !env.path().join(".codex").exists(),
        "CODEX_HOME is where it goes"
    );

    // Baton's own line, edited by hand (a new argument): kept without --force.
    let edited = text.replace("\"devbox\"]", "\"devbox\", \"--verbose\"]");
    fs::write(&path, &edited).unwrap();
    let (_, status) = run(&["status"]);
    assert_eq!(status_of(&status, "codex", "user")["state"], "edited");
    for args in [
        &["install", "--harness", "codex"][..],
        &["remove", "--harness", "codex"][..],
    ] {
        let (code, doc) = run(args);
        assert_eq!(code, Some(5), "{args:?}: {doc}");
        assert_eq!(fs::read_to_string(&path).unwrap(), edited);
    }
    let (code, _) = run(&["remove", "--harness", "codex", "--force"]);
    assert_eq!(code, Some(0));
    let after = fs::read_to_string(&path).unwrap();
    assert!(!after.contains("notify"), "{after}");
    assert!(
        after.contains("# desktop notifications for approvals"),
        "{after}"
    );
}

#[test]
fn a_config_of_tables_only_gets_notify_at_the_top_and_bad_requests_are_usage_errors() {
    let env = Env::new();
    let tables = "[tui]\nnotifications = true\n";
    let path = write(&config(&env), tables);
    hooks_ok(&env, &["install", "--harness", "codex"]);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!("{NOTIFY}\n{tables}"),
        "notify must stay a top-level key"
    );
    hooks_ok(&env, &["remove", "--harness", "codex"]);
    assert_eq!(fs::read_to_string(&path).unwrap(), tables);

    for (args, says) in [
        (
            &["install", "--harness", "codex", "--scope", "project"][..],
            "no project scope",
        ),
        (
            &["install", "--harness", "codex", "--on-stop"][..],
            "--on-stop is for Claude Code",
        ),
        (
            &["install", "--harness", "codex", "--resume"][..],
            "--resume is for Claude Code",
        ),
        (
            &["status", "--harness", "codex", "--scope", "project"][..],
            "no project scope",
        ),
    ] {
        let err = hooks_err(&env, args, 2);
        assert!(
            err["message"].as_str().unwrap().contains(says),
            "{args:?}: {err}"
        );
    }

    let broken = "model = \"o3\"\n[tui\nnotifications = true\n";
    write(&path, broken);
    let err = hooks_err(&env, &["install", "--harness", "codex"], 2);
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("is not valid TOML (line 2, column"),
        "{err}"
    );
    assert!(!message.contains('\n'), "one line: {err}");
    assert_eq!(fs::read_to_string(&path).unwrap(), broken);

    // No config.toml yet: baton makes a private one, and remove takes it away again.
    let env = Env::new();
    hooks_ok(&env, &["install", "--harness", "codex"]);
    assert_eq!(
        fs::read_to_string(config(&env)).unwrap(),
        format!("{NOTIFY}\n")
    );
    assert_eq!(mode(&config(&env)), 0o600);
    hooks_ok(&env, &["remove", "--harness", "codex"]);
    assert!(!config(&env).exists());
}
