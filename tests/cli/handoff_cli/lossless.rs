//! Handoff CLI: imports and exports that lose nothing (issue 29): prowl archive names that
//! never collide, frontmatter histories with their merges and ids, prowl `log.md` list
//! items, session excerpts' fields.

use super::import::{field, meta};
use super::*;

/// A bundle of a store's history: its id, its parents and its `show --json` document.
type Shown = (String, Vec<String>, Value);

/// Every bundle of `env`'s history, oldest first.
fn history(env: &Env) -> Vec<Shown> {
    let log = json_ok(env, &["log"]);
    let mut out: Vec<Shown> = log["bundles"]
        .as_array()
        .expect("bundles")
        .iter()
        .map(|b| {
            let id = b["id"].as_str().expect("id").to_string();
            let show = json_ok(env, &["show", &id]);
            let parents = show["parents"]
                .as_array()
                .expect("parents")
                .iter()
                .map(|p| p.as_str().expect("parent").to_string())
                .collect();
            (id, parents, show)
        })
        .collect();
    out.reverse();
    out
}

/// The files directly in `dir`, by name.
fn files_in(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| {
            let e = e.expect("entry");
            let name = e.file_name().into_string().expect("name");
            (name, fs::read(e.path()).expect("read"))
        })
        .collect()
}

/// A fresh store with `dir` imported into it.
fn imported(dir: &Path) -> (Env, Value) {
    let env = Env::new();
    env.init();
    let doc = json_ok(&env, &["import-handoff", &s(dir)]);
    (env, doc)
}

/// `export-handoff current --format FORMAT DIR --history`, as JSON.
fn export_history(env: &Env, format: &str, dir: &Path) -> Value {
    json_ok(
        env,
        &[
            "export-handoff",
            "current",
            "--format",
            format,
            &s(dir),
            "--history",
        ],
    )
}

#[test]
fn prowl_export_keeps_bundles_that_share_a_time_and_agents() {
    // Four handoffs written in the same second: two by claude to codex (the same archive
    // name), one by aaa to bbb (a name that sorts first), the last one current.
    let env = Env::new();
    env.init();
    let agents = [
        ("claude", "codex"),
        ("claude", "codex"),
        ("aaa", "bbb"),
        ("claude", "codex"),
    ];
    let mut files = Vec::new();
    for (n, (from, to)) in agents.iter().enumerate() {
        let parent = if n == 0 {
            "null".to_string()
        } else {
            format!("h{n}")
        };
        files.push((
            format!("2024-01-01T00-00-00-{from}-{n}.md"),
            format!(
                "---\nid: h{}\nparent: {parent}\nagent: {from}\nnext_agent: {to}\n---\n## Objective\nstep {}\n",
                n + 1,
                n + 1
            ),
        ));
    }
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_bytes()))
        .collect();
    let input = env.write_tree("in", &refs);
    json_ok(&env, &["import-handoff", &s(&input)]);
    let out = env.path().join("out");
    let doc = export_history(&env, "prowl", &out);
    assert_eq!(doc["bundles"].as_array().map(Vec::len), Some(4), "{doc}");
    let written: BTreeSet<&str> = doc["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        written,
        BTreeSet::from([
            "archive/2024-01-01T00-00-00Z-claude-to-codex.md",
            "archive/2024-01-01T00-00-00Z-claude-to-codex-2.md",
            "archive/2024-01-01T00-00-00Z-aaa-to-bbb.md",
            "current.md",
            "log.md",
        ]),
        "{doc}"
    );

    // Re-imported: every briefing, in the order written, with its agents and time.
    let (fresh, again) = imported(&out);
    assert_eq!(
        again["bundles"].as_array().map(Vec::len),
        Some(4),
        "{again}"
    );
    let bundles = history(&fresh);
    assert_eq!(bundles.len(), 4);
    for (n, (id, parents, show)) in bundles.iter().enumerate() {
        let briefing = cat(&fresh, &format!("{id}:handoff.md"));
        assert_eq!(briefing, format!("## Objective\nstep {}\n", n + 1), "{n}");
        assert_eq!(
            (field(show, "from"), field(show, "to")),
            agents[n],
            "bundle {n}: {show}"
        );
        assert_eq!(field(show, "created"), "2024-01-01T00:00:00Z");
        let want: Vec<String> = n
            .checked_sub(1)
            .map(|p| vec![bundles[p].0.clone()])
            .unwrap_or_default();
        assert_eq!(*parents, want, "bundle {n}");
    }
    assert_eq!(
        meta(&bundles[1].2, "import.source"),
        "archive/2024-01-01T00-00-00Z-claude-to-codex-2.md"
    );
}

