//! Handoff CLI: import-handoff.

use super::*;

// ---------------------------------------------------------------------------------------
// 7. import-handoff
// ---------------------------------------------------------------------------------------

pub(super) fn fixture(rel: &str) -> String {
    s(&Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/import")
        .join(rel))
}

/// A bundle of the history: its id, its parents and its `show --json` document.
type LogEntry = (String, Vec<String>, Value);

/// Import `rel` into a fresh store; returns the env, the import document and the log
/// (oldest first) as (id, parents, show document).
pub(super) fn import_fixture(rel: &str) -> (Env, Value, Vec<LogEntry>) {
    let env = Env::new();
    env.init();
    let imported = json_ok(&env, &["import-handoff", &fixture(rel)]);
    let log = json_ok(&env, &["log"]);
    let mut bundles: Vec<LogEntry> = log["bundles"]
        .as_array()
        .expect("bundles")
        .iter()
        .map(|b| {
            let id = b["id"].as_str().expect("id").to_string();
            let show = json_ok(&env, &["show", &id]);
            let parents: Vec<String> = show["parents"]
                .as_array()
                .expect("parents")
                .iter()
                .map(|p| p.as_str().expect("parent").to_string())
                .collect();
            assert_eq!(b["parents"], show["parents"], "log and show agree");
            (id, parents, show)
        })
        .collect();
    bundles.reverse();
    (env, imported, bundles)
}

pub(super) fn field<'a>(show: &'a Value, key: &str) -> &'a str {
    show[key].as_str().unwrap_or_default()
}

pub(super) fn meta<'a>(show: &'a Value, key: &str) -> &'a str {
    show["metadata"][key].as_str().unwrap_or_default()
}

#[test]
fn import_prowl() {
    let (env, imported, bundles) = import_fixture("prowl");
    assert_eq!(imported["format"], "prowl");
    assert_eq!(imported["bundles"].as_array().map(Vec::len), Some(3));
    assert_eq!(bundles.len(), 3);
    // A chain: each bundle's parent is the one before it.
    assert!(bundles[0].1.is_empty());
    assert_eq!(bundles[1].1, [bundles[0].0.clone()]);
    assert_eq!(bundles[2].1, [bundles[1].0.clone()]);
    let who: Vec<(&str, &str)> = bundles
        .iter()
        .map(|(_, _, s)| (field(s, "from"), field(s, "to")))
        .collect();
    // current.md's from/to are the last transition of log.md.
    assert_eq!(
        who,
        [
            ("claude", "codex"),
            ("codex", "claude"),
            ("claude", "codex")
        ]
    );
    assert_eq!(
        field(&bundles[0].2, "summary"),
        "Add idempotency keys to the `POST /transfers` endpoint."
    );
    assert_eq!(
        field(&bundles[1].2, "summary"),
        "Finish replay handling for idempotent transfers and cover it with tests."
    );
    assert_eq!(field(&bundles[0].2, "created"), "2024-05-01T09:15:00Z");
    assert_eq!(field(&bundles[1].2, "created"), "2024-05-02T14:30:00Z");
    for (_, _, show) in &bundles {
        assert_eq!(meta(show, "import.format"), "prowl");
        assert!(!meta(show, "import.source").is_empty(), "{show}");
    }
    assert_eq!(
        meta(&bundles[0].2, "import.source"),
        "archive/2024-05-01T09-15-00-claude-to-codex.md"
    );
    // The last bundle carries the context and log too; the session excerpt goes to the
    // transition whose window it falls in (14:25 is before the 14:30 handoff).
    let last = files_of(&bundles[2].2);
    for path in ["handoff.md", "context.md", "log.md"] {
        assert!(last.contains_key(path), "{path}: {last:?}");
    }
    assert!(files_of(&bundles[1].2).contains_key("sessions/2024-05-02T14-25-10-pane-2.md"));
    assert_eq!(
        cat(&env, "current:handoff.md").as_bytes(),
        fs::read(fixture("prowl/.prowl/handoff/current.md")).expect("read")
    );
    assert_eq!(
        json_ok(&env, &["show", "current"])["id"],
        bundles[2].0.as_str()
    );
}

