//! Handoff CLI: native transcripts (Claude Code and Codex sessions) found and normalised.

use super::*;

// ---------------------------------------------------------------------------------------
// Native transcripts: Claude Code and Codex sessions found and normalised
// ---------------------------------------------------------------------------------------

/// Claude Code's project directory name for a workspace.
pub(super) fn claude_project_dir(workspace: &Path) -> String {
    s(workspace)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Copy a fixture session to `dest`, naming the workspaces, with the given age in hours.
pub(super) fn plant_session(
    fixture: &str,
    dest: &Path,
    workspace: &Path,
    other: &Path,
    hours_old: u64,
) {
    let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture))
        .expect("fixture")
        .replace("{{WORKSPACE}}", &s(workspace))
        .replace("{{OTHER}}", &s(other));
    fs::create_dir_all(dest.parent().unwrap()).unwrap();
    fs::write(dest, text).unwrap();
    let when = SystemTime::now() - std::time::Duration::from_secs(hours_old * 3600);
    fs::File::options()
        .write(true)
        .open(dest)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

#[test]
fn native_sessions_are_found_normalised_paired_and_scrubbed() {
    let env = Env::new();
    let ws = git_init(&env.path().join("ws"));
    let ws = fs::canonicalize(&ws).unwrap();
    let other = env.path().join("other");
    fs::create_dir_all(&other).unwrap();
    let projects = env.path().join(".claude/projects");
    let here = projects.join(claude_project_dir(&ws));
    plant_session(
        "fixtures/transcripts/claude-code/main.jsonl",
        &here.join("5e551011-aaaa-4bbb-8ccc-000000000001.jsonl"),
        &ws,
        &other,
        2,
    );
    plant_session(
        "fixtures/transcripts/claude-code/older.jsonl",
        &here.join("01de0000-aaaa-4bbb-8ccc-000000000002.jsonl"),
        &ws,
        &other,
        48,
    );
    plant_session(
        "fixtures/transcripts/claude-code/other.jsonl",
        &projects
            .join(claude_project_dir(&other))
            .join("07e40000-aaaa-4bbb-8ccc-000000000003.jsonl"),
        &ws,
        &other,
        1,
    );
    plant_session(
        "fixtures/transcripts/codex/rollout-main.jsonl",
        &env.path()
            .join(".codex/sessions/2026/11/30/rollout-2026-11-30T13-00-00-019a2d7a.jsonl"),
        &ws,
        &other,
        3,
    );
    let in_ws = |args: &[&str]| {
        let out = env
            .cmd()
            .current_dir(&ws)
            .args(args)
            .output()
            .expect("run baton");
        (out.status.code(), common::text(&out), out.stdout)
    };
    let store = s(&ws.join(".baton"));
    let (code, text, _) = in_ws(&["init"]);
    assert_eq!(code, Some(0), "{text}");

    // Sources: this workspace's sessions only, newest first per harness.
    let (code, _, stdout) = in_ws(&["--json", "transcript", "sources"]);
    assert_eq!(code, Some(0));
    let doc: Value = serde_json::from_slice(&stdout).unwrap();
    let listed: Vec<(&str, &str)> = doc["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["harness"].as_str().unwrap(),
                s["session"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            ("claude-code", "5e551011-aaaa-4bbb-8ccc-000000000001"),
            ("claude-code", "01de0000-aaaa-4bbb-8ccc-000000000002"),
            ("codex", "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"),
        ]
    );

    // latest: the newest session of this workspace (not the newer one elsewhere).
    let (code, text, _) = in_ws(&["save", "--no-brief", "--transcript", "claude-code:latest"]);
    assert_eq!(code, Some(0), "{text}");
    let shown = env.ok(&["--store", &store, "show", "current"]);
    assert!(
        shown.contains("claude-code:5e551011-aaaa-4bbb-8ccc-000000000001"),
        "{shown}"
    );
    assert!(
        shown.contains("attachments/transcript/claude-code-5e551011"),
        "{shown}"
    );
    let env_ws = |args: &[&str]| {
        let mut full = vec!["--store", store.as_str()];
        full.extend_from_slice(args);
        env.ok(&full)
    };
    let events: Vec<Value> = env_ws(&["cat", "current:transcript.jsonl"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shape: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e["role"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shape,
        vec![
            ("system", "system"),
            ("user", "message"),
            ("assistant", "reasoning"),
            ("assistant", "tool_call"),
            ("tool", "tool_result"),
            ("assistant", "message"),
            ("assistant", "message"),
            ("user", "message"),
        ]
    );
    assert_eq!(
        events[4]["tool"], "Bash",
        "the result is paired with its call"
    );
    assert_eq!(events[4]["call_id"], events[3]["call_id"]);
    assert_eq!(
        events[5]["source"]["agent"], "a1b2c3d4",
        "sidechain work is marked"
    );
    assert!(
        events
            .iter()
            .all(|e| e["v"] == 1 && e["source"]["harness"] == "claude-code")
    );
    let secret = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa";
    assert!(
        events[4]["text"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:anthropic_api_key]")
    );
    for (where_, bytes) in all_objects(&ws.join(".baton")) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "the secret is stored in {where_}"
        );
    }

    // Search matches what was said, never ids; filters narrow by kind and tool.
    let page = json_ok(&env, &["--store", &store, "search", "current", "5e551011"]);
    assert_eq!(page["total_matches"], 0, "{page}");
    let page = json_ok(
        &env,
        &[
            "--store",
            &store,
            "search",
            "current",
            "golden",
            "--kind",
            "tool_result",
            "--tool",
            "bash",
        ],
    );
    assert_eq!(page["total_matches"], 1, "{page}");
    assert_eq!(page["hits"][0]["event"]["kind"], "tool_result");

    // A session by id prefix; Codex rollouts without their preambles and duplicates.
    let (code, text, _) = in_ws(&["save", "--no-brief", "--transcript", "claude-code:01de0000"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(transcript_events_in(&env, &ws).len(), 1);
    let (code, text, _) = in_ws(&["save", "--no-brief", "--transcript", "codex:latest"]);
    assert_eq!(code, Some(0), "{text}");
    let events = transcript_events_in(&env, &ws);
    let texts: Vec<&str> = events.iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(
        texts[0],
        "Regenerate the golden file and rerun the parser tests."
    );
    assert_eq!(events.len(), 5, "{texts:?}");
    assert_eq!(events[3]["tool"], "shell");
    assert!(
        texts
            .iter()
            .all(|t| !t.contains("environment_context") && !t.contains("opaque"))
    );

    // An entry type this baton does not know is skipped and named in one note, never
    // refused (issue 29); a line that is no JSON object still is, with file and line,
    // and the store does not change.
    let unknown = here.join("0dd00000-aaaa-4bbb-8ccc-000000000004.jsonl");
    plant_session(
        "fixtures/transcripts/claude-code/unknown.jsonl",
        &unknown,
        &ws,
        &other,
        0,
    );
    let (code, text, stdout) = in_ws(&[
        "--json",
        "save",
        "--no-brief",
        "--transcript",
        "claude-code:latest",
    ]);
    assert_eq!(code, Some(0), "{text}");
    let saved: Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(
        saved["transcript_skipped"],
        json!({"hologram": 1}),
        "{saved}"
    );
    assert_eq!(
        saved["transcript_notes"],
        json!(["skipped 1 Claude Code entry of types this baton does not know: hologram (1)"])
    );
    assert_eq!(transcript_events_in(&env, &ws).len(), 1);
    let before = env_ws(&["log", "--json"]);
    let mut broken = fs::read(&unknown).unwrap();
    broken.extend_from_slice(b"[1, 2]\n");
    fs::write(&unknown, broken).unwrap();
    let (code, text, _) = in_ws(&["save", "--no-brief", "--transcript", "claude-code:latest"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(&format!("{} line 3", unknown.display())),
        "{text}"
    );
    assert_eq!(env_ws(&["log", "--json"]), before);
    fs::remove_file(&unknown).unwrap();

    // A file being appended to: the incomplete last line is left out.
    let growing = env.path().join("growing.jsonl");
    let mut bytes = fs::read(here.join("01de0000-aaaa-4bbb-8ccc-000000000002.jsonl")).unwrap();
    bytes
        .extend_from_slice(b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"half");
    fs::write(&growing, bytes).unwrap();
    let (code, text, _) = in_ws(&["save", "--no-brief", "--transcript", &s(&growing)]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(transcript_events_in(&env, &ws).len(), 1);
}

fn transcript_events_in(env: &Env, ws: &Path) -> Vec<Value> {
    env.ok(&[
        "--store",
        &s(&ws.join(".baton")),
        "cat",
        "current:transcript.jsonl",
    ])
    .lines()
    .map(|l| serde_json::from_str(l).expect("event"))
    .collect()
}
