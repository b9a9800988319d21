//! Tests of the Claude Code reader: listing, normalising, unknown entries and blocks, the
//! user entries the harness writes.

use super::*;

#[test]
fn the_newest_session_is_the_first_of_the_whole_listing() {
    use super::super::Count;
    let tmp = tempfile::tempdir().unwrap();
    let ws = Path::new("/w/proj");
    let dir = tmp.path().join("projects").join(&encodings(ws)[0]);
    fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, line: String, secs: u64| {
        super::super::test_support::write_dated(&dir.join(name), &line, secs);
    };
    let session = |cwd: &str, started: &str, id: &str| {
        format!(r#"{{"cwd":"{cwd}","timestamp":"{started}","sessionId":"{id}"}}"#)
    };
    let newest_id = || {
        let all = sessions(tmp.path(), Some(ws), Count::NotLines).unwrap();
        super::super::test_support::newest_of_listing(all, newest(tmp.path(), ws))
    };
    assert_eq!(newest_id(), None);
    write("a.jsonl", session("/w/proj", "2026-01-01", "a"), 100);
    assert_eq!(newest_id().as_deref(), Some("a"));
    // Newer, in the same project directory, but recorded in another workspace.
    write("b.jsonl", session("/w-proj", "2026-01-02", "b"), 300);
    assert_eq!(newest_id().as_deref(), Some("a"));
    write("c.jsonl", session("/w/proj", "2026-01-03", "c"), 200);
    assert_eq!(newest_id().as_deref(), Some("c"));
    // The same time: the later start wins, then the greater id.
    write("d.jsonl", session("/w/proj", "2026-01-04", "d"), 200);
    write("e.jsonl", session("/w/proj", "2026-01-01", "e"), 200);
    assert_eq!(newest_id().as_deref(), Some("d"));
    write("f.jsonl", session("/w/proj", "2026-01-04", "f"), 200);
    assert_eq!(newest_id().as_deref(), Some("f"));
    // Newer files that are no session of it: a sub-agent log, another name, no
    // recorded directory, an unreadable start.
    write("agent-x.jsonl", session("/w/proj", "2026-02-01", "x"), 900);
    write("notes.txt", session("/w/proj", "2026-02-01", "n"), 900);
    write(
        "g.jsonl",
        r#"{"timestamp":"2026-02-01","sessionId":"g"}"#.into(),
        900,
    );
    write("h.jsonl", "not json".into(), 900);
    assert_eq!(newest_id().as_deref(), Some("f"));
    write("i.jsonl", session("/w/proj", "2026-01-01", "i"), 901);
    assert_eq!(newest_id().as_deref(), Some("i"));
}

#[test]
fn workspace_paths_encode_as_claude_code_names_them() {
    assert_eq!(
        encodings(Path::new("/home/u/my_proj.v2")),
        vec![
            "-home-u-my-proj-v2".to_string(),
            "-home-u-my_proj.v2".to_string()
        ]
    );
    assert_eq!(
        encodings(Path::new("/srv/app")),
        vec!["-srv-app".to_string()]
    );
}

#[test]
fn calls_results_reasoning_and_sidechains_are_normalised() {
    let jsonl = br#"{"type":"summary","summary":"Fix the parser","leafUuid":"l1"}
{"type":"user","sessionId":"s-1","uuid":"u1","parentUuid":null,"cwd":"/w","timestamp":"2026-01-01T00:00:00Z","isSidechain":false,"message":{"role":"user","content":"Why does the test fail?"}}
{"type":"assistant","sessionId":"s-1","uuid":"u2","parentUuid":"u1","timestamp":"2026-01-01T00:00:01Z","isSidechain":false,"message":{"role":"assistant","content":[{"type":"thinking","thinking":"Look at the parser.","signature":"x"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"cargo test"}}]}}
{"type":"user","sessionId":"s-1","uuid":"u3","parentUuid":"u2","timestamp":"2026-01-01T00:00:02Z","isSidechain":false,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"1 failed"}]}]}}
{"type":"user","sessionId":"s-1","uuid":"u4","isMeta":true,"message":{"role":"user","content":"Caveat: injected"}}
{"type":"assistant","sessionId":"s-1","uuid":"u5","isSidechain":true,"agentId":"a7","message":{"role":"assistant","content":[{"type":"text","text":"sub-agent report"}]}}
{"type":"file-history-snapshot","messageId":"m","snapshot":{}}
"#;
    let (lines, drafts) = read(Path::new("s.jsonl"), jsonl).unwrap();
    assert_eq!(lines.session.as_deref(), Some("s-1"));
    assert!(lines.skipped.is_empty(), "bookkeeping is known");
    let events = crate::events::finish("claude-code", "s-1", drafts);
    let kinds: Vec<_> = events.iter().map(|e| (e.role, e.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            (Role::System, Kind::System),
            (Role::User, Kind::Message),
            (Role::Assistant, Kind::Reasoning),
            (Role::Assistant, Kind::ToolCall),
            (Role::Tool, Kind::ToolResult),
            (Role::Assistant, Kind::Message),
        ]
    );
    assert_eq!(events[3].tool.as_deref(), Some("Bash"));
    assert_eq!(
        events[4].tool.as_deref(),
        Some("Bash"),
        "result paired with its call"
    );
    assert_eq!(events[4].call_id.as_deref(), Some("toolu_1"));
    assert_eq!(events[4].text, "1 failed");
    assert_eq!(events[5].source.agent.as_deref(), Some("a7"));
    assert!(events.iter().all(|e| !e.text.contains("Caveat")));
}

