//! Store CLI: deduplication, excluding the store itself, JSON output.

use super::*;

// ---------------------------------------------------------------------------------------
// Deduplication and excluding the store itself
// ---------------------------------------------------------------------------------------

#[test]
fn saving_the_same_tree_twice_writes_only_a_manifest() {
    let env = Env::new();
    env.init();
    rich_tree(&env);
    let first = json_ok(&env, &["save", "work"]);
    assert!(first["objects_written"].as_u64().unwrap() > 5, "{first}");
    assert_eq!(first["parents"], json!([]));
    let before = object_ids(&env.store());

    let second = json_ok(&env, &["save", "work"]);
    assert_eq!(second["objects_written"], json!(0), "{second}");
    assert_eq!(second["bytes_written"], json!(0), "{second}");
    assert_eq!(second["tree"], first["tree"]);
    assert_eq!(second["files"], first["files"]);
    assert_eq!(second["bytes"], first["bytes"]);
    assert_eq!(second["parents"], json!([first["bundle"]]));
    let after = object_ids(&env.store());
    let new: Vec<_> = after.difference(&before).cloned().collect();
    assert_eq!(
        new,
        vec![second["bundle"].as_str().unwrap().to_string()],
        "only the new manifest was written"
    );
}

#[test]
fn the_store_is_excluded_from_the_snapshot() {
    let env = Env::new();
    env.init();
    env.write_tree(".", &[("handoff.md", b"x"), ("sub/y", b"y")]);
    env.save(".", &[]);
    let paths: Vec<String> = json_ok(&env, &["show", "current"])["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(paths, ["handoff.md", "sub", "sub/y"]);

    // Also a store elsewhere in the tree (given by --store), whatever its name.
    let env = Env::new();
    env.write_tree("d", &[("a", b"1")]);
    env.ok(&["--store", "d/inner/st", "init"]);
    env.save("d", &["--store", "d/inner/st"]);
    let paths: Vec<String> =
        json_ok(&env, &["--store", "d/inner/st", "show", "current"])["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_string())
            .collect();
    assert_eq!(
        paths,
        ["a", "inner"],
        "the store's parent stays, the store does not"
    );
}

// ---------------------------------------------------------------------------------------
// JSON output
// ---------------------------------------------------------------------------------------

/// Run with `--json` and require exactly one JSON document on one line of stdout.
fn one_json_doc(out: &Output, what: &str) -> Value {
    let stdout = String::from_utf8(out.stdout.clone()).expect("utf-8");
    assert!(
        stdout.ends_with('\n') && stdout.matches('\n').count() == 1,
        "{what}: not one line: {stdout:?}"
    );
    let doc: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{what}: {e}: {stdout:?}"));
    assert!(doc.is_object(), "{what}: {doc}");
    assert!(
        out.stderr.is_empty(),
        "{what}: stderr {:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    doc
}

#[test]
fn json_every_command_prints_one_ok_document() {
    let env = Env::new();
    env.write_tree("d", &[("a.txt", b"hello"), ("b", b"\xff\xfe")]);
    let runs: &[&[&str]] = &[
        &["init"],
        &["save", "d", "--summary", "s"],
        &["save", "d"],
        &["log"],
        &["log", "-n", "1"],
        &["log", "--audit"],
        &["show", "current"],
        &["cat", "current:a.txt"],
        &["cat", "current:b"],
        &["checkout", "current", "out"],
        &["diff", "current~", "current"],
        &["verify"],
        &["verify", "current"],
        &["verify", "current", "--history"],
        &["reset", "current~"],
        &["reset", "current", "--expect", "current"],
        &["gc"],
        &["gc", "--dry-run", "--grace", "0s"],
        &["completions", "bash"],
        &["man"],
    ];
    for args in runs {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let out = env.run(&full);
        let doc = one_json_doc(&out, &format!("{args:?}"));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {doc}");
        assert_eq!(doc["ok"], json!(true), "{args:?}: {doc}");
        assert!(doc.get("error").is_none(), "{args:?}: {doc}");
    }
    // --json is global: it may follow the subcommand.
    let out = env.run(&["show", "current", "--json"]);
    assert_eq!(one_json_doc(&out, "show --json")["ok"], json!(true));
    let completions = json_ok(&env, &["completions", "bash"]);
    assert!(completions["script"].as_str().unwrap().contains("save"));
    let man = json_ok(&env, &["man"]);
    assert!(man["man"].as_str().unwrap().contains("save"));
    let verify = json_ok(&env, &["verify"]);
    assert_eq!(verify["report"]["problems"], json!([]));
}

#[test]
fn json_errors_are_one_document_with_code_and_exit_code() {
    let env = Env::new();
    env.init();
    env.write_tree("d", &[("a", b"1")]);
    env.save("d", &[]);
    let cases: &[(&[&str], i32, &str)] = &[
        (&["show", "deadbeef"], 3, "not_found"),
        (&["show", "abc"], 2, "usage"),
        (&["cat", "current:nope"], 3, "not_found"),
        (&["cat", "current"], 2, "usage"),
        (&["init"], 2, "usage"),
        (&["save", "missing"], 3, "not_found"),
        (&["checkout", "current", "d"], 2, "usage"),
        (&["show", "targets/nobody"], 3, "not_found"),
        // clap usage errors
        (&["bogus"], 2, "usage"),
        (&["save"], 2, "usage"),
        (&["save", "d", "--no-such-flag"], 2, "usage"),
        (&["gc", "--grace", "forever"], 2, "usage"),
        (&["log", "-n", "many"], 2, "usage"),
        (&["completions", "no-such-shell"], 2, "usage"),
        (&[], 2, "usage"),
    ];
    for (args, exit, code) in cases {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let out = env.run(&full);
        let doc = one_json_doc(&out, &format!("{args:?}"));
        assert_eq!(out.status.code(), Some(*exit), "{args:?}: {doc}");
        assert_eq!(doc["ok"], json!(false), "{args:?}: {doc}");
        assert_eq!(doc["error"]["code"], json!(code), "{args:?}: {doc}");
        assert_eq!(doc["error"]["exit_code"], json!(exit), "{args:?}: {doc}");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(
            !message.is_empty() && !message.contains('\n'),
            "{args:?}: {doc}"
        );
    }
    // The same usage error with --json after the subcommand.
    let out = env.run(&["gc", "--grace", "forever", "--json"]);
    let doc = one_json_doc(&out, "gc --json");
    assert_eq!(
        (out.status.code(), &doc["error"]["code"]),
        (Some(2), &json!("usage"))
    );
}
