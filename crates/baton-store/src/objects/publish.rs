//! Storing objects: a byte string or a streamed file encoded into a new loose file, an
//! object received in stored form checked and published, many small ones as one pack,
//! and the directories that still need an fsync before anything refers to them.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::Objects;
use crate::codec::hash_stream;
use crate::fsutil;
use crate::streams::ProgressReader;
use crate::write_behind::WriteBehind;
use baton_error::{Error, IoContext, Result};
use baton_format::ObjectId;

/// Files up to this size are read into memory once; larger ones are streamed in two passes.
pub(crate) const IN_MEMORY_LIMIT: u64 = 1 << 20;
const BUF_SIZE: usize = 256 << 10;

/// Directories that received new entries and still need an fsync before anything that
/// refers to those entries (a tree, a manifest, a ref) is published.
#[derive(Default)]
pub struct PendingDirs(Mutex<BTreeSet<PathBuf>>);

impl PendingDirs {
    pub(crate) fn add(&self, dir: PathBuf) {
        if let Ok(mut set) = self.0.lock() {
            set.insert(dir);
        }
    }

    pub fn sync(&self) -> Result<()> {
        let dirs = match self.0.lock() {
            Ok(mut set) => std::mem::take(&mut *set),
            Err(_) => {
                return Err(Error::other(
                    "internal error: pending directory set poisoned",
                ));
            }
        };
        for dir in dirs {
            fsutil::fsync_dir(&dir)?;
        }
        Ok(())
    }
}

/// Outcome of storing one object.
#[derive(Clone, Copy, Debug)]
pub struct Stored {
    pub id: ObjectId,
    pub size: u64,
    /// False when the store already held the object.
    pub written: bool,
}

impl Objects {
    /// A temp file in the directory where `id` will live, for receiving it.
    pub fn temp_for_name(&self, name: &ObjectId) -> Result<tempfile::NamedTempFile> {
        self.loose.temp_for(name)
    }

    /// Publish a received object from a temp file made by `temp_for_name`, found under
    /// storage name `name`, after checking that it opens to content whose id derives
    /// that name (in a plain store: whose hash is `name`).
    pub fn put_stored_file(
        &self,
        name: &ObjectId,
        temp: tempfile::NamedTempFile,
        pending: &PendingDirs,
    ) -> Result<bool> {
        let file = File::open(temp.path()).ctx("cannot read", temp.path())?;
        self.decode_named(name, file, &mut io::sink())
            .map_err(|e| Error {
                message: format!("received {}", e.message),
                ..e
            })?;
        if self.contains_name(name) {
            return Ok(false);
        }
        let dest = self.name_path(name);
        fsutil::publish(temp, &dest, false)?;
        if let Some(dir) = dest.parent() {
            pending.add(dir.to_path_buf());
        }
        Ok(true)
    }

    /// Store an object received in stored form under storage name `name`, after
    /// checking that it opens to content whose id derives that name. Returns false if it
    /// was already here.
    pub fn put_stored(
        &self,
        name: &ObjectId,
        stored: &[u8],
        pending: &PendingDirs,
    ) -> Result<bool> {
        // The same check every later read makes, so nothing is stored that reads as corrupt.
        let (id, _) = self
            .decode_named(name, stored, &mut io::sink())
            .map_err(|e| Error {
                message: format!("received {}", e.message),
                ..e
            })?;
        if self.contains(&id) {
            return Ok(false);
        }
        self.publish_with(&id, pending, |temp| {
            temp.write_all(stored)
                .map_err(|e| Error::other(format!("cannot write object {id}: {e}")).with_source(e))
        })?;
        Ok(true)
    }

    /// The object when the store already holds it, freshened so that a concurrent gc
    /// keeps it for its grace period (a new bundle is about to refer to it).
    pub(crate) fn reuse(&self, id: &ObjectId, size: u64) -> Option<Stored> {
        if !self.contains(id) {
            return None;
        }
        self.loose.freshen(&self.name_of(id));
        Some(Stored {
            id: *id,
            size,
            written: false,
        })
    }

    /// Store many objects (storage name, stored bytes from `encode_stored`) as one new
    /// pack: the bulk path for writers with thousands of small objects.
    pub fn write_pack(&self, objects: &[(ObjectId, Vec<u8>)]) -> Result<ObjectId> {
        self.packs.write(objects)
    }

    /// Store a byte string (trees, manifests, small files).
    pub fn put_bytes(&self, bytes: &[u8], pending: &PendingDirs) -> Result<Stored> {
        let id = ObjectId::of(bytes);
        let size = bytes.len() as u64;
        if let Some(stored) = self.reuse(&id, size) {
            return Ok(stored);
        }
        let compressed = self.stored_form(bytes)?;
        self.publish_with(&id, pending, |temp| {
            temp.write_all(&compressed)
                .map_err(|e| Error::other(format!("cannot write object {id}: {e}")).with_source(e))
        })?;
        Ok(Stored {
            id,
            size,
            written: true,
        })
    }

    /// Store the regular file `file` (opened by the caller, `path` naming it in messages),
    /// streaming it: memory stays bounded whatever its size. Read from that descriptor
    /// only, twice (hashed, then encoded), never opened again by its path. `progress`
    /// gets the file's bytes once, as the encoding pass reads them (the hashing pass is
    /// the fast one).
    pub(crate) fn put_file(
        &self,
        mut file: File,
        path: &Path,
        pending: &PendingDirs,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Stored> {
        let len = file.metadata().ctx("cannot stat", path)?.len();
        if len <= IN_MEMORY_LIMIT {
            let mut bytes = Vec::with_capacity(len as usize);
            ProgressReader::new(&mut file, progress)
                .read_to_end(&mut bytes)
                .ctx("cannot read", path)?;
            return self.put_bytes(&bytes, pending);
        }
        let (id, size) = hash_stream(&mut file).ctx("cannot read", path)?;
        if let Some(stored) = self.reuse(&id, size) {
            progress(size);
            return Ok(stored);
        }
        self.publish_with(&id, pending, |temp| {
            let mut buffered = self.encode_file(
                &mut file,
                path,
                (&id, size),
                io::BufWriter::with_capacity(BUF_SIZE, WriteBehind::new(temp)),
                progress,
            )?;
            buffered.flush().ctx("cannot write", path)
        })?;
        Ok(Stored {
            id,
            size,
            written: true,
        })
    }

    fn publish_with(
        &self,
        id: &ObjectId,
        pending: &PendingDirs,
        write: impl FnOnce(&mut File) -> Result<()>,
    ) -> Result<()> {
        let fanout = self.loose.publish_with(&self.name_of(id), write)?;
        pending.add(fanout);
        Ok(())
    }
}
