//! Handoff CLI: personal data (emails, phone numbers, US SSNs, card numbers) in briefings,
//! text fields and transcripts is redacted by default, kept and reported with
//! `--pii allow`; the commits' author emails in the evidence are kept.

use super::mcp_paths::mcp_calls;
use super::*;

const EMAIL: &str = "bob.smith@corp-mail.io";
const PHONE: &str = "+1 415 555 2671";
const SSN: &str = "123-45-6789";
const CARD: &str = "4111 1111 1111 1111";
const AUTHOR: &str = "jane.committer@corp-mail.io";

fn pii_briefing() -> String {
    format!(
        "# Handoff\n\n## Objective\n\nFix the customer import.\n\n## Current State\n\n\
         The failing row is Bob Smith <{EMAIL}>, phone {PHONE}, SSN {SSN}, card {CARD}.\n\
         Jane ({AUTHOR}) wrote the importer.\n\n## Next Steps\n\n1. Add a test for that row.\n"
    )
}

/// A repository whose one commit is by `AUTHOR`.
fn workspace(env: &Env) -> PathBuf {
    let work = git_init(&env.path().join("work"));
    fs::write(work.join("import.py"), "rows = []\n").expect("write");
    git(&work, &["add", "import.py"]);
    git(
        &work,
        &[
            "commit",
            "-q",
            "-m",
            "importer",
            "--author",
            &format!("Jane Committer <{AUTHOR}>"),
        ],
    );
    work
}

fn assert_none_of(text: &str, values: &[&str], what: &str) {
    for value in values {
        assert!(!text.contains(value), "{what} holds {value}: {text}");
    }
}

