//! Import: the tar read as a stream into private staging, every entry and object checked,
//! the history complete, then objects published and `current` fast-forwarded.

use super::checks::*;
use super::*;
use crate::error::SyncError;
use baton_store::ingest::{self, Forward};
use baton_store::streams::{Bounded, HashingWriter, LimitedVec};

/// Import the archive `file`: verify everything, publish the objects, then fast-forward
/// `current` to the archive's. `max_expansion` bounds decompression (docs/archives.md).
pub fn import(store: &Store, file: &Path, max_expansion: Option<u64>) -> Result<ImportReport> {
    let ratio = max_expansion.unwrap_or(DEFAULT_MAX_EXPANSION).max(1);
    let stage = ingest::StagingArea::new(store, "import")?;

    let received = receive(store, file, stage.path(), ratio)?;
    let (bundles, current) = check_manifest(file, &received)?;
    check_reachable(store, &received, &bundles)?;

    let mut report = ImportReport {
        file: file.to_path_buf(),
        bundles: bundles.clone(),
        history: received.manifest.history,
        archive_current: Some(current),
        objects: received.staged.len() as u64,
        log_lines: received.log_lines,
        ..ImportReport::default()
    };
    let staged = received
        .staged
        .into_iter()
        .map(|(id, object)| (id, object.path, object.stored_len));
    (report.objects_published, report.bytes_published) = ingest::publish_staged(store, staged)?;
    drop(stage);

    let reason = MoveReason {
        action: "import".into(),
        from: file.display().to_string(),
        to: String::new(),
    };
    let (ours, forward) = ingest::fast_forward(store, &RefName::Current, current, &reason, |o| {
        Error::conflict(format!(
            "history diverged: local current is {o}, the archive's current is {current}"
        ))
        .with_hint(format!(
            "the archive's objects were imported but no ref names them; inspect it with 'baton log {current}'"
        ))
    })?;
    report.current_before = ours;
    report.current_after = match forward {
        Forward::Initial | Forward::FastForward => Some(current),
        Forward::UpToDate | Forward::LocalAhead => ours,
    };
    report.outcome = forward.as_str().into();
    Ok(report)
}

