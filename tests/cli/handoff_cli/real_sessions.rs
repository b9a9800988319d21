//! Handoff CLI: real Claude Code sessions (fixtures/transcripts/real/claude-code, written by
//! Claude Code 1.0.98 to 2.1.141, not by us) accepted, normalised as the files say (the
//! counts of fixtures/transcripts/real/expected.json, measured apart from baton), their
//! sub-agent logs merged, their turns counted from typed prompts, and searchable.

use super::*;

const REAL: &str = "fixtures/transcripts/real";

/// Entry types baton reads or knows as bookkeeping; every other type in a file is one the
/// handoff skips and names in its note.
const KNOWN: &[&str] = &[
    "user",
    "assistant",
    "summary",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "custom-title",
    "tag",
];

fn real(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(REAL).join(rel)
}

fn expected() -> Value {
    let text = fs::read_to_string(real("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("expected.json is JSON")
}

/// The Claude Code session files of the corpus (sub-agent logs are read with theirs, and
/// on their own too).
fn claude_files(expected: &Value) -> Vec<String> {
    let files: Vec<String> = expected
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("claude-code/"))
        .cloned()
        .collect();
    assert!(files.len() >= 5, "the corpus: {files:?}");
    files
}

/// The sub-agent logs Claude Code wrote beside `rel` (`<session>/subagents/agent-*.jsonl`).
fn subagent_logs(expected: &Value, rel: &str) -> Vec<String> {
    let dir = format!("{}/subagents/", rel.trim_end_matches(".jsonl"));
    expected
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with(&dir))
        .cloned()
        .collect()
}

fn count(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

/// A workspace with a store, and the briefing to save with.
fn workspace(env: &Env) -> (PathBuf, PathBuf) {
    let ws = fs::canonicalize(git_init(&env.path().join("ws"))).unwrap();
    ok(baton_in(env, &ws, &["init"]), "init");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).unwrap();
    (ws, brief)
}

fn events_of(env: &Env, ws: &Path) -> Vec<Value> {
    ok(
        baton_in(env, ws, &["cat", "current:transcript.jsonl"]),
        "cat transcript",
    )
    .lines()
    .map(|l| serde_json::from_str(l).expect("event"))
    .collect()
}

/// Tool calls, results, and calls paired by id with a result that names the same tool.
fn pairing(events: &[Value]) -> (u64, u64, u64) {
    let of = |kind: &str| -> Vec<&Value> { events.iter().filter(|e| e["kind"] == kind).collect() };
    let (calls, results) = (of("tool_call"), of("tool_result"));
    let paired = calls
        .iter()
        .filter(|c| {
            results
                .iter()
                .any(|r| r["call_id"] == c["call_id"] && r["tool"] == c["tool"])
        })
        .count();
    (calls.len() as u64, results.len() as u64, paired as u64)
}

fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `baton --json save --brief BRIEF --transcript SOURCE` in `ws`, with Claude Code's
/// configuration at `config`.
fn save_from_config(env: &Env, ws: &Path, config: &Path, brief: &Path, source: &str) -> Output {
    env.cmd()
        .current_dir(ws)
        .env("CLAUDE_CONFIG_DIR", config)
        .args([
            "--json",
            "save",
            "--brief",
            &s(brief),
            "--transcript",
            source,
        ])
        .output()
        .unwrap()
}

