//! Receiving history from elsewhere (pull, clone, object storage): one `Ingest` takes
//! packs and loose objects, each verified by its hash as it streams in and held back
//! once whole (a pack in a temp file beside its final name; small loose objects appended
//! to one pack of their own, as a save packs its objects, so that a clone of many loose
//! objects costs one fsync and not one per object; a large loose object in a staging
//! area; all removed on drop, and readable meanwhile by this process only:
//! `store::quarantine`), then `complete` checks that the tip's history is all here with
//! the one walker and the receive-side limits (`store::receive`), and only then
//! publishes what arrived; `fast_forward` moves a ref onto it by compare-and-swap. A
//! receive refused at any step leaves the store as it was.
//!
//! A receiver that must check everything before publishing anything (archive import,
//! docs/archives.md) stages objects in a `StagingArea` (a private directory under
//! `staging/`, removed on drop) and publishes them with `publish_staged` once its checks
//! pass; it ends in the same `fast_forward`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::packs::{PackIndex, PackWriter, pack_file_name};
use super::refs::{Expect, MoveReason};
use super::write_behind::WriteBehind;
use super::{Store, fsutil, leftovers, pack_stream};
use baton_error::{Error, ErrorKind, IoContext, Result};
use baton_format::ObjectId;
use baton_format::names::RefName;
use baton_format::pack::PackEntry;

/// Prefix of a pack being received into `packs/`, followed by `<pid>-`.
const PACK_TEMP_PREFIX: &str = ".tmp-pull-";

/// Objects received into one store: verified as they arrive, published by `complete`.
pub struct Ingest<'s> {
    store: &'s Store,
    /// Verified packs, fsynced in their temp files in `packs/`, by id.
    packs: Vec<(tempfile::NamedTempFile, ObjectId)>,
    /// The pack that verified small loose objects are appended to (opened by the first).
    loose_pack: Option<LoosePack>,
    /// Where verified large loose objects wait (made at the first one).
    staging: Option<StagingArea>,
    /// Those objects: id, staged file, stored length.
    loose: Vec<(ObjectId, tempfile::TempPath, u64)>,
    /// The content length of every object received and verified, by id: what the receive
    /// check compares declared sizes with, at no second read.
    sizes: HashMap<ObjectId, u64>,
    /// Objects received (in packs and loose) and their stored bytes.
    pub objects: u64,
    pub bytes: u64,
}

impl Drop for Ingest<'_> {
    fn drop(&mut self) {
        // Whatever was not published is removed with its temp files.
        self.store.objects.quarantine.clear();
    }
}

impl<'s> Ingest<'s> {
    /// Start receiving; leftovers of interrupted receives are swept first.
    pub fn new(store: &'s Store) -> Self {
        leftovers::sweep(
            store.objects.packs_dir(),
            &[
                leftovers::Rule {
                    prefix: PACK_TEMP_PREFIX,
                    pid_after_prefix: true,
                    by_age: true,
                },
                leftovers::Rule {
                    prefix: fsutil::TEMP_PREFIX,
                    pid_after_prefix: false,
                    by_age: true,
                },
            ],
        );
        Ingest {
            store,
            packs: Vec::new(),
            loose_pack: None,
            staging: None,
            loose: Vec::new(),
            sizes: HashMap::new(),
            objects: 0,
            bytes: 0,
        }
    }

    /// Receive the pack `pack_id` of `size` bytes whose index (`entries`) was read and
    /// checked first: `fill` writes its bytes in order; each object is decoded and rehashed
    /// as it arrives and the whole file hashed against the name, and only then is it
    /// kept, fsynced, for `complete` to publish (never over an existing pack).
    pub fn receive_pack(
        &mut self,
        pack_id: &ObjectId,
        entries: Vec<PackEntry>,
        size: u64,
        fill: impl FnOnce(&mut dyn Write) -> Result<()>,
    ) -> Result<()> {
        let mut temp = pack_temp(self.store)?;
        let sizes = pack_stream::receive_verified(
            self.store.objects.envelope(),
            pack_id,
            &entries,
            &mut WriteBehind::new(temp.as_file_mut()),
            fill,
        )?;
        self.sizes.extend(sizes);
        temp.as_file().sync_all().ctx("cannot fsync", temp.path())?;
        self.objects += entries.len() as u64;
        self.bytes += size;
        self.store.objects.quarantine.add_pack(PackIndex {
            id: *pack_id,
            path: temp.path().to_path_buf(),
            entries,
        });
        self.packs.push((temp, *pack_id));
        Ok(())
    }

