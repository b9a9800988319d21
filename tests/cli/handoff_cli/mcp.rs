//! Handoff CLI: baton mcp driven by the official Python MCP SDK's stdio client.

use super::transcripts::claude_project_dir;
use super::transcripts::plant_session;
use super::*;

// ---------------------------------------------------------------------------------------
// baton mcp: driven by the official Python MCP SDK's stdio client
// ---------------------------------------------------------------------------------------

#[test]
fn mcp_server_serves_a_real_client_save_resume_search_and_tool_errors() {
    require_mcp_sdk();
    let env = Env::new();
    let ws = git_init(&env.path().join("ws"));
    let ws = fs::canonicalize(&ws).unwrap();
    fs::write(ws.join("notes.txt"), "notes\n").unwrap();
    fs::write(env.path().join("outside.txt"), "not yours\n").unwrap();
    plant_session(
        "fixtures/transcripts/claude-code/main.jsonl",
        &env.path()
            .join(".claude/projects")
            .join(claude_project_dir(&ws))
            .join("5e551011-aaaa-4bbb-8ccc-000000000001.jsonl"),
        &ws,
        &ws,
        1,
    );
    assert!(
        env.cmd()
            .current_dir(&ws)
            .arg("init")
            .status()
            .unwrap()
            .success()
    );
    // A handoff of another repository, into the same store: the client resumes it as
    // current~1 with require_same_repo and is refused.
    let other = git_init(&env.path().join("other"));
    commit(&other, "o.txt", "o\n", "other");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).unwrap();
    let store = s(&ws.join(".baton"));
    ok(
        baton_in(
            &env,
            &other,
            &["--store", &store, "save", "--brief", &s(&brief), "."],
        ),
        "save of another repository",
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_baton"))
        .arg(&ws)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", env.path())
        .current_dir(&ws)
        .output()
        .expect("run the MCP client");
    assert!(
        out.status.success(),
        "MCP client failed: {}",
        common::text(&out)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["server"], "baton");
    assert_eq!(
        doc["tools"],
        json!([
            "log",
            "pull",
            "push",
            "resume",
            "save_handoff",
            "search",
            "show"
        ])
    );
    let save = &doc["save"];
    assert_eq!(save["error"], false, "{save}");
    let bundle = save["structured"]["bundle"].as_str().unwrap();
    let files = save["structured"]["files"].to_string();
    assert!(
        files.contains("attachments/notes.txt") && files.contains("transcript.jsonl"),
        "{files}"
    );

    let resume = &doc["resume"];
    assert_eq!(resume["error"], false, "{resume}");
    assert_eq!(resume["structured"]["bundle"], bundle);
    assert!(resume["structured"]["kickoff"]["tokens"].as_u64().unwrap() <= 1500);
    let text = resume["text"].as_str().unwrap();
    assert!(
        text.contains("## Next Steps") && text.contains("## Risks / Watch Out"),
        "{text}"
    );
    assert!(text.contains("## Recent turns"), "{text}");
    assert!(
        resume["structured"]["workspace"].is_object(),
        "the comparison is structured"
    );

    let search = &doc["search"]["structured"];
    assert_eq!(search["total_matches"], 1, "{search}");
    assert_eq!(search["hits"][0]["event"]["kind"], "tool_result");
    assert_eq!(doc["log"]["structured"]["bundles"][0]["id"], bundle);

    // Errors come back as tool errors carrying baton's stable codes.
    for (call, code, exit) in [
        ("bad_rev", "not_found", 3),
        ("outside", "security", 6),
        ("bad_kind", "usage", 2),
        // The other repository's handoff does not belong in this workspace.
        ("same_repo", "store_conflict", 5),
    ] {
        let r = &doc[call];
        assert_eq!(r["error"], true, "{call}: {r}");
        assert_eq!(r["structured"]["error"]["code"], code, "{call}: {r}");
        assert_eq!(r["structured"]["error"]["exit_code"], exit, "{call}: {r}");
    }
    // The refused save wrote nothing: the other repository's bundle and the client's.
    let log = json_ok(&env, &["--store", &store, "log"]);
    assert_eq!(log["bundles"].as_array().unwrap().len(), 2, "{log}");
}
