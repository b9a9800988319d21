//! Local-path targets: round trips, target management, push, the remote CAS and pull.

use super::*;

// ---------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------

#[test]
fn file_url_and_explicit_clone_path_work() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, id) = store_with_target(&remote, 2);
    a.ok(&["target", "add", "f", &format!("file://{}", s(&remote))]);
    let doc = json_ok(&a, &["push", "f"]);
    assert_eq!(
        doc["url"],
        s(&remote),
        "file:// is stored as the plain path"
    );
    assert_eq!(disk_current(&remote).as_deref(), Some(id.as_str()));
    let b = Env::new();
    let dest = b.path().join("elsewhere");
    let doc = json_ok(&b, &["clone", &format!("file://{}", s(&remote)), s(&dest)]);
    assert_eq!(doc["store"], s(&dest));
    assert!(
        !b.store().exists(),
        "clone with PATH must not touch ./.baton"
    );
    let shown = json_ok(&b, &["--store", s(&dest), "show", "current"]);
    assert_eq!(shown["id"], id.as_str());
    verify(&b, &dest);
}

// ---------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------

#[test]
fn target_add_list_remove_and_malformed_urls_are_refused() {
    let env = Env::new();
    env.init();
    json_ok(&env, &["target", "add", "disk", "/mnt/disk/store"]);
    json_ok(&env, &["target", "add", "box", "me@box:work/.baton"]);
    json_ok(&env, &["target", "add", "url", "ssh://me@box:2222/srv/b"]);
    json_ok(&env, &["target", "add", "file", "file:///mnt/x"]);
    let list = json_ok(&env, &["target", "list"]);
    let targets = list["targets"].as_array().unwrap();
    let find = |name: &str| {
        targets
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {list}"))
            .clone()
    };
    assert_eq!(targets.len(), 4, "{list}");
    assert_eq!(
        find("disk")["default"],
        true,
        "the first target is the default"
    );
    assert_eq!(find("box")["default"], false);
    assert_eq!(find("disk")["url"], "/mnt/disk/store");
    assert_eq!(find("box")["url"], "ssh://me@box/~/work/.baton");
    assert_eq!(find("url")["url"], "ssh://me@box:2222/srv/b");
    assert_eq!(find("file")["url"], "/mnt/x");
    assert_eq!(find("disk")["last_seen"], Value::Null);

    // --default moves the default.
    json_ok(&env, &["target", "add", "other", "/srv/other", "--default"]);
    let list = json_ok(&env, &["target", "list"]);
    let defaults: Vec<&Value> = list["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["default"] == true)
        .collect();
    assert_eq!(defaults.len(), 1, "{list}");
    assert_eq!(defaults[0]["name"], "other");

    let config = env.store().join("config");
    let before = fs::read(&config).unwrap();
    for bad in [
        "-oProxyCommand=x:p",
        "ssh://-u@h/p",
        "ssh://u:pw@h/p",
        "ssh://-oProxyCommand=x/p",
        "host:",
        "http://h/p",
    ] {
        // After `--` so that the URL parser (not the argument parser) must refuse it.
        let err = json_err(&env, &["target", "add", "bad", "--", bad], 2);
        assert_eq!(err["code"], "usage", "{bad}: {err}");
        assert!(
            err["message"].as_str().unwrap().contains("malformed"),
            "{bad}: {err}"
        );
        assert_eq!(
            fs::read(&config).unwrap(),
            before,
            "{bad} changed the config"
        );
        // Without `--` too.
        let out = env.run(&["target", "add", "bad", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out));
        assert_eq!(
            fs::read(&config).unwrap(),
            before,
            "{bad} changed the config"
        );
    }
    // Duplicate names and bad names.
    json_err(&env, &["target", "add", "disk", "/elsewhere"], 2);
    json_err(&env, &["target", "add", "a/b", "/elsewhere"], 2);
    assert_eq!(fs::read(&config).unwrap(), before);

    json_ok(&env, &["target", "remove", "other"]);
    json_err(&env, &["target", "remove", "other"], 3);
    let list = json_ok(&env, &["target", "list"]);
    let names: Vec<&str> = list["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 4, "{list}");
    assert!(!names.contains(&"other"));
    // Nothing is the default now: a bare push cannot choose.
    json_err(&env, &["push"], 2);
    json_err(&env, &["pull", "nosuch"], 3);
}

#[test]
fn refused_url_with_a_password_does_not_echo_it() {
    let env = Env::new();
    env.init();
    for args in [
        vec!["target", "add", "bad", "ssh://u:hunter2@h/p"],
        vec!["clone", "ssh://u:hunter2@h/p", "dest"],
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(!text(&out).contains("hunter2"), "{}", text(&out));
        let mut json = vec!["--json"];
        json.extend_from_slice(&args);
        let out = env.run(&json);
        assert!(!text(&out).contains("hunter2"), "{}", text(&out));
    }
}

#[test]
fn push_without_targets_or_to_unknown_target_is_not_found() {
    let env = Env::new();
    env.init();
    env.write_tree("work", &[("a", b"a")]);
    env.save("work", &[]);
    json_err(&env, &["push"], 3);
    json_err(&env, &["pull"], 3);
}

// ---------------------------------------------------------------------------------------
// Push
// ---------------------------------------------------------------------------------------

#[test]
fn incremental_push_sends_only_new_objects() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 5);
    // Many files, so that "everything" and "only the new ones" differ a lot.
    let files: Vec<(String, Vec<u8>)> = (0..40)
        .map(|i| (format!("many/f{i:02}"), random_bytes(100 + i, 20_000)))
        .collect();
    a.write_files("work", &files);
    a.save("work", &[]);
    let first = json_ok(&a, &["push"]);
    let first_objects = first["report"]["objects_sent"].as_u64().unwrap();
    let first_bytes = first["report"]["bytes_sent"].as_u64().unwrap();
    assert!(first_objects > 40, "{first}");

    let new_id = save_change(&a, "many/f07", b"changed\n");
    let second = json_ok(&a, &["push"]);
    assert_eq!(second["report"]["bundle"], new_id.as_str());
    let objects = second["report"]["objects_sent"].as_u64().unwrap();
    let bytes = second["report"]["bytes_sent"].as_u64().unwrap();
    // The changed blob, the trees above it (many/ and the root) and the bundle.
    assert!(
        (1..=4).contains(&objects),
        "sent {objects} objects: {second}"
    );
    assert!(
        bytes * 20 < first_bytes,
        "sent {bytes} bytes again (first push {first_bytes})"
    );
    assert_eq!(pack_files(&remote).len(), 2, "one pack per push");
    assert_eq!(disk_current(&remote).as_deref(), Some(new_id.as_str()));
    verify(&a, &remote);
    // And a pushed bundle's history is complete on the other side.
    let b = clone_env(&remote);
    assert_eq!(checkout(&a, "current~1"), checkout(&b, "current~1"));
}

