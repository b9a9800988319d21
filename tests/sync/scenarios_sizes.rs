//! Declared sizes (issue 28, "Integrity"): a tree whose entry names a blob this store
//! already holds, with a size that blob does not have. Pull refused only lies about
//! blobs it had to read; one it already held was taken on trust, `current` moved onto a
//! bundle that failed `verify current`, and full `verify` and `pull --repair` saw
//! nothing. The pull scenarios run over every transport (`scenarios!`); the local
//! checks of verify, repair and import follow.

use super::{clone_env, new_pack, store_with_target, verify};
use crate::common;
use crate::transport::Transport;

use std::fs;
use std::path::Path;
use std::time::SystemTime;

use baton::format::names::RefName;
use baton::format::{Bundle, ObjectId, Tree};
use baton::store::Store;
use baton::store::refs::{Expect, MoveReason};
use common::{Via, pack_files, s, snapshot_files};

scenarios!(
    pull_refuses_a_tree_that_lies_about_the_size_of_a_blob_held_here,
    pull_refuses_the_lie_sent_as_loose_objects_too;
    not_on_s3: ;
    permissive_umask:
);

/// Put on top of `current` of the store at `dir` a bundle whose root tree is current's
/// with `name` declared one byte longer than its blob: only the new tree and manifest
/// are new objects (one pack), the blob is the one every copy of the store holds.
/// Returns the bundle and the blob.
pub(crate) fn plant_lying_bundle(dir: &Path, name: &str) -> (String, String) {
    let store = Store::open(dir).unwrap();
    let current = store.read_ref(&RefName::Current).unwrap().unwrap();
    let root = store
        .read_tree(&store.read_bundle(&current).unwrap().tree)
        .unwrap();
    let mut entries = root.entries.clone();
    let entry = entries.iter_mut().find(|e| e.name == name).unwrap();
    entry.size += 1;
    let blob = entry.id;
    let tree = Tree::new(entries).unwrap().encode();
    let manifest = Bundle::new(ObjectId::of(&tree), vec![current], SystemTime::now()).encode();
    let mut pack: Vec<(ObjectId, Vec<u8>)> = [&tree, &manifest]
        .iter()
        .map(|bytes| {
            let (_, name, stored) = store.objects.encode_stored(bytes).unwrap();
            (name, stored)
        })
        .collect();
    pack.sort_by_key(|(name, _)| *name);
    store.objects.write_pack(&pack).unwrap();
    let id = ObjectId::of(&manifest);
    let reason = MoveReason {
        action: "push".into(),
        ..MoveReason::default()
    };
    store
        .update_ref(
            &RefName::Current,
            Expect::Value(Some(current)),
            Some(id),
            &reason,
        )
        .unwrap();
    (id.to_hex(), blob.to_hex())
}

fn pull_refuses_a_tree_that_lies_about_the_size_of_a_blob_held_here(t: &Transport) {
    let (a, base) = store_with_target(t, 28);
    t.json_ok(&a, &["push"]);
    let b = clone_env(t, &t.clone_url());
    let remote = t.remote();
    let old_packs = pack_files(&remote);
    let (lying, blob) = plant_lying_bundle(&remote, "handoff.md");
    t.upload(&remote);

    let before = snapshot_files(&b.store());
    // Twice: a refused pull must not leave objects behind that let the next one through.
    for round in 0..2 {
        let err = t.json_err(&b, &["pull"], 4);
        assert_eq!(err["code"], "integrity", "{err}");
        let message = err["message"].as_str().unwrap();
        assert!(
            message.contains(&blob) && message.contains("its tree entry says"),
            "round {round}: {err}"
        );
        assert_eq!(
            snapshot_files(&b.store()),
            before,
            "round {round}: a refused pull must leave the local store exactly as it was"
        );
        for rev in ["current", "targets/origin"] {
            assert_eq!(
                common::json_ok(&b, &["show", rev])["id"],
                base.as_str(),
                "round {round}: {rev} moved"
            );
        }
        common::json_err(&b, &["show", &lying], 3);
    }
    verify(&b.store());

    // The lying objects here already, named by no ref (as an older baton's refused pull
    // left them): nothing is downloaded, and the check still runs.
    let newest = new_pack(&remote, &old_packs);
    fs::copy(
        &newest,
        b.store().join("packs").join(newest.file_name().unwrap()),
    )
    .unwrap();
    let refs = snapshot_files(&b.store().join("refs"));
    let err = t.json_err(&b, &["pull"], 4);
    assert!(err["message"].as_str().unwrap().contains(&blob), "{err}");
    assert_eq!(snapshot_files(&b.store().join("refs")), refs, "a ref moved");
}