#[test]
fn unknown_entries_are_skipped_and_counted_and_unknown_blocks_kept_as_other() {
    let jsonl = br#"{"type":"last-prompt","lastPrompt":"hi","sessionId":"s-2"}
{"type":"user","sessionId":"s-2","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}
{"type":"attachment","attachment":{"type":"hook_success","content":"ok"},"timestamp":"2026-01-01T00:00:00Z"}
{"type":"ai-title","aiTitle":"A title","sessionId":"s-2"}
{"type":"last-prompt","leafUuid":"x","sessionId":"s-2"}
{"type":"assistant","sessionId":"s-2","timestamp":"2026-01-01T00:00:01Z","message":{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"rust serde borrow"}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","title":"T","url":"https://e.x","encrypted_content":"SEALED"}]},{"type":"redacted_thinking","data":"opaque"},{"type":"hologram","text":"a new kind of block"},{"type":"text","text":"done"}]}}
{"type":"hologram-entry","message":{"role":"user","content":"kept under its type"}}
"#;
    let (lines, drafts) = read(Path::new("s.jsonl"), jsonl).unwrap();
    assert_eq!(
        lines.skipped.note("Claude Code").unwrap(),
        "skipped 4 Claude Code entries of types this baton does not know: \
         ai-title (1), attachment (1), last-prompt (2)"
    );
    let events = crate::events::finish("claude-code", "s-2", drafts);
    let shape: Vec<_> = events
        .iter()
        .map(|e| (e.kind, e.harness_type.as_deref(), e.text.as_str()))
        .collect();
    assert_eq!(
        shape,
        vec![
            (Kind::Message, None, "hi"),
            (
                Kind::Other,
                Some("server_tool_use"),
                r#"{"query":"rust serde borrow"}"#
            ),
            (Kind::Other, Some("web_search_tool_result"), ""),
            (Kind::Other, Some("redacted_thinking"), ""),
            (Kind::Other, Some("hologram"), "a new kind of block"),
            (Kind::Message, None, "done"),
            (Kind::Other, Some("hologram-entry"), "kept under its type"),
        ]
    );
    assert!(
        events
            .iter()
            .all(|e| !e.text.contains("SEALED") && !e.text.contains("opaque"))
    );
}

#[test]
fn text_the_harness_writes_as_the_user_is_no_prompt() {
    let line = |extra: &str, content: &str| {
        format!(
            r#"{{"type":"user","sessionId":"s"{extra},"message":{{"role":"user","content":{content}}}}}"#
        )
    };
    let jsonl = [
        line("", r#""typed by a person""#),
        line(r#","isCompactSummary":true"#, r#""This session is being continued""#),
        line("", r#""<task-notification> <task-id>b1</task-id>""#),
        line("", r#""[Request interrupted by user]""#),
        line("", r#""<command-name>/review</command-name>""#),
        line("", r#""<local-command-stdout>ok</local-command-stdout>""#),
        line(
            "",
            r#"[{"type":"tool_result","tool_use_id":"t","content":"out"},{"type":"text","text":"said beside a result"}]"#,
        ),
        line("", r#"[{"type":"text","text":"<command-message>x</command-message>"}]"#),
        line(r#","isSidechain":true"#, r#""the parent's prompt to a sub-agent""#),
        line("", r#"[{"type":"text","text":"typed again"}]"#),
    ]
    .join("\n");
    let (_, drafts) = read(Path::new("s.jsonl"), jsonl.as_bytes()).unwrap();
    let prompts: Vec<&str> = drafts
        .iter()
        .filter(|d| d.role == Role::User && d.kind == Kind::Message && d.agent.is_none())
        .map(|d| d.text.as_str())
        .collect();
    assert_eq!(prompts, vec!["typed by a person", "typed again"]);
    let system = drafts.iter().filter(|d| d.kind == Kind::System).count();
    assert_eq!(system, 7, "kept, searchable, as the harness's");
}

#[test]
fn a_file_of_no_claude_code_entry_is_refused() {
    let jsonl = b"{\"type\":\"hologram\"}\n{\"kind\":\"other\"}\n";
    let err = read_each(Path::new("/x/s.jsonl"), jsonl, &[], &mut |_| Ok(())).unwrap_err();
    assert_eq!(err.kind, baton_error::ErrorKind::Usage);
    assert!(
        err.message
            .contains("/x/s.jsonl is not a Claude Code session"),
        "{}",
        err.message
    );
    // A line that is not JSON is refused with its line, as before.
    let err = read(
        Path::new("/x/s.jsonl"),
        b"{\"type\":\"summary\",\"summary\":\"s\"}\nnot json\n",
    )
    .unwrap_err();
    assert!(err.message.contains("/x/s.jsonl line"), "{}", err.message);
}
