//! Bad input: the store itself (wrong path, wrong version, damage).

use super::*;

// ---------------------------------------------------------------------------------------
// The store itself: wrong path, wrong version, damage
// ---------------------------------------------------------------------------------------

#[test]
fn store_path_that_is_a_file() {
    let env = populated();
    let file = env.path().join("d/handoff.md");
    refuse_with(
        &|| env.cmd(),
        &file,
        &["--store", "d/handoff.md", "log"],
        2,
        "usage",
        "is not a directory",
    );
    refuse_with(
        &|| env.cmd(),
        &file,
        &["--store", "d/handoff.md", "init"],
        2,
        "usage",
        "is not a directory",
    );
    let with_env = || {
        let mut cmd = env.cmd();
        cmd.env("BATON_STORE", &file);
        cmd
    };
    refuse_with(
        &with_env,
        &file,
        &["save", "d"],
        2,
        "usage",
        "is not a directory",
    );
    refuse(
        &env,
        &["--store", "d/handoff.md", "save", "d"],
        2,
        "usage",
        "is not a directory",
    );
}

#[test]
fn store_path_that_does_not_exist() {
    let env = populated();
    let missing = env.path().join("nowhere");
    for args in [
        &["--store", "nowhere", "log"][..],
        &["--store", "nowhere", "save", "d"],
        &["--store", "nowhere", "gc"],
    ] {
        refuse_with(
            &|| env.cmd(),
            &missing,
            args,
            3,
            "not_found",
            "no baton store at",
        );
    }
    assert!(!missing.exists());
    // A directory that is not a store.
    let empty = env.path().join("not-a-store");
    fs::create_dir(&empty).unwrap();
    refuse_with(
        &|| env.cmd(),
        &empty,
        &["--store", "not-a-store", "log"],
        3,
        "not_found",
        "is not a baton store",
    );
}

#[test]
fn no_store_anywhere_upwards() {
    let env = Env::new();
    env.write_tree("d", &[("a", b"1")]);
    let store_above = env
        .path()
        .ancestors()
        .skip(1)
        .any(|p| p.join(".baton").is_dir());
    if !common::precondition(!store_above, "no .baton store above the temp directory") {
        return;
    }
    refuse(&env, &["save", "d"], 3, "not_found", "no baton store in");
    refuse(&env, &["log"], 3, "not_found", "no baton store in");
    assert!(!env.store().exists());
}

fn rewrite_config(env: &Env, from: &str, to: &str) {
    let path = env.store().join("config");
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{text}");
    fs::write(&path, text.replace(from, to)).unwrap();
}

#[test]
fn store_with_a_newer_format_version() {
    let env = populated();
    rewrite_config(&env, "\"version\": 1", "\"version\": 2");
    for args in [
        &["log"][..],
        &["save", "d"],
        &["show", "current"],
        &["gc", "--grace", "0s"],
        &["verify"],
        &["init"],
    ] {
        if args == ["init"] {
            // init refuses an existing store before reading its config.
            refuse(&env, args, 2, "usage", "already a baton store");
        } else {
            refuse(
                &env,
                args,
                1,
                "unsupported",
                "store format version 2 is not supported",
            );
        }
    }
}

#[test]
fn store_requiring_an_unknown_feature() {
    let env = populated();
    rewrite_config(&env, "\"features\": []", "\"features\": [\"packs-v9\"]");
    refuse(&env, &["log"], 1, "unsupported", "feature 'packs-v9'");
    refuse(&env, &["save", "d"], 1, "unsupported", "feature 'packs-v9'");
}

#[test]
fn store_with_a_garbled_config() {
    let env = populated();
    fs::write(env.store().join("config"), b"{not json").unwrap();
    refuse(&env, &["log"], 4, "integrity", "config does not decode");
    refuse(
        &env,
        &["save", "d"],
        4,
        "integrity",
        "config does not decode",
    );
}

/// The file holding `current`'s value: the ref file itself, or (when refs are
/// directories of generations) its newest generation.
fn current_ref_file(store: &Path) -> PathBuf {
    let path = store.join("refs/current");
    if !path.is_dir() {
        return path;
    }
    let mut names: Vec<String> = fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with(".tmp-"))
        .collect();
    names.sort();
    path.join(names.last().expect("current has a value"))
}