#[test]
fn pii_in_a_briefing_is_redacted_by_default_and_kept_with_allow() {
    let env = Env::new();
    env.init();
    let work = workspace(&env);
    let brief = env.path().join("brief.md");
    fs::write(&brief, pii_briefing()).expect("write");
    let summary = format!("call {PHONE} first");
    let args = ["save", "--brief", &s(&brief), "--summary", &summary];

    // Redact, the default: placeholders in handoff.md and the summary; the note and
    // --json name kinds, counts and places, never a value.
    let out = baton_in(&env, &work, &args);
    ok(out.clone(), "save");
    let err = stderr(&out);
    assert!(
        err.contains(
            "note: redacted personal data (card: 1, email: 1, phone: 2, ssn: 1 in handoff.md, --summary)"
        ),
        "{err}"
    );
    assert_none_of(&err, &[EMAIL, PHONE, SSN, CARD], "stderr");
    let stored = cat(&env, "current:handoff.md");
    assert_none_of(&stored, &[EMAIL, PHONE, SSN, CARD], "handoff.md");
    for placeholder in [
        "Bob Smith <[REDACTED:email]>, phone [REDACTED:phone], SSN [REDACTED:ssn], card [REDACTED:card].",
        "Jane (jane.committer@corp-mail.io)",
    ] {
        assert!(stored.contains(placeholder), "{stored}");
    }
    // The author's email identifies the commit: kept in the evidence and context.md.
    assert!(cat(&env, "current:evidence/evidence.json").contains(AUTHOR));
    assert!(cat(&env, "current:context.md").contains(AUTHOR));
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["summary"], "call [REDACTED:phone] first");
    assert_eq!(
        show["metadata"]["pii.redacted"],
        "card: 1, email: 1, phone: 2, ssn: 1 in handoff.md, --summary"
    );
    let saved = json_in(&env, &work, &args);
    assert_eq!(saved["pii"]["mode"], "redact");
    assert_eq!(
        saved["pii"]["found"],
        json!({ "card": 1, "email": 1, "phone": 2, "ssn": 1 })
    );
    assert_eq!(
        saved["pii"]["places"],
        json!([
            { "place": "handoff.md", "counts": { "card": 1, "email": 1, "phone": 1, "ssn": 1 } },
            { "place": "--summary", "counts": { "phone": 1 } },
        ])
    );
    assert_none_of(&saved.to_string(), &[EMAIL, PHONE, SSN, CARD], "--json");

    // Allow: stored as written, and reported.
    let mut allow = args.to_vec();
    allow.extend(["--pii", "allow"]);
    let out = baton_in(&env, &work, &allow);
    ok(out.clone(), "save --pii allow");
    assert!(
        stderr(&out).contains("note: stored personal data as it is (card: 1, email: 1, phone: 2, ssn: 1 in handoff.md, --summary)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(cat(&env, "current:handoff.md"), pii_briefing());
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["summary"], summary.as_str());
    assert_eq!(
        show["metadata"]["pii.allowed"],
        "card: 1, email: 1, phone: 2, ssn: 1 in handoff.md, --summary"
    );
    let saved = json_in(&env, &work, &allow);
    assert_eq!(saved["pii"]["mode"], "allow");
    assert_eq!(saved["pii"]["found"]["ssn"], 1);

    // A snapshot has no --pii: refused before anything is read.
    let out = baton_in(&env, &work, &["save", ".", "--pii", "allow"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--pii belong to a handoff"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn pii_in_a_transcript_is_redacted_by_default_and_kept_with_allow() {
    let env = Env::new();
    env.init();
    let work = workspace(&env);
    // A real Claude Code session's shape (the raw session is attached too), one prompt
    // holding the data.
    let session = env.path().join("session.jsonl");
    let fixture = fs::read_to_string("fixtures/transcripts/claude-code/main.jsonl").expect("read");
    let said =
        format!("Find out why. The customer is {EMAIL}, call {PHONE}, card {CARD}, SSN {SSN}.");
    let lines = fixture
        .replace("{{WORKSPACE}}", &s(&work))
        .replacen("Find out why.", &said, 1);
    fs::write(&session, &lines).expect("write");
    let args = ["save", "--no-brief", "--transcript", &s(&session)];
    let saved = json_in(&env, &work, &args);
    // Once in transcript.jsonl, once in the attached session file.
    assert_eq!(
        saved["pii"]["found"],
        json!({ "card": 2, "email": 2, "phone": 2, "ssn": 2 }),
        "{saved}"
    );
    let files = bundle_files(&env, "current");
    let transcript_files: Vec<&String> = files
        .keys()
        .filter(|p| *p == "transcript.jsonl" || p.starts_with("attachments/"))
        .collect();
    assert!(transcript_files.len() >= 2, "{files:?}");
    for path in &transcript_files {
        let text = cat(&env, &format!("current:{path}"));
        assert_none_of(&text, &[EMAIL, PHONE, SSN, CARD], path);
        assert!(text.contains("[REDACTED:email]"), "{path}: {text}");
        for line in text.lines() {
            let _: Value = serde_json::from_str(line).expect("a redacted line is still JSON");
        }
    }
    // The same session again with --pii allow: stored as it is (that a session that held
    // personal data is never cached is transcript_append's test).
    let mut allow = args.to_vec();
    allow.extend(["--pii", "allow"]);
    let saved = json_in(&env, &work, &allow);
    assert_eq!(saved["transcript_cached"], false, "{saved}");
    assert_eq!(saved["pii"]["found"]["email"], 2, "{saved}");
    assert!(cat(&env, "current:transcript.jsonl").contains(EMAIL));
    // And with redact again: redacted again (a session that held personal data is never
    // remembered as clean).
    let saved = json_in(&env, &work, &args);
    assert_eq!(saved["transcript_cached"], false, "{saved}");
    assert!(!cat(&env, "current:transcript.jsonl").contains(EMAIL));
}

#[test]
fn baton_handoff_and_mcp_take_the_pii_mode() {
    let env = Env::new();
    env.init();
    let work = workspace(&env);
    let brief = env.path().join("brief.md");
    fs::write(&brief, pii_briefing()).expect("write");
    let store = s(&env.store());
    let out = baton_in(
        &env,
        &work,
        &[
            "--store",
            &store,
            "handoff",
            "--to",
            "codex",
            "--brief",
            &s(&brief),
        ],
    );
    ok(out, "handoff");
    let stored = cat(&env, "current:handoff.md");
    assert_none_of(&stored, &[EMAIL, PHONE, SSN, CARD], "handoff.md");
    let out = baton_in(
        &env,
        &work,
        &[
            "--store",
            &store,
            "--json",
            "handoff",
            "--to",
            "codex",
            "--brief",
            &s(&brief),
            "--pii",
            "allow",
        ],
    );
    let d = doc(&out);
    assert_eq!(d["saved"]["pii"]["mode"], "allow", "{d}");
    assert_eq!(cat(&env, "current:handoff.md"), pii_briefing());

    // The MCP tool: redacts unless asked to allow.
    let ws = fs::canonicalize(&work).expect("canonical");
    ok(baton_in(&env, &ws, &["init"]), "init in the workspace");
    let results = mcp_calls(
        &env,
        &ws,
        &json!([
            { "tool": "save_handoff", "args": { "brief": pii_briefing(), "to": "codex" } },
            { "tool": "save_handoff", "args": { "brief": pii_briefing(), "pii": "allow" } },
            { "tool": "save_handoff", "args": { "brief": pii_briefing(), "pii": "keep" } },
        ]),
    );
    assert_eq!(results[0]["error"], false, "{results:?}");
    assert_eq!(
        results[0]["structured"]["pii"]["found"],
        json!({ "card": 1, "email": 1, "phone": 1, "ssn": 1 }),
        "{results:?}"
    );
    assert_none_of(
        &results[0].to_string(),
        &[EMAIL, PHONE, SSN, CARD],
        "MCP answer",
    );
    assert_eq!(
        results[1]["structured"]["pii"]["mode"], "allow",
        "{results:?}"
    );
    assert_eq!(results[2]["error"], true, "{results:?}");
    assert!(
        results[2]["text"]
            .as_str()
            .unwrap_or("")
            .contains("pii must be"),
        "{results:?}"
    );
}