#[test]
fn push_of_an_older_rev_to_a_newer_remote_is_a_conflict() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, base) = store_with_target(&remote, 6);
    let newer = save_change(&a, "x", b"x");
    json_ok(&a, &["push"]);
    let before = refs_snapshot(&remote);
    // Pushing an ancestor would move the remote backwards: refused.
    let err = json_err(&a, &["push", "r", &base], 5);
    assert!(err["message"].as_str().unwrap().contains(&newer), "{err}");
    assert_eq!(refs_snapshot(&remote), before);
}

#[test]
fn push_from_a_store_behind_the_remote_says_it_is_ahead_and_to_pull() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, base) = store_with_target(&remote, 12);
    json_ok(&a, &["push"]);
    let b = clone_env(&remote);
    let newer = save_change(&a, "x", b"x");
    json_ok(&a, &["push"]);
    let before = refs_snapshot(&remote);
    // B never saw `newer` and has nothing of its own: it is only behind.
    let err = json_err(&b, &["push"], 5);
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("the remote is ahead"), "{err}");
    assert!(!message.contains("diverged"), "{err}");
    let hint = err["hint"].as_str().unwrap();
    assert!(hint.contains("baton pull origin"), "{err}");
    assert!(!hint.contains("merge targets"), "{err}");
    assert_eq!(refs_snapshot(&remote), before);
    // An older bundle of this store's own: the remote already has it.
    let err = json_err(&a, &["push", "r", &base], 5);
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("the remote is ahead") && message.contains(&newer),
        "{err}"
    );
    // Once the remote bundle is here and both sides saved, it is history diverged.
    json_ok(&b, &["pull"]);
    json_ok(&b, &["reset", &base]);
    save_change(&b, "b", b"b");
    let err = json_err(&b, &["push"], 5);
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("history diverged"),
        "{err}"
    );
    assert!(
        err["hint"]
            .as_str()
            .unwrap()
            .contains("baton merge targets/origin"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// Compare-and-swap on the remote ref
// ---------------------------------------------------------------------------------------

#[test]
fn force_none_creates_only_on_an_empty_remote() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, id) = store_with_target(&remote, 8);
    json_ok(&a, &["push", "--force", "none"]);
    assert_eq!(disk_current(&remote).as_deref(), Some(id.as_str()));
    let next = save_change(&a, "y", b"y");
    json_err(&a, &["push", "--force", "none"], 5);
    json_err(&a, &["push", "--force", "not-an-id"], 2);
    json_ok(&a, &["push", "--force", &id]);
    assert_eq!(disk_current(&remote).as_deref(), Some(next.as_str()));
}

