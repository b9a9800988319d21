//! Pack rollup: merging packs so that their number stays small however many saves,
//! pulls and pushes made them (SPEC 7 "Merging packs", 13.3, 17).
//!
//! A merge writes one new pack holding every object of the packs it replaces (reachable
//! or not: a concurrent writer may have deduplicated against any of them), each object
//! decoded and rehashed on the way, makes it durable (file and directory fsynced), and
//! only then unlinks the packs it replaces; all of it under the store lock. A reader that
//! listed a pack that then vanished re-lists the packs and retries (`Objects`).
//!
//! `gc` merges every pack into one; after a save or a pull that leaves more than
//! `AUTO_MAX_PACKS` packs, `auto_repack` merges the smallest ones geometrically (like
//! `git repack --geometric=2`): each remaining pack is at least twice the size of all
//! smaller ones together, so there are O(log n) packs and each byte is copied O(log n)
//! times over the store's life.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use serde::Serialize;

use super::packs::{self, PackWriter, pack_file_name, pack_name_id};
use super::{Store, StoreLock, fsutil};
use baton_error::{Error, IoContext, Result};
use baton_format::ObjectId;

/// A save or pull that leaves more packs than this merges some (`auto_repack`).
pub const AUTO_MAX_PACKS: usize = 16;
/// Packs left at most after an automatic merge.
const AUTO_TARGET_PACKS: usize = AUTO_MAX_PACKS / 2;
/// Geometric factor: a pack stays unmerged only if it is at least this many times the
/// size of all the smaller packs together.
const FACTOR: u64 = 2;

/// Which packs to merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepackMode {
    /// Every pack into one (`gc`).
    All,
    /// The smallest packs, geometrically, down to at most `AUTO_TARGET_PACKS`.
    Geometric,
}

#[derive(Debug, Default, Serialize)]
pub struct RepackReport {
    pub packs_before: u64,
    pub packs_merged: u64,
    pub packs_after: u64,
    /// Objects in the new pack.
    pub objects: u64,
    /// Bytes of the new pack.
    pub bytes: u64,
    /// The new pack, when a merge happened.
    pub pack: Option<ObjectId>,
    /// Why nothing was merged in a store that has packs to merge (a locked encrypted
    /// store cannot check what it would copy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// The packs in `packs/`: id, path and length, sorted by name.
fn list(dir: &std::path::Path) -> Result<Vec<(ObjectId, PathBuf, u64)>> {
    let mut out = Vec::new();
    if !dir.exists() {
        return Ok(out);
    }
    for name in fsutil::read_dir_sorted(dir)? {
        let Some(id) = pack_name_id(&name) else {
            continue;
        };
        let path = dir.join(&name);
        match fs::metadata(&path) {
            Ok(meta) => out.push((id, path, meta.len())),
            // Gone since the listing: nothing to merge (only the lock holder deletes).
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("cannot stat", &path, e)),
        }
    }
    Ok(out)
}

