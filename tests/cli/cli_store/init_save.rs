//! Store CLI: init and store discovery; save, parents, the audit log, blob ids.

use super::*;

// ---------------------------------------------------------------------------------------
// init and store discovery
// ---------------------------------------------------------------------------------------

fn init_under_umask(mask: libc::mode_t) {
    let env = Env::new();
    let stdout = output_ok(with_umask(env.cmd(), mask).arg("init"));
    let store = env.store();
    let canonical = fs::canonicalize(&store).unwrap();
    assert_eq!(
        stdout,
        format!("Initialized empty baton store in {}\n", canonical.display())
    );
    assert!(store.is_dir());
    for name in [
        "config",
        "log",
        "lock",
        ".gitignore",
        "objects",
        "refs",
        "refs/targets",
    ] {
        assert!(store.join(name).exists(), "store lacks {name}");
    }
    assert_eq!(fs::read(store.join(".gitignore")).unwrap(), b"*\n");
    common::assert_private_tree(&store);

    // Everything a save creates (objects, fan-out dirs, refs, the log) is private too.
    let work = rich_tree(&env);
    let id = output_ok(with_umask(env.cmd(), mask).args(["save", work.to_str().unwrap()]));
    assert_eq!(id.trim().len(), 64);
    fs::write(work.join("handoff.md"), b"second\n").unwrap();
    output_ok(with_umask(env.cmd(), mask).args(["save", "work"]));
    output_ok(with_umask(env.cmd(), mask).args(["gc", "--grace", "0s"]));
    common::assert_private_tree(&store);
    let verify = env.ok(&["verify"]);
    assert!(verify.trim_end().ends_with(": ok"), "{verify}");
}

#[test]
fn init_makes_a_private_store_under_umask_000() {
    init_under_umask(0o000);
}

#[test]
fn init_makes_a_private_store_under_umask_077() {
    init_under_umask(0o077);
}

#[test]
fn init_json_reports_the_store_and_version() {
    let env = Env::new();
    let doc = json_ok(&env, &["init"]);
    assert_eq!(doc["store"], json!(fs::canonicalize(env.store()).unwrap()));
    assert_eq!(doc["version"], json!(1));
}

#[test]
fn store_flag_chooses_the_store() {
    let env = Env::new();
    let out = env.ok(&["--store", "elsewhere/st", "init"]);
    assert!(out.contains("elsewhere/st"), "{out}");
    let store = env.path().join("elsewhere/st");
    assert!(store.join("config").is_file());
    assert!(
        !env.store().exists(),
        "init --store must not create ./.baton"
    );
    common::assert_private_tree(&store);

    env.write_tree("d", &[("a", b"1")]);
    let id = env.save("d", &["--store", "elsewhere/st"]);
    // Without --store there is no store to be found.
    assert_eq!(env.run(&["log"]).status.code(), Some(3));
    let shown = env.ok(&["--store", "elsewhere/st", "show", "current"]);
    assert!(shown.starts_with(&format!("bundle  {id}\n")), "{shown}");
    assert!(object_path(&store, &id).is_file());
}

#[test]
fn baton_store_env_chooses_the_store() {
    let env = Env::new();
    let store = env.path().join("envstore");
    let run = |args: &[&str]| output_ok(env.cmd().env("BATON_STORE", &store).args(args));
    run(&["init"]);
    assert!(store.join("config").is_file());
    assert!(!env.store().exists());
    env.write_tree("d", &[("a", b"1")]);
    let id = run(&["save", "d"]).trim().to_string();
    assert!(object_path(&store, &id).is_file());
    assert_eq!(
        run(&["show", "current"]).lines().next().unwrap(),
        format!("bundle  {id}")
    );

    // BATON_STORE beats discovery of ./.baton, and --store beats BATON_STORE.
    env.init();
    let local = env.save("d", &[]);
    assert!(object_path(&env.store(), &local).is_file());
    assert_eq!(
        run(&["log", "--audit", "--json"])
            .matches("\"action\":\"save\"")
            .count(),
        1
    );
    let other = env.path().join("other");
    output_ok(env.cmd().env("BATON_STORE", &store).args([
        "--store",
        other.to_str().unwrap(),
        "init",
    ]));
    assert!(other.join("config").is_file());
}