/// What a re-import must give back of each bundle: everything but the store's ids.
fn described(env: &Env, bundles: &[Shown]) -> Vec<Value> {
    let index: BTreeMap<&str, usize> = bundles
        .iter()
        .enumerate()
        .map(|(i, b)| (b.0.as_str(), i))
        .collect();
    bundles
        .iter()
        .map(|(id, parents, show)| {
            let parents: Vec<usize> = parents.iter().map(|p| index[p.as_str()]).collect();
            json!({
                "parents": parents,
                "from": show["from"],
                "to": show["to"],
                "summary": show["summary"],
                "note": show["note"],
                "created": show["created"],
                "metadata": show["metadata"],
                "files": files_of(show).into_keys().collect::<Vec<_>>(),
                "handoff.md": cat(env, &format!("{id}:handoff.md")),
            })
        })
        .collect()
}

#[test]
fn frontmatter_history_round_trips_with_merges_and_ids() {
    // plan-1 <- api-2, plan-1 <- ui-3, [ui-3, api-2] <- review-4: a merge.
    let fixture = super::import::fixture("frontmatter");
    let (env, _) = imported(Path::new(&fixture));
    let before = history(&env);
    assert_eq!(before.len(), 4);
    let out = env.path().join("out");
    let doc = export_history(&env, "frontmatter", &out);
    // Every bundle once, parents first, under the names the protocol gave them.
    let exported: Vec<&str> = doc["bundles"]
        .as_array()
        .expect("bundles")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(exported.len(), 4, "{doc}");
    assert_eq!(exported.last(), Some(&before[3].0.as_str()));
    let mut names: Vec<String> = fs::read_dir(&out)
        .expect("out")
        .map(|e| e.expect("entry").file_name().into_string().expect("name"))
        .collect();
    names.sort();
    let mut want: Vec<String> = fs::read_dir(&fixture)
        .expect("fixture")
        .map(|e| e.expect("entry").file_name().into_string().expect("name"))
        .collect();
    want.sort();
    assert_eq!(names, want);
    let review = fs::read_to_string(out.join("2024-06-03T15-10-00-reviewer.md")).expect("read");
    assert!(
        review.starts_with("---\nid: \"review-4\"\nparent: [\"ui-3\", \"api-2\"]\n"),
        "{review}"
    );
    assert_eq!(
        review.matches("\n---\n").count(),
        1,
        "one frontmatter: {review}"
    );

    // Re-imported: the same bundles, their ids included (same content, same parents).
    let (fresh, _) = imported(&out);
    let after = history(&fresh);
    assert_eq!(described(&fresh, &after), described(&env, &before));
    let ids = |h: &[Shown]| h.iter().map(|b| b.0.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&after), ids(&before));
    for (id, _, show) in &after {
        let text = cat(&fresh, &format!("{id}:handoff.md"));
        assert!(
            !text.starts_with("---"),
            "{}: {text}",
            meta(show, "frontmatter.id")
        );
    }
    // And again: the second export is the first, byte for byte.
    let again = fresh.path().join("again");
    export_history(&fresh, "frontmatter", &again);
    assert_eq!(files_in(&again), files_in(&out));
}