    /// Receive one small loose object by its storage name: verified, then appended to
    /// this receive's pack of loose objects (published by `complete` with the packs).
    pub fn receive_loose(&mut self, name: &ObjectId, stored: &[u8]) -> Result<()> {
        let decoded = self
            .store
            .objects
            .decode_named_bytes(name, stored, &mut std::io::sink());
        if self.newly_received(decoded)?.is_none() {
            return Ok(());
        }
        let pack = match &mut self.loose_pack {
            Some(pack) => pack,
            empty => empty.insert(LoosePack::new(self.store)?),
        };
        if !pack.names.insert(*name) {
            return Ok(());
        }
        pack.writer
            .add(*name, stored)
            .ctx("cannot write", pack.temp.path())?;
        self.objects += 1;
        self.bytes += stored.len() as u64;
        Ok(())
    }

    /// The id of a received loose object as its decoding found it, with its length kept
    /// for the receive check; `None` when the store holds it already.
    fn newly_received(&mut self, decoded: Result<(ObjectId, u64)>) -> Result<Option<ObjectId>> {
        let (id, size) = decoded.map_err(|e| Error {
            message: format!("received {}", e.message),
            ..e
        })?;
        if self.store.objects.contains(&id) {
            return Ok(None);
        }
        self.sizes.insert(id, size);
        Ok(Some(id))
    }

    /// Receive one loose object of `len` stored bytes: `fill` streams it into a file of
    /// the staging area, which is verified and kept for `complete` to publish.
    pub fn receive_loose_stream(
        &mut self,
        name: &ObjectId,
        len: u64,
        fill: impl FnOnce(&mut dyn Write) -> Result<()>,
    ) -> Result<()> {
        if self.staging.is_none() {
            self.staging = Some(StagingArea::new(self.store, "pull")?);
        }
        let Some(staging) = &self.staging else {
            return Err(Error::internal("the pull's staging area is gone"));
        };
        let mut temp = fsutil::temp_file_in(staging.path())?;
        fill(&mut WriteBehind::new(temp.as_file_mut()))?;
        // Durable now, on the descriptor whose write-back was started; `publish` only
        // renames it.
        temp.as_file().sync_all().ctx("cannot fsync", temp.path())?;
        let file = File::open(temp.path()).ctx("cannot read", temp.path())?;
        let decoded = self
            .store
            .objects
            .decode_named(name, file, &mut std::io::sink());
        let Some(id) = self.newly_received(decoded)? else {
            return Ok(());
        };
        let path = temp.into_temp_path();
        self.store
            .objects
            .quarantine
            .add_loose(*name, path.to_path_buf());
        self.loose.push((id, path, len));
        self.objects += 1;
        self.bytes += len;
        Ok(())
    }

    /// Check that `tip`'s whole history is here and within the receive-side limits
    /// (`source` names where it came from, for the error), then publish what arrived:
    /// the packs, then the loose objects, each durable before anything names it.
    pub fn complete(mut self, tip: &ObjectId, source: &str) -> Result<(u64, u64)> {
        self.finish_loose_pack()?;
        self.store.complete_beyond_refs(tip).map_err(|e| {
            e.recast(ErrorKind::Integrity, format!("{source} is incomplete"))
                .with_hint("nothing was published; run 'baton verify' on the remote store")
        })?;
        // Sizes and depth (store/receive.rs), the lengths of what arrived as found on
        // arrival.
        self.store.check_received_with(tip, &self.sizes)?;
        self.publish()?;
        Ok((self.objects, self.bytes))
    }