/// Read the whole archive as a stream, staging and verifying every object.
pub(super) fn receive(store: &Store, file: &Path, stage: &Path, ratio: u64) -> Result<Received> {
    let handle = File::open(file).ctx("cannot open", file)?;
    let file_len = handle.metadata().ctx("cannot stat", file)?.len();
    let padding = Rc::new(Cell::new((0u64, 0u64)));
    let bad_padding = Rc::new(Cell::new(false));
    let mut archive = tar::Archive::new(Counting {
        inner: BufReader::with_capacity(256 << 10, handle),
        count: 0,
        padding: padding.clone(),
        bad_padding: bad_padding.clone(),
    });
    // Set after each entry's data has been read: the tar reader reads its padding only
    // when it moves to the next header.
    let check_padding = |last: &str| {
        if bad_padding.get() {
            return Err(malformed(
                file,
                format!("entry {last} holds more data than its header declares"),
            ));
        }
        Ok(())
    };
    let mut last_name = String::new();
    let mut manifest: Option<(ArchiveManifest, blake3::Hash)> = None;
    let mut log: Option<blake3::Hash> = None;
    let mut log_lines = 0;
    let mut staged: BTreeMap<ObjectId, Staged> = BTreeMap::new();
    // Where the data (with its padding) of the last entry ends.
    let mut data_end = 0u64;
    let mut first = true;
    // Raw: PAX and GNU extension headers are entries of their own, and refused below.
    let entries = archive
        .entries()
        .map_err(|e| malformed(file, tar_error(&e)))?
        .raw(true);
    for entry in entries {
        let mut entry = entry.map_err(|e| {
            let at = if last_name.is_empty() {
                "at the start".to_string()
            } else {
                format!("after entry {last_name}")
            };
            malformed(file, format!("bad tar header {at}: {}", tar_error(&e)))
        })?;
        check_padding(&last_name)?;
        let name_bytes = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&name_bytes).into_owned();
        let shown = name.escape_debug().to_string();
        let kind = entry.header().entry_type();
        if !kind.is_file() {
            return Err(malformed(
                file,
                format!("entry '{shown}' is a {}", describe_kind(kind)),
            ));
        }
        check_name(file, &name_bytes)?;
        let declared = entry.size();
        let data_start = entry.raw_file_position();
        data_end = data_start.saturating_add(declared.div_ceil(BLOCK).saturating_mul(BLOCK));
        padding.set((data_start.saturating_add(declared), data_end));
        last_name = name.clone();
        if first && name != MANIFEST_NAME {
            return Err(malformed(
                file,
                format!("the first entry is '{shown}', not {MANIFEST_NAME}"),
            ));
        }
        first = false;
        if name == MANIFEST_NAME || name == LOG_NAME {
            let limit = if name == LOG_NAME {
                MAX_LOG
            } else {
                MAX_MANIFEST
            };
            if declared > limit {
                return Err(malformed(
                    file,
                    format!("entry {name} is larger than {limit} bytes"),
                ));
            }
            let mut bytes = Vec::with_capacity(declared as usize);
            (&mut entry)
                .take(declared)
                .read_to_end(&mut bytes)
                .map_err(|e| malformed(file, tar_error(&e)))?;
            if bytes.len() as u64 != declared {
                return Err(short_entry(file, &name, bytes.len() as u64, declared));
            }
            let hash = blake3::hash(&bytes);
            let previous = if name == MANIFEST_NAME {
                manifest.as_ref().map(|m| m.1)
            } else {
                log
            };
            match previous {
                Some(h) if h == hash => continue,
                Some(_) => return Err(duplicate(&name)),
                None => {}
            }
            if name == MANIFEST_NAME {
                let parsed: ArchiveManifest = serde_json::from_slice(&bytes)
                    .map_err(|e| malformed(file, format!("{MANIFEST_NAME} does not parse: {e}")))?;
                manifest = Some((parsed, hash));
            } else {
                log_lines = check_log(&bytes)?;
                log = Some(hash);
            }
            continue;
        }
        // objects/<id>: check_name allowed nothing else.
        let id = ObjectId::parse(&name["objects/".len()..]).map_err(|e| malformed(file, e))?;
        let mut temp = fsutil::temp_file_in(stage)?;
        let mut hashing = HashingWriter {
            inner: io::BufWriter::new(temp.as_file_mut()),
            hasher: blake3::Hasher::new(),
        };
        let copied = io::copy(&mut (&mut entry).take(declared), &mut hashing)
            .map_err(|e| malformed(file, tar_error(&e)))?;
        let stored_hash = hashing.hasher.finalize();
        hashing
            .inner
            .flush()
            .map_err(|e| Error::io("cannot write", stage, e))?;
        drop(hashing);
        if copied != declared {
            return Err(short_entry(file, &name, copied, declared));
        }
        if let Some(previous) = staged.get(&id) {
            if previous.stored_hash == stored_hash && previous.stored_len == copied {
                continue;
            }
            return Err(duplicate(&name));
        }
        // Not fsynced yet: `publish` does, once every check has passed, so that a
        // refused archive of 100,000 objects costs no 100,000 fsyncs.
        staged.insert(
            id,
            Staged {
                path: temp.into_temp_path(),
                stored_hash,
                stored_len: copied,
                content_len: 0,
            },
        );
    }
    // The end: at least two zero blocks after the last entry and nothing but zeros after
    // them; otherwise the archive was cut short (perhaps exactly between two entries).
    let mut counting = archive.into_inner();
    let consumed = counting.count;
    let mut rest = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match counting.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("cannot read", file, e)),
        };
        if buf[..n].iter().any(|&b| b != 0) {
            return Err(malformed(file, "data follows the end of the archive"));
        }
        rest += n as u64;
    }
    if consumed + rest < data_end + 2 * BLOCK {
        return Err(malformed(
            file,
            "the archive is truncated (no end-of-archive marker)",
        ));
    }
    check_padding(&last_name)?;
    let Some((manifest, _)) = manifest else {
        return Err(malformed(file, format!("it has no {MANIFEST_NAME}")));
    };
    // The structure is sound; now the content of every object, with bounded expansion.
    let total_bound = MIN_TOTAL_BOUND.max(file_len.saturating_mul(ratio));
    let mut expanded = 0u64;
    // Entries are named by storage name; staged objects are keyed by object id.
    let mut by_id: BTreeMap<ObjectId, Staged> = BTreeMap::new();
    for (id, mut object) in std::mem::take(&mut staged) {
        let id = &id;
        let stored = object.stored_len;
        let object_bound = MIN_OBJECT_BOUND.max(stored.saturating_mul(ratio));
        let left = total_bound.saturating_sub(expanded);
        let mut sink = Bounded {
            limit: object_bound.min(left),
            written: 0,
            overflow: false,
        };
        let reader = File::open(&object.path).ctx("cannot read", &object.path)?;
        let result = store
            .objects
            .decode_named(id, BufReader::new(reader), &mut sink);
        if sink.overflow {
            let what = if object_bound <= left {
                format!(
                    "object {id} expands beyond {object_bound} bytes from {stored} stored bytes"
                )
            } else {
                format!("the archive's objects expand beyond {total_bound} bytes in all")
            };
            return Err(Error::integrity(format!(
                "{what}: refusing a possible decompression bomb"
            ))
            .with_hint(
                "nothing was imported; if the archive is trusted, raise the bound with --max-expansion RATIO",
            ));
        }
        let (actual, content_len) = result.map_err(|e| {
            if e.kind == baton_error::ErrorKind::Security {
                return e;
            }
            e.recast(
                baton_error::ErrorKind::Integrity,
                format!("archive entry objects/{id}"),
            )
            .with_hint("nothing was imported; the archive is damaged or forged")
        })?;
        object.content_len = content_len;
        expanded += object.content_len;
        by_id.insert(actual, object);
    }
    let staged = by_id;
    Ok(Received {
        manifest,
        staged,
        log_lines,
    })
}

