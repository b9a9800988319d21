//! Gemini CLI sessions read: the real chat document of the corpus, the log format's
//! updates and rewinds, and the project directories of a workspace.

use super::*;

fn read_all(bytes: &[u8]) -> (Chat, Vec<Draft>) {
    let mut drafts = Vec::new();
    let chat = read_each(Path::new("/s.json"), bytes, &mut |d| {
        drafts.push(d);
        Ok(())
    })
    .unwrap();
    (chat, drafts)
}

#[test]
fn the_real_chat_document_is_read_whole() {
    let bytes = fs::read(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("fixtures/transcripts/real/gemini/unknown-2026-01-entire-accessible-form.json"),
    )
    .unwrap();
    assert!(is_document(&bytes));
    let (chat, drafts) = read_all(&bytes);
    assert_eq!(
        chat.session.as_deref(),
        Some("e0f3d3a9-3a6a-440f-8053-2a8abecbe741")
    );
    let count = |kind| drafts.iter().filter(|d| d.kind == kind).count();
    assert_eq!(count(Kind::ToolCall), 6);
    assert_eq!(count(Kind::ToolResult), 6);
    assert_eq!(count(Kind::Reasoning), 9);
    assert_eq!(
        drafts[0].text,
        "write to test-gemini.txt \"hello, it's gemini\""
    );
    assert_eq!(
        (drafts[0].role, drafts[0].kind),
        (Role::User, Kind::Message)
    );
    let cancelled = drafts
        .iter()
        .find(|d| {
            d.kind == Kind::ToolResult
                && d.call_id
                    .as_deref()
                    .is_some_and(|c| c.starts_with("replace-"))
        })
        .unwrap();
    assert!(
        cancelled.text.contains("[Operation Cancelled]"),
        "{}",
        cancelled.text
    );
    let last = drafts.last().unwrap();
    assert_eq!(
        (last.kind, last.text.as_str()),
        (Kind::System, "Request cancelled.")
    );
}

#[test]
fn a_session_log_keeps_each_message_last_recorded_and_honours_rewinds() {
    let log = br#"{"sessionId":"s-1","projectHash":"ab","startTime":"2026-04-01T00:00:00Z","kind":"main"}
{"id":"m1","timestamp":"2026-04-01T00:00:01Z","type":"user","content":[{"text":"First prompt"}]}
{"id":"m2","timestamp":"2026-04-01T00:00:02Z","type":"gemini","content":"","toolCalls":[{"id":"c1","name":"read_file","args":{"file_path":"a"},"status":"executing"}]}
{"id":"m2","timestamp":"2026-04-01T00:00:02Z","type":"gemini","content":"","toolCalls":[{"id":"c1","name":"read_file","args":{"file_path":"a"},"status":"success","result":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"alpha"}}}]}]}
{"$set":{"lastUpdated":"2026-04-01T00:00:03Z"}}
{"id":"m3","timestamp":"2026-04-01T00:00:04Z","type":"user","content":"A prompt taken back"}
{"$rewindTo":"m3"}
{"id":"m4","timestamp":"2026-04-01T00:00:05Z","type":"user","content":"<session_context>injected</session_context>"}
{"id":"m5","timestamp":"2026-04-01T00:00:06Z","type":"hologram","content":""}
"#;
    assert!(!is_document(log));
    assert!(is_log_start(log.split(|&b| b == b'\n').next().unwrap()));
    let (chat, drafts) = read_all(log);
    assert_eq!(chat.session.as_deref(), Some("s-1"));
    let shape: Vec<_> = drafts
        .iter()
        .map(|d| (d.role, d.kind, d.text.as_str()))
        .collect();
    assert_eq!(
        shape,
        vec![
            (Role::User, Kind::Message, "First prompt"),
            (Role::Assistant, Kind::ToolCall, r#"{"file_path":"a"}"#),
            (Role::Tool, Kind::ToolResult, "alpha"),
            (
                Role::User,
                Kind::System,
                "<session_context>injected</session_context>"
            ),
        ]
    );
    assert_eq!(chat.skipped.total(), 1);
    // A record that is none of those is refused with file and line.
    let err = read_each(
        Path::new("/s.jsonl"),
        b"{\"sessionId\":\"s\",\"projectHash\":\"p\"}\n{\"x\":1}\n",
        &mut |_| Ok(()),
    )
    .unwrap_err();
    assert!(err.message.contains("/s.jsonl line 2"), "{}", err.message);
}

#[test]
fn a_workspace_s_sessions_are_under_its_hash_or_its_named_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("proj");
    fs::create_dir_all(&ws).unwrap();
    let ws = fs::canonicalize(&ws).unwrap();
    let gemini = tmp.path().join(".gemini");
    let hash = hex(&Sha256::digest(ws.as_os_str().as_encoded_bytes()));
    let by_hash = gemini.join("tmp").join(&hash).join("chats");
    let by_name = gemini.join("tmp/proj").join("chats");
    let elsewhere = gemini.join("tmp/other/chats");
    for dir in [&by_hash, &by_name, &elsewhere] {
        fs::create_dir_all(dir).unwrap();
    }
    fs::write(
        gemini.join("tmp/proj/.project_root"),
        ws.to_string_lossy().as_bytes(),
    )
    .unwrap();
    fs::write(gemini.join("tmp/other/.project_root"), "/somewhere/else").unwrap();
    let doc = |id: &str| {
        format!(r#"{{"sessionId":"{id}","projectHash":"{hash}","startTime":"t","messages":[]}}"#)
    };
    fs::write(
        by_hash.join("session-2026-01-01T00-00-aaaaaaaa.json"),
        doc("aaaaaaaa-1"),
    )
    .unwrap();
    fs::write(
        by_name.join("session-2026-02-01T00-00-bbbbbbbb.jsonl"),
        format!("{{\"sessionId\":\"bbbbbbbb-2\",\"projectHash\":\"{hash}\"}}\n"),
    )
    .unwrap();
    fs::write(
        elsewhere.join("session-2026-03-01T00-00-cccccccc.json"),
        doc("cccccccc-3"),
    )
    .unwrap();
    let mut ids: Vec<String> = sessions(&gemini, Some(&ws), super::super::Count::NotLines)
        .unwrap()
        .into_iter()
        .map(|s| s.session)
        .collect();
    ids.sort();
    assert_eq!(ids, vec!["aaaaaaaa-1", "bbbbbbbb-2"]);
    assert_eq!(
        sessions(&gemini, None, super::super::Count::NotLines)
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn a_document_past_the_value_limit_is_refused_with_the_limit_named() {
    let many = "{},".repeat(super::super::json::MAX_LINE_VALUES);
    let doc = format!(r#"{{"sessionId":"s","projectHash":"p","messages":[{many}{{}}]}}"#);
    let err = read_each(Path::new("/s.json"), doc.as_bytes(), &mut |_| Ok(())).unwrap_err();
    assert!(err.message.contains("/s.json line 1"), "{}", err.message);
    assert!(
        err.message.contains("100000 JSON values"),
        "{}",
        err.message
    );
}