/// A store whose `current` is a bundle with a tree that lies about a blob's size, made
/// here: full `verify` reports it (it said ok), `verify current` too, and `pull
/// --repair` says that no target can repair it, leaving the store as it was.
#[test]
fn full_verify_reports_a_tree_that_lies_about_a_blob_size_and_repair_says_why_it_cannot_help() {
    let t = Transport::local();
    let (a, _) = store_with_target(&t, 29);
    t.json_ok(&a, &["push"]);
    let (lying, blob) = plant_lying_bundle(&a.store(), "handoff.md");

    let err = common::json_err(&a, &["verify"], 4);
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains(&blob) && message.contains("its tree entry says"),
        "{err}"
    );
    common::json_err(&a, &["verify", "current"], 4);
    common::json_err(&a, &["verify", &lying], 4);

    // The target holds the same blob and no tree of that id but this one: nothing to fetch.
    let before = snapshot_files(&a.store());
    let err = t.json_err(&a, &["pull", "--repair"], 4);
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains(&blob) && message.contains("cannot be repaired"),
        "{err}"
    );
    let hint = err["hint"].as_str().unwrap_or("");
    assert!(hint.contains("baton reset"), "{err}");
    assert_eq!(
        snapshot_files(&a.store()),
        before,
        "repair changed the store"
    );
}

/// Archive import checks declared sizes against the blobs this store holds too (it
/// always did: its check reads the length of every blob it is not given), and imports
/// nothing.
#[test]
fn import_refuses_a_tree_that_lies_about_the_size_of_a_blob_held_here() {
    let t = Transport::local();
    let (a, base) = store_with_target(&t, 30);
    t.json_ok(&a, &["push"]);
    let b = clone_env(&t, &t.clone_url());
    let (lying, blob) = plant_lying_bundle(&a.store(), "handoff.md");
    let archive = a.path().join("lying.tar");
    a.ok(&["export", &lying, "--output", s(&archive)]);
    // The blob out of the archive: import must find it here, with its real size. (One
    // block a record: GNU tar's --delete garbles large entries of an archive whose
    // length is not a multiple of its default record.)
    let status = std::process::Command::new("tar")
        .args([
            "-b1",
            "--delete",
            "-f",
            s(&archive),
            &format!("objects/{blob}"),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let before = snapshot_files(&b.store());
    let err = common::json_err(&b, &["import", s(&archive)], 4);
    assert!(err["message"].as_str().unwrap().contains(&blob), "{err}");
    assert_eq!(snapshot_files(&b.store()), before);
    assert_eq!(
        common::json_ok(&b, &["show", "current"])["id"],
        base.as_str()
    );
}

/// The same lie in loose objects (received one by one into a staging area, not in a
/// pack): refused, and nothing of it stays.
fn pull_refuses_the_lie_sent_as_loose_objects_too(t: &Transport) {
    let (a, base) = store_with_target(t, 31);
    t.json_ok(&a, &["push"]);
    let b = clone_env(t, &t.clone_url());
    let remote = t.remote();
    let (_, blob) = plant_lying_bundle(&remote, "handoff.md");
    common::unpack_to_loose(&remote);
    t.upload(&remote);
    let before = snapshot_files(&b.store());
    let err = t.json_err(&b, &["pull"], 4);
    assert!(err["message"].as_str().unwrap().contains(&blob), "{err}");
    assert_eq!(
        snapshot_files(&b.store()),
        before,
        "a refused pull must leave the local store exactly as it was"
    );
    assert_eq!(
        common::json_ok(&b, &["show", "current"])["id"],
        base.as_str()
    );
    verify(&b.store());
}
