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
    assert_eq!(again["bundles"].as_array().map(Vec::len), Some(4), "{again}");
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