#[test]
fn damaged_ref() {
    let env = populated();
    fs::write(current_ref_file(&env.store()), b"garbage\n").unwrap();
    refuse(&env, &["log"], 4, "integrity", "ref 'current' is damaged");
    refuse(
        &env,
        &["show", "current"],
        4,
        "integrity",
        "ref 'current' is damaged",
    );
    refuse(
        &env,
        &["cat", "current:handoff.md"],
        4,
        "integrity",
        "ref 'current' is damaged",
    );
    refuse(
        &env,
        &["checkout", "current", "out"],
        4,
        "integrity",
        "ref 'current' is damaged",
    );
    assert!(!env.path().join("out").exists());
    // save must refuse before writing anything, even objects.
    env.write_tree("d", &[("brand-new.txt", b"never stored")]);
    refuse(
        &env,
        &["save", "d"],
        4,
        "integrity",
        "ref 'current' is damaged",
    );
    refuse(
        &env,
        &["gc", "--grace", "0s"],
        4,
        "integrity",
        "ref 'current' is damaged",
    );
}

/// Replace line `n` (1-based) of the log with `with`.
fn damage_log_line(store: &Path, n: usize, with: &str) {
    let path = store.join("log");
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= n, "log has {} lines", lines.len());
    lines[n - 1] = with;
    fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
}

#[test]
fn damaged_log_line() {
    let env = populated();
    damage_log_line(&env.store(), 1, "{\"this is\": \"not a log line\"}");
    refuse(
        &env,
        &["log", "--audit"],
        4,
        "integrity",
        "log line 1 is damaged",
    );
    env.write_tree("d", &[("brand-new.txt", b"never stored")]);
    refuse(
        &env,
        &["save", "d"],
        4,
        "integrity",
        "log line 1 is damaged",
    );
    refuse(&env, &["gc", "--grace", "0s"], 4, "integrity", "log line 1");
}

#[test]
fn damaged_log_line_that_is_the_last() {
    let env = populated();
    damage_log_line(&env.store(), 2, "garbage");
    refuse(
        &env,
        &["log", "--audit"],
        4,
        "integrity",
        "log line 2 is damaged",
    );
    env.write_tree("d", &[("brand-new.txt", b"never stored")]);
    refuse(
        &env,
        &["save", "d"],
        4,
        "integrity",
        "log line 2 is damaged",
    );
}

#[test]
fn torn_last_log_line_is_an_uncommitted_append() {
    // A crash inside the append of a log line leaves a fragment without its newline. It
    // was never committed: readers leave it out, verify stays clean, and the next ref
    // move cuts it off before appending, never touching a committed line.
    let env = populated();
    let path = env.store().join("log");
    let committed = fs::read(&path).unwrap();
    let mut torn = committed.clone();
    torn.extend_from_slice(b"{\"time\":\"2026-");
    fs::write(&path, &torn).unwrap();
    let (code, doc) = env.json(&["log", "--audit"]);
    assert_eq!(code, 0);
    assert_eq!(doc["entries"].as_array().unwrap().len(), 2);
    let (code, doc) = env.json(&["verify"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["report"]["log_torn_tail"], true);
    env.write_tree("d", &[("brand-new.txt", b"stored")]);
    env.save("d", &[]);
    let after = fs::read(&path).unwrap();
    assert!(after.starts_with(&committed), "committed lines untouched");
    assert_eq!(after.iter().filter(|&&b| b == b'\n').count(), 3);
    assert!(after.ends_with(b"\n"));
    let (code, doc) = env.json(&["verify"]);
    assert_eq!(code, 0);
    assert_eq!(doc["report"]["log_torn_tail"], false);
}

#[test]
fn init_on_an_existing_store() {
    let env = populated();
    refuse(&env, &["init"], 2, "usage", "already a baton store");
    let other = env.path().join("other");
    fs::create_dir(&other).unwrap();
    env.ok(&["--store", "other", "init"]);
    refuse_with(
        &|| env.cmd(),
        &other,
        &["--store", "other", "init"],
        2,
        "usage",
        "already a baton store",
    );
    // A non-empty directory that is not a store is not taken over either.
    let busy = env.path().join("d");
    refuse_with(
        &|| env.cmd(),
        &busy,
        &["--store", "d", "init"],
        2,
        "usage",
        "is not empty",
    );
}
