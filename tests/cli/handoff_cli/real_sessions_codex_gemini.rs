//! Handoff CLI: the real Codex and Gemini CLI sessions of the corpus
//! (fixtures/transcripts/real/, counts in expected.json) accepted as FILE and as the
//! harness's own session (`codex:<id>`, `codex:latest`, `gemini:latest`) from a home laid
//! out as the harness lays it out: events, tool pairing and typed prompts as the file
//! says, and `search` finds its text. Also a sub-agent thread merged into the session that
//! spawned it, and a legacy (pre-`session_meta`) rollout.

use super::*;

fn real(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/transcripts/real")
        .join(rel)
}

fn expected() -> Value {
    serde_json::from_slice(&fs::read(real("expected.json")).expect("expected.json")).unwrap()
}

/// A workspace with a store, and a home for the harnesses.
struct Bench {
    env: Env,
    ws: PathBuf,
}

impl Bench {
    fn new() -> Bench {
        let env = Env::new();
        let ws = fs::canonicalize(git_init(&env.path().join("ws"))).unwrap();
        let bench = Bench { env, ws };
        bench.run(&["init"]);
        bench
    }

    /// Run in the workspace with CODEX_HOME set (HOME is the bench's own).
    fn cmd(&self, args: &[&str]) -> Output {
        self.env
            .cmd()
            .current_dir(&self.ws)
            .env("CODEX_HOME", self.env.path().join("codex-home"))
            .args(args)
            .output()
            .expect("run baton")
    }

    fn run(&self, args: &[&str]) -> String {
        ok(self.cmd(args), &format!("{args:?}"))
    }

    fn events(&self) -> Vec<Value> {
        self.run(&["cat", "current:transcript.jsonl"])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn matches(&self, phrase: &str) -> u64 {
        let out = self.cmd(&["--json", "search", "current", phrase]);
        let doc: Value = serde_json::from_slice(&out.stdout).expect("search --json");
        doc["total_matches"].as_u64().expect("total_matches")
    }
}

/// What the events of a handoff hold, counted as expected.json counts the file: tool
/// calls (not web searches), results, results paired to a call by id and given its tool,
/// and prompts (user messages no sub-agent wrote).
#[derive(Debug, PartialEq)]
struct Counts {
    calls: u64,
    results: u64,
    paired: u64,
    prompts: u64,
}

fn counts(events: &[Value]) -> Counts {
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool_call" && e["tool"] != "web_search")
        .collect();
    let ids: BTreeSet<&str> = calls.iter().filter_map(|c| c["call_id"].as_str()).collect();
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .collect();
    let paired = results
        .iter()
        .filter(|r| {
            r["call_id"].as_str().is_some_and(|id| ids.contains(id)) && r["tool"].is_string()
        })
        .count();
    let prompts = events
        .iter()
        .filter(|e| e["role"] == "user" && e["kind"] == "message" && e["source"]["agent"].is_null())
        .count();
    Counts {
        calls: calls.len() as u64,
        results: results.len() as u64,
        paired: paired as u64,
        prompts: prompts as u64,
    }
}

/// The first line's session id and start, as a Codex rollout's `session_meta` has them.
fn rollout_meta(path: &Path) -> (String, String) {
    let text = fs::read_to_string(path).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let id = first["payload"]["id"].as_str().unwrap().to_string();
    let time = first["payload"]["timestamp"].as_str().unwrap().to_string();
    (id, time)
}

/// Where Codex puts the rollout of `id` started at `time` (RFC 3339):
/// sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl.
fn rollout_path(home: &Path, id: &str, time: &str) -> PathBuf {
    let (date, clock) = (&time[..10], time[11..19].replace(':', "-"));
    home.join("sessions")
        .join(date.replace('-', "/"))
        .join(format!("rollout-{date}T{clock}-{id}.jsonl"))
}

#[test]
fn every_real_codex_rollout_is_accepted_paired_and_searchable() {
    let expected = expected();
    let bench = Bench::new();
    let home = bench.env.path().join("codex-home");
    let brief = bench.env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).unwrap();
    let mut seen = 0;
    for (name, facts) in expected.as_object().unwrap() {
        let Some(file) = name.strip_prefix("codex/") else {
            continue;
        };
        seen += 1;
        let path = real(name);
        let (id, time) = rollout_meta(&path);
        let subagent = facts["source"]["subagent"].is_object();
        let want = Counts {
            calls: facts["tool_calls"].as_u64().unwrap(),
            results: facts["tool_results"].as_u64().unwrap(),
            paired: facts["paired_by_id"].as_u64().unwrap(),
            // A sub-agent thread's one prompt was written by its parent: its events
            // name the agent, so it is no turn of this handoff.
            prompts: if subagent {
                0
            } else {
                facts["typed_prompts"].as_u64().unwrap()
            },
        };

        // As a FILE, with a briefing.
        bench.run(&["save", "--brief", &s(&brief), "--transcript", &s(&path)]);
        let events = bench.events();
        assert_eq!(counts(&events), want, "{file} as FILE");
        assert!(
            events.iter().all(|e| e["source"]["harness"] == "codex"),
            "{file}"
        );
        assert!(
            events.iter().all(|e| e["source"]["session"] == id.as_str()),
            "{file}"
        );
        if subagent {
            let agent = &facts["source"]["subagent"]["thread_spawn"];
            let name = format!(
                "{} ({})",
                agent["agent_nickname"].as_str().unwrap(),
                agent["agent_role"].as_str().unwrap()
            );
            assert!(
                events.iter().all(|e| e["source"]["agent"] == name.as_str()),
                "{file}"
            );
        }
        let phrase = facts["search_phrase"].as_str().unwrap();
        assert!(bench.matches(phrase) >= 1, "{file}: search {phrase:?}");

        // As Codex keeps it, found by its id.
        let dest = rollout_path(&home, &id, &time);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::copy(&path, &dest).unwrap();
        bench.run(&[
            "save",
            "--no-brief",
            "--transcript",
            &format!("codex:{}", &id[..13]),
        ]);
        let shown = bench.run(&["show", "current"]);
        assert!(shown.contains(&format!("codex:{id}")), "{file}: {shown}");
        assert_eq!(counts(&bench.events()), want, "{file} as codex:<id>");
        if want.prompts > 0 {
            // A turn begins at a prompt a person typed, and only there.
            let kickoff = bench.run(&["resume"]);
            let turns = format!("Last {0} of {0} turns", want.prompts);
            assert!(kickoff.contains(&turns), "{file}: {kickoff}");
        }
        assert!(bench.matches(phrase) >= 1, "{file}: search {phrase:?}");
    }
    assert_eq!(seen, 5, "the corpus's Codex files");

