//! `gc --target`: merging a remote store's packs so that a hub that receives one pack
//! per push keeps few of them (SPEC 17.1). The merged pack holds every object of every
//! pack it replaces, each checked as a read checks it, and is published before the
//! first of them is deleted: concurrent pushers, readers, merges and a kill at any
//! instant leave every object readable.

use std::collections::HashSet;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use indicatif::ProgressBar;
use serde::Serialize;

use super::push_parts::transport_err as transport;
use super::remote_store;
use baton_error::{Error, ErrorKind, IoContext, Result};
use baton_format::ObjectId;
use baton_format::layout::Kind;
use baton_format::pack::PackEntry;
use baton_store::Store;
use baton_store::packs::{PackWriter, pack_file_name, read_index};
use baton_store::repack::{RepackMode, choose};
use baton_transport::Published;
use baton_transport::backend::BackendExt;

#[derive(Debug, Default, Serialize)]
pub struct CompactReport {
    pub packs_before: u64,
    pub packs_merged: u64,
    pub packs_after: u64,
    /// Objects in the new pack.
    pub objects: u64,
    /// Bytes of the new pack.
    pub bytes: u64,
    /// Bytes of the packs it replaced (downloaded to check and copy them).
    pub bytes_read: u64,
    /// The new pack, when a merge happened.
    pub pack: Option<ObjectId>,
    /// Packs chosen that were gone before they were deleted here (another merge).
    pub packs_already_gone: u64,
    pub dry_run: bool,
}

/// Merge packs of the store at `remote` (`mode`: geometrically, or every one into one).
/// Nothing is deleted unless the new pack is published; a pack that fails its check
/// stops the merge before anything is published.
pub fn compact(
    store: &Store,
    remote: &mut dyn BackendExt,
    mode: RepackMode,
    dry_run: bool,
    progress: &ProgressBar,
) -> Result<CompactReport> {
    let state = remote_store::read_existing_state(store, remote)?;
    let lens: Vec<u64> = state.packs.iter().map(|(_, e)| e.size).collect();
    let chosen = choose(&lens, mode);
    let mut report = CompactReport {
        packs_before: state.packs.len() as u64,
        packs_after: state.packs.len() as u64,
        dry_run,
        ..CompactReport::default()
    };
    report.bytes_read = chosen.iter().map(|&i| lens[i]).sum();
    if chosen.is_empty() || dry_run {
        report.packs_merged = chosen.len() as u64;
        return Ok(report);
    }
    if store.objects.envelope().is_locked() {
        return Err(Error::usage(
            "cannot merge the packs of an encrypted store without its key: each object is checked before it is copied",
        )
        .with_hint("give the age identity with --identity FILE (or BATON_IDENTITY)"));
    }
    progress.set_length(report.bytes_read);
    let packs: Vec<(ObjectId, String, u64)> = chosen
        .iter()
        .map(|&i| (state.packs[i].0, state.packs[i].1.name.clone(), lens[i]))
        .collect();
    let item = remote.begin_new(None)?;
    let written = write_merged(store, remote, &item, &packs, progress);
    let merged = match written {
        Ok(Some(merged)) => merged,
        Ok(None) => {
            remote.abandon(item);
            report.packs_already_gone = packs.len() as u64;
            return Ok(report);
        }
        Err(e) => {
            remote.abandon(item);
            return Err(e);
        }
    };
    let (pack_id, pack_len) = (merged.id, merged.len);
    let pack_name = pack_file_name(&pack_id);
    let published = match remote.publish_item(&item, &Kind::Pack, &pack_name) {
        Ok(published) => published,
        Err(e) => {
            remote.close_new(item, false);
            return Err(e);
        }
    };
    remote.close_new(item, published == Published::Done);
    if published == Published::Exists
        && !merged.replaced.iter().any(|(id, _)| *id == pack_id)
        && let Err(e) =
            super::push_parts::check_existing_pack(remote, &pack_id, &pack_name, pack_len)
    {
        return Err(e);
    }
    // Published (or there already, the same bytes): every object of the packs below is
    // readable from it before the first of them goes.
    let mut removed = 0u64;
    report.packs_already_gone = (packs.len() - merged.replaced.len()) as u64;
    let doomed: Vec<String> = merged
        .replaced
        .iter()
        .filter(|(id, _)| *id != pack_id)
        .map(|(_, name)| name.clone())
        .collect();
    for was_there in remote.delete_many(&Kind::Pack, &doomed)? {
        match was_there {
            true => removed += 1,
            false => report.packs_already_gone += 1,
        }
    }
    report.objects = merged.objects;
    report.bytes = pack_len;
    report.pack = Some(pack_id);
    report.packs_merged = merged.replaced.len() as u64;
    let existed = state.packs.iter().any(|(id, _)| *id == pack_id);
    report.packs_after =
        report.packs_before - removed - report.packs_already_gone + u64::from(!existed);
    Ok(report)
}

