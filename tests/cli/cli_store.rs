//! Happy paths of the local store, through the real binary: init, save, show, log, cat,
//! checkout, diff, gc, revisions, JSON output, completions and the man page.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use base64::Engine;
use common::{Env, object_path, read_object_file, snapshot_files};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Run the child with `mask` as its umask.
fn with_umask(mut cmd: Command, mask: libc::mode_t) -> Command {
    // SAFETY: umask is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(move || {
            libc::umask(mask);
            Ok(())
        });
    }
    cmd
}

fn output_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run baton");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Every directory must be 0700 and every file 0600, the store root included.
fn assert_private(store: &Path) {
    let mut bad = Vec::new();
    let root_mode = fs::symlink_metadata(store).unwrap().permissions().mode() & 0o7777;
    if root_mode != 0o700 {
        bad.push(format!("{} {root_mode:o}", store.display()));
    }
    for (path, mode, is_dir) in modes(store) {
        let want = if is_dir { 0o700 } else { 0o600 };
        if mode != want {
            bad.push(format!("{} {mode:o} (want {want:o})", path.display()));
        }
    }
    assert!(bad.is_empty(), "store entries with wrong modes: {bad:#?}");
}

/// (relative path, permission bits, is_dir) of everything under `root`.
fn modes(root: &Path) -> Vec<(PathBuf, u32, bool)> {
    let mut out = Vec::new();
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, u32, bool)>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let meta = fs::symlink_metadata(&path).unwrap();
            out.push((
                path.strip_prefix(root).unwrap().to_path_buf(),
                meta.permissions().mode() & 0o7777,
                meta.is_dir(),
            ));
            if meta.is_dir() {
                walk(&path, root, out);
            }
        }
    }
    walk(root, root, &mut out);
    out
}

/// Ids of every object file in the store.
/// Every object id the store holds, loose or packed (a save packs its blobs and trees).
fn object_ids(store: &Path) -> BTreeSet<String> {
    common::stored_ids(store)
}

/// Replace every RFC 3339 timestamp (`2026-11-29T21:26:12Z`) with `<TIME>`.
fn normalise_times(text: &str) -> String {
    let bytes = text.as_bytes();
    let shape = b"dddd-dd-ddTdd:dd:ddZ";
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let matches = bytes.len() - i >= shape.len()
            && shape.iter().zip(&bytes[i..]).all(|(s, b)| {
                if *s == b'd' {
                    b.is_ascii_digit()
                } else {
                    s == b
                }
            });
        if matches {
            out.push_str("<TIME>");
            i += shape.len();
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn b3(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// What a directory holds, exactly: kinds, contents, link targets, the owner's exec bit.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Dir,
    File { exec: bool, bytes: Vec<u8> },
    Link(PathBuf),
}

fn describe(root: &Path) -> BTreeMap<String, Item> {
    let mut out = BTreeMap::new();
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, Item>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            let meta = fs::symlink_metadata(&path).unwrap();
            let item = if meta.file_type().is_symlink() {
                Item::Link(fs::read_link(&path).unwrap())
            } else if meta.is_dir() {
                walk(&path, root, out);
                Item::Dir
            } else {
                Item::File {
                    exec: meta.permissions().mode() & 0o100 != 0,
                    bytes: fs::read(&path).unwrap(),
                }
            };
            out.insert(rel, item);
        }
    }
    walk(root, root, &mut out);
    out
}

fn set_exec(path: &Path, exec: bool) {
    fs::set_permissions(
        path,
        fs::Permissions::from_mode(if exec { 0o755 } else { 0o644 }),
    )
    .unwrap();
}

fn all_bytes() -> Vec<u8> {
    (0..=255u8).cycle().take(3000).collect()
}

/// A tree with every kind of entry: text, binary, executable, empty and nested dirs, and
/// symlinks that dangle, stay inside, or point outside the tree (at a file and a dir).
fn rich_tree(env: &Env) -> PathBuf {
    let outside = env.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.txt"), b"not to be saved").unwrap();
    let root = env.write_tree(
        "work",
        &[
            ("handoff.md", b"# Handoff\n\nall done\n"),
            ("bin.dat", &all_bytes()),
            ("tool.sh", b"#!/bin/sh\necho hi\n"),
            ("deep/nested/dir/file.md", b"nested\n"),
            ("name with spaces & \u{fc}nicode.txt", b"u\n"),
            ("zero", b""),
        ],
    );
    set_exec(&root.join("tool.sh"), true);
    fs::create_dir_all(root.join("empty")).unwrap();
    fs::create_dir_all(root.join("deep/nested/empty2")).unwrap();
    fs::create_dir_all(root.join("links")).unwrap();
    symlink("does/not/exist", root.join("links/dangling")).unwrap();
    symlink("../../outside/secret.txt", root.join("links/outside-file")).unwrap();
    symlink("../../outside", root.join("links/outside-dir")).unwrap();
    symlink("/etc", root.join("links/absolute")).unwrap();
    symlink("../handoff.md", root.join("links/inside")).unwrap();
    root
}

fn json_ok(env: &Env, args: &[&str]) -> Value {
    let (code, doc) = env.json(args);
    assert_eq!(code, 0, "baton --json {args:?}: {doc}");
    assert_eq!(doc["ok"], json!(true), "{doc}");
    doc
}

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
    assert_private(&store);

    // Everything a save creates (objects, fan-out dirs, refs, the log) is private too.
    let work = rich_tree(&env);
    let id = output_ok(with_umask(env.cmd(), mask).args(["save", work.to_str().unwrap()]));
    assert_eq!(id.trim().len(), 64);
    fs::write(work.join("handoff.md"), b"second\n").unwrap();
    output_ok(with_umask(env.cmd(), mask).args(["save", "work"]));
    output_ok(with_umask(env.cmd(), mask).args(["gc", "--grace", "0s"]));
    assert_private(&store);
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
    assert_private(&store);

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
        (&["init"], 1, "other"),
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
    let before = snapshot_files(&store);
    let doc = json_ok(&env, &["gc", "--grace", "0s"]);
    assert_eq!(doc["report"]["removed_objects"], json!(0), "{doc}");
    assert_eq!(doc["report"]["reachable"], json!(ids.len()), "{doc}");
    assert_eq!(snapshot_files(&store), before);
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
