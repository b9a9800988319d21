//! Encrypted stores (issue 5): nothing readable on disk, real `age` interop, keys
//! required (exit 6, store untouched), encrypted sync and archives.

use crate::common;
use crate::sshd;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Env, s, snapshot_files};
use sshd::Sshd;

const MARKERS: &[&str] = &[
    "ZQXJcontent",
    "ZQXJfilename",
    "ZQXJdirname",
    "ZQXJsummary",
    "ZQXJnote",
    "ZQXJfrom",
    "ZQXJto",
];

/// An encrypted store at `.baton` holding one bundle full of markers.
fn encrypted_env() -> (Env, PathBuf, String) {
    let env = Env::new();
    let (key, public) = common::age_keygen(&env, "key.txt");
    env.ok(&["init", "--encrypt", "--recipient", &public]);
    env.write_tree(
        "w",
        &[
            ("ZQXJdirname/ZQXJfilename.txt", b"secret ZQXJcontent here\n"),
            ("big.bin", "ZQXJcontent ".repeat(200_000).as_bytes()),
        ],
    );
    let id = env.save(
        "w",
        &[
            "--identity",
            "key.txt",
            "--summary",
            "ZQXJsummary",
            "--note",
            "ZQXJnote",
            "--from",
            "ZQXJfrom",
            "--to",
            "ZQXJto",
        ],
    );
    (env, key, id)
}

/// Every marker found in any file under `root`, raw or zstd-decompressed.
fn markers_in(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (path, bytes) in snapshot_files(root) {
        let mut views = vec![bytes.clone()];
        if let Ok(plain) = zstd::stream::decode_all(&bytes[..]) {
            views.push(plain);
        }
        for view in views {
            for marker in MARKERS {
                if view.windows(marker.len()).any(|w| w == marker.as_bytes()) {
                    found.push(format!("{marker} in {}", path.display()));
                }
            }
        }
        let name = path.to_string_lossy();
        if name.contains("ZQXJ") {
            found.push(format!("marker in file name {name}"));
        }
    }
    found
}

