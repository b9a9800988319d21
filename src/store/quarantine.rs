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
use crate::format::ObjectId;
use crate::format::pack::PackEntry;

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
pub struct Quarantine(Mutex<Contents>);

#[derive(Default)]
struct Contents {
    /// Indexes of received packs; `path` is the temp file.
    packs: Vec<PackIndex>,
    loose: HashMap<ObjectId, PathBuf>,
}

impl Quarantine {
    pub(crate) fn add_pack(&self, pack: PackIndex) {
        if let Ok(mut held) = self.0.lock() {
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
        held.packs
            .iter()
            .find_map(|p| p.find(name).map(|e| Held::Packed(p.path.clone(), *e)))
    }

    pub(crate) fn holds(&self, name: &ObjectId) -> bool {
        self.find(name).is_some()
    }
}