// ---------------------------------------------------------------------------------------
// Pull
// ---------------------------------------------------------------------------------------

#[test]
fn pull_fast_forwards_and_a_diverged_pull_still_records_the_target() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, base) = store_with_target(&remote, 9);
    json_ok(&a, &["push"]);
    let b = Env::new();
    b.init();
    b.ok(&["target", "add", "r", s(&remote)]);
    // Into an empty store: "initial".
    let doc = json_ok(&b, &["pull"]);
    assert_eq!(doc["report"]["outcome"], "initial", "{doc}");
    assert_eq!(doc["report"]["current_before"], Value::Null);
    assert_eq!(doc["report"]["current_after"], base.as_str());
    b.write_tree("work", &[]);

    let x = save_change(&a, "x", b"x\n");
    json_ok(&a, &["push"]);
    let doc = json_ok(&b, &["pull"]);
    assert_eq!(doc["report"]["outcome"], "fast-forward");
    assert_eq!(doc["report"]["current_after"], x.as_str());
    assert_eq!(checkout(&a, "current"), checkout(&b, "current"));

    // B ahead of the remote: nothing moves.
    let b_ahead = save_change(&b, "b", b"b\n");
    let doc = json_ok(&b, &["pull"]);
    assert_eq!(doc["report"]["outcome"], "local-ahead");
    assert_eq!(doc["report"]["current_after"], b_ahead.as_str());

    // Diverged: A pushes y, B has b_ahead.
    let y = save_change(&a, "y", b"y\n");
    json_ok(&a, &["push"]);
    let err = json_err(&b, &["pull"], 5);
    let message = err["message"].as_str().unwrap();
    assert!(message.contains(&y) && message.contains(&b_ahead), "{err}");
    assert!(
        err["hint"].as_str().unwrap_or("").contains("targets/r"),
        "{err}"
    );
    assert_eq!(json_ok(&b, &["show", "current"])["id"], b_ahead.as_str());
    assert_eq!(
        json_ok(&b, &["show", "targets/r"])["id"],
        y.as_str(),
        "the fetched remote bundle is recorded"
    );
    // Its content is there to look at.
    let out = b.ok(&["cat", "targets/r:y"]);
    assert_eq!(out, "y\n");
    verify(&b, &b.store());

    // Recovery without a re-clone: reset onto the fetched bundle (a compare-and-swap with
    // --expect), save the work again on top, push. Nothing is lost: the abandoned bundle
    // stays in the audit log and readable.
    assert!(
        err["hint"]
            .as_str()
            .unwrap_or("")
            .contains("baton reset targets/r"),
        "{err}"
    );
    let refused = json_err(&b, &["reset", "targets/r", "--expect", &base], 5);
    assert!(
        refused["message"].as_str().unwrap().contains(&b_ahead),
        "{refused}"
    );
    assert_eq!(json_ok(&b, &["show", "current"])["id"], b_ahead.as_str());
    json_err(&b, &["reset", "0123456789abcdef"], 3);
    let doc = json_ok(&b, &["reset", "targets/r", "--expect", &b_ahead]);
    assert_eq!(doc["old"], b_ahead.as_str(), "{doc}");
    assert_eq!(doc["new"], y.as_str(), "{doc}");
    assert_eq!(doc["moved"], true, "{doc}");
    let again = json_ok(&b, &["reset", "targets/r"]);
    assert_eq!(again["moved"], false, "{again}");
    let last = audit(&b);
    let reset_line = last
        .iter()
        .find(|e| e["action"] == "reset")
        .expect("a reset line");
    assert_eq!(reset_line["old"], b_ahead.as_str());
    assert_eq!(b.ok(&["cat", &format!("{b_ahead}:b")]), "b\n");
    let redone = save_change(&b, "b", b"b\n");
    json_ok(&b, &["push"]);
    let chain: Vec<String> = json_ok(&a, &["--store", s(&remote), "log"])["bundles"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["id"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(chain[..2], [redone.clone(), y.clone()], "{chain:?}");
    verify(&b, &remote);
}

#[test]
fn pull_from_an_empty_remote_store() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, id) = store_with_target(&remote, 10);
    json_ok(&a, &["push"]);
    // Make it a store with no current.
    for f in fs::read_dir(remote.join("refs/current")).unwrap() {
        fs::remove_file(f.unwrap().path()).unwrap();
    }
    let doc = json_ok(&a, &["pull"]);
    assert_eq!(doc["report"]["outcome"], "empty-remote");
    assert_eq!(doc["report"]["current_after"], id.as_str());
}
