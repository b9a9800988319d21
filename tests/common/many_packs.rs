//! Stores with many packs, made quickly through baton's own writers (as
//! examples/scale_gen.rs does): one pack per bundle, `current` moved once per bundle.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use baton::format::names::RefName;
use baton::format::{Bundle, EntryKind, ObjectId, Tree, TreeEntry};
use baton::store::Store;
use baton::store::refs::{Expect, MoveReason};

/// What `many_packs` wrote.
pub struct Packed {
    /// Bundle ids, oldest first.
    pub bundles: Vec<String>,
    /// Every object written (reachable ones and `garbage`).
    pub objects: Vec<ObjectId>,
    /// One unreachable blob per pack (as a killed writer or a lost push leaves them).
    pub garbage: Vec<ObjectId>,
}

fn entry(name: &str, kind: EntryKind, bytes: &[u8]) -> TreeEntry {
    TreeEntry {
        name: name.to_string(),
        kind,
        size: bytes.len() as u64,
        id: ObjectId::of(bytes),
    }
}

/// Add `packs` packs to the (initialised, plain) store at `store`, each holding one new
/// bundle on top of `current`: three new files, an unreachable blob, and a root tree that
/// also names `shared/`, a subtree written only in the first pack (so a read of any
/// bundle needs an object from the oldest pack).
pub fn many_packs(store: &Path, packs: usize) -> Packed {
    many_packs_sized(store, packs, 0)
}

/// `many_packs`, each bundle also holding a new incompressible file of `big` bytes.
pub fn many_packs_sized(store: &Path, packs: usize, big: usize) -> Packed {
    let store = Store::open(store).expect("open store");
    let mut out = Packed {
        bundles: Vec::new(),
        objects: Vec::new(),
        garbage: Vec::new(),
    };
    let shared_file = b"shared library file\n".to_vec();
    let shared_tree = Tree::new(vec![entry("lib.rs", EntryKind::File, &shared_file)])
        .unwrap()
        .encode();
    let shared = entry("shared", EntryKind::Dir, &shared_tree);
    let mut parent = store.read_ref(&RefName::Current).expect("read current");
    for i in 0..packs {
        let mut contents: Vec<Vec<u8>> = Vec::new();
        if i == 0 {
            contents.push(shared_file.clone());
            contents.push(shared_tree.clone());
        }
        let mut root = vec![shared.clone()];
        for f in 0..3 {
            let text = format!("file {f} of bundle {i}\n").into_bytes();
            root.push(entry(&format!("f{f}.txt"), EntryKind::File, &text));
            contents.push(text);
        }
        if big > 0 {
            let bytes = super::random_bytes(i as u64 ^ 0xb16, big);
            root.push(entry("big.bin", EntryKind::File, &bytes));
            contents.push(bytes);
        }
        let garbage = format!("unreachable blob {i}\n").into_bytes();
        out.garbage.push(ObjectId::of(&garbage));
        contents.push(garbage);
        let root = Tree::new(root).unwrap().encode();
        let created = UNIX_EPOCH + Duration::from_secs(1_780_000_000 + 60 * i as u64);
        let mut bundle = Bundle::new(ObjectId::of(&root), parent.into_iter().collect(), created);
        bundle.summary = format!("step {i}");
        contents.push(root);
        let manifest = bundle.encode();
        let id = ObjectId::of(&manifest);
        contents.push(manifest);
        let mut pack: Vec<(ObjectId, Vec<u8>)> = contents
            .iter()
            .map(|bytes| {
                let (id, name, stored) = store.objects.encode_stored(bytes).unwrap();
                out.objects.push(id);
                (name, stored)
            })
            .collect();
        pack.sort_by_key(|a| a.0);
        store.objects.write_pack(&pack).expect("write pack");
        let reason = MoveReason {
            action: "save".into(),
            from: String::new(),
            to: String::new(),
        };
        store
            .update_ref(&RefName::Current, Expect::Value(parent), Some(id), &reason)
            .expect("move current");
        parent = Some(id);
        out.bundles.push(id.to_hex());
    }
    out
}

/// Those of `ids` that the store at `store` does not hold (loose or packed).
pub fn missing(store: &Path, ids: &[ObjectId]) -> Vec<ObjectId> {
    let store = Store::open(store).expect("open store");
    ids.iter()
        .filter(|id| !store.objects.contains(id))
        .copied()
        .collect()
}
