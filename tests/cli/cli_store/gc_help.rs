//! Store CLI: gc; completions, man, help.

use super::*;

// ---------------------------------------------------------------------------------------
// gc
// ---------------------------------------------------------------------------------------

/// Write `content` as a loose object directly (what an interrupted save leaves behind).
fn plant_object(store: &Path, content: &[u8]) -> (String, PathBuf) {
    let id = b3(content);
    let path = object_path(store, &id);
    let fanout = path.parent().unwrap();
    fs::create_dir_all(fanout).unwrap();
    fs::set_permissions(fanout, fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(&path, zstd::encode_all(content, 3).unwrap()).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    (id, path)
}

fn age(path: &Path, by: Duration) {
    let file = fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - by).unwrap();
}

const DAY: Duration = Duration::from_secs(24 * 3600);

#[test]
fn gc_keeps_young_garbage_and_removes_it_after_the_grace_period() {
    let env = Env::new();
    env.init();
    rich_tree(&env);
    let id = env.save("work", &[]);
    let store = env.store();
    let reachable = object_ids(&store);
    let (orphan, orphan_path) = plant_object(&store, b"an orphan blob from an interrupted save");
    let orphan_len = fs::metadata(&orphan_path).unwrap().len();
    assert!(
        env.ok(&["verify"]).trim_end().ends_with(": ok"),
        "a planted object is a valid object"
    );

    // Within the default grace period: kept.
    let doc = json_ok(&env, &["gc"]);
    assert_eq!(doc["report"]["removed_objects"], json!(0), "{doc}");
    assert_eq!(doc["report"]["kept_in_grace"], json!(1), "{doc}");
    assert_eq!(doc["report"]["reachable"], json!(reachable.len()), "{doc}");
    assert!(orphan_path.is_file());

    // Dry run: reports it, removes nothing at all.
    let before = snapshot_files(&store);
    let doc = json_ok(&env, &["gc", "--grace", "0s", "--dry-run"]);
    assert_eq!(doc["report"]["removed_objects"], json!(1), "{doc}");
    assert_eq!(doc["report"]["dry_run"], json!(true), "{doc}");
    assert_eq!(snapshot_files(&store), before);

    // Grace 0: removed; every reachable object stays.
    let doc = json_ok(&env, &["gc", "--grace", "0s"]);
    assert_eq!(doc["report"]["removed_objects"], json!(1), "{doc}");
    assert_eq!(doc["report"]["removed_bytes"], json!(orphan_len), "{doc}");
    assert!(!orphan_path.exists(), "{orphan} removed");
    assert_eq!(object_ids(&store), reachable);
    assert!(env.ok(&["verify"]).trim_end().ends_with(": ok"));
    env.ok(&["checkout", &id, "out"]);
    assert_eq!(
        describe(&env.path().join("out")),
        describe(&env.path().join("work"))
    );

    // Human output says what happened.
    plant_object(&store, b"another");
    let human = env.ok(&["gc", "--grace", "0s"]);
    assert!(
        human.starts_with("removed 1 unreachable objects"),
        "{human}"
    );
}

#[test]
fn gc_removes_old_garbage_with_the_default_grace() {
    let env = Env::new();
    env.init();
    env.write_tree("d", &[("a", b"1")]);
    env.save("d", &[]);
    let store = env.store();
    let (_, old) = plant_object(&store, b"old garbage");
    let (_, young) = plant_object(&store, b"young garbage");
    age(&old, 15 * DAY);
    age(&young, 13 * DAY);
    let doc = json_ok(&env, &["gc"]);
    assert_eq!(doc["report"]["removed_objects"], json!(1), "{doc}");
    assert_eq!(doc["report"]["kept_in_grace"], json!(1), "{doc}");
    assert!(!old.exists());
    assert!(young.exists());
    let doc = json_ok(&env, &["gc", "--grace", "1h"]);
    assert_eq!(doc["report"]["removed_objects"], json!(1), "{doc}");
    assert!(!young.exists());
}

