//! A save's new objects in one pack: durability in one batch instead of one per object.
//!
//! `save` (and in-memory trees: handoffs, imports) store each new blob and tree through a
//! [`PackBatch`]. Their stored bytes (exactly what a loose file would hold, SPEC 6–7) are
//! appended to one `.tmp-*` file in `packs/`; [`PackBatch::finish`] appends the index,
//! fsyncs the file, publishes it as `packs/<hash>.pack` by a no-clobber rename and fsyncs
//! `packs/`, so a save of any number of small files costs two fsyncs for its objects
//! (SPEC 12.2). Files are read, hashed and compressed in parallel by the callers; only
//! the append of finished bytes holds the lock. Files over [`PACK_OBJECT_LIMIT`] stay
//! loose (streamed, memory bounded; their count is bounded by their size), with their
//! fan-out directories fsynced by `finish` too. The dedup rules are those of loose
//! writes: an object the store already holds is not written again (a loose copy is
//! freshened, SPEC 13.3), and an object given twice within one batch goes in once.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Read};
use std::path::Path;
use std::sync::Mutex;

use super::codec::hash_stream;
use super::fsutil;
use super::objects::{IN_MEMORY_LIMIT, Objects, PendingDirs, Stored};
use super::packs::{self, PackWriter};
use super::streams::ProgressReader;
use super::write_behind::WriteBehind;
use baton_error::{Error, IoContext, Result};
use baton_format::ObjectId;

/// Objects whose content is larger than this are stored loose, not in the batch's pack:
/// their compressed form is held in memory once before it is appended.
pub(crate) const PACK_OBJECT_LIMIT: u64 = 8 << 20;
const BUF_SIZE: usize = 1 << 20;

/// The new objects of one save, bound for one pack (see the module documentation).
pub struct PackBatch<'a> {
    objects: &'a Objects,
    state: Mutex<State>,
    /// Fan-out directories of the large objects written loose.
    pending: PendingDirs,
}

#[derive(Default)]
struct State {
    /// The pack being written, opened by the first new object.
    open: Option<OpenPack>,
    /// Storage names appended so far.
    names: HashSet<ObjectId>,
    /// An append failed part way: the temp file is not a pack and is never published.
    broken: bool,
}

struct OpenPack {
    temp: tempfile::NamedTempFile,
    writer: PackWriter<BufWriter<WriteBehind<File>>>,
}

/// What `finish` published.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchOutcome {
    /// The new pack, if any object went into one.
    pub pack: Option<ObjectId>,
    /// Objects in that pack.
    pub packed: u64,
}

