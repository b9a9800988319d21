//! Received objects that only their receiver may read yet: a pull's packs (verified,
//! fsynced, still in their temp files) and loose objects (in a staging area) are looked
//! up here by this process until the checks of the whole received history pass, and
//! only then published (`store::ingest`). A receive refused after its objects arrived
//! (a tree that lies about a size, a missing object) leaves the store exactly as it was,
//! as git's quarantine of received objects does; no other process ever saw them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use super::packs::PackIndex;
use baton_format::ObjectId;
use baton_format::pack::PackEntry;

/// Where a quarantined object's stored bytes are.
pub(crate) enum Held {
    /// A file holding exactly the stored bytes.
    Loose(PathBuf),
    /// An entry of a pack file.
    Packed(PathBuf, PackEntry),
}

/// The objects one receive holds back, by storage name. Empty outside a receive, and
/// then a lookup costs one uncontended lock.
#[derive(Default)]
pub(crate) struct Quarantine(Mutex<Contents>);

#[derive(Default)]
struct Contents {
    /// Indexes of received packs; `path` is the temp file.
    packs: Vec<PackIndex>,
    /// Every entry of those packs: (pack, entry) by storage name, the first pack's kept.
    /// A clone may receive thousands of packs (a remote's are never merged), and every
    /// lookup of its walks lands here.
    entries: HashMap<ObjectId, (usize, usize)>,
    loose: HashMap<ObjectId, PathBuf>,
}

impl Quarantine {
    pub(crate) fn add_pack(&self, pack: PackIndex) {
        if let Ok(mut held) = self.0.lock() {
            let n = held.packs.len();
            for (i, entry) in pack.entries.iter().enumerate() {
                held.entries.entry(entry.id).or_insert((n, i));
            }
            held.packs.push(pack);
        }
    }

    pub(crate) fn add_loose(&self, name: ObjectId, path: PathBuf) {
        if let Ok(mut held) = self.0.lock() {
            held.loose.insert(name, path);
        }
    }

    /// Forget everything held (the receive published it, or dropped it).
    pub(crate) fn clear(&self) {
        if let Ok(mut held) = self.0.lock() {
            *held = Contents::default();
        }
    }

    pub(crate) fn find(&self, name: &ObjectId) -> Option<Held> {
        let held = self.0.lock().ok()?;
        if let Some(path) = held.loose.get(name) {
            return Some(Held::Loose(path.clone()));
        }
        let &(pack, entry) = held.entries.get(name)?;
        let pack = held.packs.get(pack)?;
        Some(Held::Packed(pack.path.clone(), *pack.entries.get(entry)?))
    }

    pub(crate) fn holds(&self, name: &ObjectId) -> bool {
        self.find(name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn held_objects_are_found_until_cleared_and_the_first_pack_wins() {
        let q = Quarantine::default();
        let (a, b) = (ObjectId::of(b"a"), ObjectId::of(b"b"));
        let entry = |id, offset| PackEntry {
            id,
            offset,
            length: 3,
        };
        assert!(!q.holds(&a));
        q.add_pack(PackIndex {
            id: ObjectId::of(b"p1"),
            path: PathBuf::from("/p1"),
            entries: vec![entry(a, 16)],
        });
        q.add_pack(PackIndex {
            id: ObjectId::of(b"p2"),
            path: PathBuf::from("/p2"),
            entries: vec![entry(a, 99), entry(b, 16)],
        });
        let Some(Held::Packed(path, found)) = q.find(&a) else {
            panic!("a is held");
        };
        assert_eq!((path, found.offset), (PathBuf::from("/p1"), 16));
        assert!(matches!(q.find(&b), Some(Held::Packed(p, _)) if p == Path::new("/p2")));
        let c = ObjectId::of(b"c");
        q.add_loose(c, PathBuf::from("/staged/c"));
        assert!(matches!(q.find(&c), Some(Held::Loose(p)) if p == Path::new("/staged/c")));
        q.clear();
        assert!(!q.holds(&a) && !q.holds(&b) && !q.holds(&c));
    }
}
