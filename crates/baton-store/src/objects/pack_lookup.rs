//! Pack lookup: which pack holds a storage name, with the pack listing and indexes
//! cached per store handle and dropped when a pack lands or one listed has vanished.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::packs::{self, PackIndex, PackSet};
use baton_error::{Error, Result};
use baton_format::ObjectId;
use baton_format::pack::PackEntry;

pub(crate) struct PackLookup {
    dir: PathBuf,
    /// Whole pack indexes, loaded on first use (verify); `refresh` drops them after a new
    /// pack lands.
    indexes: Mutex<Option<Arc<Vec<PackIndex>>>>,
    /// The packs for lookups: listed on first use, each index searched on disk, so that
    /// finding a few objects never reads every index entry of the store.
    set: Mutex<Option<Arc<PackSet>>>,
}

impl PackLookup {
    pub(crate) fn new(dir: PathBuf) -> Self {
        PackLookup {
            dir,
            indexes: Mutex::new(None),
            set: Mutex::new(None),
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The whole index of every pack (loaded once, then cached).
    pub(crate) fn indexes(&self) -> Result<Arc<Vec<PackIndex>>> {
        let mut cached = self
            .indexes
            .lock()
            .map_err(|_| Error::other("internal error: pack cache poisoned"))?;
        if let Some(packs) = cached.as_ref() {
            return Ok(packs.clone());
        }
        // A pack merged away between the listing and its read: list again, once.
        let loaded = match packs::load_all(&self.dir) {
            Err(e) if packs::vanished(&e) => packs::load_all(&self.dir)?,
            other => other?,
        };
        let loaded = Arc::new(loaded);
        *cached = Some(loaded.clone());
        Ok(loaded)
    }

    /// The packs for lookups (listed once, then cached).
    pub(crate) fn set(&self) -> Result<Arc<PackSet>> {
        let mut cached = self
            .set
            .lock()
            .map_err(|_| Error::other("internal error: pack cache poisoned"))?;
        if let Some(set) = cached.as_ref() {
            return Ok(set.clone());
        }
        let listed = Arc::new(PackSet::list(&self.dir)?);
        *cached = Some(listed.clone());
        Ok(listed)
    }

    /// Forget the cached listing and indexes (after publishing a pack).
    pub(crate) fn refresh(&self) {
        if let Ok(mut cached) = self.indexes.lock() {
            *cached = None;
        }
        if let Ok(mut cached) = self.set.lock() {
            *cached = None;
        }
    }

    /// Run a pack read; if a pack it had listed has vanished (a merge under the store
    /// lock unlinked it after writing its objects into a new pack, SPEC 7), list the
    /// packs again and run it once more.
    pub(crate) fn retry_vanished<T>(&self, read: impl Fn() -> Result<T>) -> Result<T> {
        match read() {
            Err(e) if packs::vanished(&e) => {
                self.refresh();
                read()
            }
            other => other,
        }
    }

    /// The pack and entry holding storage name `name`.
    pub(crate) fn find(&self, name: &ObjectId) -> Result<Option<(PathBuf, PackEntry)>> {
        self.retry_vanished(|| self.set()?.find(name))
    }

    /// Storage names of packed objects starting with the hex digits `prefix`.
    pub(crate) fn with_prefix(&self, prefix: &str) -> Result<Vec<ObjectId>> {
        self.retry_vanished(|| self.set()?.with_prefix(prefix))
    }

    /// Write `objects` (storage name, stored bytes) as one new pack and see it from now on.
    pub(crate) fn write(&self, objects: &[(ObjectId, Vec<u8>)]) -> Result<ObjectId> {
        let id = packs::write_pack(&self.dir, objects)?;
        self.refresh();
        Ok(id)
    }

    /// Whether no pack is listed.
    pub(crate) fn is_empty(&self) -> Result<bool> {
        Ok(self.set()?.is_empty())
    }
}