impl<'a> PackBatch<'a> {
    pub fn new(objects: &'a Objects) -> Self {
        PackBatch {
            objects,
            state: Mutex::new(State::default()),
            pending: PendingDirs::default(),
        }
    }

    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| Error::internal("pack batch poisoned"))
    }

    /// Whether this batch already holds storage name `name`.
    fn holds(&self, name: &ObjectId) -> Result<bool> {
        Ok(self.state()?.names.contains(name))
    }

    /// The object as already stored (in the store, freshened, or earlier in this batch).
    fn existing(&self, id: &ObjectId, size: u64) -> Result<Option<Stored>> {
        if self.holds(&self.objects.name_of(id))? {
            return Ok(Some(Stored {
                id: *id,
                size,
                written: false,
            }));
        }
        Ok(self.objects.reuse(id, size))
    }

    /// Append stored bytes under storage name `name`; false if the batch already held it.
    fn append(&self, name: ObjectId, stored: &[u8]) -> Result<bool> {
        let mut state = self.state()?;
        if state.broken {
            return Err(Error::internal("pack batch used after a failed write"));
        }
        if state.names.contains(&name) {
            return Ok(false);
        }
        let open = match state.open.take() {
            Some(open) => open,
            None => {
                let dir = self.objects.packs_dir();
                fsutil::ensure_private_dir(dir)?;
                let temp = fsutil::temp_file_in(dir)?;
                let file = temp
                    .as_file()
                    .try_clone()
                    .ctx("cannot write", temp.path())?;
                let sink = BufWriter::with_capacity(BUF_SIZE, WriteBehind::new(file));
                let writer = PackWriter::new(sink).ctx("cannot write", temp.path())?;
                OpenPack { temp, writer }
            }
        };
        let open = state.open.insert(open);
        match open.writer.add(name, stored) {
            Ok(()) => {
                state.names.insert(name);
                Ok(true)
            }
            Err(e) => {
                // Part of the bytes may be in the file: it is no pack any more.
                let err = Error::io("cannot write", open.temp.path(), e);
                state.broken = true;
                Err(err)
            }
        }
    }

    /// Store a byte string (a small file, a symlink target, a tree).
    pub fn put_bytes(&self, bytes: &[u8]) -> Result<Stored> {
        self.put_bytes_hashed(bytes, None)
    }

    /// [`PackBatch::put_bytes`] of bytes whose BLAKE3 the caller may know: `digest`.
    pub fn put_bytes_hashed(&self, bytes: &[u8], digest: Option<ObjectId>) -> Result<Stored> {
        debug_assert!(digest.is_none_or(|d| d == ObjectId::of(bytes)));
        let id = digest.unwrap_or_else(|| ObjectId::of(bytes));
        let size = bytes.len() as u64;
        if let Some(stored) = self.existing(&id, size)? {
            return Ok(stored);
        }
        let stored = self.objects.stored_form(bytes)?;
        let written = self.append(self.objects.name_of(&id), &stored)?;
        Ok(Stored { id, size, written })
    }

    /// Store the regular file `file` (opened by the caller; `path` names it in messages):
    /// up to `PACK_OBJECT_LIMIT` into the pack (read whole up to `IN_MEMORY_LIMIT`, else
    /// hashed, then compressed in a second pass of the same descriptor), larger ones loose
    /// and streamed.
    pub(crate) fn put_file(
        &self,
        mut file: File,
        path: &Path,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Stored> {
        let len = file.metadata().ctx("cannot stat", path)?.len();
        if len <= IN_MEMORY_LIMIT {
            let mut bytes = Vec::with_capacity(len as usize);
            ProgressReader::new(&mut file, progress)
                .read_to_end(&mut bytes)
                .ctx("cannot read", path)?;
            return self.put_bytes(&bytes);
        }
        if len > PACK_OBJECT_LIMIT {
            return self.objects.put_file(file, path, &self.pending, progress);
        }
        let (id, size) = hash_stream(&mut file).ctx("cannot read", path)?;
        if let Some(stored) = self.existing(&id, size)? {
            progress(size);
            return Ok(stored);
        }
        if size > PACK_OBJECT_LIMIT {
            // It grew between the stat and the read: store it the bounded way.
            std::io::Seek::rewind(&mut file).ctx("cannot read", path)?;
            return self.objects.put_file(file, path, &self.pending, progress);
        }
        let stored =
            self.objects
                .encode_file(&mut file, path, (&id, size), Vec::new(), progress)?;
        let written = self.append(self.objects.name_of(&id), &stored)?;
        Ok(Stored { id, size, written })
    }

    /// Make everything written durable: the pack (index appended, fsynced, published
    /// without clobbering, `packs/` fsynced) and the directories of loose objects. Nothing
    /// that names these objects may be published before this returns.
    pub fn finish(self) -> Result<BatchOutcome> {
        let state = self
            .state
            .into_inner()
            .map_err(|_| Error::internal("pack batch poisoned"))?;
        if state.broken {
            return Err(Error::internal("pack batch used after a failed write"));
        }
        self.pending.sync()?;
        let Some(OpenPack { temp, writer }) = state.open else {
            return Ok(BatchOutcome::default());
        };
        let packed = writer.entries().len() as u64;
        let (id, _, _, sink) = writer.finish().ctx("cannot write", temp.path())?;
        // Flushed through the cloned descriptor; `publish_pack` fsyncs the file.
        sink.into_inner()
            .map_err(|e| e.into_error())
            .ctx("cannot write", temp.path())?;
        let dir = self.objects.packs_dir();
        packs::publish_pack(dir, temp, &id)?;
        self.objects.refresh_packs();
        Ok(BatchOutcome {
            pack: Some(id),
            packed,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::Store;

    /// Each file size class (whole in memory, packed in two passes, loose) reports its
    /// bytes in total exactly once; the streamed ones in many steps, as they are read.
    #[test]
    fn a_file_is_counted_as_it_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::init(&tmp.path().join("s")).unwrap();
        let batch = PackBatch::new(&store.objects);
        for len in [IN_MEMORY_LIMIT, 3 * IN_MEMORY_LIMIT, PACK_OBJECT_LIMIT + 1] {
            let path = tmp.path().join(format!("f{len}"));
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            std::fs::write(&path, &bytes).unwrap();
            let (total, calls) = (AtomicU64::new(0), AtomicU64::new(0));
            let progress = |n: u64| {
                total.fetch_add(n, Ordering::Relaxed);
                calls.fetch_add(1, Ordering::Relaxed);
            };
            batch
                .put_file(File::open(&path).unwrap(), &path, &progress)
                .unwrap();
            assert_eq!(total.load(Ordering::Relaxed), len, "{len}");
            if len > IN_MEMORY_LIMIT {
                assert!(
                    calls.load(Ordering::Relaxed) > 4,
                    "{len}: one count at the end"
                );
            }
        }
        batch.finish().unwrap();
    }
}
