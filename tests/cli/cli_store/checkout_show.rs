//! Store CLI: checkout; cat, show, log, diff, revisions.

use super::*;

// ---------------------------------------------------------------------------------------
// checkout
// ---------------------------------------------------------------------------------------

#[test]
fn checkout_restores_everything_exactly() {
    let env = Env::new();
    env.init();
    let root = rich_tree(&env);
    let id = env.save("work", &[]);
    let original = describe(&root);
    assert!(original.len() >= 15, "{original:#?}");

    // Into an absent directory (with absent parents).
    let out = env.ok(&["checkout", &id, "restored/new"]);
    assert!(
        out.starts_with(&format!("Checked out {} (", &id[..12])),
        "{out}"
    );
    let restored = env.path().join("restored/new");
    assert_eq!(describe(&restored), original);
    // The dangling link was restored as a link, not resolved or dropped.
    assert_eq!(
        fs::read_link(restored.join("links/dangling")).unwrap(),
        Path::new("does/not/exist")
    );
    assert!(!restored.join("links/dangling").exists());
    assert!(
        restored.join("empty").is_dir()
            && fs::read_dir(restored.join("empty"))
                .unwrap()
                .next()
                .is_none()
    );
    // No staging directory is left beside it.
    let siblings: Vec<_> = fs::read_dir(env.path().join("restored"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(siblings, vec![std::ffi::OsString::from("new")]);

    // Into an existing empty directory.
    let empty = env.path().join("empty-target");
    fs::create_dir(&empty).unwrap();
    let doc = json_ok(&env, &["checkout", "current", "empty-target"]);
    assert_eq!(doc["bundle"], json!(id));
    let files = original
        .values()
        .filter(|i| matches!(i, Item::File { .. }))
        .count();
    assert_eq!(doc["files"], json!(files));
    let bytes: usize = original
        .values()
        .map(|i| {
            if let Item::File { bytes, .. } = i {
                bytes.len()
            } else {
                0
            }
        })
        .sum();
    assert_eq!(doc["bytes"], json!(bytes));
    assert_eq!(describe(&empty), original);

    // A round trip: saving the checkout gives the same tree.
    let again = env.save("empty-target", &[]);
    assert_eq!(
        json_ok(&env, &["show", &again])["tree"],
        json_ok(&env, &["show", &id])["tree"]
    );
}

#[test]
fn checkout_restores_the_exec_bit_both_ways() {
    let env = Env::new();
    env.init();
    let root = env.write_tree("d", &[("run", b"x"), ("data", b"x")]);
    set_exec(&root.join("run"), true);
    set_exec(&root.join("data"), false);
    env.save("d", &[]);
    output_ok(with_umask(env.cmd(), 0o022).args(["checkout", "current", "out"]));
    let mode = |p: &str| {
        fs::metadata(env.path().join("out").join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("run"), 0o755);
    assert_eq!(mode("data"), 0o644);
}

#[test]
fn checkout_refuses_a_non_empty_directory() {
    let env = Env::new();
    env.init();
    env.write_tree("d", &[("a", b"new")]);
    env.save("d", &[]);
    let target = env.write_tree("busy", &[("a", b"old"), ("keep/me", b"mine")]);
    let before = describe(&target);
    let out = env.run(&["checkout", "current", "busy"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    assert_eq!(describe(&target), before, "target untouched");
    let names: BTreeSet<_> = fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([".baton".to_string(), "d".into(), "busy".into()]),
        "no staging dir left"
    );
}

// ---------------------------------------------------------------------------------------
// cat, show, log, diff, revisions
// ---------------------------------------------------------------------------------------

#[test]
fn cat_prints_exact_bytes() {
    let env = Env::new();
    env.init();
    rich_tree(&env);
    env.save("work", &[]);
    let cat = |spec: &str| {
        let out = env.run(&["cat", spec]);
        assert!(
            out.status.success(),
            "{spec}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stderr.is_empty());
        out.stdout
    };
    assert_eq!(cat("current:handoff.md"), b"# Handoff\n\nall done\n");
    assert_eq!(cat("current:bin.dat"), all_bytes());
    assert_eq!(cat("current:zero"), b"");
    assert_eq!(cat("current:deep/nested/dir/file.md"), b"nested\n");
    assert_eq!(
        cat("current:/deep//nested/dir/file.md"),
        b"nested\n",
        "extra slashes are harmless"
    );
    assert_eq!(cat("current:name with spaces & \u{fc}nicode.txt"), b"u\n");
    assert_eq!(cat("current:tool.sh"), b"#!/bin/sh\necho hi\n");

    let text = json_ok(&env, &["cat", "current:handoff.md"]);
    assert_eq!(text["content"], json!("# Handoff\n\nall done\n"));
    assert!(text.get("content_base64").is_none());
    assert_eq!(text["path"], json!("handoff.md"));
    assert_eq!(text["kind"], json!("file"));
    assert_eq!(text["size"], json!(20));
    assert_eq!(text["id"], json!(b3(b"# Handoff\n\nall done\n")));

    let binary = json_ok(&env, &["cat", "current:bin.dat"]);
    assert!(binary.get("content").is_none());
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(binary["content_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(decoded, all_bytes());
    assert_eq!(
        json_ok(&env, &["cat", "current:tool.sh"])["kind"],
        json!("exec")
    );
}

#[test]
fn cat_streams_a_large_file_exactly() {
    let env = Env::new();
    env.init();
    // Larger than the in-memory limits of both save (1 MiB) and cat (8 MiB).
    let big: Vec<u8> = (0..9 * 1024 * 1024 + 17)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    env.write_tree("d", &[("big", &big)]);
    env.save("d", &[]);
    let out = env.run(&["cat", "current:big"]);
    assert!(out.status.success());
    assert!(out.stdout == big, "large file differs");
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["entries"][0]["id"], json!(b3(&big)));
}

#[test]
fn show_lists_kind_size_id_and_path() {
    let env = Env::new();
    env.init();
    let root = env.write_tree("d", &[("a.txt", b"abc"), ("sub/run.sh", b"#!x\n")]);
    set_exec(&root.join("sub/run.sh"), true);
    symlink("a.txt", root.join("link")).unwrap();
    let first = env.save("d", &[]);
    let id = env.save(
        "d",
        &[
            "--from",
            "alice",
            "--to",
            "bob",
            "--summary",
            "sum",
            "--note",
            "n1\nn2",
            "--meta",
            "k=v",
        ],
    );
    let doc = json_ok(&env, &["show", &id]);
    let tree = doc["tree"].as_str().unwrap();
    let sub = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == json!("sub"))
        .unwrap();
    let expected = format!(
        "bundle  {id}\n\
         tree    {tree}\n\
         parent  {first}\n\
         created <TIME>\n\
         from    alice\n\
         to      bob\n\
         summary sum\n\
         note    n1\n        n2\n\
         meta    k=v\n\
         \n\
         file               3 {} a.txt\n\
         symlink            5 {} link\n\
         dir     {:>12} {} sub\n\
         exec               4 {} sub/run.sh\n",
        b3(b"abc"),
        b3(b"a.txt"),
        sub["size"].as_u64().unwrap(),
        sub["id"].as_str().unwrap(),
        b3(b"#!x\n"),
    );
    assert_eq!(normalise_times(&env.ok(&["show", &id])), expected);
    assert_eq!(
        doc["entries"],
        json!([
            { "path": "a.txt", "kind": "file", "size": 3, "id": b3(b"abc") },
            { "path": "link", "kind": "symlink", "size": 5, "id": b3(b"a.txt") },
            { "path": "sub", "kind": "dir", "size": sub["size"], "id": sub["id"] },
            { "path": "sub/run.sh", "kind": "exec", "size": 4, "id": b3(b"#!x\n") },
        ])
    );
}

#[test]
fn log_shows_history_newest_first_and_honours_n() {
    let env = Env::new();
    env.init();
    assert_eq!(env.ok(&["log"]), "", "empty history prints nothing");
    let mut ids = Vec::new();
    for (i, summary) in ["one", "two", "three"].iter().enumerate() {
        env.write_tree("d", &[("f", format!("{i}").as_bytes())]);
        let mut extra = vec!["--summary", summary];
        if i == 2 {
            extra.extend(["--from", "alice", "--to", "bob"]);
        }
        ids.push(env.save("d", &extra));
    }
    let entry = |i: usize| {
        let who = if i == 2 {
            "Handoff: alice -> bob\n"
        } else {
            ""
        };
        format!(
            "bundle {}\n{who}Date:    <TIME>\n\n    {}\n",
            ids[i],
            ["one", "two", "three"][i]
        )
    };
    assert_eq!(
        normalise_times(&env.ok(&["log"])),
        format!("{}\n{}\n{}", entry(2), entry(1), entry(0))
    );
    assert_eq!(
        normalise_times(&env.ok(&["log", "-n", "2"])),
        format!("{}\n{}", entry(2), entry(1))
    );
    assert_eq!(
        normalise_times(&env.ok(&["log", "--max-count", "1"])),
        entry(2)
    );
    assert_eq!(
        normalise_times(&env.ok(&["log", "current~1"])),
        format!("{}\n{}", entry(1), entry(0))
    );
    assert_eq!(env.ok(&["log", "-n", "0"]), "");

    let doc = json_ok(&env, &["log", "-n", "2"]);
    let listed: Vec<&str> = doc["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec![ids[2].as_str(), ids[1].as_str()]);
    assert_eq!(doc["bundles"][0]["summary"], json!("three"));
    assert_eq!(doc["bundles"][0]["parents"], json!([ids[1]]));

    let audit = json_ok(&env, &["log", "--audit", "-n", "1"]);
    assert_eq!(audit["entries"].as_array().unwrap().len(), 1);
    assert_eq!(
        audit["entries"][0]["new"],
        json!(ids[2]),
        "-n keeps the newest audit entries"
    );
}

#[test]
fn diff_reports_added_deleted_modified_and_type_changes() {
    let env = Env::new();
    env.init();
    let v1 = env.write_tree(
        "v1",
        &[
            ("keep.txt", b"same"),
            ("mod.txt", b"one"),
            ("del.txt", b"gone"),
            ("mode.sh", b"x"),
            ("tolink", b"target"),
            ("dir/a", b"a"),
            ("dir/b", b"b"),
            ("filetodir", b"f"),
            ("dirtofile/x", b"x"),
        ],
    );
    set_exec(&v1.join("mode.sh"), false);
    symlink("somewhere", v1.join("relink")).unwrap();
    let old = env.save("v1", &[]);

    let v2 = env.write_tree(
        "v2",
        &[
            ("keep.txt", b"same"),
            ("mod.txt", b"two"),
            ("add.txt", b"new"),
            ("mode.sh", b"x"),
            ("dir/a", b"a"),
            ("dir/c", b"c"),
            ("filetodir/inner", b"i"),
            ("dirtofile", b"now a file"),
        ],
    );
    set_exec(&v2.join("mode.sh"), true);
    symlink("target", v2.join("tolink")).unwrap();
    symlink("elsewhere", v2.join("relink")).unwrap();
    let new = env.save("v2", &[]);

    let expected = "A add.txt\n\
                    D del.txt\n\
                    D dir/b\n\
                    A dir/c\n\
                    D dirtofile/x\n\
                    A dirtofile\n\
                    D filetodir\n\
                    A filetodir/inner\n\
                    M mod.txt\n\
                    T mode.sh\n\
                    M relink\n\
                    T tolink\n";
    assert_eq!(env.ok(&["diff", &old, &new]), expected);
    assert_eq!(env.ok(&["diff", "current~", "current"]), expected);
    let doc = json_ok(&env, &["diff", &old, &new]);
    let changes: Vec<String> = doc["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["status"].as_str().unwrap(),
                c["path"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            "added add.txt",
            "deleted del.txt",
            "deleted dir/b",
            "added dir/c",
            "deleted dirtofile/x",
            "added dirtofile",
            "deleted filetodir",
            "added filetodir/inner",
            "modified mod.txt",
            "type-changed mode.sh",
            "modified relink",
            "type-changed tolink",
        ]
    );
    // Reversed, additions and deletions swap.
    let reversed = env.ok(&["diff", &new, &old]);
    assert!(
        reversed.contains("D add.txt\n") && reversed.contains("A del.txt\n"),
        "{reversed}"
    );
    // Identical bundles differ in nothing.
    assert_eq!(env.ok(&["diff", &new, "current"]), "");
    assert_eq!(
        json_ok(&env, &["diff", "current", "current"])["changes"],
        json!([])
    );
}

#[test]
fn revision_forms_resolve() {
    let env = Env::new();
    env.init();
    let mut ids = Vec::new();
    for i in 0..3 {
        env.write_tree("d", &[("f", format!("{i}").as_bytes())]);
        ids.push(env.save("d", &[]));
    }
    let resolve = |rev: &str| {
        json_ok(&env, &["show", rev])["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(resolve(&ids[0]), ids[0]);
    assert_eq!(resolve(&ids[1][..8]), ids[1]);
    assert_eq!(resolve(&ids[1][..20]), ids[1]);
    assert_eq!(resolve("current"), ids[2]);
    assert_eq!(resolve("current~0"), ids[2]);
    assert_eq!(resolve("current~"), ids[1]);
    assert_eq!(resolve("current~1"), ids[1]);
    assert_eq!(resolve("current~2"), ids[0]);
    assert_eq!(resolve(&format!("{}~1", &ids[2][..8])), ids[1]);
    assert_eq!(resolve(&format!("{}~", ids[1])), ids[0]);
    let past = env.run(&["show", "current~3"]);
    assert_eq!(
        past.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&past.stderr)
    );

    let (code, doc) = env.json(&["show", "targets/devbox"]);
    assert_eq!(code, 3, "{doc}");
    assert_eq!(doc["error"]["code"], json!("not_found"));

    // A blob or tree id is not a revision, even though the object exists.
    let blob = b3(b"0");
    let (code, doc) = env.json(&["show", &blob]);
    assert_eq!(code, 3, "{doc}");
}