    /// Close the pack of small loose objects (index, footer, fsync) and hold it as a
    /// received pack, found by lookups from here on and published with the others.
    fn finish_loose_pack(&mut self) -> Result<()> {
        let Some(LoosePack { temp, writer, .. }) = self.loose_pack.take() else {
            return Ok(());
        };
        let (id, _, entries, mut sink) = writer.finish().ctx("cannot write", temp.path())?;
        sink.flush().ctx("cannot write", temp.path())?;
        drop(sink);
        temp.as_file().sync_all().ctx("cannot fsync", temp.path())?;
        self.store.objects.quarantine.add_pack(PackIndex {
            id,
            path: temp.path().to_path_buf(),
            entries,
        });
        self.packs.push((temp, id));
        Ok(())
    }

    fn publish(&mut self) -> Result<()> {
        let objects = &self.store.objects;
        // From here on lookups find the published copies.
        objects.quarantine.clear();
        let dir = objects.packs_dir().to_path_buf();
        let packs = !self.packs.is_empty();
        for (temp, id) in self.packs.drain(..) {
            let dest = dir.join(pack_file_name(&id));
            match temp.persist_noclobber(&dest) {
                Ok(_) => {}
                Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io("cannot publish", &dest, e.error)),
            }
        }
        if packs {
            fsutil::fsync_dir(&dir)?;
            objects.refresh_packs();
        }
        publish_loose(self.store, self.loose.drain(..), true)?;
        Ok(())
    }
}

/// The small loose objects of one receive, bound for one pack.
struct LoosePack {
    temp: tempfile::NamedTempFile,
    writer: PackWriter<BufWriter<WriteBehind<File>>>,
    /// Storage names appended so far (each goes in once).
    names: HashSet<ObjectId>,
}

impl LoosePack {
    fn new(store: &Store) -> Result<LoosePack> {
        let temp = pack_temp(store)?;
        let file = temp
            .as_file()
            .try_clone()
            .ctx("cannot write", temp.path())?;
        let sink = BufWriter::with_capacity(1 << 20, WriteBehind::new(file));
        let writer = PackWriter::new(sink).ctx("cannot write", temp.path())?;
        Ok(LoosePack {
            temp,
            writer,
            names: HashSet::new(),
        })
    }
}

/// A temp file in `packs/` for a pack being received, named after this process so that
/// the next receive can tell an interrupted one (its process is gone) from one still
/// running.
fn pack_temp(store: &Store) -> Result<tempfile::NamedTempFile> {
    let dir = store.objects.packs_dir();
    fsutil::ensure_private_dir(dir)?;
    tempfile::Builder::new()
        .prefix(&format!("{PACK_TEMP_PREFIX}{}-", std::process::id()))
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(
            fsutil::FILE_MODE,
        ))
        .tempfile_in(dir)
        .map_err(|e| Error::io("cannot create a temp file in", dir, e))
}

/// A private directory under the store's `staging/` for objects received before they may
/// be published; removed when dropped (on success, on every error, on a panic). Areas
/// left by a killed run age out by the rules of `store::leftovers`.
pub struct StagingArea {
    dir: tempfile::TempDir,
}

