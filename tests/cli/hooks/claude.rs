//! Claude Code: baton's hooks merged into a settings.json that already holds a user's own.

use super::*;

/// A user's settings as Claude Code users write them: permissions, a Bash guard, their own
/// PreCompact hook, env, and four-space indentation.
const SETTINGS: &str = r#"{
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "permissions": {
        "allow": ["Bash(npm run test:*)", "Read(~/.zshrc)"],
        "deny": ["Read(./.env)", "Read(./secrets/**)"]
    },
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    { "type": "command", "command": "$CLAUDE_PROJECT_DIR/.claude/hooks/check-bash.sh", "timeout": 5 }
                ]
            }
        ],
        "PreCompact": [
            {
                "matcher": "manual",
                "hooks": [ { "type": "command", "command": "echo compacting >> ~/compact.log" } ]
            }
        ]
    },
    "env": { "DISABLE_TELEMETRY": "1", "MAX_THINKING_TOKENS": 12000 },
    "cleanupPeriodDays": 20.5
}
"#;

const HOOK: &str = "baton checkpoint --hook claude-code";

fn settings(env: &Env) -> PathBuf {
    env.path().join(".claude/settings.json")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

/// The top-level keys of a file baton wrote (two-space indentation), in their order
/// (serde_json's Value sorts them).
fn key_order(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("  \""))
        .map(|l| l.trim().split('"').nth(1).unwrap().to_string())
        .collect()
}

#[test]
fn install_merges_among_a_users_hooks_is_idempotent_and_remove_restores_the_settings() {
    let env = Env::new();
    let path = write(&settings(&env), SETTINGS);
    fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let original = read_json(&path);

    let doc = hooks_ok(&env, &["install", "--harness", "claude-code"]);
    assert_eq!(
        actions(&doc),
        pairs(&[("PreCompact", "installed"), ("SessionEnd", "installed")])
    );
    assert_eq!(doc["written"], true, "{doc}");
    assert_eq!(doc["command"], HOOK, "{doc}");
    assert_eq!(doc["file"], path.to_str().unwrap(), "{doc}");
    let text = fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("{\n  \"$schema\""),
        "2-space pretty: {text}"
    );
    assert!(text.ends_with("}\n"), "trailing newline: {text:?}");
    assert_eq!(
        key_order(&text),
        [
            "$schema",
            "permissions",
            "model",
            "hooks",
            "env",
            "cleanupPeriodDays"
        ],
        "{text}"
    );
    assert_eq!(mode(&path), 0o640, "the file's mode is kept");

    let now = read_json(&path);
    // Everything of the user's is still there, as it was.
    for key in [
        "$schema",
        "permissions",
        "model",
        "env",
        "cleanupPeriodDays",
    ] {
        assert_eq!(now[key], original[key], "{key}");
    }
    assert_eq!(now["hooks"]["PreToolUse"], original["hooks"]["PreToolUse"]);
    let pre = now["hooks"]["PreCompact"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "{now}");
    assert_eq!(
        pre[0], original["hooks"]["PreCompact"][0],
        "the user's first"
    );
    let ours = serde_json::json!({"hooks": [{"type": "command", "command": HOOK, "timeout": 30}]});
    assert_eq!(pre[1], ours);
    assert_eq!(now["hooks"]["SessionEnd"], serde_json::json!([ours]));
    assert!(now["hooks"].get("Stop").is_none() && now["hooks"].get("SessionStart").is_none());

    // Twice: nothing moves.
    let doc = hooks_ok(&env, &["install", "--harness", "claude-code"]);
    assert_eq!(doc["written"], false, "{doc}");
    assert_eq!(
        actions(&doc),
        pairs(&[("PreCompact", "unchanged"), ("SessionEnd", "unchanged")])
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), text, "not idempotent");

    let status = hooks_ok(&env, &["status", "--harness", "claude-code"]);
    let user = status_of(&status, "claude-code", "user");
    assert_eq!(user["state"], "installed", "{status}");
    assert_eq!(user["command"], HOOK);
    let events: Vec<&str> = user["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["PreCompact", "SessionEnd"]);

    let doc = hooks_ok(&env, &["remove", "--harness", "claude-code"]);
    assert_eq!(
        actions(&doc),
        pairs(&[("PreCompact", "removed"), ("SessionEnd", "removed")])
    );
    assert_eq!(read_json(&path), original, "remove restores the JSON value");
    assert_eq!(key_order(&fs::read_to_string(&path).unwrap()).len(), 6);
    assert!(!env.path().join(".claude/.baton-hooks.json").exists());
    let doc = hooks_ok(&env, &["remove", "--harness", "claude-code"]);
    assert_eq!(
        (doc["written"].clone(), actions(&doc)),
        (false.into(), vec![])
    );
}