#[test]
fn gc_never_removes_reachable_objects_however_old() {
    let env = Env::new();
    env.init();
    rich_tree(&env);
    env.save("work", &[]);
    fs::write(env.path().join("work/handoff.md"), b"changed").unwrap();
    env.save("work", &[]);
    let store = env.store();
    let ids = object_ids(&store);
    for id in &ids {
        if object_path(&store, id).is_file() {
            age(&object_path(&store, id), 400 * DAY);
        }
    }
    for pack in common::pack_files(&store) {
        age(&pack, 400 * DAY);
    }
    // gc merges the saves' packs into one (every object kept); everything else stays
    // byte for byte.
    let outside_packs = |store: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        snapshot_files(store)
            .into_iter()
            .filter(|(p, _)| !p.starts_with("packs/"))
            .collect()
    };
    let before = outside_packs(&store);
    let doc = json_ok(&env, &["gc", "--grace", "0s"]);
    assert_eq!(doc["report"]["removed_objects"], json!(0), "{doc}");
    assert_eq!(doc["report"]["reachable"], json!(ids.len()), "{doc}");
    assert_eq!(outside_packs(&store), before);
    assert_eq!(object_ids(&store), ids);
    // The first bundle (reachable through the parent chain) is intact too.
    env.ok(&["checkout", "current~", "old"]);
    assert_eq!(
        fs::read(env.path().join("old/handoff.md")).unwrap(),
        b"# Handoff\n\nall done\n"
    );
}

#[test]
fn gc_removes_stale_temp_files() {
    let env = Env::new();
    env.init();
    env.write_tree("d", &[("a", b"1")]);
    env.save("d", &[]);
    let store = env.store();
    // A loose object's fan-out (the manifest's: a save packs blobs and trees).
    let some_id = object_ids(&store)
        .into_iter()
        .find(|id| object_path(&store, id).is_file())
        .unwrap();
    let fanout = object_path(&store, &some_id)
        .parent()
        .unwrap()
        .to_path_buf();
    let stale = fanout.join(".tmp-stale123");
    let fresh = fanout.join(".tmp-fresh456");
    fs::write(&stale, b"half an object").unwrap();
    fs::write(&fresh, b"a save in progress").unwrap();
    age(&stale, 30 * DAY);

    let before = snapshot_files(&store);
    let doc = json_ok(&env, &["gc", "--dry-run"]);
    assert_eq!(doc["report"]["removed_temp_files"], json!(1), "{doc}");
    assert_eq!(snapshot_files(&store), before, "dry run removes nothing");

    let doc = json_ok(&env, &["gc"]);
    assert_eq!(doc["report"]["removed_temp_files"], json!(1), "{doc}");
    assert_eq!(doc["report"]["removed_objects"], json!(0), "{doc}");
    assert!(!stale.exists());
    assert!(
        fresh.exists(),
        "a young temp file may belong to a running save"
    );
    let doc = json_ok(&env, &["gc", "--grace", "0s"]);
    assert_eq!(doc["report"]["removed_temp_files"], json!(1), "{doc}");
    assert!(!fresh.exists());
}

// ---------------------------------------------------------------------------------------
// completions, man, help
// ---------------------------------------------------------------------------------------

#[test]
fn completions_and_man_page_mention_the_commands() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = env.ok(&["completions", shell]);
        assert!(script.len() > 200, "{shell}: {script}");
        assert!(script.contains("save"), "{shell}");
        assert!(script.contains("checkout"), "{shell}");
    }
    let man = env.ok(&["man"]);
    assert!(
        man.starts_with(".ie") || man.starts_with(".TH") || man.contains(".TH baton"),
        "{}",
        &man[..200.min(man.len())]
    );
    assert!(man.contains("save"));
    assert!(man.contains("baton"));
}

