//! Finding and reading objects wherever they live (a loose file, a pack entry, or what a
//! receive in this process holds in quarantine), verified on every whole read.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::SystemTime;

use super::Objects;
use crate::error::StoreError;
use crate::quarantine::Held;
use crate::streams::{LimitedVec, TeeReader};
use baton_error::{Error, IoContext, Result};
use baton_format::ObjectId;
use baton_format::pack::PackEntry;

/// Where an object's stored bytes live.
enum Location {
    Loose(File),
    Packed(PathBuf, PackEntry),
}

impl Objects {
    /// Whether object `id` is stored, packed or loose. The pack indexes first: they are
    /// in memory once read, and since a save packs its objects most are there, so a
    /// re-save's stat-cache hits cost no failed `stat` of a loose path each.
    pub fn contains(&self, id: &ObjectId) -> bool {
        matches!(self.find_packed(id), Ok(Some(_)))
            || self.path(id).is_file()
            || self.quarantine.holds(&self.name_of(id))
    }

    /// Whether something is stored under storage name `name`, loose or packed.
    pub fn contains_name(&self, name: &ObjectId) -> bool {
        self.name_path(name).is_file()
            || self.packs.find(name).is_ok_and(|found| found.is_some())
            || self.quarantine.holds(name)
    }

    fn find_packed(&self, id: &ObjectId) -> Result<Option<(PathBuf, PackEntry)>> {
        self.packs.find(&self.name_of(id))
    }

    fn locate(&self, id: &ObjectId) -> Result<Option<Location>> {
        let path = self.path(id);
        match File::open(&path) {
            Ok(file) => return Ok(Some(Location::Loose(file))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("cannot read object", &path, e)),
        }
        if let Some((path, entry)) = self.find_packed(id)? {
            return Ok(Some(Location::Packed(path, entry)));
        }
        Ok(match self.quarantine.find(&self.name_of(id)) {
            Some(Held::Loose(path)) => Some(Location::Loose(
                File::open(&path).ctx("cannot read", &path)?,
            )),
            Some(Held::Packed(path, entry)) => Some(Location::Packed(path, entry)),
            None => None,
        })
    }

    /// A reader over the stored (compressed) bytes of `id`, loose or packed, unverified.
    pub(crate) fn open_stored(&self, id: &ObjectId) -> Result<Box<dyn Read + Send>> {
        // An open descriptor keeps reading a pack that is unlinked afterwards.
        self.packs.retry_vanished(|| self.open_stored_once(id))
    }

    fn open_stored_once(&self, id: &ObjectId) -> Result<Box<dyn Read + Send>> {
        match self.locate(id)? {
            Some(Location::Loose(file)) => Ok(Box::new(file)),
            Some(Location::Packed(path, entry)) => {
                use std::io::Seek;
                let mut file = File::open(&path).ctx_in_store("cannot open pack", &path)?;
                file.seek(io::SeekFrom::Start(entry.offset))
                    .ctx_in_store("cannot read pack", &path)?;
                Ok(Box::new(file.take(entry.length)))
            }
            None => Err(StoreError::MissingObject { id: *id }.into_error()),
        }
    }

    /// Copy the stored bytes of `id` to `sink` (e.g. into a pack) while checking that they
    /// decompress to content with that id. Returns the stored length.
    pub fn copy_stored_verified(&self, id: &ObjectId, sink: &mut dyn Write) -> Result<u64> {
        // The same check as every read (`decode_verified`: one complete frame, nothing
        // after it, the right hash), on the stored bytes as they pass through to `sink`.
        let mut tee = TeeReader {
            inner: self.open_stored(id)?,
            sink,
            count: 0,
            sink_error: None,
        };
        let result = self.decode_stored(id, &mut tee, None, &mut io::sink());
        if let Some(e) = tee.sink_error.take() {
            // A sink that fails with a baton error (an upload whose connection broke)
            // keeps its kind; a plain I/O failure is "other".
            if let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<Error>()) {
                return Err(Error::rewrapped(inner, format!("cannot write object {id}")));
            }
            return Err(Error::other(format!("cannot write object {id}: {e}")).with_source(e));
        }
        result?;
        Ok(tee.count)
    }

    /// Stream the verified content of `id` into `sink`. The bytes written are trustworthy
    /// only once this returns `Ok`: callers that must never emit bad bytes write to a
    /// temp file first. `expected_size`, when known, bounds the read.
    pub fn copy_to(
        &self,
        id: &ObjectId,
        expected_size: Option<u64>,
        sink: &mut dyn Write,
    ) -> Result<u64> {
        self.decode_stored(id, self.open_stored(id)?, expected_size, sink)
    }

    /// Read a whole small object (tree or manifest), verified, at most `limit` bytes.
    pub fn get_bytes(&self, id: &ObjectId, limit: u64) -> Result<Vec<u8>> {
        self.get_bytes_sized(id, None, limit)
    }

    /// [`Objects::get_bytes`] of an object whose size the caller knows (from a tree
    /// entry, say): it must be exactly that, and is read into one buffer of that size
    /// (a 3 MB transcript grown by doubling cost a handoff 2-3 ms of copies and page
    /// faults).
    pub fn get_bytes_sized(&self, id: &ObjectId, size: Option<u64>, limit: u64) -> Result<Vec<u8>> {
        let mut out = LimitedVec::new(limit);
        if let Some(size) = size.filter(|&s| s <= limit)
            && let Ok(capacity) = usize::try_from(size)
        {
            out.bytes.reserve_exact(capacity);
        }
        self.copy_to(id, size, &mut out).map_err(|e| {
            if out.overflow {
                Error::integrity(format!("object {id} is larger than {limit} bytes"))
            } else {
                e
            }
        })?;
        Ok(out.bytes)
    }

    /// The length of an object's stored bytes (loose file or pack entry).
    pub fn stored_len(&self, id: &ObjectId) -> Option<u64> {
        match fs::metadata(self.path(id)) {
            Ok(meta) => Some(meta.len()),
            Err(_) => self
                .find_packed(id)
                .ok()
                .flatten()
                .map(|(_, entry)| entry.length),
        }
    }

    /// Whether the store holds no object at all, loose or packed.
    pub fn is_empty(&self) -> Result<bool> {
        if !self.packs.is_empty()? {
            return Ok(false);
        }
        self.loose.is_empty()
    }

    /// Modification time and length of an object file.
    pub fn stat(&self, id: &ObjectId) -> Option<(SystemTime, u64)> {
        self.loose.stat(&self.name_of(id))
    }
}
