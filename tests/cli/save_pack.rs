//! A save's new objects go into one pack (issue 14, durability in batches): one pack per
//! save with every new blob and tree exactly once, nothing when nothing is new, large
//! files loose, and every reader (verify, checkout, gc, push, clone, pull) finds them,
//! in plain and encrypted stores.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use baton::format::ObjectId;
use baton::store::packs::load_all;
use common::{Env, json_ok, pack_files, s, snapshot_files};

/// Loose object files (not temp files) under `store/objects`.
fn loose(store: &Path) -> Vec<PathBuf> {
    snapshot_files(&store.join("objects"))
        .into_iter()
        .map(|(p, _)| store.join("objects").join(p))
        .filter(|p| {
            p.is_file()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(".tmp-"))
        })
        .collect()
}

/// Storage names in every pack of the store, one list per pack.
fn packed(store: &Path) -> Vec<Vec<ObjectId>> {
    load_all(&store.join("packs"))
        .unwrap()
        .into_iter()
        .map(|p| p.entries.into_iter().map(|e| e.id).collect())
        .collect()
}

fn same_tree(a: &Path, b: &Path) {
    assert_eq!(snapshot_files(a), snapshot_files(b), "{a:?} vs {b:?}");
}

#[test]
fn a_save_writes_its_new_objects_once_into_one_pack() {
    let env = Env::new();
    env.init();
    let files: Vec<(String, Vec<u8>)> = (0..60)
        .map(|i| {
            (
                format!("d{}/s{}/f{i}.txt", i % 4, i % 3),
                format!("file {i}\n").repeat(i + 1).into_bytes(),
            )
        })
        .collect();
    let mut refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_slice()))
        .collect();
    // The same content under three names, and the same subtree twice.
    refs.extend([
        ("dup/a", &b"same bytes\n"[..]),
        ("dup/b", b"same bytes\n"),
        ("c", b"same bytes\n"),
        ("twin1/x", b"x\n"),
        ("twin2/x", b"x\n"),
    ]);
    env.write_tree("work", &refs);
    let doc = json_ok(&env, &["save", "work"]);
    let store = env.store();
    let packs = packed(&store);
    assert_eq!(packs.len(), 1, "one pack per save");
    let written = doc["objects_written"].as_u64().unwrap();
    // 60 blobs + "same bytes" + "x"; trees: root, d0..d3, 12 d/s, dup, twin1 = twin2.
    assert_eq!(written, 62 + 1 + 4 + 12 + 2, "{doc}");
    assert_eq!(
        packs[0].len() as u64,
        written,
        "each new object exactly once"
    );
    // Only the manifest is loose.
    assert_eq!(loose(&store).len(), 1, "{:?}", loose(&store));
    env.ok(&["verify"]);
    env.ok(&["checkout", "current", "out"]);
    same_tree(&env.path().join("work"), &env.path().join("out"));

    // Nothing new: no pack, one more loose manifest.
    let doc = json_ok(&env, &["save", "work"]);
    assert_eq!(doc["objects_written"], 0, "{doc}");
    assert_eq!(pack_files(&store).len(), 1, "an empty save writes no pack");

    // One changed file: a pack of that blob and the trees above it.
    env.write_tree("work", &[("d1/s1/f1.txt", b"changed\n")]);
    let doc = json_ok(&env, &["save", "work"]);
    assert_eq!(doc["objects_written"], 4, "{doc}");
    let packs = packed(&store);
    assert_eq!(packs.len(), 2);
    assert!(packs.iter().any(|p| p.len() == 4), "{packs:?}");
    env.ok(&["verify"]);
    env.ok(&["verify", "current~1"]);
    // gc merges the two packs into one holding every object, and removes nothing
    // reachable.
    let ids = common::stored_ids(&store);
    env.ok(&["gc", "--grace", "0s"]);
    assert_eq!(pack_files(&store).len(), 1);
    assert_eq!(common::stored_ids(&store), ids);
    env.ok(&["verify"]);
    fs::remove_dir_all(env.path().join("out")).unwrap();
    env.ok(&["checkout", "current", "out"]);
    same_tree(&env.path().join("work"), &env.path().join("out"));
}

#[test]
fn files_over_the_pack_limit_stay_loose() {
    let env = Env::new();
    env.init();
    let big = common::random_bytes(7, (8 << 20) + 1);
    let mid = common::random_bytes(8, 2 << 20);
    env.write_tree(
        "work",
        &[("big.bin", &big), ("mid.bin", &mid), ("small", b"s\n")],
    );
    env.save("work", &[]);
    let store = env.store();
    let big_id = ObjectId::of(&big).to_hex();
    assert!(
        common::object_path(&store, &big_id).is_file(),
        "big is loose"
    );
    let packs = packed(&store);
    assert_eq!(packs.len(), 1);
    assert!(
        packs[0].contains(&ObjectId::of(&mid)),
        "a 2 MiB file is packed"
    );
    assert!(packs[0].contains(&ObjectId::of(b"s\n")));
    // The manifest and the big blob.
    assert_eq!(loose(&store).len(), 2);
    env.ok(&["verify"]);
    env.ok(&["checkout", "current", "out"]);
    same_tree(&env.path().join("work"), &env.path().join("out"));
}

#[test]
fn packed_saves_of_an_encrypted_store_sync_and_verify() {
    let env = Env::new();
    let (_key, public) = common::age_keygen(&env, "key.txt");
    env.ok(&["init", "--encrypt", "--recipient", &public]);
    let mid = common::random_bytes(9, (1 << 20) + 5);
    env.write_tree(
        "work",
        &[
            ("a.txt", b"alpha\n"),
            ("d/b.txt", b"beta\n"),
            ("d/e/mid.bin", &mid),
        ],
    );
    let id = env.save("work", &["--identity", "key.txt"]);
    let store = env.store();
    let packs = packed(&store);
    assert_eq!(packs.len(), 1);
    // Index entries are keyed storage names, not ids.
    assert!(!packs[0].contains(&ObjectId::of(b"alpha\n")));
    assert_eq!(packs[0].len(), 6, "three blobs, three trees");
    env.ok(&["--identity", "key.txt", "verify"]);
    env.ok(&["--identity", "key.txt", "checkout", "current", "out"]);
    same_tree(&env.path().join("work"), &env.path().join("out"));

    let remote = env.path().join("remote");
    env.ok(&["--identity", "key.txt", "target", "add", "r", s(&remote)]);
    env.ok(&["--identity", "key.txt", "push", "r"]);
    env.ok(&["--identity", "key.txt", "clone", s(&remote), "c1"]);
    env.ok(&["--store", "c1", "--identity", "key.txt", "verify"]);
    env.ok(&[
        "--store",
        "c1",
        "--identity",
        "key.txt",
        "checkout",
        &id,
        "out2",
    ]);
    same_tree(&env.path().join("work"), &env.path().join("out2"));

    // A second packed save reaches the clone by pull.
    env.write_tree("work", &[("d/b.txt", b"beta, changed\n")]);
    let id2 = env.save("work", &["--identity", "key.txt"]);
    env.ok(&["--identity", "key.txt", "push", "r"]);
    env.ok(&["--store", "c1", "--identity", "key.txt", "pull"]);
    let shown = json_ok(
        &env,
        &["--store", "c1", "--identity", "key.txt", "show", "current"],
    );
    assert_eq!(shown["id"], id2.as_str());
    env.ok(&["--store", "c1", "--identity", "key.txt", "verify"]);
    env.ok(&["--identity", "key.txt", "gc", "--grace", "0s"]);
    env.ok(&["--identity", "key.txt", "verify"]);
}