#[test]
fn import_frontmatter() {
    let (env, imported, bundles) = import_fixture("frontmatter");
    assert_eq!(imported["format"], "frontmatter");
    assert_eq!(bundles.len(), 4);
    let by_key: BTreeMap<&str, &LogEntry> = bundles
        .iter()
        .map(|b| (meta(&b.2, "frontmatter.id"), b))
        .collect();
    let keys: Vec<&str> = by_key.keys().copied().collect();
    assert_eq!(keys, ["api-2", "plan-1", "review-4", "ui-3"]);
    let id = |k: &str| by_key[k].0.clone();
    assert!(by_key["plan-1"].1.is_empty());
    assert_eq!(by_key["api-2"].1, [id("plan-1")]);
    assert_eq!(by_key["ui-3"].1, [id("plan-1")]);
    // Converging work: two parents, in the order the frontmatter lists them.
    assert_eq!(by_key["review-4"].1, [id("ui-3"), id("api-2")]);
    let review = &by_key["review-4"].2;
    assert_eq!(field(review, "from"), "reviewer");
    assert_eq!(field(review, "to"), "backend");
    assert_eq!(
        field(review, "summary"),
        "Export works end to end; blocked on the column-order mismatch"
    );
    assert_eq!(
        field(review, "note"),
        "Emit columns in the on-screen order (date, account, memo, debit, credit)"
    );
    assert_eq!(field(review, "created"), "2024-06-03T15:10:00Z");
    assert_eq!(meta(review, "frontmatter.status"), "blocked");
    assert_eq!(meta(review, "frontmatter.parent"), "ui-3,api-2");
    for (_, _, show) in &bundles {
        assert_eq!(meta(show, "import.format"), "frontmatter");
    }
    assert_eq!(
        json_ok(&env, &["show", "current"])["id"],
        id("review-4").as_str()
    );
    // The briefing is the file below its frontmatter, byte for byte.
    let whole =
        fs::read_to_string(fixture("frontmatter/2024-06-03T09-00-00-planner.md")).expect("read");
    let (_, below) = whole[4..].split_once("\n---\n").expect("frontmatter");
    assert_eq!(cat(&env, &format!("{}:handoff.md", id("plan-1"))), below);
}

#[test]
fn import_agent_bundles() {
    let (env, imported, bundles) = import_fixture("agent-bundle");
    assert_eq!(imported["format"], "agent-bundle");
    assert_eq!(bundles.len(), 1);
    let (_, parents, show) = &bundles[0];
    assert!(parents.is_empty());
    assert_eq!(field(show, "from"), "claude-code");
    assert_eq!(field(show, "to"), "codex");
    assert_eq!(
        field(show, "summary"),
        "Config loader parses TOML and env overrides; wiring into main is left"
    );
    assert_eq!(field(show, "created"), "2024-07-10T09:30:12Z");
    assert_eq!(meta(show, "import.format"), "agent-bundle");
    assert_eq!(meta(show, "manifest.id"), "ah-20240710-0930-k2");
    let files: Vec<String> = files_of(show).into_keys().collect();
    assert_eq!(
        files,
        [
            "artifacts/test-output.txt",
            "handoff.md",
            "manifest.json",
            "state.json",
            "transcript.jsonl"
        ]
    );
    // The imported transcript is searchable.
    let found = json_ok(&env, &["search", "current", ""]);
    assert!(found["total_matches"].as_u64().unwrap_or(0) > 0, "{found}");

    let (_, imported, bundles) = import_fixture("agent-bundles");
    assert_eq!(imported["format"], "agent-bundle");
    assert_eq!(bundles.len(), 2);
    assert_eq!(meta(&bundles[0].2, "manifest.id"), "ah-7f3a");
    assert_eq!(meta(&bundles[1].2, "manifest.id"), "ah-1c9e");
    assert!(bundles[0].1.is_empty());
    assert_eq!(bundles[1].1, [bundles[0].0.clone()]);
    assert_eq!(field(&bundles[0].2, "from"), "codex");
    assert_eq!(field(&bundles[0].2, "to"), "claude-code");
    assert_eq!(
        field(&bundles[1].2, "summary"),
        "Invoice totals now sum then round; ready for review"
    );
    for (_, _, show) in &bundles {
        assert_eq!(meta(show, "import.format"), "agent-bundle");
    }
}