#[test]
fn help_shows_the_exit_code_table() {
    let env = Env::new();
    let help = env.ok(&["--help"]);
    for line in [
        "Exit codes:",
        "0  ok",
        "1  other failure",
        "2  usage error",
        "3  not found",
        "4  integrity failure",
        "5  store_conflict",
        "6  refused for security",
        "7  transport failure",
    ] {
        assert!(help.contains(line), "--help lacks {line:?}:\n{help}");
    }
    for command in [
        "init",
        "save",
        "log",
        "show",
        "cat",
        "checkout",
        "diff",
        "verify",
        "gc",
        "completions",
        "man",
    ] {
        assert!(
            help.contains(&format!("  {command} ")),
            "--help lacks {command}"
        );
    }
    let version = env.ok(&["--version"]);
    assert_eq!(version, format!("baton {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn checkout_into_the_current_empty_directory() {
    let env = Env::new();
    env.init();
    let src = env.write_tree("d", &[("a.txt", b"hello\n"), ("sub/b", b"b")]);
    env.save("d", &[]);
    let here = env.path().join("here");
    fs::create_dir(&here).unwrap();
    output_ok(
        env.cmd()
            .current_dir(&here)
            .args(["checkout", "current", "."]),
    );
    assert_eq!(describe(&here), describe(&src));
}

/// A file whose bytes are exactly a tree's encoding has that tree's id. Seeing it as a
/// file must not stop the walk below the tree: gc would then delete what the tree holds.
#[test]
fn gc_keeps_objects_below_a_tree_whose_bytes_are_also_a_file() {
    // Learn the bytes of the tree of `sub/` in a scratch store.
    let scratch = Env::new();
    scratch.init();
    scratch.write_tree("one", &[("sub/x", b"precious\n")]);
    scratch.save("one", &[]);
    let (_, show) = scratch.json(&["show", "current"]);
    let sub = show["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "sub")
        .expect("sub listed")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let tree_bytes = common::read_stored(&scratch.store(), &sub);
    // In a new store, the only bundle lists that copy before the directory itself.
    let env = Env::new();
    env.init();
    env.write_tree("two", &[("a-copy", &tree_bytes), ("sub/x", b"precious\n")]);
    env.save("two", &[]);
    env.ok(&["gc", "--grace", "0s"]);
    let (code, doc) = env.json(&["verify"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(env.ok(&["cat", "current:sub/x"]), "precious\n");
}

/// `verify REV` costs one bundle (its tree, its blobs, its parents present); `--history`
/// and the full verify also reach damage that only an ancestor holds.
#[test]
fn verify_rev_checks_the_bundle_and_history_on_request() {
    let env = Env::new();
    env.init();
    env.write_tree("w", &[("old.txt", b"only in the first bundle\n")]);
    let first = env.save("w", &[]);
    fs::remove_file(env.path().join("w/old.txt")).unwrap();
    env.write_tree("w", &[("new.txt", b"second\n")]);
    env.save("w", &[]);
    let victim = blake3::hash(b"only in the first bundle\n")
        .to_hex()
        .to_string();
    common::damage_object(&env.store(), &victim);
    let doc = json_ok(&env, &["verify", "current"]);
    assert!(
        !doc["scope"].as_str().unwrap().ends_with("and its history"),
        "{doc}"
    );
    assert_eq!(doc["report"]["bundles_checked"], 1, "{doc}");
    for args in [
        &["verify", "current", "--history"][..],
        &["verify"][..],
        &["verify", &first][..],
    ] {
        let out = env.run(args);
        assert_eq!(
            out.status.code(),
            Some(4),
            "{args:?}: {}",
            common::text(&out)
        );
        assert!(common::text(&out).contains(&victim), "{args:?}");
    }
    // A missing parent manifest is damage even without --history.
    fs::remove_file(common::object_path(&env.store(), &first)).unwrap();
    let out = env.run(&["verify", "current"]);
    assert_eq!(out.status.code(), Some(4), "{}", common::text(&out));
    assert!(common::text(&out).contains(&format!("parent bundle {first}")));
    // --history needs a REV.
    assert_eq!(env.run(&["verify", "--history"]).status.code(), Some(2));
}

#[test]
fn log_audit_ignores_a_rev_with_a_note() {
    let env = Env::new();
    env.init();
    env.write_tree("d", &[("a", b"a")]);
    env.save("d", &[]);
    let plain = env.run(&["log", "--audit"]);
    let with_rev = env.run(&["log", "--audit", "current"]);
    assert!(with_rev.status.success(), "{with_rev:?}");
    assert_eq!(with_rev.stdout, plain.stdout);
    let err = String::from_utf8_lossy(&with_rev.stderr);
    assert!(
        err.contains("note: --audit shows every ref move; 'current' is ignored"),
        "{err}"
    );
    let (code, doc) = env.json(&["log", "--audit", "current"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["entries"].as_array().map(Vec::len), Some(1), "{doc}");
}

#[test]
fn relative_local_target_paths_are_stored_absolute() {
    let env = Env::new();
    env.init();
    let work = env.path().join("work");
    fs::create_dir_all(&work).unwrap();
    let out = env
        .cmd()
        .current_dir(&work)
        .args(["target", "add", "up", "../hub"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (_, list) = env.json(&["target", "list"]);
    let expected = env.path().join("hub");
    assert_eq!(
        list["targets"][0]["url"],
        expected.to_str().unwrap(),
        "{list}"
    );
    // The stored path works from anywhere: a push creates the store there.
    env.write_tree("d", &[("a", b"a")]);
    env.save("d", &[]);
    let push = env.run(&["push", "up"]);
    assert!(push.status.success(), "{push:?}");
    assert!(expected.join("config.toml").exists() || expected.is_dir());
}

#[test]
fn save_help_says_what_save_does() {
    let env = Env::new();
    let help = String::from_utf8_lossy(&env.run(&["save", "--help"]).stdout).into_owned();
    assert!(!help.contains("[default: \"\"]"), "{help}");
    assert!(
        help.contains("(required without --brief/--no-brief)"),
        "{help}"
    );
    assert!(help.contains("repeatable; handoffs only"), "{help}");
    // What it says is what it does: DIR is required for a plain snapshot, --attach is
    // refused without a handoff.
    let out = env.run(&["save"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The names in `show REV`'s listing (its last column).
fn listed_paths(env: &Env, rev: &str) -> BTreeSet<String> {
    env.ok(&["show", rev])
        .lines()
        .filter(|l| l.starts_with("file ") || l.starts_with("dir ") || l.starts_with("exec "))
        .filter_map(|l| l.split_whitespace().last().map(str::to_owned))
        .collect()
}

#[test]
fn a_plain_snapshot_skips_git_and_ignored_files_unless_no_ignore() {
    let env = Env::new();
    env.init();
    env.write_tree(
        "proj",
        &[
            (".git/HEAD", b"ref: refs/heads/main\n"),
            (".git/info/exclude", b"excluded.log\n"),
            (".gitignore", b"target/\n"),
            ("target/debug/app", b"binary"),
            ("web/.gitignore", b"node_modules/\n"),
            (
                "web/node_modules/left-pad/index.js",
                b"module.exports = 1;\n",
            ),
            ("web/app.js", b"app\n"),
            (".batonignore", b"scratch.txt\n"),
            ("scratch.txt", b"notes\n"),
            ("excluded.log", b"log\n"),
            ("vendor/.git", b"gitdir: ../.git/modules/vendor\n"),
            ("vendor/lib.rs", b"lib\n"),
            ("src/main.rs", b"fn main() {}\n"),
        ],
    );
    env.save("proj", &[]);
    let kept = listed_paths(&env, "current");
    for path in [
        ".gitignore",
        ".batonignore",
        "web/app.js",
        "vendor/lib.rs",
        "src/main.rs",
    ] {
        assert!(kept.contains(path), "{path} missing from {kept:?}");
    }
    for path in [
        ".git",
        "target",
        "web/node_modules",
        "scratch.txt",
        "excluded.log",
        "vendor/.git",
    ] {
        assert!(!kept.contains(path), "{path} was stored: {kept:?}");
    }
    env.save("proj", &["--no-ignore"]);
    let all = listed_paths(&env, "current");
    for path in [
        ".git/HEAD",
        "target/debug/app",
        "web/node_modules/left-pad/index.js",
        "scratch.txt",
        "excluded.log",
        "vendor/.git",
    ] {
        assert!(all.contains(path), "--no-ignore left out {path}: {all:?}");
    }
    // The store itself is never taken, even with --no-ignore.
    env.write_tree("here", &[("a.txt", b"a\n")]);
    let out = env.ok(&["save", ".", "--no-ignore"]);
    assert_eq!(out.trim().len(), 64);
    assert!(!listed_paths(&env, "current").contains(".baton"));
}

#[test]
fn a_plain_snapshot_with_a_secret_is_refused_unless_redact_or_allow() {
    let env = Env::new();
    env.init();
    let token = format!("ghp_{}", "A1b2C3d4E5".repeat(4));
    env.write_tree(
        "proj",
        &[
            (".env", format!("GITHUB_TOKEN={token}\n").as_bytes()),
            ("src/main.rs", b"fn main() {}\n"),
        ],
    );
    let before = snapshot_files(&env.store());
    let out = env.run(&["save", "proj"]);
    assert_eq!(out.status.code(), Some(6), "{}", common::text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("github_token"), "{err}");
    assert!(err.contains(".env"), "{err}");
    assert!(!err.contains(&token), "the value is never shown: {err}");
    assert_eq!(snapshot_files(&env.store()), before, "nothing written");

    let out = env.run(&["save", "proj", "--secrets", "redact"]);
    assert!(out.status.success(), "{}", common::text(&out));
    let stored = env.ok(&["cat", "current:.env"]);
    assert_eq!(stored, "GITHUB_TOKEN=[REDACTED:github_token]\n");
    assert!(
        env.ok(&["show", "current"])
            .contains(&format!("{} ", stored.len()))
    );

    let out = env.run(&["save", "proj", "--secrets", "allow"]);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("github_token"));
    assert_eq!(
        env.ok(&["cat", "current:.env"]),
        format!("GITHUB_TOKEN={token}\n")
    );
    // Many files: the list stops at ten.
    for i in 0..13 {
        env.write_tree(
            "many",
            &[(&format!("f{i:02}.env"), format!("T={token}\n").as_bytes())],
        );
    }
    let out = env.run(&["save", "many"]);
    assert_eq!(out.status.code(), Some(6));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("13 files hold secrets") && err.contains("and 3 more"),
        "{err}"
    );
    // A handoff keeps redact as the default and refuses allow.
    let out = env.run(&["save", "--no-brief", "--secrets", "allow"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::text(&out));
}

/// verify counted "1 bundles" and "1 problem(s)": counts agree with their nouns.
#[test]
fn verify_counts_agree_with_their_nouns() {
    let env = Env::new();
    env.init();
    env.write_tree("d", &[("a", b"1")]);
    env.ok(&["save", "d"]);
    let text = env.ok(&["verify"]);
    assert!(text.contains("1 bundle checked"), "{text}");
    assert!(!text.contains("(s)"), "{text}");
    let obj = std::fs::read_dir(env.store().join("objects"))
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .and_then(|d| std::fs::read_dir(d.path()).unwrap().flatten().next())
        .expect("a loose object");
    std::fs::remove_file(obj.path()).unwrap();
    let out = env.run(&["verify"]);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("has 1 problem:"), "{err}");
}