/// How many packs `dir` holds: one directory listing, no stat and no open.
pub(crate) fn count_packs(dir: &std::path::Path) -> Result<usize> {
    match fs::read_dir(dir) {
        Ok(rd) => {
            let mut n = 0;
            for entry in rd {
                let entry = entry.ctx("cannot list", dir)?;
                n += usize::from(pack_name_id(&entry.file_name().to_string_lossy()).is_some());
            }
            Ok(n)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(Error::io("cannot list", dir, e)),
    }
}

/// Which of `lens` (pack lengths) to merge, as indexes: none, or at least two.
pub fn choose(lens: &[u64], mode: RepackMode) -> Vec<usize> {
    let mut order: Vec<usize> = (0..lens.len()).collect();
    if mode == RepackMode::All {
        return if order.len() >= 2 { order } else { Vec::new() };
    }
    order.sort_by_key(|&i| (lens[i], i));
    // The smallest packs up to the last one that is not at least FACTOR times the sum
    // of all those below it: after the merge every pack left is.
    let mut split = 0;
    let mut sum = 0u64;
    for (k, &i) in order.iter().enumerate() {
        if k > 0 && lens[i] < sum.saturating_mul(FACTOR) {
            split = k + 1;
        }
        sum = sum.saturating_add(lens[i]);
    }
    // And enough of them that at most AUTO_TARGET_PACKS remain.
    let n = order.len();
    if n > AUTO_TARGET_PACKS {
        split = split.max(n - AUTO_TARGET_PACKS + 1);
    }
    if split < 2 {
        return Vec::new();
    }
    order.truncate(split);
    order
}

impl Store {
    /// After a save or pull: merge packs when there are more than `AUTO_MAX_PACKS`
    /// (counted with one directory listing, no lock taken when there are not).
    pub fn auto_repack(&self) -> Result<Option<RepackReport>> {
        if count_packs(self.objects.packs_dir())? <= AUTO_MAX_PACKS {
            return Ok(None);
        }
        let lock = self.lock()?;
        self.repack(&lock, RepackMode::Geometric).map(Some)
    }

    /// Merge packs (SPEC 7): the new pack is durable before any pack it replaces is
    /// unlinked. Every object copied is decoded and rehashed first, so a damaged pack
    /// stops the merge (nothing is deleted) instead of spreading.
    pub fn repack(&self, _lock: &StoreLock, mode: RepackMode) -> Result<RepackReport> {
        let dir = self.objects.packs_dir().to_path_buf();
        let listed = list(&dir)?;
        let lens: Vec<u64> = listed.iter().map(|p| p.2).collect();
        let chosen = choose(&lens, mode);
        let mut report = RepackReport {
            packs_before: listed.len() as u64,
            packs_after: listed.len() as u64,
            ..RepackReport::default()
        };
        if chosen.is_empty() {
            return Ok(report);
        }
        let envelope = self.objects.envelope();
        if envelope.is_locked() {
            report.skipped = Some("the store is encrypted and locked".into());
            return Ok(report);
        }
        fsutil::ensure_private_dir(&dir)?;
        let mut temp = fsutil::temp_file_in(&dir)?;
        let mut seen: HashSet<ObjectId> = HashSet::new();
        let id = {
            let sink = io::BufWriter::with_capacity(1 << 20, temp.as_file_mut());
            let mut writer = PackWriter::new(sink).ctx("cannot write", &dir)?;
            let mut buf = Vec::new();
            for &i in &chosen {
                let (_, path, _) = &listed[i];
                let index = packs::load_index(path)?;
                let file = File::open(path).ctx_in_store("cannot open pack", path)?;
                for entry in &index.entries {
                    if !seen.insert(entry.id) {
                        continue;
                    }
                    buf.resize(entry.length as usize, 0);
                    file.read_exact_at(&mut buf, entry.offset)
                        .ctx_in_store("cannot read pack", path)?;
                    super::codec::decode_named(envelope, &entry.id, &buf[..], &mut io::sink())
                        .map_err(|e| {
                            Error::integrity(format!(
                                "refusing to merge packs: in pack {}: {}",
                                index.id, e.message
                            ))
                            .with_hint("run 'baton verify', then 'baton pull --repair [TARGET]'")
                        })?;
                    writer.add(entry.id, &buf).ctx("cannot write", &dir)?;
                }
            }
            let (id, len, _, mut sink) = writer.finish().ctx("cannot write", &dir)?;
            sink.flush().ctx("cannot write", &dir)?;
            report.bytes = len;
            id
        };
        temp.as_file().sync_all().ctx("cannot fsync", temp.path())?;
        let dest = dir.join(pack_file_name(&id));
        match temp.persist_noclobber(&dest) {
            Ok(_) => {}
            // The same bytes already there (a merge of packs one of which held them all).
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io("cannot publish", &dest, e.error)),
        }
        // Durable before anything it replaces goes.
        fsutil::fsync_dir(&dir)?;
        let mut removed = 0u64;
        for &i in &chosen {
            let (old, path, _) = &listed[i];
            if *old == id {
                continue;
            }
            match fs::remove_file(path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("cannot remove merged pack", path, e)),
            }
        }
        fsutil::fsync_dir(&dir)?;
        self.objects.refresh_packs();
        report.objects = seen.len() as u64;
        report.packs_merged = chosen.len() as u64;
        let existed = listed.iter().any(|(old, _, _)| *old == id);
        report.packs_after = report.packs_before - removed + u64::from(!existed);
        report.pack = Some(id);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store at `dir` with `n` packs of three blobs each; returns the blobs' contents.
    fn store_with_packs(dir: &std::path::Path, n: usize) -> (Store, Vec<Vec<u8>>) {
        let store = Store::init(dir).unwrap();
        let mut all = Vec::new();
        for p in 0..n {
            let mut pack = Vec::new();
            for k in 0..3 {
                let content = format!("blob {k} of pack {p}\n").into_bytes();
                let (_, name, stored) = store.objects.encode_stored(&content).unwrap();
                pack.push((name, stored));
                all.push(content);
            }
            pack.sort_by_key(|a| a.0);
            store.objects.write_pack(&pack).unwrap();
        }
        (store, all)
    }

    #[test]
    fn a_reader_that_listed_packs_before_a_merge_still_reads_every_object() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("store");
        let (writer, contents) = store_with_packs(&root, 6);
        let reader = Store::open(&root).unwrap();
        // The reader lists the packs and opens some of them (the first lookup), and
        // loads every whole index (as verify does).
        let first = ObjectId::of(&contents[0]);
        assert_eq!(
            reader.objects.get_bytes(&first, 1 << 20).unwrap(),
            contents[0]
        );
        assert_eq!(reader.objects.packs().unwrap().len(), 6);
        // A verify that listed every pack before the merge.
        let verifier = Store::open(&root).unwrap();
        assert_eq!(verifier.objects.packs().unwrap().len(), 6);
        let lock = writer.lock().unwrap();
        let report = writer.repack(&lock, RepackMode::All).unwrap();
        drop(lock);
        assert_eq!((report.packs_merged, report.packs_after), (6, 1));
        assert_eq!(report.objects, 18);
        // Every pack the reader listed is gone; it lists again and finds the new one.
        for content in &contents {
            let id = ObjectId::of(content);
            assert_eq!(&reader.objects.get_bytes(&id, 1 << 20).unwrap(), content);
        }
        let fresh = Store::open(&root).unwrap();
        assert_eq!(fresh.objects.packs().unwrap().len(), 1);
        // The verify checks the merged pack in place of the ones that vanished.
        let report = verifier.verify_all(&|_| {}).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.objects_checked, 18);
    }

    #[test]
    fn a_merge_keeps_unreachable_objects_and_refuses_a_damaged_pack() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("store");
        let (store, contents) = store_with_packs(&root, 3);
        // Damage one object's bytes in the second pack (by name order).
        let mut listed = list(store.objects.packs_dir()).unwrap();
        listed.sort_by(|a, b| a.1.cmp(&b.1));
        let (_, path, _) = &listed[1];
        let index = packs::load_index(path).unwrap();
        let mut bytes = fs::read(path).unwrap();
        let at = (index.entries[0].offset + index.entries[0].length / 2) as usize;
        bytes[at] ^= 0xff;
        fs::write(path, &bytes).unwrap();
        let lock = store.lock().unwrap();
        let err = store.repack(&lock, RepackMode::All).unwrap_err();
        assert!(
            err.message.contains("refusing to merge packs"),
            "{}",
            err.message
        );
        assert_eq!(count_packs(store.objects.packs_dir()).unwrap(), 3);
        // Restored, the merge keeps every object (none of them is reachable).
        bytes[at] ^= 0xff;
        fs::write(path, &bytes).unwrap();
        let report = store.repack(&lock, RepackMode::All).unwrap();
        assert_eq!(report.objects, 9);
        assert_eq!(count_packs(store.objects.packs_dir()).unwrap(), 1);
        for content in &contents {
            assert!(store.objects.contains(&ObjectId::of(content)));
        }
    }

    #[test]
    fn geometric_choice_leaves_a_geometric_progression() {
        // Equal packs: all merge.
        assert_eq!(choose(&[10; 20], RepackMode::Geometric).len(), 20);
        // Already geometric: nothing to do.
        assert!(choose(&[1, 3, 9, 27, 81], RepackMode::Geometric).is_empty());
        // One big pack and small new ones: the small ones merge, the big one stays.
        let mut lens = vec![1_000_000];
        lens.extend([100; 10]);
        let chosen = choose(&lens, RepackMode::Geometric);
        assert_eq!(chosen.len(), 10);
        assert!(!chosen.contains(&0));
        // Never more than AUTO_TARGET_PACKS left, even from a geometric progression.
        let lens: Vec<u64> = (0..30).map(|k| 3u64.pow(k)).collect();
        let chosen = choose(&lens, RepackMode::Geometric);
        assert_eq!(lens.len() - chosen.len() + 1, AUTO_TARGET_PACKS);
        assert!(choose(&[5], RepackMode::All).is_empty());
        assert_eq!(choose(&[5, 1], RepackMode::All).len(), 2);
    }
}