#[test]
fn discovery_walks_up_from_a_subdirectory() {
    let env = Env::new();
    env.init();
    let sub = env.path().join("a/b/c");
    fs::create_dir_all(&sub).unwrap();
    fs::write(sub.join("note.txt"), b"from deep down\n").unwrap();
    let id = output_ok(env.cmd().current_dir(&sub).args(["save", "."]))
        .trim()
        .to_string();
    assert_eq!(id.len(), 64);
    assert!(
        object_path(&env.store(), &id).is_file(),
        "saved into the store found upwards"
    );
    assert!(!sub.join(".baton").exists());
    // Any directory below the store's parent sees the same store.
    let from_mid = output_ok(
        env.cmd()
            .current_dir(env.path().join("a"))
            .args(["cat", "current:note.txt"]),
    );
    assert_eq!(from_mid, "from deep down\n");
    // The nearest store wins: a store in a/ shadows the outer one.
    output_ok(env.cmd().current_dir(env.path().join("a")).arg("init"));
    let inner = output_ok(env.cmd().current_dir(&sub).args(["log", "--json"]));
    assert_eq!(
        serde_json::from_str::<Value>(&inner).unwrap()["bundles"],
        json!([])
    );
}

// ---------------------------------------------------------------------------------------
// save, parents, the audit log, blob ids
// ---------------------------------------------------------------------------------------

#[test]
fn save_prints_one_id_and_chains_parents() {
    let env = Env::new();
    env.init();
    env.write_tree("d", &[("handoff.md", b"v1\n")]);
    let out = env.run(&[
        "save",
        "d",
        "--from",
        "alice",
        "--to",
        "bob",
        "--summary",
        "first",
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let first = stdout.trim_end().to_string();
    assert_eq!(stdout, format!("{first}\n"), "exactly one line");
    assert!(
        first.len() == 64
            && first
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{first}"
    );
    assert!(
        out.stderr.is_empty(),
        "save is quiet on stderr: {:?}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The id names the manifest: the object's content hashes to it.
    let manifest = read_object_file(&object_path(&env.store(), &first));
    assert_eq!(b3(&manifest), first);

    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["id"], json!(first));
    assert_eq!(show["parents"], json!([]));

    env.write_tree("d", &[("handoff.md", b"v2\n")]);
    let second = env.save("d", &["--from", "bob", "--to", "carol"]);
    assert_ne!(first, second);
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["id"], json!(second), "current moved");
    assert_eq!(show["parents"], json!([first]));
    assert_eq!(show["from"], json!("bob"));
    assert_eq!(show["to"], json!("carol"));
    assert_eq!(json_ok(&env, &["show", "current~1"])["id"], json!(first));

    let log = json_ok(&env, &["log", "--audit"]);
    let entries = log["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{log}");
    let host = entries[0]["host"].as_str().unwrap().to_string();
    assert!(!host.is_empty());
    let expected = [
        (Value::Null, &first, "alice", "bob"),
        (json!(first), &second, "bob", "carol"),
    ];
    for (entry, (old, new, from, to)) in entries.iter().zip(expected) {
        assert_eq!(entry["action"], json!("save"));
        assert_eq!(entry["ref"], json!("current"));
        assert_eq!(entry["old"], old);
        assert_eq!(entry["new"], json!(new));
        assert_eq!(entry["from"], json!(from));
        assert_eq!(entry["to"], json!(to));
        assert_eq!(entry["user"], json!("tester"));
        assert_eq!(entry["host"], json!(host));
        assert_eq!(normalise_times(entry["time"].as_str().unwrap()), "<TIME>");
    }

    // The human audit log: one line per move, oldest first.
    let audit = normalise_times(&env.ok(&["log", "--audit"]));
    assert_eq!(
        audit,
        format!(
            "<TIME> current (none)..{} save alice -> bob by tester@{host}\n\
             <TIME> current {}..{} save bob -> carol by tester@{host}\n",
            &first[..12],
            &first[..12],
            &second[..12]
        )
    );
}

#[test]
fn save_records_summary_note_and_metadata() {
    let env = Env::new();
    env.init();
    env.write_tree("d", &[("a", b"1")]);
    env.save(
        "d",
        &[
            "--summary",
            "the work",
            "--note",
            "line one\nline two",
            "--meta",
            "k=v",
            "--meta",
            "x=a=b",
            "--meta",
            "empty=",
        ],
    );
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["summary"], json!("the work"));
    assert_eq!(show["note"], json!("line one\nline two"));
    assert_eq!(
        show["metadata"],
        json!({ "k": "v", "x": "a=b", "empty": "" })
    );
    // BATON_FROM supplies --from.
    let id = output_ok(env.cmd().env("BATON_FROM", "agent-7").args(["save", "d"]))
        .trim()
        .to_string();
    assert_eq!(json_ok(&env, &["show", &id])["from"], json!("agent-7"));
}

