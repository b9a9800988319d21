//! Bad input: checkout and cat; targets in an encrypted store; a stored symlink target holding NUL.

use super::*;

// ---------------------------------------------------------------------------------------
// checkout and cat
// ---------------------------------------------------------------------------------------

#[test]
fn checkout_into_a_non_empty_dir() {
    let env = populated();
    let target = env.write_tree("busy", &[("mine.txt", b"precious")]);
    let before = snapshot_files(&target);
    refuse(
        &env,
        &["checkout", "current", "busy"],
        2,
        "usage",
        "is not empty",
    );
    assert_eq!(snapshot_files(&target), before);
    // A regular file in the way.
    refuse(
        &env,
        &["checkout", "current", "busy/mine.txt"],
        2,
        "usage",
        "is not a directory",
    );
    assert_eq!(snapshot_files(&target), before);
    // No staging directory left behind in either case.
    let names: Vec<_> = fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn cat_of_a_missing_path() {
    let env = populated();
    refuse(
        &env,
        &["cat", "current:nope.md"],
        3,
        "not_found",
        "'nope.md' is not in the bundle",
    );
    refuse(
        &env,
        &["cat", "current~1:sub/nope"],
        3,
        "not_found",
        "'sub/nope' is not in the bundle",
    );
    refuse(
        &env,
        &["cat", "current~1:handoff.md/deeper"],
        3,
        "not_found",
        "is not a directory",
    );
    // The first bundle had sub/x; the second does not.
    refuse(
        &env,
        &["cat", "current:sub/x"],
        3,
        "not_found",
        "is not in the bundle",
    );
}

#[test]
fn cat_of_a_directory() {
    let env = populated();
    refuse(
        &env,
        &["cat", "current~1:sub"],
        2,
        "usage",
        "'sub' is a directory",
    );
}

#[test]
fn cat_without_a_path() {
    let env = populated();
    refuse(&env, &["cat", "current"], 2, "usage", "is not REV:PATH");
    refuse(&env, &["cat", "current:"], 2, "usage", "empty path");
    refuse(&env, &["cat", "current:/"], 2, "usage", "empty path");
}

#[test]
fn clap_usage_errors_exit_2() {
    let env = populated();
    let before = state(&env.store());
    for args in [
        &["bogus"][..],
        &["save"],
        &["gc", "--grace", "soon"],
        &["log", "-n", "-1"],
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert!(state(&env.store()) == before);
}

#[test]
fn errors_quoting_a_line_break_stay_one_line() {
    let env = populated();
    mkfifo(&env.path().join("d/evil\nname"));
    refuse(&env, &["save", "d"], 2, "usage", "is a FIFO");
    let stderr = String::from_utf8(env.run(&["save", "d"]).stderr).unwrap();
    assert!(stderr.ends_with("evil\\nname is a FIFO; baton saves regular files, directories and symlinks only; move it out of the directory\n"), "{stderr:?}");
    fs::remove_file(env.path().join("d/evil\nname")).unwrap();
    refuse(
        &env,
        &["cat", "current:no\nsuch"],
        3,
        "not_found",
        "is not in the bundle",
    );
    refuse(
        &env,
        &["show", "dead\r\nbeef"],
        2,
        "usage",
        "is not a revision",
    );
    refuse(
        &env,
        &["save", "d", "--meta", "multi\nline"],
        2,
        "usage",
        "is not KEY=VALUE",
    );
}

#[test]
fn a_file_that_looks_like_a_manifest_is_not_a_revision() {
    let env = populated();
    let fake = b"{\"type\":\"bundle\",\"note\":\"just a file that starts like a manifest\"}\n";
    env.write_tree("d", &[("fake.json", fake)]);
    env.save("d", &[]);
    let blob = blake3::hash(fake).to_hex().to_string();
    assert!(common::has_object(&env.store(), &blob));
    // Not a bundle: not found, and certainly not "the store is damaged".
    refuse(&env, &["show", &blob], 3, "not_found", "no bundle matches");
    refuse(
        &env,
        &["show", &blob[..8]],
        3,
        "not_found",
        "no bundle matches",
    );
    let verify = env.ok(&["verify"]);
    assert!(verify.trim_end().ends_with(": ok"), "{verify}");
}

// ---------------------------------------------------------------------------------------
// Targets in an encrypted store; a stored symlink target holding NUL
// ---------------------------------------------------------------------------------------

/// `target add` and `target default` rewrote an encrypted store's config without its
/// keys while `target remove` demanded them. Every change needs the keys now (exit 6,
/// the store untouched); listing still works locked.
#[test]
fn target_changes_in_an_encrypted_store_all_need_the_keys() {
    let env = Env::new();
    let run = |pass: Option<&str>, args: &[&str]| {
        let mut cmd = env.cmd();
        cmd.env_remove("BATON_PASSPHRASE");
        if let Some(pass) = pass {
            cmd.env("BATON_PASSPHRASE", pass);
        }
        cmd.args(args).output().unwrap()
    };
    let pw = Some("right horse");
    assert!(
        run(pw, &["init", "--encrypt", "--passphrase"])
            .status
            .success()
    );
    env.write_tree("w", &[("a.txt", b"a\n")]);
    assert!(run(pw, &["save", "w"]).status.success());
    let remote = env.path().join("remote");
    let remote = remote.to_str().unwrap();
    assert!(run(pw, &["target", "add", "r", remote]).status.success());
    assert!(run(pw, &["push", "r"]).status.success());

    let before = snapshot_files(&env.store());
    for args in [
        &["target", "add", "other", remote][..],
        &["target", "add", "other", remote, "--default"],
        &["target", "default", "r"],
        &["target", "remove", "r"],
    ] {
        let out = run(None, args);
        assert_eq!(out.status.code(), Some(6), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("passphrase"), "{err}");
        assert_eq!(snapshot_files(&env.store()), before, "{args:?} wrote");
    }
    let out = run(None, &["target", "list"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("r* "));
    // With the keys, all of them work.
    for args in [
        &["target", "add", "other", remote][..],
        &["target", "default", "other"],
        &["target", "remove", "r"],
        &["target", "remove", "other"],
    ] {
        let out = run(pw, args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
}

/// A crafted tree whose symlink's stored target holds a NUL byte: checkout exited 1
/// (symlink(2) cannot take it). It is a damaged store, exit 4, and nothing is created.
#[test]
fn stored_symlink_target_with_nul_is_an_integrity_error() {
    use baton::format::{EntryKind, Tree, TreeEntry};
    use baton::store::Store;
    use baton::store::objects::PendingDirs;
    let env = Env::new();
    env.init();
    {
        let store = Store::open(&env.store()).unwrap();
        let pending = PendingDirs::default();
        let link = store.objects.put_bytes(b"../a\0b", &pending).unwrap();
        let file = store.objects.put_bytes(b"x\n", &pending).unwrap();
        let tree = Tree::new(vec![
            TreeEntry {
                name: "f".into(),
                kind: EntryKind::File,
                size: 2,
                id: file.id,
            },
            TreeEntry {
                name: "link".into(),
                kind: EntryKind::Symlink,
                size: 6,
                id: link.id,
            },
        ])
        .unwrap();
        let tree = store.objects.put_bytes(&tree.encode(), &pending).unwrap();
        pending.sync().unwrap();
        store.commit_bundle(tree.id, "save", |_| {}).unwrap();
    }
    let before = snapshot_files(&env.store());
    let out = env.run(&["checkout", "current", "out"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("NUL") && err.contains("link"), "{err}");
    assert!(!env.path().join("out").exists());
    assert_eq!(snapshot_files(&env.store()), before);
}

#[test]
fn target_names_that_shadow_a_rev_are_refused() {
    let env = populated();
    for name in ["current", "targets", "deadbeef00"] {
        refuse(
            &env,
            &["target", "add", name, "/tmp/baton-shadow-target"],
            2,
            "usage",
            "would shadow it",
        );
    }
}

#[test]
fn json_usage_errors_are_one_message_line_and_the_usage_as_hint() {
    let env = populated();
    let (code, doc) = env.json(&["save", "--bogus"]);
    assert_eq!(code, 2, "{doc}");
    let message = doc["error"]["message"].as_str().expect("message");
    assert_eq!(message, "unexpected argument '--bogus' found", "{doc}");
    let hint = doc["error"]["hint"].as_str().expect("hint");
    assert!(hint.starts_with("Usage: baton save "), "{doc}");
    assert!(!hint.contains('\n') && !message.contains('\n'), "{doc}");
}