fn loose_objects(store: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = snapshot_files(&store.join("objects"))
        .into_iter()
        .map(|(p, _)| store.join("objects").join(p))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

fn code(env: &Env, args: &[&str]) -> i32 {
    env.run(args).status.code().unwrap_or(-1)
}

#[test]
fn nothing_readable_on_disk_and_age_reads_an_object() {
    let (env, key, id) = encrypted_env();
    let store = env.store();
    assert_eq!(markers_in(&store), Vec::<String>::new());
    // The same file in a plain store is named by its hash; in the encrypted store not.
    let plain = Env::new();
    plain.init();
    plain.write_tree("w", &[("f.txt", b"secret ZQXJcontent here\n")]);
    plain.save("w", &[]);
    let blob = blake3::hash(b"secret ZQXJcontent here\n")
        .to_hex()
        .to_string();
    assert!(common::has_object(&plain.store(), &blob));
    assert!(!common::has_object(&store, &blob));
    // Loose (the manifest) and packed (the blobs and trees of the save).
    let ids: Vec<String> = common::stored_ids(&store).into_iter().collect();
    assert!(ids.len() >= 4, "{ids:?}");
    assert!(!ids.contains(&id), "the bundle id is not a storage name");
    // Real age + zstd read every stored object; each hashes to an object of the store,
    // and one of them is the marker file.
    let mut contents = Vec::new();
    for name in &ids {
        let sealed = env.path().join("sealed.age");
        fs::write(&sealed, common::stored_bytes(&store, name).unwrap()).unwrap();
        let dec = Command::new("age")
            .arg("-d")
            .arg("-i")
            .arg(&key)
            .arg(&sealed)
            .output()
            .expect("age");
        assert!(dec.status.success(), "age -d of stored object {name}");
        let plain = zstd::stream::decode_all(&dec.stdout[..]).expect("zstd -d");
        contents.push((blake3::hash(&plain).to_hex().to_string(), plain));
    }
    assert!(
        contents
            .iter()
            .any(|(h, p)| *h == blob && p == b"secret ZQXJcontent here\n")
    );
    assert!(
        contents.iter().any(|(h, _)| *h == id),
        "the manifest decrypts too"
    );
    // The log's free text is sealed; with the identity it reads back.
    let audit = env.ok(&["--identity", "key.txt", "log", "--audit"]);
    assert!(audit.contains("ZQXJfrom"), "{audit}");
    let sealed = env.ok(&["log", "--audit"]);
    assert!(
        sealed.contains("(encrypted)") && !sealed.contains("ZQXJ"),
        "{sealed}"
    );
    // Full verify: without keys what it can, with keys everything.
    let out = env.ok(&["verify"]);
    assert!(out.contains("contents were not"), "{out}");
    let out = env.ok(&["--identity", "key.txt", "verify"]);
    assert!(
        out.contains(": ok") && !out.contains("not checked"),
        "{out}"
    );
    let out = env.ok(&[
        "--identity",
        "key.txt",
        "cat",
        "current:ZQXJdirname/ZQXJfilename.txt",
    ]);
    assert_eq!(out, "secret ZQXJcontent here\n");
}

#[test]
fn keys_are_required_and_nothing_is_written_without_them() {
    let (env, _key, _id) = encrypted_env();
    let (_other, _) = common::age_keygen(&env, "other.txt");
    let before = snapshot_files(&env.store());
    for id_args in [&[][..], &["--identity", "other.txt"][..]] {
        for cmd in [
            &["save", "w"][..],
            &["cat", "current:ZQXJdirname/ZQXJfilename.txt"],
            &["checkout", "current", "out"],
            &["show", "current"],
            &["log"],
            &["verify", "current"],
            &["gc", "--grace", "0s"],
            &["export", "-o", "x.tar"],
        ] {
            let mut args = id_args.to_vec();
            args.extend_from_slice(cmd);
            let out = env.run(&args);
            assert_eq!(out.status.code(), Some(6), "{args:?}: {out:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
    assert_eq!(code(&env, &["--identity", "other.txt", "verify"]), 6);
    assert!(!env.path().join("out").exists() && !env.path().join("x.tar").exists());
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "the store is byte-identical"
    );

    // A passphrase store: the right one works, a wrong one is exit 6.
    let ps = Env::new();
    ps.write_tree("w", &[("a.txt", b"ZQXJcontent")]);
    let run = |pass: &str, args: &[&str]| {
        ps.cmd()
            .env("BATON_PASSPHRASE", pass)
            .args(args)
            .output()
            .unwrap()
    };
    assert!(
        run("right", &["init", "--encrypt", "--passphrase"])
            .status
            .success()
    );
    assert!(run("right", &["save", "w"]).status.success());
    let before = snapshot_files(&ps.store());
    let out = run("wrong", &["save", "w"]);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrong passphrase"));
    assert_eq!(code(&ps, &["save", "w"]), 6, "no passphrase, no terminal");
    assert_eq!(snapshot_files(&ps.store()), before);
    assert_eq!(markers_in(&ps.store()), Vec::<String>::new());
}

#[test]
fn push_clone_pull_round_trip_sends_ciphertext_only() {
    let (env, _key, id) = encrypted_env();
    let remote = env.path().join("remote");
    env.ok(&[
        "--identity",
        "key.txt",
        "target",
        "add",
        "r",
        remote.to_str().unwrap(),
    ]);
    env.ok(&["--identity", "key.txt", "push", "r"]);
    assert_eq!(markers_in(&remote), Vec::<String>::new());
    let config = fs::read_to_string(remote.join("config")).unwrap();
    assert!(
        config.contains("age-v1") && config.contains("name_key") && !config.contains("targets")
    );
    // Clone without an identity: exit 6, nothing created.
    let url = remote.to_str().unwrap();
    assert_eq!(code(&env, &["clone", url, "c0"]), 6);
    assert!(!env.path().join("c0").exists());
    env.ok(&["--identity", "key.txt", "clone", url, "c1"]);
    assert_eq!(markers_in(&env.path().join("c1")), Vec::<String>::new());
    env.ok(&[
        "--store",
        "c1",
        "--identity",
        "key.txt",
        "checkout",
        "current",
        "out",
    ]);
    assert_eq!(
        snapshot_files(&env.path().join("out")),
        snapshot_files(&env.path().join("w"))
    );
    let out = env.ok(&["--store", "c1", "--identity", "key.txt", "verify"]);
    assert!(out.contains(": ok"), "{out}");
    let out = env.ok(&["--store", "c1", "--identity", "key.txt", "show", &id]);
    assert!(out.contains("ZQXJsummary"), "{out}");
    // Pull without identity: exit 6; into a plain store: refused.
    assert_eq!(code(&env, &["--store", "c1", "pull"]), 6);
    let plain = env.path().join("plain");
    env.ok(&["--store", plain.to_str().unwrap(), "init"]);
    env.ok(&[
        "--store",
        plain.to_str().unwrap(),
        "target",
        "add",
        "r",
        url,
    ]);
    assert_eq!(
        code(&env, &["--store", plain.to_str().unwrap(), "pull", "r"]),
        2
    );
    // A second push, then pull into the clone with the identity.
    env.write_tree("w", &[("more.txt", b"ZQXJcontent again")]);
    let second = env.save("w", &["--identity", "key.txt"]);
    env.ok(&["--identity", "key.txt", "push", "r"]);
    env.ok(&["--store", "c1", "--identity", "key.txt", "pull"]);
    assert_eq!(
        common::disk_current(&env.path().join("c1")).as_deref(),
        Some(second.as_str())
    );
    assert_eq!(markers_in(&remote), Vec::<String>::new());
}

#[test]
fn export_and_import_carry_ciphertext_only() {
    let (env, _key, _first) = encrypted_env();
    let remote = env.path().join("remote");
    env.ok(&[
        "--identity",
        "key.txt",
        "target",
        "add",
        "r",
        remote.to_str().unwrap(),
    ]);
    env.ok(&["--identity", "key.txt", "push", "r"]);
    env.ok(&[
        "--identity",
        "key.txt",
        "clone",
        remote.to_str().unwrap(),
        "c1",
    ]);
    env.write_tree("w", &[("later.txt", b"ZQXJcontent later")]);
    let second = env.save("w", &["--identity", "key.txt", "--summary", "ZQXJsummary"]);
    env.ok(&[
        "--identity",
        "key.txt",
        "export",
        "--history",
        "-o",
        "a.tar",
    ]);
    let tar = fs::read(env.path().join("a.tar")).unwrap();
    for marker in MARKERS {
        assert!(
            !tar.windows(marker.len()).any(|w| w == marker.as_bytes()),
            "{marker}"
        );
    }
    assert_eq!(code(&env, &["--store", "c1", "import", "a.tar"]), 6);
    env.ok(&["--store", "c1", "--identity", "key.txt", "import", "a.tar"]);
    assert_eq!(
        common::disk_current(&env.path().join("c1")).as_deref(),
        Some(second.as_str())
    );
    let out = env.ok(&["--store", "c1", "--identity", "key.txt", "verify"]);
    assert!(out.contains(": ok"), "{out}");
    assert_eq!(markers_in(&env.path().join("c1")), Vec::<String>::new());
}

/// With the identity, the store verifies fully and `current` restores the tree in `w`.
fn verifies_and_restores_the_work(env: &Env) {
    let out = env.ok(&["--identity", "key.txt", "verify"]);
    assert!(
        out.contains(": ok") && !out.contains("not checked"),
        "{out}"
    );
    env.ok(&["--identity", "key.txt", "checkout", "current", "out"]);
    assert_eq!(
        snapshot_files(&env.path().join("out")),
        snapshot_files(&env.path().join("w"))
    );
}

/// The age header of a stored object: the text before the `---` MAC line.
fn age_header(path: &Path) -> String {
    let bytes = fs::read(path).unwrap();
    let end = bytes
        .windows(4)
        .position(|w| w == b"\n---")
        .expect("age header");
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[test]
fn objects_sealed_by_age_alone_still_open() {
    let (env, key, _id) = encrypted_env();
    let (_, public) = {
        let text = fs::read_to_string(&key).unwrap();
        let public = text
            .lines()
            .find_map(|l| l.strip_prefix("# public key: "))
            .unwrap()
            .trim()
            .to_string();
        ((), public)
    };
    // Every object in its own file (a save packs its blobs and trees), so each can be
    // re-sealed on its own.
    common::unpack_to_loose(&env.store());
    // baton seals for the recipients (X25519, what `age -d` uses) and for the store's own
    // key-wrap stanza (what baton tries first, skipping the X25519 exchange).
    let objects = loose_objects(&env.store());
    for path in &objects {
        let header = age_header(path);
        assert!(header.contains("\n-> X25519 "), "{header}");
        assert!(header.contains("\n-> baton-wrap "), "{header}");
    }
    // Re-seal every object with the real age binary alone (no baton-wrap stanza), as an
    // object written before the stanza existed: the store still verifies and checks out.
    for path in &objects {
        let dec = Command::new("age")
            .arg("-d")
            .arg("-i")
            .arg(&key)
            .arg(path)
            .output()
            .expect("age -d");
        assert!(dec.status.success());
        let resealed = env.path().join("resealed");
        let mut enc = Command::new("age")
            .args(["-r", &public, "-o"])
            .arg(&resealed)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("age -r");
        use std::io::Write;
        enc.stdin.take().unwrap().write_all(&dec.stdout).unwrap();
        assert!(enc.wait().unwrap().success());
        fs::set_permissions(
            &resealed,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        fs::rename(&resealed, path).unwrap();
        assert!(!age_header(path).contains("baton-wrap"));
    }
    verifies_and_restores_the_work(&env);
    // A wrong identity opens neither kind of stanza: exit 6.
    let (_other, _) = common::age_keygen(&env, "other.txt");
    assert_eq!(code(&env, &["--identity", "other.txt", "verify"]), 6);
}

#[test]
fn ssh_push_clone_pull_of_an_encrypted_store() {
    let server = Sshd::start();
    let (env, _key, first) = encrypted_env();
    let remote = server.scratch().join("remote");
    let url = format!("{}:{}", server.alias(), s(&remote));
    env.ok(&["--identity", "key.txt", "target", "add", "r", &url]);
    let run = |env: &Env, args: &[&str]| {
        let mut cmd = env.cmd();
        for (k, v) in server.env() {
            cmd.env(k, v);
        }
        let out = cmd.args(args).output().expect("run baton");
        (out.status.code().unwrap_or(-1), common::text(&out))
    };
    // Without the identity the push cannot even name objects: exit 6, nothing sent.
    assert_eq!(run(&env, &["push", "r"]).0, 6);
    assert!(!remote.exists());
    let (code, out) = run(&env, &["--identity", "key.txt", "push", "r"]);
    assert_eq!(code, 0, "{out}\n{}", server.log());
    assert_eq!(markers_in(&remote), Vec::<String>::new());
    // The remote box holds no key, yet verifies what it can: every pack's hash and the
    // ciphertext of every object.
    let host = Env::new();
    let (code, doc) = host.json(&["--store", s(&remote), "verify"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["report"]["problems"], serde_json::json!([]), "{doc}");
    // The receiver clones with the identity, checks out byte for byte, then pulls.
    let receiver = Env::new();
    fs::copy(env.path().join("key.txt"), receiver.path().join("key.txt")).unwrap();
    assert_eq!(run(&receiver, &["clone", &url]).0, 6);
    assert!(!receiver.store().exists(), "a refused clone leaves nothing");
    let (code, out) = run(&receiver, &["--identity", "key.txt", "clone", &url]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        common::disk_current(&receiver.store()).as_deref(),
        Some(first.as_str())
    );
    receiver.ok(&["--identity", "key.txt", "checkout", "current", "out"]);
    assert_eq!(
        snapshot_files(&receiver.path().join("out")),
        snapshot_files(&env.path().join("w"))
    );
    env.write_tree("w", &[("second.txt", b"ZQXJcontent second")]);
    let second = env.save("w", &["--identity", "key.txt"]);
    assert_eq!(run(&env, &["--identity", "key.txt", "push"]).0, 0);
    assert_eq!(markers_in(&remote), Vec::<String>::new());
    let (code, out) = run(&receiver, &["--identity", "key.txt", "pull"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        common::disk_current(&receiver.store()).as_deref(),
        Some(second.as_str())
    );
    let out = receiver.ok(&["--identity", "key.txt", "verify"]);
    assert!(
        out.contains(": ok") && !out.contains("not checked"),
        "{out}"
    );
    assert_eq!(markers_in(&receiver.store()), Vec::<String>::new());
}

#[test]
fn gc_of_an_encrypted_store_removes_only_garbage_and_needs_the_key() {
    let (env, _key, _first) = encrypted_env();
    // Garbage that is valid ciphertext under this store's keys: objects of a bundle saved
    // in a clone (same keys), copied in without any ref or log line naming them.
    let remote = env.path().join("remote");
    env.ok(&["--identity", "key.txt", "target", "add", "r", s(&remote)]);
    env.ok(&["--identity", "key.txt", "push", "r"]);
    env.ok(&["--identity", "key.txt", "clone", s(&remote), "c1"]);
    env.write_tree("w2", &[("orphan.txt", b"ZQXJcontent orphan")]);
    env.ok(&["--store", "c1", "--identity", "key.txt", "save", "w2"]);
    let before: Vec<PathBuf> = loose_objects(&env.store());
    let mut garbage = Vec::new();
    for path in loose_objects(&env.path().join("c1")) {
        let rel = path.strip_prefix(env.path().join("c1")).unwrap();
        let target = env.store().join(rel);
        if !target.exists() {
            let fanout = target.parent().unwrap();
            fs::create_dir_all(fanout).unwrap();
            fs::set_permissions(fanout, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .unwrap();
            fs::copy(&path, &target).unwrap();
            garbage.push(target);
        }
    }
    assert!(!garbage.is_empty());
    // gc must read trees to know what is reachable: without the key, exit 6, nothing gone.
    assert_eq!(code(&env, &["gc", "--grace", "0s"]), 6);
    assert!(garbage.iter().all(|p| p.exists()));
    let (code_, doc) = env.json(&["--identity", "key.txt", "gc", "--grace", "0s"]);
    assert_eq!(code_, 0, "{doc}");
    assert!(garbage.iter().all(|p| !p.exists()), "{doc}");
    assert_eq!(loose_objects(&env.store()), before);
    verifies_and_restores_the_work(&env);
}
