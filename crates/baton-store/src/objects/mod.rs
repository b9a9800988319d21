//! Objects: the one way in and out of the store's content, whatever holds it. A thin
//! facade over the loose files (`loose`), the pack lookup (`pack_lookup`), the stored
//! form and its envelope (`stored_form`), reading (`read`) and storing (`publish`).
//!
//! Lookup goes through `Objects` only, so that formats (packs, encrypted envelopes) can
//! change where and how bytes live without changing any id.

mod loose;
mod pack_lookup;
mod publish;
mod read;
mod stored_form;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::envelope::Envelope;
use crate::packs::PackIndex;
use crate::quarantine::Quarantine;
use baton_error::Result;
use baton_format::ObjectId;
use loose::LooseDir;
use pack_lookup::PackLookup;

pub use loose::ListedObject;
pub(crate) use publish::IN_MEMORY_LIMIT;
pub use publish::{PendingDirs, Stored};

pub struct Objects {
    loose: LooseDir,
    packs: PackLookup,
    /// Plain, or age-encrypted: the one place that decides names and stored bytes.
    envelope: Envelope,
    /// What a receive in this process holds back until its checks pass: read last.
    pub(crate) quarantine: Quarantine,
}

impl Objects {
    pub fn new(dir: PathBuf, packs_dir: PathBuf) -> Self {
        Objects {
            loose: LooseDir::new(dir),
            packs: PackLookup::new(packs_dir),
            envelope: Envelope::Plain,
            quarantine: Quarantine::default(),
        }
    }

    pub fn dir(&self) -> &Path {
        self.loose.dir()
    }

    /// The loose path of object `id` (under its storage name).
    pub fn path(&self, id: &ObjectId) -> PathBuf {
        self.loose.path(&self.name_of(id))
    }

    /// The loose path of storage name `name`.
    pub(crate) fn name_path(&self, name: &ObjectId) -> PathBuf {
        self.loose.path(name)
    }

    /// Every object file in the store, with its size on disk and modification time.
    /// Names that are not objects are returned as their own entries for `verify` to report.
    pub fn list(&self) -> Result<Vec<ListedObject>> {
        self.loose.list()
    }

    pub fn packs_dir(&self) -> &Path {
        self.packs.dir()
    }

    /// The whole index of every pack in the store (loaded once, then cached): for
    /// commands that read every entry anyway (verify). Lookups search each index on disk.
    pub fn packs(&self) -> Result<Arc<Vec<PackIndex>>> {
        self.packs.indexes()
    }

    /// Forget cached pack indexes (after publishing a pack, or to see the packs other
    /// processes published since: a long-running drain of the push queue).
    pub fn refresh_packs(&self) {
        self.packs.refresh()
    }

    /// Storage names of packed objects starting with the hex digits `prefix`.
    pub(crate) fn packed_with_prefix(&self, prefix: &str) -> Result<Vec<ObjectId>> {
        self.packs.with_prefix(prefix)
    }
}