impl StagingArea {
    /// A fresh area named `<purpose>-<pid>-<nanos>-...` (stale ones of the same purpose
    /// are swept first).
    pub fn new(store: &Store, purpose: &str) -> Result<Self> {
        let root = store.root().join(baton_format::layout::STAGING);
        fsutil::ensure_private_dir(&root)?;
        let prefix = format!("{purpose}-");
        leftovers::sweep(
            &root,
            &[leftovers::Rule {
                prefix: &prefix,
                pid_after_prefix: false,
                by_age: true,
            }],
        );
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = fsutil::private_temp_dir_in(
            &root,
            &format!("{prefix}{}-{nanos}-", std::process::id()),
        )?;
        Ok(StagingArea { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Move verified loose objects (storage name, staged file, stored length) from a staging
/// area into `objects/` with no-clobber renames, then fsync every directory that received
/// one. An object already here is freshened instead (gc's grace period starts again, SPEC
/// 13.3). Returns the objects and stored bytes published.
pub fn publish_staged(
    store: &Store,
    staged: impl IntoIterator<Item = (ObjectId, tempfile::TempPath, u64)>,
) -> Result<(u64, u64)> {
    publish_loose(store, staged, false)
}

/// `publish_staged`; `synced`: every file was fsynced already.
fn publish_loose(
    store: &Store,
    staged: impl IntoIterator<Item = (ObjectId, tempfile::TempPath, u64)>,
    synced: bool,
) -> Result<(u64, u64)> {
    let (mut objects, mut bytes) = (0, 0);
    let mut dirs = BTreeSet::new();
    for (id, path, stored_len) in staged {
        let dest = store.objects.path(&id);
        if store.objects.contains(&id) {
            if let Ok(file) = File::open(&dest) {
                let _ = file.set_modified(SystemTime::now());
            }
            continue;
        }
        let fanout = dest.parent().unwrap_or(store.objects.dir()).to_path_buf();
        fsutil::ensure_private_dir(&fanout)?;
        // Durable before it is renamed into place (SPEC 12.1).
        if !synced {
            File::open(&path)
                .and_then(|f| f.sync_all())
                .ctx("cannot fsync", &path)?;
        }
        match path.persist_noclobber(&dest) {
            Ok(()) => {
                objects += 1;
                bytes += stored_len;
                dirs.insert(fanout);
            }
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io("cannot publish", &dest, e.error)),
        }
    }
    for dir in dirs {
        fsutil::fsync_dir(&dir)?;
    }
    Ok((objects, bytes))
}

/// How a local ref related to the received tip, and what `fast_forward` did about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Forward {
    /// The ref was empty: it now names theirs.
    Initial,
    /// Theirs descends from ours: the ref moved to theirs.
    FastForward,
    /// The ref already named theirs.
    UpToDate,
    /// Ours descends from theirs: nothing to do.
    LocalAhead,
}

impl Forward {
    /// The word reports carry (`outcome` in pull, clone and import reports).
    pub fn as_str(self) -> &'static str {
        match self {
            Forward::Initial => "initial",
            Forward::FastForward => "fast-forward",
            Forward::UpToDate => "up-to-date",
            Forward::LocalAhead => "local-ahead",
        }
    }
}

/// Move `name` to `theirs` if that is a fast-forward (or the ref is empty), under the
/// store lock and by compare-and-swap; `diverged(ours)` makes the error when neither
/// side descends from the other (callers say where theirs came from and what to do).
/// Returns what the ref was before and how it related.
pub fn fast_forward(
    store: &Store,
    name: &RefName,
    theirs: ObjectId,
    reason: &MoveReason,
    diverged: impl FnOnce(ObjectId) -> Error,
) -> Result<(Option<ObjectId>, Forward)> {
    let lock = store.lock()?;
    let ours = store.read_ref(name)?;
    let forward = match ours {
        None => Forward::Initial,
        Some(o) if o == theirs => Forward::UpToDate,
        // The usual answer first: each walk goes down from its second argument and
        // stops where it meets the first, so a bundle on top of ours costs one step;
        // asking the other way first walked the whole local history.
        Some(o) if store.is_ancestor(&o, &theirs)? => Forward::FastForward,
        Some(o) if store.is_ancestor(&theirs, &o)? => Forward::LocalAhead,
        Some(o) => return Err(diverged(o)),
    };
    if matches!(forward, Forward::Initial | Forward::FastForward) {
        store.update_ref_locked(&lock, name, Expect::Value(ours), Some(theirs), reason)?;
    }
    Ok((ours, forward))
}