#[test]
fn import_hangs_under_the_existing_current() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let before = ok(baton_in(&env, &ws, &["save", "--no-brief"]), "save")
        .trim()
        .to_string();
    let imported = json_ok(&env, &["import-handoff", &fixture("agent-bundles")]);
    let first = &imported["bundles"][0];
    assert_eq!(first["parents"], json!([before]));
    let current = imported["bundles"][1]["bundle"].as_str().expect("id");
    // Importing the same input again gives the same bundles on top of the new current;
    // the text output names the format as the metadata does.
    let human = env.ok(&["import-handoff", &fixture("agent-bundle")]);
    assert!(
        human.starts_with("Imported 1 handoff (agent-bundle); current is "),
        "{human}"
    );
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["parents"], json!([current]));
    let history = json_ok(&env, &["log"])["bundles"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert_eq!(history, 4);
    let audit = json_ok(&env, &["log", "--audit"]);
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["action"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        actions,
        ["save", "import-handoff", "import-handoff", "import-handoff"]
    );
}

#[test]
fn bad_imports_name_the_file_and_line_and_write_nothing() {
    let env = Env::new();
    env.init();
    json_ok(&env, &["import-handoff", &fixture("agent-bundle")]);
    // (fixture, the `path:line:` or path the message must name, words it must hold)
    let cases: [(&str, &str, &str); 11] = [
        (
            "frontmatter-cycle",
            "2024-05-01T10-00-00-claude.md:3:",
            "cycle",
        ),
        (
            "frontmatter-duplicate-id",
            "2024-05-01T11-00-00-codex.md:3:",
            "duplicate id `h1`",
        ),
        (
            "frontmatter-missing-id",
            "2024-05-01T10-00-00-claude.md:1:",
            "no `id`",
        ),
        (
            "frontmatter-parent-type",
            "2024-05-01T10-00-00-claude.md:3:",
            "`parent` must be",
        ),
        (
            "frontmatter-unknown-parent",
            "2024-05-01T11-00-00-codex.md:4:",
            "`h9`",
        ),
        (
            "frontmatter-unterminated",
            "2024-05-01T10-00-00-claude.md:1:",
            "never closed",
        ),
        (
            "frontmatter-yaml-syntax",
            "2024-05-01T10-00-00-claude.md:4:",
            "invalid YAML",
        ),
        ("manifest-invalid-json", "manifest.json:5:", "invalid JSON"),
        // The fault is the file's name, not a line in it.
        (
            "prowl-archive-name",
            "archive/yesterday-claude-to-codex.md:",
            "no parsable timestamp",
        ),
        (
            "transcript-not-object",
            "transcript.jsonl:3:",
            "not a JSON object",
        ),
        // No file at all: the directory is named, with the layouts understood.
        (
            "unrecognized-layout",
            "unrecognized-layout:",
            "recognised layouts",
        ),
    ];
    let listed: BTreeSet<String> = fs::read_dir(fixture("bad"))
        .expect("bad fixtures")
        .map(|e| e.expect("entry").file_name().into_string().expect("name"))
        .collect();
    let covered: BTreeSet<String> = cases.iter().map(|c| c.0.to_string()).collect();
    assert_eq!(listed, covered, "every bad fixture has a case");

    let before = snapshot_files(&env.store());
    for (name, location, words) in cases {
        let path = fixture(&format!("bad/{name}"));
        let out = baton_in(&env, env.path(), &["import-handoff", &path]);
        assert_eq!(code(&out), 2, "{name}: {}", stderr(&out));
        let err = stderr(&out);
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("error: {path}/"))
                || first.starts_with(&format!("error: {path}:")),
            "{name}: {first}"
        );
        assert!(first.contains(&format!("/{location}")), "{name}: {first}");
        assert!(first.contains(words), "{name}: {first}");
        assert_eq!(
            snapshot_files(&env.store()),
            before,
            "{name}: store changed"
        );
        let out = baton_in(&env, env.path(), &["--json", "import-handoff", &path]);
        assert_eq!(code(&out), 2);
        assert_eq!(doc(&out)["error"]["code"], "usage");
        assert_eq!(
            snapshot_files(&env.store()),
            before,
            "{name}: store changed"
        );
    }
}