    // codex:latest: the newest rollout recorded in this workspace (the real 0.129.0
    // one, its session_meta.cwd made this workspace's).
    let path = real("codex/0.129.0-entire-exec-review-aborted.jsonl");
    let text = fs::read_to_string(&path).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut meta: Value = serde_json::from_str(first).unwrap();
    meta["payload"]["cwd"] = json!(s(&bench.ws));
    let (id, time) = rollout_meta(&path);
    let dest = rollout_path(&home, &id, &time);
    fs::write(&dest, format!("{meta}\n{rest}")).unwrap();
    bench.run(&["save", "--no-brief", "--transcript", "codex:latest"]);
    let events = bench.events();
    assert_eq!(
        counts(&events).prompts,
        1,
        "the <turn_aborted> message is no prompt"
    );
    let aborted = events
        .iter()
        .find(|e| {
            e["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("<turn_aborted>"))
        })
        .expect("kept");
    assert_eq!(
        (&aborted["role"], &aborted["kind"]),
        (&json!("user"), &json!("system"))
    );
}

#[test]
fn unknown_codex_line_and_item_types_are_skipped_or_kept_not_refused() {
    // A real rollout with what a newer Codex writes: a line type and an item type this
    // baton does not know (the shapes of 0.15x's world_state lines and agent_message
    // items), one carrying text.
    let bench = Bench::new();
    let mut text =
        fs::read_to_string(real("codex/0.130.0-entire-exec-review-findings.jsonl")).unwrap();
    text.push_str(concat!(
        r#"{"timestamp":"2026-05-19T18:00:00.000Z","ordinal":22,"type":"world_state","payload":{"cwd":"/w","git":{"branch":"main"}}}"#,
        "\n",
        r#"{"timestamp":"2026-05-19T18:00:01.000Z","type":"response_item","payload":{"type":"agent_message","content":[{"type":"output_text","text":"Zebra-striped follow-up"}],"encrypted_content":"gAAAAopaque"}}"#,
        "\n",
    ));
    let path = bench.env.path().join("newer.jsonl");
    fs::write(&path, text).unwrap();
    let out = bench.cmd(&["--json", "save", "--no-brief", "--transcript", &s(&path)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let events = bench.events();
    let other: Vec<&Value> = events.iter().filter(|e| e["kind"] == "other").collect();
    assert_eq!(other.len(), 1, "{other:?}");
    assert_eq!(other[0]["harness_type"], "agent_message");
    assert_eq!(other[0]["text"], "Zebra-striped follow-up");
    assert_eq!(counts(&events).paired, 5);
    assert!(bench.matches("Zebra-striped").ge(&1));
    assert!(
        !bench
            .run(&["cat", "current:transcript.jsonl"])
            .contains("gAAAAopaque")
    );
}

#[test]
fn a_sub_agent_thread_is_merged_into_the_session_that_spawned_it() {
    // The real 0.128.0 thread and a parent written to link it (no public parent rollout
    // exists): the parent's id is the thread's parent_thread_id.
    let bench = Bench::new();
    let home = bench.env.path().join("codex-home");
    let child = real("codex/0.128.0-entire-subagent-explorer-review.jsonl");
    let (child_id, child_time) = rollout_meta(&child);
    let child_dest = rollout_path(&home, &child_id, &child_time);
    fs::create_dir_all(child_dest.parent().unwrap()).unwrap();
    fs::copy(&child, &child_dest).unwrap();
    let parent_text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/transcripts/codex/subagent-parent-0.128.jsonl"),
    )
    .unwrap()
    .replace("{{WORKSPACE}}", &s(&bench.ws));
    let parent_id = "019dffa9-f1ee-7981-8a3b-742966da6b8a";
    let parent_dest = rollout_path(&home, parent_id, "2026-05-06T23:40:23.102Z");
    fs::write(&parent_dest, parent_text).unwrap();
    // The thread changed last (its session still running, waiting on it): latest is
    // still the session, whose handoff merges the thread in.
    let now = SystemTime::now();
    let set = |path: &Path, secs_ago: u64| {
        let when = now - std::time::Duration::from_secs(secs_ago);
        let file = fs::File::options().write(true).open(path).unwrap();
        file.set_modified(when).unwrap();
    };
    set(&parent_dest, 60);
    set(&child_dest, 5);
    // The thread recorded this workspace as its cwd too.
    let child_text = fs::read_to_string(&child).unwrap();
    let (first, rest) = child_text.split_once('\n').unwrap();
    let mut meta: Value = serde_json::from_str(first).unwrap();
    meta["payload"]["cwd"] = json!(s(&bench.ws));
    fs::write(&child_dest, format!("{meta}\n{rest}")).unwrap();
    set(&child_dest, 5);
    let listed = bench.run(&["transcript", "sources"]);
    let latest = listed
        .lines()
        .find(|l| l.ends_with("codex:latest"))
        .unwrap_or_default();
    assert!(latest.contains(parent_id), "{listed}");
    bench.run(&["save", "--no-brief", "--transcript", "codex:latest"]);
    let events = bench.events();
    assert!(events.iter().all(|e| e["source"]["session"] == parent_id));
    let agents: Vec<&str> = events
        .iter()
        .map(|e| e["source"]["agent"].as_str().unwrap_or("-"))
        .collect();
    let thread = agents
        .iter()
        .filter(|a| **a == "Anscombe (explorer)")
        .count();
    assert_eq!(thread, 12, "the thread's events: {agents:?}");
    // In time order: the thread ran between the spawn call's result and the wait's.
    let at = |text: &str| {
        events
            .iter()
            .position(|e| e["text"].as_str().is_some_and(|t| t.contains(text)))
            .unwrap_or_else(|| panic!("{text}"))
    };
    let first_of_thread = agents.iter().position(|a| *a != "-").unwrap();
    let last_of_thread = agents.iter().rposition(|a| *a != "-").unwrap();
    assert!(at("\"agent_id\"") < first_of_thread);
    assert!(last_of_thread < at("\"completed\""));
    let c = counts(&events);
    assert_eq!((c.calls, c.results, c.paired, c.prompts), (6, 6, 6, 1));
    assert!(bench.matches("for the Security & Adversarial lens only") >= 1);
    let kickoff = bench.run(&["resume"]);
    assert!(kickoff.contains("1 of 1 turns"), "{kickoff}");
}

#[test]
fn a_legacy_rollout_is_normalised_and_found_by_its_id_and_workspace() {
    let bench = Bench::new();
    let home = bench.env.path().join("codex-home");
    let id = "5973b6c0-94b8-487b-a530-2aeb6098ae0e";
    let dest = home.join(format!(
        "sessions/2025/08/20/rollout-2025-08-20T10-15-02-{id}.jsonl"
    ));
    super::transcripts::plant_session(
        "fixtures/transcripts/codex/legacy-rollout-2025-08.jsonl",
        &dest,
        &bench.ws,
        &bench.ws,
        1,
    );
    for source in ["codex:5973b6c0", "codex:latest", dest.to_str().unwrap()] {
        bench.run(&["save", "--no-brief", "--transcript", source]);
        let shown = bench.run(&["show", "current"]);
        assert!(shown.contains(&format!("codex:{id}")), "{source}: {shown}");
        let events = bench.events();
        let c = counts(&events);
        assert_eq!(
            (c.calls, c.results, c.paired, c.prompts),
            (2, 2, 2, 1),
            "{source}"
        );
        assert!(
            events.iter().all(|e| e["v"] == 1),
            "normalised, not the raw lines"
        );
        let transcript = bench.run(&["cat", "current:transcript.jsonl"]);
        assert!(!transcript.contains("gAAAA"), "encrypted reasoning dropped");
        assert!(!transcript.contains("record_type"));
        assert!(bench.matches("parse_cli") >= 1);
    }
}

/// Gemini CLI's directory for a project: the sha256 of its root.
fn gemini_project_dir(home: &Path, ws: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let hash: String = Sha256::digest(s(ws).as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    home.join(".gemini/tmp").join(hash)
}

#[test]
fn the_real_gemini_chat_is_accepted_as_file_and_as_gemini_latest() {
    let expected = expected();
    let name = "gemini/unknown-2026-01-entire-accessible-form.json";
    let facts = &expected[name];
    let want = Counts {
        calls: facts["tool_calls"].as_u64().unwrap(),
        results: facts["tool_results"].as_u64().unwrap(),
        paired: facts["paired_by_id"].as_u64().unwrap(),
        prompts: facts["typed_prompts"].as_u64().unwrap(),
    };
    let phrase = facts["search_phrase"].as_str().unwrap();
    let bench = Bench::new();
    bench.run(&["save", "--no-brief", "--transcript", &s(&real(name))]);
    let events = bench.events();
    assert_eq!(counts(&events), want);
    let thoughts = events.iter().filter(|e| e["kind"] == "reasoning").count() as u64;
    assert_eq!(thoughts, facts["thoughts"].as_u64().unwrap());
    assert!(events.iter().all(|e| e["source"]["harness"] == "gemini"));
    assert!(bench.matches(phrase) >= 1);

    // gemini:latest from a home laid out as Gemini CLI lays it out, under HOME and under
    // GEMINI_CLI_HOME.
    let chats = gemini_project_dir(bench.env.path(), &bench.ws).join("chats");
    fs::create_dir_all(&chats).unwrap();
    fs::copy(
        real(name),
        chats.join("session-2026-01-10T07-58-e0f3d3a9.json"),
    )
    .unwrap();
    bench.run(&["save", "--no-brief", "--transcript", "gemini:latest"]);
    let shown = bench.run(&["show", "current"]);
    assert!(
        shown.contains("gemini:e0f3d3a9-3a6a-440f-8053-2a8abecbe741"),
        "{shown}"
    );
    assert!(
        shown.contains("attachments/transcript/gemini-e0f3d3a9-3a6a-440f-8053-2a8abecbe741.json"),
        "the chat document is attached as it is: {shown}"
    );
    assert_eq!(counts(&bench.events()), want);
    assert!(bench.matches(phrase) >= 1);
    let kickoff = bench.run(&["resume"]);
    assert!(
        kickoff.contains("Last 1 of 1 turns of gemini session"),
        "{kickoff}"
    );
    let listed = bench.run(&["transcript", "sources"]);
    assert!(listed.contains("gemini:latest"), "{listed}");

    let other_home = bench.env.path().join("elsewhere");
    let chats = gemini_project_dir(&other_home, &bench.ws).join("chats");
    fs::create_dir_all(&chats).unwrap();
    fs::rename(
        gemini_project_dir(bench.env.path(), &bench.ws)
            .join("chats/session-2026-01-10T07-58-e0f3d3a9.json"),
        chats.join("session-2026-01-10T07-58-e0f3d3a9.json"),
    )
    .unwrap();
    let out = bench.cmd(&["save", "--no-brief", "--transcript", "gemini:latest"]);
    assert_eq!(code(&out), 3, "not under HOME any more: {}", stderr(&out));
    let out = bench
        .env
        .cmd()
        .current_dir(&bench.ws)
        .env("GEMINI_CLI_HOME", &other_home)
        .args(["save", "--no-brief", "--transcript", "gemini:e0f3d3a9"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(counts(&bench.events()), want);
}

#[test]
fn a_gemini_sub_agent_log_is_merged_into_its_session() {
    // The real chat, and a sub-agent log written beside it as Gemini CLI writes one
    // (chats/<session id>/<agent id>.jsonl, kind "subagent"; no public one was found).
    let bench = Bench::new();
    let name = "gemini/unknown-2026-01-entire-accessible-form.json";
    let chats = gemini_project_dir(bench.env.path(), &bench.ws).join("chats");
    let agent = "4f1c9a2e-7b3d-4e8f-9a01-5c6d7e8f9a0b";
    let logs = chats.join("e0f3d3a9-3a6a-440f-8053-2a8abecbe741");
    fs::create_dir_all(&logs).unwrap();
    fs::copy(
        real(name),
        chats.join("session-2026-01-10T07-58-e0f3d3a9.json"),
    )
    .unwrap();
    let log = [
        json!({"sessionId": agent, "projectHash": "7e89", "startTime": "2026-01-10T07:58:38.000Z", "kind": "subagent"}),
        json!({"id": "u1", "timestamp": "2026-01-10T07:58:38.100Z", "type": "user", "content": [{"text": "Find where isAccessibleMode is defined."}]}),
        json!({"id": "g1", "timestamp": "2026-01-10T07:58:39.000Z", "type": "gemini", "content": "It is in manual_commit_reset.go, a quokka-shaped helper.",
               "toolCalls": [{"id": "grep-1", "name": "search_file_content", "args": {"pattern": "isAccessibleMode"}, "status": "success",
                              "result": [{"functionResponse": {"id": "grep-1", "name": "search_file_content", "response": {"output": "manual_commit_reset.go:11"}}}]}]}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect::<String>();
    fs::write(logs.join(format!("{agent}.jsonl")), log).unwrap();
    bench.run(&["save", "--no-brief", "--transcript", "gemini:latest"]);
    let events = bench.events();
    let from_agent: Vec<&Value> = events
        .iter()
        .filter(|e| e["source"]["agent"] == agent)
        .collect();
    assert_eq!(
        from_agent.len(),
        4,
        "prompt, reply, call, result: {events:?}"
    );
    assert!(
        events
            .iter()
            .all(|e| e["source"]["session"] == "e0f3d3a9-3a6a-440f-8053-2a8abecbe741")
    );
    let c = counts(&events);
    assert_eq!((c.calls, c.results, c.paired, c.prompts), (7, 7, 7, 1));
    // In time order: after the session's read_file call of 07:58:37, before its search.
    let at = |text: &str| {
        events
            .iter()
            .position(|e| e["text"].as_str().is_some_and(|t| t.contains(text)))
            .unwrap_or_else(|| panic!("{text}"))
    };
    assert!(at("cmd/entire/cli/hooks.go") < at("quokka-shaped"));
    assert!(at("quokka-shaped") < at("\"pattern\":\"NewAccessibleForm\""));
    assert!(bench.matches("quokka-shaped") >= 1);
}

#[test]
fn the_help_names_every_harness_a_transcript_comes_from() {
    // A new user learns the sources from --help: Gemini CLI is one of them.
    let env = Env::new();
    for args in [
        &["handoff", "--help"][..],
        &["save", "--help"],
        &["transcript", "sources", "--help"],
    ] {
        let out = env.cmd().args(args).output().unwrap();
        assert_eq!(code(&out), 0, "{args:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Gemini CLI"), "{args:?}: {help}");
        if args[0] != "transcript" {
            assert!(help.contains("gemini[:SESSION|latest]"), "{args:?}: {help}");
        }
    }
}