#[test]
fn on_stop_resume_and_push_add_their_events_and_a_plain_install_takes_them_out_again() {
    let env = Env::new();
    let store = fs::canonicalize(env.path())
        .unwrap()
        .join("my stores/.baton");
    let path = settings(&env);
    let doc = hooks_ok(
        &env,
        &[
            "--store",
            "my stores/.baton",
            "install",
            "--harness",
            "claude-code",
            "--on-stop",
            "--resume",
            "--push",
            "origin",
        ],
    );
    let command = format!("{HOOK} --push origin --store '{}'", store.display());
    assert_eq!(doc["command"], command.as_str(), "{doc}");
    assert_eq!(
        actions(&doc),
        pairs(&[
            ("PreCompact", "installed"),
            ("SessionEnd", "installed"),
            ("Stop", "installed"),
            ("SessionStart", "installed")
        ])
    );
    // A file baton creates is private, in a private directory.
    assert_eq!(mode(&path), 0o600);
    let now = read_json(&path);
    let hook = serde_json::json!({"type": "command", "command": command, "timeout": 30});
    assert_eq!(now["hooks"]["Stop"], serde_json::json!([{"hooks": [hook]}]));
    assert_eq!(
        now["hooks"]["SessionStart"],
        serde_json::json!([{"matcher": "startup|clear|compact", "hooks": [hook]}])
    );

    // Entries baton wrote are baton's to change: no --force needed.
    let doc = hooks_ok(&env, &["install", "--harness", "claude-code"]);
    assert_eq!(
        actions(&doc),
        pairs(&[
            ("PreCompact", "updated"),
            ("SessionEnd", "updated"),
            ("Stop", "removed"),
            ("SessionStart", "removed")
        ])
    );
    let now = read_json(&path);
    assert_eq!(now["hooks"]["PreCompact"][0]["hooks"][0]["command"], HOOK);
    assert_eq!(
        now["hooks"].as_object().unwrap().keys().collect::<Vec<_>>(),
        ["PreCompact", "SessionEnd"]
    );
    // Baton made the file, and nothing else is in it: remove takes it away again.
    hooks_ok(&env, &["remove", "--harness", "claude-code"]);
    assert!(!path.exists());
}

#[test]
fn a_settings_file_that_does_not_parse_is_left_byte_for_byte_with_exit_2() {
    let env = Env::new();
    let path = settings(&env);
    for (broken, says) in [
        ("{\n  \"model\": \"opus\",\n}\n", "is not valid JSON"),
        ("[\"hooks\"]\n", "holds an array"),
        ("{\"hooks\": [\"PreCompact\"]}", "\"hooks\" is an array"),
        (
            "{\"hooks\": {\"SessionEnd\": {\"command\": \"x\"}}}",
            "\"SessionEnd\" is an object",
        ),
    ] {
        write(&path, broken);
        for args in [
            &["install", "--harness", "claude-code"][..],
            &["remove", "--harness", "claude-code", "--force"][..],
        ] {
            let err = hooks_err(&env, args, 2);
            let message = err["message"].as_str().unwrap();
            assert!(message.contains(path.to_str().unwrap()), "{err}");
            assert!(message.contains(says), "{broken}: {err}");
            assert!(!message.contains('\n'), "one line: {err}");
            assert!(
                err["hint"].as_str().unwrap().contains("fix the file"),
                "{err}"
            );
            assert_eq!(fs::read_to_string(&path).unwrap(), broken, "{args:?} wrote");
        }
        let status = hooks_ok(&env, &["status", "--harness", "claude-code"]);
        let user = status_of(&status, "claude-code", "user");
        assert_eq!(user["state"], "unreadable", "{status}");
        assert!(user["problem"].as_str().unwrap().contains(says), "{status}");
    }
    assert!(!env.path().join(".claude/.baton-hooks.json").exists());
}