#[test]
fn frontmatter_export_of_saved_handoffs_walks_every_parent() {
    // Two saved handoffs merged by a third: the export names each file as the protocol
    // does (`<%Y-%m-%dT%H-%M-%S>-<agent>.md`, no zone) and keeps both branches.
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let save = |from: &str| {
        ok(
            baton_in(
                &env,
                &ws,
                &[
                    "save",
                    "--brief",
                    &s(&brief),
                    "--from",
                    from,
                    "--to",
                    "next",
                ],
            ),
            "save",
        )
        .trim()
        .to_string()
    };
    let a = save("ann");
    let b = save("bob");
    env.ok(&["reset", &a]);
    let c = save("cy");
    let merged = json_ok(&env, &["merge", &b]);
    let head = json_ok(&env, &["show", "current"]);
    assert_eq!(
        head["parents"].as_array().map(Vec::len),
        Some(2),
        "{merged} {head}"
    );
    let out = env.path().join("out");
    let doc = export_history(&env, "frontmatter", &out);
    let exported: BTreeSet<&str> = doc["bundles"]
        .as_array()
        .expect("bundles")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for id in [&a, &b, &c] {
        assert!(exported.contains(id.as_str()), "{id} missing: {doc}");
    }
    for name in doc["files"].as_array().expect("files") {
        let name = name.as_str().unwrap_or_default();
        assert!(!name.contains('Z'), "{name}");
        assert!(name.ends_with(".md"), "{name}");
    }
    let (fresh, _) = imported(&out);
    let after = history(&fresh);
    assert_eq!(after.len(), exported.len());
    assert_eq!(
        after.last().map(|b| b.1.len()),
        Some(2),
        "the merge keeps both parents"
    );
}

