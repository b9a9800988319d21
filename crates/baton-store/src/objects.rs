//! Loose objects: zstd-compressed files named by id under `objects/`, written once.
//!
//! Lookup goes through `Objects` only, so that later formats (packs, encrypted envelopes)
//! can change where and how bytes live without changing any id.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::codec::{decode_named, decode_verified, hash_stream};
use crate::envelope::Envelope;
use crate::fsutil::{self, read_dir_sorted};
use crate::packs::{self, PackIndex, PackSet};
use crate::quarantine::{Held, Quarantine};
use crate::streams::{HashingReader, LimitedVec, ProgressReader, TeeReader};
use crate::write_behind::WriteBehind;
use baton_error::{Error, IoContext, Result};
use baton_format::ObjectId;
use baton_format::pack::PackEntry;

/// zstd level for new objects: level 3 (zstd's default) balances speed and size.
pub const ZSTD_LEVEL: i32 = 3;
/// Files up to this size are read into memory once; larger ones are streamed in two passes.
pub(crate) const IN_MEMORY_LIMIT: u64 = 1 << 20;
const BUF_SIZE: usize = 256 << 10;

thread_local! {
    /// One zstd context per thread, reused for every in-memory object: creating one per
    /// object (its tables and buffers) was a visible share of a save of many small files.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// `bytes` as one zstd frame at [`ZSTD_LEVEL`]: the same frame `zstd::bulk::compress`
/// makes (each call starts a new frame with the same parameters), from this thread's
/// context.
fn compress(bytes: &[u8]) -> io::Result<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| io::Error::other("zstd context busy"))?;
        let compressor = match &mut *slot {
            Some(compressor) => compressor,
            empty => empty.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL)?),
        };
        compressor.compress(bytes)
    })
}

pub struct Objects {
    dir: PathBuf,
    packs_dir: PathBuf,
    /// Whole pack indexes, loaded on first use (verify); `refresh_packs` drops them after
    /// a new pack lands.
    packs: Mutex<Option<Arc<Vec<PackIndex>>>>,
    /// The packs for lookups: listed on first use, each index searched on disk, so that
    /// finding a few objects never reads every index entry of the store.
    lookup: Mutex<Option<Arc<PackSet>>>,
    /// Plain, or age-encrypted: the one place that decides names and stored bytes.
    envelope: Envelope,
    /// What a receive in this process holds back until its checks pass: read last.
    pub(crate) quarantine: Quarantine,
}