#[test]
fn blob_ids_are_plain_blake3_of_the_content() {
    let env = Env::new();
    env.init();
    let root = rich_tree(&env);
    let id = env.save("work", &[]);
    let show = json_ok(&env, &["show", &id]);
    let entries = show["entries"].as_array().unwrap();
    let src = describe(&root);
    assert_eq!(entries.len(), src.len(), "{show}");
    for entry in entries {
        let path = entry["path"].as_str().unwrap();
        let (kind, content): (&str, Vec<u8>) = match &src[path] {
            Item::Dir => {
                assert_eq!(entry["kind"], json!("dir"), "{path}");
                // A tree's id is also the BLAKE3 of its stored (decompressed) bytes.
                let tree = common::read_stored(&env.store(), entry["id"].as_str().unwrap());
                assert_eq!(entry["id"], json!(b3(&tree)));
                assert_eq!(entry["size"], json!(tree.len()));
                continue;
            }
            Item::File { exec, bytes } => (if *exec { "exec" } else { "file" }, bytes.clone()),
            Item::Link(target) => ("symlink", target.as_os_str().as_encoded_bytes().to_vec()),
        };
        assert_eq!(entry["kind"], json!(kind), "{path}");
        assert_eq!(entry["id"], json!(b3(&content)), "{path}");
        assert_eq!(entry["size"], json!(content.len()), "{path}");
        let stored = common::read_stored(&env.store(), entry["id"].as_str().unwrap());
        assert_eq!(stored, content, "{path}");
    }
    // The empty file is the well-known BLAKE3 of nothing.
    let zero = entries.iter().find(|e| e["path"] == json!("zero")).unwrap();
    assert_eq!(
        zero["id"],
        json!("af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262")
    );
    // The root tree too.
    let tree = common::read_stored(&env.store(), show["tree"].as_str().unwrap());
    assert_eq!(show["tree"], json!(b3(&tree)));
}

#[test]
fn symlinks_are_recorded_never_followed() {
    let env = Env::new();
    env.init();
    rich_tree(&env);
    env.save("work", &[]);
    let show = json_ok(&env, &["show", "current"]);
    let paths: Vec<&str> = show["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(
        !paths
            .iter()
            .any(|p| p.contains("secret") || p.starts_with("links/absolute/")),
        "{paths:?}"
    );
    for name in [
        "dangling",
        "outside-file",
        "outside-dir",
        "absolute",
        "inside",
    ] {
        let entry = show["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["path"] == json!(format!("links/{name}")))
            .unwrap();
        assert_eq!(entry["kind"], json!("symlink"), "{name}");
    }
    // cat of a symlink prints its target, not the file it points at.
    assert_eq!(
        env.ok(&["cat", "current:links/outside-file"]),
        "../../outside/secret.txt"
    );
    assert_eq!(env.ok(&["cat", "current:links/absolute"]), "/etc");
}