#[test]
fn an_edited_baton_entry_is_kept_without_force() {
    let env = Env::new();
    let path = write(&settings(&env), SETTINGS);
    hooks_ok(&env, &["install", "--harness", "claude-code"]);
    let text = fs::read_to_string(&path).unwrap();
    // The user raises baton's timeout in SessionEnd.
    let edited = text
        .replacen("\"timeout\": 30", "\"timeout\": 90", 2)
        .replacen("\"timeout\": 90", "\"timeout\": 30", 1);
    assert_ne!(edited, text);
    fs::write(&path, &edited).unwrap();
    let status = hooks_ok(
        &env,
        &["status", "--harness", "claude-code", "--scope", "user"],
    );
    let user = status_of(&status, "claude-code", "user");
    assert_eq!(user["state"], "edited", "{status}");
    assert_eq!(
        user["events"],
        serde_json::json!([
            {"event": "PreCompact", "state": "recorded"},
            {"event": "SessionEnd", "state": "edited"}
        ])
    );
    for args in [
        &["install", "--harness", "claude-code"][..],
        &["install", "--harness", "claude-code", "--on-stop"][..],
        &["remove", "--harness", "claude-code"][..],
    ] {
        let err = hooks_err(&env, args, 5);
        assert!(
            err["message"].as_str().unwrap().contains("SessionEnd"),
            "{err}"
        );
        assert!(err["hint"].as_str().unwrap().contains("--force"), "{err}");
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            edited,
            "{args:?} touched the edit"
        );
    }
    let doc = hooks_ok(&env, &["install", "--harness", "claude-code", "--force"]);
    assert_eq!(
        actions(&doc),
        pairs(&[("PreCompact", "unchanged"), ("SessionEnd", "updated")])
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), text);

    // An entry taken out by hand shows as such; install puts it back, no --force needed.
    let mut value = read_json(&path);
    value["hooks"].as_object_mut().unwrap().remove("SessionEnd");
    fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let status = hooks_ok(&env, &["status", "--harness", "claude-code"]);
    let user = status_of(&status, "claude-code", "user");
    assert_eq!(user["state"], "edited", "{status}");
    assert_eq!(
        user["events"][1],
        serde_json::json!({"event": "SessionEnd", "state": "missing"})
    );
    assert!(
        env.ok(&["hooks", "status"])
            .contains("SessionEnd (removed by hand)"),
        "human status"
    );
    let doc = hooks_ok(&env, &["install", "--harness", "claude-code"]);
    assert_eq!(
        actions(&doc),
        pairs(&[("PreCompact", "unchanged"), ("SessionEnd", "installed")])
    );

    // A baton line the user wrote by hand, with their own hook beside it in the group, has
    // no record: edited too; remove --force takes out only baton's hook.
    let original = read_json(&write(&path, SETTINGS));
    fs::remove_file(env.path().join(".claude/.baton-hooks.json")).unwrap();
    let by_hand = SETTINGS.replace(
        "\"command\": \"echo compacting >> ~/compact.log\" }",
        "\"command\": \"echo compacting >> ~/compact.log\" },\n                           \
         { \"type\": \"command\", \"command\": \"baton checkpoint --hook claude-code\" }",
    );
    write(&path, &by_hand);
    let status = hooks_ok(&env, &["status", "--harness", "claude-code"]);
    assert_eq!(status_of(&status, "claude-code", "user")["state"], "edited");
    hooks_err(&env, &["remove", "--harness", "claude-code"], 5);
    assert_eq!(fs::read_to_string(&path).unwrap(), by_hand);
    let doc = hooks_ok(&env, &["remove", "--harness", "claude-code", "--force"]);
    assert_eq!(actions(&doc), pairs(&[("PreCompact", "removed")]));
    assert_eq!(read_json(&path), original, "the user's own hook stayed");
}

#[test]
fn project_scope_writes_the_work_tree_settings_and_a_symlinked_file_stays_a_link() {
    let env = Env::new();
    let project = env.path().join("proj");
    fs::create_dir_all(project.join("src/deep")).unwrap();
    common::git(&project, &["init", "-q"]);
    let project = fs::canonicalize(&project).unwrap();
    let doc = hooks_ok_in(
        &env,
        &project.join("src/deep"),
        &["install", "--harness", "claude-code", "--scope", "project"],
    );
    let path = project.join(".claude/settings.json");
    assert_eq!(doc["file"], path.to_str().unwrap(), "{doc}");
    assert_eq!(
        read_json(&path)["hooks"]["SessionEnd"][0]["hooks"][0]["command"],
        HOOK
    );
    assert_eq!(mode(&project.join(".claude")), 0o700);
    assert!(
        !settings(&env).exists(),
        "the user's settings were not touched"
    );
    // Outside a work tree at home, the "project" settings would be the user's own.
    let err = hooks_err(
        &env,
        &["install", "--harness", "claude-code", "--scope", "project"],
        2,
    );
    assert!(
        err["message"].as_str().unwrap().contains("user settings"),
        "{err}"
    );
    assert!(!settings(&env).exists());
    let status = hooks_ok(&env, &["status"]);
    let listed: Vec<(&str, &str)> = status["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["harness"].as_str().unwrap(), e["scope"].as_str().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [("claude-code", "user"), ("codex", "user")],
        "{status}"
    );
    let doc = hooks_ok_in(&env, &project, &["status", "--scope", "project"]);
    assert_eq!(doc["hooks"][0]["state"], "installed", "{doc}");
    assert_eq!(doc["hooks"].as_array().unwrap().len(), 1, "{doc}");

    // A dotfiles setup: ~/.claude/settings.json links to the real file elsewhere.
    let real = write(&env.path().join("dotfiles/claude.json"), SETTINGS);
    fs::create_dir_all(env.path().join(".claude")).unwrap();
    std::os::unix::fs::symlink(&real, settings(&env)).unwrap();
    hooks_ok(&env, &["install", "--harness", "claude-code"]);
    assert!(
        fs::symlink_metadata(settings(&env))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        read_json(&real)["hooks"]["SessionEnd"][0]["hooks"][0]["command"],
        HOOK
    );
    hooks_ok(&env, &["remove", "--harness", "claude-code"]);
    assert_eq!(
        read_json(&real),
        serde_json::from_str::<Value>(SETTINGS).unwrap()
    );
}