#[test]
fn prowl_log_list_items_are_read_and_unreadable_ones_are_warnings() {
    // log.md as prowl writes it: list items, `→`, no `handoff`, fields after the agents.
    let env = Env::new();
    env.init();
    let dir = env.write_tree(
        "p/.prowl/handoff",
        &[
            (
                "log.md",
                "# Handoff log\n\n\
                 - 2026-11-20T10:00:00Z  save  agent=claude  repos=1  changed=2\n\
                 - 2026-11-20T10:00:00 claude -> codex\n\
                 - 2026-11-20T11:30:00Z  codex → gemini  pane=p2  preparation=completed\n\
                 - 2026-11-20T1200 gemini -> claude\n"
                    .as_bytes(),
            ),
            (
                "archive/2026-11-20T10-00-00-claude-to-codex.md",
                b"## Objective\nfirst\n",
            ),
            ("current.md", b"## Objective\nsecond\n"),
        ],
    );
    let doc = json_ok(&env, &["import-handoff", &s(&dir)]);
    let warnings = doc["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{doc}");
    let warning = warnings[0].as_str().unwrap_or_default();
    assert!(
        warning.contains("log.md:6: log line names a transition but cannot be read"),
        "{warning}"
    );
    let bundles = history(&env);
    assert_eq!(bundles.len(), 2);
    let current = &bundles[1].2;
    assert_eq!(
        (field(current, "from"), field(current, "to")),
        ("codex", "gemini")
    );
    assert_eq!(field(current, "created"), "2026-11-20T11:30:00Z");

    // The text output says it too, and the import is not an error.
    let again = Env::new();
    again.init();
    let out = baton_in(&again, again.path(), &["import-handoff", &s(&dir)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("\nwarning: ") && stdout(&out).contains("log.md:6:"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn prowl_session_excerpt_fields_become_metadata() {
    // A session excerpt as prowl writes it, before the transition that ends its work.
    let env = Env::new();
    env.init();
    let dir = env.write_tree(
        "p/.prowl/handoff",
        &[
            (
                "log.md",
                b"# Handoff log\n\n- 2026-11-20T10:00:00Z  claude \xe2\x86\x92 codex  pane=p1\n",
            ),
            (
                "sessions/2026-11-20T09-59-00-p1.md",
                b"# Handoff Session Context\n\n- Captured: 2026-11-20T09:59:00Z\n\
                  - Agent: claude\n- Session ID: 5f0c1d2e-77aa\n- Pane: p1\n\
                  - Source: hook\n- Confidence: high\n\
                  - Native transcript: /home/dev/.claude/projects/w/5f0c1d2e-77aa.jsonl\n\n\
                  ## Terminal Excerpt\n\n````text\n$ cargo test\n````\n",
            ),
            ("current.md", b"## Objective\nship\n"),
        ],
    );
    json_ok(&env, &["import-handoff", &s(&dir)]);
    let show = json_ok(&env, &["show", "current"]);
    let key = |f: &str| format!("prowl.session.2026-11-20T09-59-00-p1.{f}");
    assert_eq!(meta(&show, &key("agent")), "claude", "{show}");
    assert_eq!(meta(&show, &key("session")), "5f0c1d2e-77aa");
    assert_eq!(meta(&show, &key("confidence")), "high");
    assert_eq!(
        meta(&show, &key("path")),
        "/home/dev/.claude/projects/w/5f0c1d2e-77aa.jsonl"
    );
    assert!(files_of(&show).contains_key("sessions/2026-11-20T09-59-00-p1.md"));
}

#[test]
fn a_prowl_directory_as_prowl_writes_it_imports() {
    // Prowl's HandoffStore stamps archive and session files `yyyy-MM-dd'T'HHmm` (no
    // seconds) and logs `- <ISO time>  <event>` items.
    let env = Env::new();
    env.init();
    let dir = env.write_tree(
        "p/.prowl/handoff",
        &[
            (
                "log.md",
                "# Handoff log\n\n\
                 - 2026-11-20T09:59:58Z  save  agent=claude  repos=1  changed=3  briefing=inline\n\
                 - 2026-11-20T10:00:03Z  claude → codex  pane=p1  preparation=completed\n"
                    .as_bytes(),
            ),
            (
                "archive/2026-11-20T1000-claude-to-codex.md",
                b"## Objective\nfirst\n\n# Handoff Context (generated)\n",
            ),
            (
                "sessions/2026-11-20T0959-p1.md",
                b"# Handoff Session Context\n\n- Agent: claude\n- Confidence: medium\n",
            ),
            ("current.md", b"## Objective\nfirst, taken over\n"),
        ],
    );
    let doc = json_ok(&env, &["import-handoff", &s(&dir)]);
    assert_eq!(doc["warnings"], json!([]), "{doc}");
    let bundles = history(&env);
    assert_eq!(bundles.len(), 2);
    let (archived, current) = (&bundles[0].2, &bundles[1].2);
    assert_eq!(
        (field(archived, "from"), field(archived, "to")),
        ("claude", "codex")
    );
    assert_eq!(field(archived, "created"), "2026-11-20T10:00:00Z");
    assert_eq!(field(archived, "summary"), "first");
    assert_eq!(
        meta(archived, "prowl.session.2026-11-20T0959-p1.confidence"),
        "medium"
    );
    assert_eq!(
        (field(current, "from"), field(current, "to")),
        ("claude", "codex")
    );
    assert_eq!(field(current, "created"), "2026-11-20T10:00:03Z");
}

#[test]
fn prowl_history_round_trips_with_its_names_sessions_and_context() {
    let fixture = super::import::fixture("prowl");
    let handoff = Path::new(&fixture).join(".prowl/handoff");
    let (env, _) = imported(Path::new(&fixture));
    let before = history(&env);
    assert_eq!(before.len(), 3);
    let out = env.path().join("out");
    export_history(&env, "prowl", &out);
    // The archive names prowl gave, its session excerpt and its context go along.
    for rel in [
        "archive/2024-05-01T09-15-00-claude-to-codex.md",
        "archive/2024-05-02T14-30-00Z-codex-to-claude.md",
        "sessions/2024-05-02T14-25-10-pane-2.md",
        "context.md",
    ] {
        assert!(out.join(rel).is_file(), "{rel} not exported");
    }
    assert_eq!(
        fs::read(out.join("context.md")).expect("context"),
        fs::read(handoff.join("context.md")).expect("context")
    );

    // Re-imported: the archived bundles are the same bundles, ids included; the last
    // differs only in its log.md, which the export writes anew.
    let (fresh, _) = imported(&out);
    let after = history(&fresh);
    assert_eq!(after.len(), 3);
    assert_eq!(after[0].0, before[0].0);
    assert_eq!(after[1].0, before[1].0);
    let mut now = described(&fresh, &after);
    let mut then = described(&env, &before);
    for d in [&mut now[2], &mut then[2]] {
        if let Some(m) = d["metadata"].as_object_mut() {
            m.remove("import.fingerprint");
        }
    }
    assert_eq!(now, then);
}