/// Where an object's stored bytes live.
enum Location {
    Loose(File),
    Packed(PathBuf, PackEntry),
}

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
    pub fn new(dir: PathBuf, packs_dir: PathBuf) -> Self {
        Objects {
            dir,
            packs_dir,
            packs: Mutex::new(None),
            lookup: Mutex::new(None),
            envelope: Envelope::Plain,
            quarantine: Quarantine::default(),
        }
    }

    pub fn set_envelope(&mut self, envelope: Envelope) {
        self.envelope = envelope;
    }

    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// The storage name of `id` (its loose path and pack index key).
    pub fn name_of(&self, id: &ObjectId) -> ObjectId {
        self.envelope.name_of(id)
    }

    /// Decode stored bytes of `id` (sealed or not) into `sink`, verified.
    pub fn decode_stored(
        &self,
        id: &ObjectId,
        stored: impl Read,
        expected_size: Option<u64>,
        sink: &mut dyn Write,
    ) -> Result<u64> {
        decode_verified(id, self.envelope.open(id, stored)?, expected_size, sink)
    }

    /// Decode stored bytes found under storage name `name`: returns the object id
    /// (checked to derive `name`) and the content size.
    pub fn decode_named(
        &self,
        name: &ObjectId,
        stored: impl Read,
        sink: &mut dyn Write,
    ) -> Result<(ObjectId, u64)> {
        decode_named(&self.envelope, name, stored, sink)
    }

    pub fn packs_dir(&self) -> &Path {
        &self.packs_dir
    }

    /// The whole index of every pack in the store (loaded once, then cached): for
    /// commands that read every entry anyway (verify). Lookups use `pack_set`.
    pub fn packs(&self) -> Result<Arc<Vec<PackIndex>>> {
        let mut cached = self
            .packs
            .lock()
            .map_err(|_| Error::other("internal error: pack cache poisoned"))?;
        if let Some(packs) = cached.as_ref() {
            return Ok(packs.clone());
        }
        // A pack merged away between the listing and its read: list again, once.
        let loaded = match packs::load_all(&self.packs_dir) {
            Err(e) if packs::vanished(&e) => packs::load_all(&self.packs_dir)?,
            other => other?,
        };
        let loaded = Arc::new(loaded);
        *cached = Some(loaded.clone());
        Ok(loaded)
    }

    /// The packs of the store for lookups (listed once, then cached).
    pub fn pack_set(&self) -> Result<Arc<PackSet>> {
        let mut cached = self
            .lookup
            .lock()
            .map_err(|_| Error::other("internal error: pack cache poisoned"))?;
        if let Some(set) = cached.as_ref() {
            return Ok(set.clone());
        }
        let listed = Arc::new(PackSet::list(&self.packs_dir)?);
        *cached = Some(listed.clone());
        Ok(listed)
    }

    /// Forget cached pack indexes (after publishing a pack).
    pub fn refresh_packs(&self) {
        if let Ok(mut cached) = self.packs.lock() {
            *cached = None;
        }
        if let Ok(mut cached) = self.lookup.lock() {
            *cached = None;
        }
    }

    /// Run a pack read; if a pack it had listed has vanished (a merge under the store
    /// lock unlinked it after writing its objects into a new pack, SPEC 7), list the
    /// packs again and run it once more.
    fn retry_vanished<T>(&self, read: impl Fn() -> Result<T>) -> Result<T> {
        match read() {
            Err(e) if packs::vanished(&e) => {
                self.refresh_packs();
                read()
            }
            other => other,
        }
    }

    fn find_packed(&self, id: &ObjectId) -> Result<Option<(PathBuf, PackEntry)>> {
        let name = self.name_of(id);
        self.retry_vanished(|| self.pack_set()?.find(&name))
    }

    /// Storage names of packed objects starting with the hex digits `prefix`.
    pub fn packed_with_prefix(&self, prefix: &str) -> Result<Vec<ObjectId>> {
        self.retry_vanished(|| self.pack_set()?.with_prefix(prefix))
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
    pub fn open_stored(&self, id: &ObjectId) -> Result<Box<dyn Read + Send>> {
        // An open descriptor keeps reading a pack that is unlinked afterwards.
        self.retry_vanished(|| self.open_stored_once(id))
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
            None => Err(
                Error::integrity(format!("object {id} is missing from the store"))
                    .with_hint("run 'baton verify', then 'baton pull --repair [TARGET]' to refetch it from a target"),
            ),
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

    /// A temp file in the directory where `id` will live, for receiving it.
    pub fn temp_for_name(&self, name: &ObjectId) -> Result<tempfile::NamedTempFile> {
        let dest = self.name_path(name);
        let fanout = dest.parent().unwrap_or(&self.dir).to_path_buf();
        fsutil::ensure_private_dir(&fanout)?;
        fsutil::temp_file_in(&fanout)
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

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The loose path of object `id` (under its storage name).
    pub fn path(&self, id: &ObjectId) -> PathBuf {
        self.name_path(&self.name_of(id))
    }

    /// The loose path of storage name `name`.
    pub fn name_path(&self, name: &ObjectId) -> PathBuf {
        let hex = name.to_hex();
        self.dir.join(&hex[..2]).join(&hex[2..])
    }

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
            || self
                .retry_vanished(|| self.pack_set()?.find(name))
                .is_ok_and(|found| found.is_some())
            || self.quarantine.holds(name)
    }

    /// Mark an existing object as recently used, so a concurrent `gc` within its grace
    /// period never deletes an object a new bundle is about to refer to.
    fn freshen(&self, id: &ObjectId) {
        if let Ok(file) = File::open(self.path(id)) {
            let _ = file.set_modified(SystemTime::now());
        }
    }

    /// The object when the store already holds it, freshened so that a concurrent gc
    /// keeps it for its grace period.
    pub(crate) fn reuse(&self, id: &ObjectId, size: u64) -> Option<Stored> {
        if !self.contains(id) {
            return None;
        }
        self.freshen(id);
        Some(Stored {
            id: *id,
            size,
            written: false,
        })
    }

    /// The stored form of `bytes` (one zstd frame, sealed in an encrypted store) with the
    /// object's id and storage name: exactly what a loose file or a pack entry holds.
    pub fn encode_stored(&self, bytes: &[u8]) -> Result<(ObjectId, ObjectId, Vec<u8>)> {
        let id = ObjectId::of(bytes);
        Ok((id, self.name_of(&id), self.stored_form(bytes)?))
    }

    /// The stored form of `bytes`: one zstd frame, sealed in an encrypted store.
    pub(crate) fn stored_form(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        let compressed =
            compress(bytes).map_err(|e| Error::other(format!("zstd compression failed: {e}")))?;
        self.envelope.seal_bytes(compressed)
    }

    /// Store many objects (storage name, stored bytes from `encode_stored`) as one new
    /// pack: the bulk path for writers with thousands of small objects.
    pub fn write_pack(&self, objects: &[(ObjectId, Vec<u8>)]) -> Result<ObjectId> {
        let id = packs::write_pack(&self.packs_dir, objects)?;
        self.refresh_packs();
        Ok(id)
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
    pub fn put_file(
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

    /// Stream the stored form of `file` (`path` in messages; its first pass hashed to
    /// `id`, `size` bytes) into `sink`, read again from its start, failing if this second
    /// pass reads other content. `progress` counts the bytes as they are read.
    pub(crate) fn encode_file<W: Write>(
        &self,
        file: &mut File,
        path: &Path,
        (id, size): (&ObjectId, u64),
        sink: W,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<W> {
        io::Seek::rewind(file).ctx("cannot read", path)?;
        let sealed = self.envelope.seal_writer(sink)?;
        let mut encoder = zstd::Encoder::new(sealed, ZSTD_LEVEL).ctx("cannot compress", path)?;
        let mut hashing = HashingReader::new(ProgressReader::new(file, progress));
        io::copy(&mut hashing, &mut encoder).ctx("cannot read", path)?;
        let sealed = encoder.finish().ctx("cannot compress", path)?;
        let sink = sealed.finish().ctx("cannot encrypt", path)?;
        let (again, again_size) = hashing.finish();
        if again != *id || again_size != size {
            return Err(Error::other(format!(
                "{} changed while it was being saved",
                path.display()
            ))
            .with_hint("save again once nothing is writing to it"));
        }
        Ok(sink)
    }

    fn publish_with(
        &self,
        id: &ObjectId,
        pending: &PendingDirs,
        write: impl FnOnce(&mut File) -> Result<()>,
    ) -> Result<()> {
        let dest = self.path(id);
        let fanout = dest.parent().unwrap_or(&self.dir).to_path_buf();
        fsutil::ensure_private_dir(&fanout)?;
        let mut temp = fsutil::temp_file_in(&fanout)?;
        write(temp.as_file_mut())?;
        fsutil::publish(temp, &dest, false)?;
        pending.add(fanout);
        Ok(())
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

    /// The first bytes of an object's content, unverified: only a cheap filter before a
    /// verified read (e.g. "is this a bundle?").
    pub fn peek(&self, id: &ObjectId, len: usize) -> Option<Vec<u8>> {
        let opened = self.envelope.open(id, self.open_stored(id).ok()?).ok()?;
        let decoder = zstd::Decoder::new(opened).ok()?;
        let mut head = Vec::with_capacity(len);
        decoder.take(len as u64).read_to_end(&mut head).ok()?;
        Some(head)
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
        if !self.pack_set()?.is_empty() {
            return Ok(false);
        }
        for fanout in read_dir_sorted(&self.dir)? {
            let path = self.dir.join(&fanout);
            if path.is_dir()
                && read_dir_sorted(&path)?
                    .iter()
                    .any(|n| !fsutil::is_temp_name(n))
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Every object file in the store, with its size on disk and modification time.
    /// Names that are not objects are returned as `Err` entries for `verify` to report.
    pub fn list(&self) -> Result<Vec<ListedObject>> {
        let mut out = Vec::new();
        for fanout in read_dir_sorted(&self.dir)? {
            let fanout_path = self.dir.join(&fanout);
            if fsutil::is_temp_name(&fanout) {
                continue;
            }
            if fanout.len() != 2
                || !baton_format::id::is_lower_hex(&fanout)
                || !fanout_path.is_dir()
            {
                out.push(ListedObject::Stray(fanout_path));
                continue;
            }
            for name in read_dir_sorted(&fanout_path)? {
                let path = fanout_path.join(&name);
                if fsutil::is_temp_name(&name) {
                    out.push(ListedObject::Temp(path));
                    continue;
                }
                match ObjectId::parse(&format!("{fanout}{name}")) {
                    Ok(id) => out.push(ListedObject::Object(id, path)),
                    Err(_) => out.push(ListedObject::Stray(path)),
                }
            }
        }
        Ok(out)
    }

    /// Modification time and length of an object file.
    pub fn stat(&self, id: &ObjectId) -> Option<(SystemTime, u64)> {
        let meta = fs::metadata(self.path(id)).ok()?;
        Some((meta.modified().ok()?, meta.size()))
    }
}

pub enum ListedObject {
    Object(ObjectId, PathBuf),
    Temp(PathBuf),
    Stray(PathBuf),
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_reused_context_makes_the_frames_a_fresh_one_does() {
        let inputs: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"short".to_vec(),
            b"line of text\n".repeat(5000),
            (0..200_000u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect(),
            b"short".to_vec(),
        ];
        for input in inputs.iter().chain(inputs.iter()) {
            let fresh = zstd::bulk::compress(input, super::ZSTD_LEVEL).unwrap();
            assert_eq!(super::compress(input).unwrap(), fresh);
        }
    }
}