/// What `save --json` reported of the transcript and the events it stored, checked
/// against the file's measured counts (its sub-agent logs' added).
fn check_saved(expected: &Value, rel: &str, saved: &Value, events: &[Value]) {
    let file = &expected[rel];
    let mut want = (
        count(file, "tool_calls"),
        count(file, "tool_results"),
        count(file, "paired_by_id"),
    );
    for log in subagent_logs(expected, rel) {
        let log = &expected[&log];
        want.0 += count(log, "tool_calls");
        want.1 += count(log, "tool_results");
        want.2 += count(log, "paired_by_id");
    }
    assert_eq!(pairing(events), want, "{rel}: calls, results, pairs");
    // Every type baton does not know is skipped, counted and named; nothing else is.
    let mut skipped = serde_json::Map::new();
    for (kind, n) in file["top_level_types"].as_object().unwrap() {
        if !KNOWN.contains(&kind.as_str()) {
            skipped.insert(kind.clone(), n.clone());
        }
    }
    assert_eq!(
        saved["transcript_skipped"],
        Value::Object(skipped.clone()),
        "{rel}"
    );
    let notes = saved["transcript_notes"].as_array().unwrap();
    if skipped.is_empty() {
        assert!(notes.is_empty(), "{rel}: {notes:?}");
    } else {
        let note = notes[0].as_str().unwrap();
        assert!(note.starts_with("skipped "), "{rel}: {note}");
        assert!(skipped.keys().all(|k| note.contains(k.as_str())), "{note}");
    }
    // The prompts a person typed are the user messages of no sub-agent, in order.
    let typed: Vec<String> = events
        .iter()
        .filter(|e| e["role"] == "user" && e["kind"] == "message" && e["source"]["agent"].is_null())
        .map(|e| words(e["text"].as_str().unwrap()))
        .collect();
    let want: Vec<String> = file["typed_prompt_texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| words(t.as_str().unwrap()))
        .collect();
    assert_eq!(
        typed.len() as u64,
        count(file, "typed_prompts"),
        "{rel}: {typed:?}"
    );
    for (got, want) in typed.iter().zip(&want) {
        assert!(
            got.starts_with(want.as_str()),
            "{rel}: {got:?} for {want:?}"
        );
    }
}

/// The kickoff's count of turns is the file's count of typed prompts.
fn check_turns(env: &Env, ws: &Path, expected: &Value, rel: &str) {
    let kickoff = ok(baton_in(env, ws, &["resume", "current"]), "resume");
    let typed = count(&expected[rel], "typed_prompts");
    let line = if typed == 0 {
        "No prompt typed in claude-code session".to_string()
    } else {
        format!(
            "Last {} of {typed} turns of claude-code session",
            typed.min(6)
        )
    };
    assert!(
        kickoff.contains(&line),
        "{rel}: want {line:?} in\n{kickoff}"
    );
}

fn check_search(env: &Env, ws: &Path, expected: &Value, rel: &str) {
    let phrase = expected[rel]["search_phrase"].as_str().unwrap();
    let found = json_in(env, ws, &["search", "current", phrase]);
    assert!(
        found["total_matches"].as_u64().unwrap() >= 1,
        "{rel}: {phrase:?} not found: {found}"
    );
}

#[test]
fn every_real_claude_code_session_is_accepted_normalised_as_the_file_says_and_searchable() {
    let expected = expected();
    for rel in claude_files(&expected) {
        let env = Env::new();
        let (ws, brief) = workspace(&env);
        let file = s(&real(&rel));
        let saved = json_in(
            &env,
            &ws,
            &["save", "--brief", &s(&brief), "--transcript", &file],
        );
        let events = events_of(&env, &ws);
        assert!(
            events
                .iter()
                .all(|e| e["v"] == 1 && e["source"]["harness"] == "claude-code"),
            "{rel}: normalised, not stored as given"
        );
        check_saved(&expected, &rel, &saved, &events);
        check_turns(&env, &ws, &expected, &rel);
        check_search(&env, &ws, &expected, &rel);
    }
}

#[test]
fn the_newest_real_session_is_taken_as_latest_from_claude_config_dir() {
    // Claude Code 2.1.141 writes last-prompt, permission-mode, attachment and ai-title
    // lines: `latest` refused it whole (exit 2). Its recorded cwd is the author's, so the
    // copy names this workspace instead; every other byte is as written.
    let expected = expected();
    let rel = "claude-code/2.1.141-entire-review-pr.jsonl";
    let env = Env::new();
    let (ws, brief) = workspace(&env);
    let original = fs::read_to_string(real(rel)).unwrap();
    let recorded =
        "\"cwd\":\"/Users/peytonmontei/Documents/entire/devenv/entireio/cli/.worktrees/redact-2\"";
    assert!(original.contains(recorded));
    let text = original.replace(recorded, &format!("\"cwd\":{}", json!(s(&ws))));
    let config = env.path().join("claude-config");
    let project = config
        .join("projects")
        .join(transcripts::claude_project_dir(&ws));
    fs::create_dir_all(&project).unwrap();
    fs::write(
        project.join("82b06be1-eb40-429b-b82b-fc441eac5e42.jsonl"),
        text,
    )
    .unwrap();
    let out = save_from_config(&env, &ws, &config, &brief, "claude-code:latest");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let saved = doc(&out);
    let events = events_of(&env, &ws);
    check_saved(&expected, rel, &saved, &events);
    check_turns(&env, &ws, &expected, rel);
    check_search(&env, &ws, &expected, rel);
    let shown = ok(baton_in(&env, &ws, &["show", "current"]), "show");
    assert!(shown.contains("skipped 9 Claude Code entries"), "{shown}");

    // Handed off again unchanged, the transcript is reused: the note is made again.
    let out = save_from_config(&env, &ws, &config, &brief, "claude-code:latest");
    let again = doc(&out);
    assert_eq!(again["transcript_cached"], true, "{again}");
    assert_eq!(again["transcript_skipped"], saved["transcript_skipped"]);
    assert_eq!(again["transcript_notes"], saved["transcript_notes"]);

    // Claude Code appends a prompt and its last-prompt line: only those are read, and
    // the count goes on from the cached one.
    let session = project.join("82b06be1-eb40-429b-b82b-fc441eac5e42.jsonl");
    let mut bytes = fs::read(&session).unwrap();
    bytes.extend_from_slice(
        br#"{"type":"user","sessionId":"82b06be1-eb40-429b-b82b-fc441eac5e42","timestamp":"2026-05-15T14:40:00.000Z","message":{"role":"user","content":"and now the tests please"}}
{"type":"last-prompt","lastPrompt":"and now the tests please","sessionId":"82b06be1-eb40-429b-b82b-fc441eac5e42"}
"#,
    );
    fs::write(&session, bytes).unwrap();
    let out = save_from_config(&env, &ws, &config, &brief, "claude-code:latest");
    let grown = doc(&out);
    assert_eq!(grown["transcript_appended"], true, "{grown}");
    let mut skipped = saved["transcript_skipped"].clone();
    skipped["last-prompt"] = json!(3);
    assert_eq!(grown["transcript_skipped"], skipped);
    let kickoff = ok(baton_in(&env, &ws, &["resume", "current"]), "resume");
    assert!(kickoff.contains("Last 2 of 2 turns"), "{kickoff}");
}

#[test]
fn a_real_sessions_sub_agent_log_is_merged_by_time_and_named() {
    // Claude Code 2.1.39 keeps the Task tool's sub-agent in
    // <session>/subagents/agent-a2898e3.jsonl, beside the session's file. Taken by id
    // from CLAUDE_CONFIG_DIR, laid out as Claude Code lays it out.
    let expected = expected();
    let rel = "claude-code/2.1.39-spotter-subagents/4d5611e5-241a-462a-8d15-5122611a9569.jsonl";
    let env = Env::new();
    let (ws, brief) = workspace(&env);
    let config = env.path().join("claude-config");
    let project = config.join("projects").join("-home-USER-projects-spotter");
    let from = real("claude-code/2.1.39-spotter-subagents");
    let sub = "4d5611e5-241a-462a-8d15-5122611a9569/subagents";
    fs::create_dir_all(project.join(sub)).unwrap();
    for name in [
        "4d5611e5-241a-462a-8d15-5122611a9569.jsonl".to_string(),
        format!("{sub}/agent-a2898e3.jsonl"),
    ] {
        fs::copy(from.join(&name), project.join(&name)).unwrap();
    }
    let out = save_from_config(&env, &ws, &config, &brief, "claude-code:4d5611e5");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let saved = doc(&out);
    let events = events_of(&env, &ws);
    check_saved(&expected, rel, &saved, &events);
    check_turns(&env, &ws, &expected, rel);

    let agent_of = |e: &Value| e["source"]["agent"].as_str().map(str::to_string);
    let from_agent: Vec<usize> = (0..events.len())
        .filter(|&i| agent_of(&events[i]).as_deref() == Some("a2898e3"))
        .collect();
    // The log's 19 entries: its prompt, 2 texts, 8 calls and 8 results.
    assert_eq!(from_agent.len(), 19, "{events:#?}");
    // In time order: after the prompt that started the work, before the next prompt.
    let prompt = |start: &str| {
        events
            .iter()
            .position(|e| e["kind"] == "message" && e["text"].as_str().unwrap().starts_with(start))
            .unwrap()
    };
    let (first, next) = (prompt("Work on bead spotter-dov"), prompt("continue"));
    assert!(
        first < from_agent[0] && from_agent[from_agent.len() - 1] < next,
        "{first} < {from_agent:?} < {next}"
    );
    let times: Vec<&str> = events
        .iter()
        .map(|e| e["time"].as_str().unwrap())
        .filter(|t| !t.is_empty())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    // The log is kept beside the session's, and its text is searchable with its agent.
    let files = saved["files"].as_array().unwrap();
    assert!(
        files.iter().any(|f| f.as_str().unwrap().ends_with(
            "claude-code-4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl"
        )),
        "{files:?}"
    );
    let found = json_in(&env, &ws, &["search", "current", "tool_use_error"]);
    let hits = found["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{found}");
    assert!(
        hits.iter().all(|h| h.to_string().contains("a2898e3")),
        "{found}"
    );
    // The text answer says whose work a hit is, as the kickoff's turns do.
    let text = ok(
        baton_in(&env, &ws, &["search", "current", "correct paths"]),
        "search",
    );
    assert!(
        text.contains("[assistant message, sub-agent a2898e3] Let me find the correct paths"),
        "{text}"
    );
}

#[test]
fn handoff_json_names_what_a_real_session_skipped() {
    let rel = "claude-code/2.1.141-entire-review-pr.jsonl";
    let env = Env::new();
    let (ws, brief) = workspace(&env);
    let out = json_in(
        &env,
        &ws,
        &[
            "handoff",
            "--to",
            "codex",
            "--brief",
            &s(&brief),
            "--transcript",
            &s(&real(rel)),
        ],
    );
    assert_eq!(
        out["saved"]["transcript_skipped"],
        json!({"ai-title": 1, "attachment": 4, "last-prompt": 2, "permission-mode": 2}),
        "{out}"
    );
    assert_eq!(
        out["saved"]["transcript_notes"],
        json!([
            "skipped 9 Claude Code entries of types this baton does not know: ai-title (1), \
             attachment (4), last-prompt (2), permission-mode (2)"
        ])
    );
    // Without --json the note is one line on stderr.
    let out = baton_in(
        &env,
        &ws,
        &[
            "handoff",
            "--to",
            "codex",
            "--brief",
            &s(&brief),
            "--transcript",
            &s(&real(rel)),
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let err = stderr(&out);
    let notes = err
        .lines()
        .filter(|l| l.starts_with("note: skipped 9 "))
        .count();
    assert_eq!(notes, 1, "{err}");
}