/// The only names allowed: `baton-archive.json`, `log`, `objects/<64 lowercase hex>`.
/// The archive's staging area in front of the store: what import's checks read.
pub(super) struct Staging<'a> {
    store: &'a Store,
    staged: &'a BTreeMap<ObjectId, Staged>,
}

impl Staging<'_> {
    /// The verified content of a bundle or tree (at most `MAX_METADATA_OBJECT` bytes),
    /// from staging or the store.
    fn load(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        if let Some(s) = self.staged.get(id) {
            let mut sink = LimitedVec::new(MAX_METADATA_OBJECT);
            let reader = File::open(&s.path).ctx("cannot read", &s.path)?;
            self.store
                .objects
                .decode_stored(id, BufReader::new(reader), None, &mut sink)
                .map_err(|e| {
                    if sink.overflow {
                        Error::integrity(format!(
                            "object {id} is larger than {MAX_METADATA_OBJECT} bytes"
                        ))
                    } else {
                        e
                    }
                })?;
            let bytes = sink.bytes;
            return Ok(Some(bytes));
        }
        self.store.tree_bytes(id)
    }
}

impl Incoming for Staging<'_> {
    fn tree_bytes(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        self.load(id)
    }
    fn blob_len(&self, id: &ObjectId) -> Result<Option<u64>> {
        match self.staged.get(id) {
            Some(s) => Ok(Some(s.content_len)),
            None => self.store.blob_len(id),
        }
    }
    fn missing(&self, id: &ObjectId, what: &str, bundle: &ObjectId) -> Error {
        missing(*id, what, *bundle)
    }
}

/// Decode every bundle and tree reachable from `bundles`, from staging or the store, and
/// check that every object they name is at hand with the size its entry declares, and no
/// tree is too deep (the store's receive check, as pull's); every staged object must be
/// reached.
pub(super) fn check_reachable(
    store: &Store,
    received: &Received,
    bundles: &[ObjectId],
) -> Result<()> {
    let staged = &received.staged;
    let staging = Staging { store, staged };
    // Separate sets per role: the same bytes may be a blob in one place and a tree in
    // another, and each role must be checked as such.
    let mut seen_bundles: HashSet<ObjectId> = HashSet::new();
    let mut trees = TreeCheck::default();
    let mut queue: Vec<(ObjectId, Option<ObjectId>)> = bundles.iter().map(|b| (*b, None)).collect();
    while let Some((id, child)) = queue.pop() {
        if !seen_bundles.insert(id) {
            continue;
        }
        let Some(bytes) = staging.load(&id)? else {
            let child = child.map(|c| c.to_hex()).unwrap_or_default();
            let hint = if received.manifest.history {
                "nothing was imported; the archive is incomplete"
            } else {
                "nothing was imported; this store lacks the bundle's history: export it with 'baton export --history'"
            };
            return Err(Error::integrity(format!(
                "bundle {id} (parent of {child}) is neither in the archive nor in this store"
            ))
            .with_hint(hint));
        };
        let bundle = Bundle::decode(&bytes)
            .map_err(|e| e.recast(baton_error::ErrorKind::Integrity, format!("bundle {id}")))?;
        queue.extend(bundle.parents.iter().map(|p| (*p, Some(id))));
        trees.check(&staging, &id, &bundle.tree).map_err(|e| {
            if matches!(SyncError::of(&e), Some(SyncError::NotInArchive { .. })) {
                e
            } else {
                e.with_hint("nothing was imported; the archive is damaged or forged")
            }
        })?;
    }
    let reached = |id: &ObjectId| {
        seen_bundles.contains(id) || trees.trees.contains(id) || trees.blobs.contains(id)
    };
    if let Some(extra) = staged.keys().find(|id| !reached(id)) {
        return Err(Error::integrity(format!(
            "the archive holds object {extra}, which none of its bundles reaches"
        ))
        .with_hint("nothing was imported; the archive is damaged or forged"));
    }
    Ok(())
}

pub(super) fn missing(id: ObjectId, what: &str, bundle: ObjectId) -> Error {
    SyncError::NotInArchive {
        what: what.to_string(),
        id,
        bundle,
    }
    .into_error()
}

/// A reader that counts the bytes taken from it and checks that the bytes in `padding`
/// (offsets from, to: the padding after an entry's data) are zero.
pub(super) struct Counting<R> {
    inner: R,
    count: u64,
    padding: Rc<Cell<(u64, u64)>>,
    bad_padding: Rc<Cell<bool>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let (from, to) = self.padding.get();
        let start = self.count;
        let end = start + n as u64;
        if from < end && start < to {
            let lo = (from.max(start) - start) as usize;
            let hi = (to.min(end) - start) as usize;
            if buf[lo..hi].iter().any(|&b| b != 0) {
                self.bad_padding.set(true);
            }
        }
        self.count = end;
        Ok(n)
    }
}