/// Download each of `packs` (id, name, size) whole, check it (its bytes hash to its
/// name, its index is valid, each object decodes to its name), and stream every object
/// once into the pack begun as `item`. `None`: fewer than two of them were still there
/// (another merge took the rest), nothing worth merging.
fn write_merged(
    store: &Store,
    remote: &mut dyn BackendExt,
    item: &baton_transport::backend::NewItem,
    packs: &[(ObjectId, String, u64)],
    progress: &ProgressBar,
) -> Result<Option<Merged>> {
    let copies = download_checked(store, remote, packs, progress)?;
    if copies.len() < 2 {
        return Ok(None);
    }
    let mut upload = remote.upload_with(item, &[])?;
    upload.expect_len(packs.iter().map(|p| p.2).sum());
    let mut writer =
        PackWriter::new(&mut *upload).map_err(|e| transport("cannot upload pack", e))?;
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut buf = Vec::new();
    for (_, name, file, entries) in &copies {
        for entry in entries {
            if !seen.insert(entry.id) {
                continue;
            }
            buf.resize(entry.length as usize, 0);
            file.read_exact_at(&mut buf, entry.offset)
                .ctx("cannot read", store.root())?;
            store
                .objects
                .decode_named_bytes(&entry.id, &buf, &mut std::io::sink())
                .map_err(|e| refuse(name, "the remote", e.message))?;
            writer
                .add(entry.id, &buf)
                .map_err(|e| transport("cannot upload pack", e))?;
        }
    }
    let (pack_id, pack_len, _, _) = writer
        .finish()
        .map_err(|e| transport("cannot upload pack", e))?;
    let receipt = upload.finish(&[])?;
    super::push_parts::check_staged_len(receipt.size, pack_len)?;
    Ok(Some(Merged {
        id: pack_id,
        len: pack_len,
        objects: seen.len() as u64,
        replaced: copies
            .into_iter()
            .map(|(id, name, _, _)| (id, name))
            .collect(),
    }))
}

/// The pack `write_merged` wrote, and the packs (id, name) it holds every object of.
struct Merged {
    id: ObjectId,
    len: u64,
    objects: u64,
    replaced: Vec<(ObjectId, String)>,
}

fn refuse(pack: &str, remote: &str, why: String) -> Error {
    Error::integrity(format!(
        "refusing to merge packs: pack {pack} on {remote} is damaged: {why}"
    ))
    .with_hint("nothing was deleted; run 'baton verify' on a clone of the target, and push a healthy copy of what it lacks")
}

/// Packs up to this size are read many at a time (one batch of requests over SFTP,
/// concurrent GETs on S3: a hub's packs are mostly one small push each); larger ones
/// one by one, streamed.
const BATCHED_PACK: u64 = 1 << 20;
/// Bytes of small packs asked for in one batch.
const BATCH_BYTES: u64 = 32 << 20;

/// A pack downloaded and checked: id, name, its bytes in an unnamed temp file (a kill
/// leaves nothing behind), its index.
type Copy = (ObjectId, String, std::fs::File, Vec<PackEntry>);

/// Each of `packs` (id, name, size) still there, downloaded and checked: its bytes hash
/// to its name and its index is valid. A pack gone since the listing was merged by
/// another `gc --target`: its objects are in the pack that merge published first, and
/// it is not this merge's to delete, so it is left out.
fn download_checked(
    store: &Store,
    remote: &mut dyn BackendExt,
    packs: &[(ObjectId, String, u64)],
    progress: &ProgressBar,
) -> Result<Vec<Copy>> {
    let mut copies = Vec::with_capacity(packs.len());
    let mut rest = packs;
    while let Some(((id, name, size), after)) = rest.split_first() {
        if *size > BATCHED_PACK {
            let mut file = temp_file(store)?;
            let mut sink = Hashing {
                file: &mut file,
                hasher: blake3::Hasher::new(),
                progress,
            };
            match remote.read_sized(&Kind::Pack, name, *size, &mut sink) {
                Ok(()) => {}
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let got = ObjectId::from_hash(sink.hasher.finalize());
            copies.push(checked(store, remote, (id, name, *size), file, got)?);
            rest = after;
            continue;
        }
        let mut batch = 0;
        let mut bytes = 0;
        while batch < rest.len() && rest[batch].2 <= BATCHED_PACK && bytes < BATCH_BYTES {
            bytes += rest[batch].2;
            batch += 1;
        }
        let (now, after) = rest.split_at(batch);
        let items: Vec<(Kind, String)> = now.iter().map(|p| (Kind::Pack, p.1.clone())).collect();
        let (read, _) = remote.read_and_list(&items, &[], BATCHED_PACK)?;
        for ((id, name, size), got) in now.iter().zip(read) {
            let Some(got) = got else {
                continue;
            };
            progress.inc(got.len() as u64);
            let mut file = temp_file(store)?;
            file.write_all(&got).ctx("cannot write", store.root())?;
            let hash = ObjectId::of(&got);
            copies.push(checked(store, remote, (id, name, *size), file, hash)?);
        }
        rest = after;
    }
    Ok(copies.into_iter().flatten().collect())
}

fn temp_file(store: &Store) -> Result<std::fs::File> {
    tempfile::tempfile_in(store.root()).ctx("cannot create a temp file in", store.root())
}

/// A downloaded pack whose bytes hash to `got`, checked against its name and its index
/// read; `None` when nothing arrived (gone since the listing).
fn checked(
    store: &Store,
    remote: &dyn BackendExt,
    (id, name, size): (&ObjectId, &String, u64),
    mut file: std::fs::File,
    got: ObjectId,
) -> Result<Option<Copy>> {
    let len = file
        .seek(SeekFrom::End(0))
        .ctx("cannot read", store.root())?;
    if len == 0 {
        return Ok(None);
    }
    if got != *id || len != size {
        return Err(refuse(
            name,
            &remote.describe(),
            format!("its {len} bytes hash to {got}"),
        ));
    }
    file.seek(SeekFrom::Start(0))
        .ctx("cannot read", store.root())?;
    let entries =
        read_index(&mut file, size).map_err(|e| refuse(name, &remote.describe(), e.message))?;
    Ok(Some((*id, name.clone(), file, entries)))
}

/// A download written to a temp file and hashed on the way.
struct Hashing<'a> {
    file: &'a mut std::fs::File,
    hasher: blake3::Hasher,
    progress: &'a ProgressBar,
}

impl Write for Hashing<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.progress.inc(n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}
