//! Pack files in `packs/`: reading their indexes, finding objects in them, verifying them
//! (writing: `pack_write`).

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::SystemTime;

use baton_error::{Error, ErrorKind, IoContext, Result};
use baton_format::ObjectId;
use baton_format::pack::{
    FOOTER_LEN, INDEX_ENTRY_LEN, PACK_MAGIC, PackEntry, decode_footer, decode_index,
};

pub(crate) use super::pack_verify::verify_pack;
pub(crate) use super::pack_write::publish_pack;
pub use super::pack_write::{PackWriter, write_pack};
pub use baton_format::layout::{PACK_SUFFIX, pack_file_name, pack_name_id};

/// The index of one pack, loaded in memory.
pub struct PackIndex {
    pub id: ObjectId,
    pub path: PathBuf,
    pub entries: Vec<PackEntry>,
}

impl PackIndex {
    pub fn find(&self, id: &ObjectId) -> Option<&PackEntry> {
        search_uniform(&self.entries, |e| &e.id, id)
            .ok()
            .map(|i| &self.entries[i])
    }
}

/// The first 8 bytes of `id` as a number: ids compare as these first (bytewise order is
/// big-endian order), so a search compares integers and calls `memcmp` only on a tie
/// (it was the largest cost of a re-save's 100,000 lookups).
fn prefix(id: &ObjectId) -> u64 {
    let bytes = id.as_bytes();
    u64::from_be_bytes([
        bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
    ])
}

/// `binary_search` of `name` in `items` (sorted by id), started where uniform ids put
/// it: the rank of an id among n uniform ones is within a few times sqrt(n) of
/// `n × id / 2^256`, so the search stays among neighbouring entries (a few cache lines)
/// instead of jumping across the whole array; a guess that does not bracket it falls
/// back to the whole array.
pub(crate) fn search_uniform<T>(
    items: &[T],
    id_of: impl Fn(&T) -> &ObjectId,
    name: &ObjectId,
) -> std::result::Result<usize, usize> {
    let key = prefix(name);
    let n = items.len();
    let (lo, hi) = uniform_window(n, key);
    let bracketed = (lo == 0 || by_id(id_of(&items[lo]), key, name).is_lt())
        && (hi == n || by_id(id_of(&items[hi - 1]), key, name).is_gt());
    if !bracketed {
        return items.binary_search_by(|item| by_id(id_of(item), key, name));
    }
    items[lo..hi]
        .binary_search_by(|item| by_id(id_of(item), key, name))
        .map(|i| i + lo)
        .map_err(|i| i + lo)
}

/// Where among `n` sorted uniform ids one with prefix `key` sits: around `n × key / 2^64`,
/// a few times sqrt(n) either way (the caller checks that the window brackets it).
fn uniform_window(n: usize, key: u64) -> (usize, usize) {
    let guess = ((u128::from(key) * n as u128) >> 64) as usize;
    let spread = 4 * (n.isqrt() + 4);
    (guess.saturating_sub(spread), (guess + spread).min(n))
}

/// The first position of `keys` (sorted) whose key is not below `key`, searched where
/// uniform keys put it, as [`search_uniform`] does, in an array of bare prefixes: 8 bytes
/// an entry, so that the neighbourhood searched is a few cache lines, not a few pages.
fn lower_bound_uniform(keys: &[u64], key: u64) -> usize {
    let n = keys.len();
    let (lo, hi) = uniform_window(n, key);
    let bracketed = (lo == 0 || keys[lo] < key) && (hi == n || keys[hi - 1] >= key);
    if !bracketed {
        return keys.partition_point(|&k| k < key);
    }
    lo + keys[lo..hi].partition_point(|&k| k < key)
}

/// Every entry of every pack, sorted by storage name, and the names' prefixes apart.
struct GlobalTable {
    prefixes: Vec<u64>,
    entries: Vec<(ObjectId, u32, PackEntry)>,
}

impl GlobalTable {
    fn find(&self, name: &ObjectId) -> Option<&(ObjectId, u32, PackEntry)> {
        let key = prefix(name);
        let from = lower_bound_uniform(&self.prefixes, key);
        self.prefixes[from..]
            .iter()
            .take_while(|&&k| k == key)
            .zip(&self.entries[from..])
            .map(|(_, entry)| entry)
            .find(|(id, _, _)| id == name)
    }
}

/// How `candidate` orders against `id` (whose [`prefix`] is `key`).
fn by_id(candidate: &ObjectId, key: u64, id: &ObjectId) -> std::cmp::Ordering {
    prefix(candidate).cmp(&key).then_with(|| candidate.cmp(id))
}

/// Whether `e` says that a listed pack file is gone: a merge (SPEC 7) unlinked it after
/// its objects were durable in a new pack, so listing the packs again finds them.
pub fn vanished(e: &Error) -> bool {
    e.source
        .as_ref()
        .and_then(|s| s.downcast_ref::<io::Error>())
        .is_some_and(|io| io.kind() == io::ErrorKind::NotFound)
}

/// Read and check the index of the pack at `path` (not the objects: `verify` does that).
pub(crate) fn load_index(path: &Path) -> Result<PackIndex> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let id = pack_name_id(name)
        .ok_or_else(|| Error::integrity(format!("{} is not a pack name", path.display())))?;
    let mut file = File::open(path).ctx_in_store("cannot open pack", path)?;
    let len = file.metadata().ctx("cannot stat", path)?.len();
    let context = |e: Error| e.recast(ErrorKind::Integrity, format!("pack {id}"));
    let entries = read_index(&mut file, len).map_err(context)?;
    Ok(PackIndex {
        id,
        path: path.to_path_buf(),
        entries,
    })
}

/// Read the footer and index from any seekable pack of `len` bytes.
pub fn read_index<R: Read + Seek>(reader: &mut R, len: u64) -> Result<Vec<PackEntry>> {
    if len < PACK_MAGIC.len() as u64 + FOOTER_LEN {
        return Err(Error::integrity("pack is too short"));
    }
    let io_err = |e: io::Error| Error::integrity(format!("cannot read pack: {e}")).with_source(e);
    let mut magic = [0u8; 16];
    reader.seek(SeekFrom::Start(0)).map_err(io_err)?;
    reader.read_exact(&mut magic).map_err(io_err)?;
    if &magic != PACK_MAGIC {
        return Err(Error::integrity("not a baton pack (bad magic)"));
    }
    let mut footer = [0u8; FOOTER_LEN as usize];
    reader
        .seek(SeekFrom::Start(len - FOOTER_LEN))
        .map_err(io_err)?;
    reader.read_exact(&mut footer).map_err(io_err)?;
    let (count, index_offset) = decode_footer(&footer, len)?;
    let mut index = vec![0u8; (len - FOOTER_LEN - index_offset) as usize];
    reader.seek(SeekFrom::Start(index_offset)).map_err(io_err)?;
    reader.read_exact(&mut index).map_err(io_err)?;
    let entries = decode_index(&index, index_offset)?;
    if entries.len() as u64 != count {
        return Err(Error::integrity("pack index count does not match"));
    }
    Ok(entries)
}

/// Every pack in `dir`, sorted by name; stray names are skipped (verify reports them).
pub fn load_all(dir: &Path) -> Result<Vec<PackIndex>> {
    let mut packs = Vec::new();
    let names = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect::<Vec<_>>(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(packs),
        Err(e) => return Err(Error::io("cannot list", dir, e)),
    };
    let mut names: Vec<String> = names
        .into_iter()
        .filter(|n| pack_name_id(n).is_some())
        .collect();
    names.sort();
    for name in names {
        packs.push(load_index(&dir.join(name))?);
    }
    Ok(packs)
}

/// Index entries read per request when a pack's index is searched on disk.
const WINDOW: u64 = 512;
/// Searches of one pack after which its whole index is read into memory: a command that
/// looks up many objects (verify, save of a large tree) pays for the index once.
const LOAD_AFTER: u32 = 64;
/// A set of at most this many packs keeps each pack's descriptor open once it is opened,
/// so that every index read is one `pread` (a handoff looks its few objects up in every
/// pack, which reopened each pack for each lookup); a larger set (a store not merged in
/// a long time) reopens them, so as never to hold a descriptor per pack.
const KEEP_OPEN_PACKS: usize = 64;

/// One pack opened for lookups. Opening reads its magic and footer only; index entries
/// are read on demand with positioned reads, so a lookup costs a read or two whatever the
/// pack's size (ids are uniform hashes, so the entry's position is predictable). No file
/// descriptor is kept beyond the first read: a store may hold more packs than a process
/// may open files.
pub(crate) struct LazyPack {
    pub id: ObjectId,
    pub path: PathBuf,
    /// The descriptor opened to read the footer, handed to the first index read.
    spare: std::sync::Mutex<Option<File>>,
    /// The descriptor every index read uses, in a set of at most [`KEEP_OPEN_PACKS`].
    kept: Option<File>,
    count: u64,
    index_offset: u64,
    searches: AtomicU32,
    loaded: OnceLock<Vec<PackEntry>>,
}

impl LazyPack {
    /// Open the pack at `path`, `len` bytes long (from its listing), keeping its
    /// descriptor for every read when `keep`.
    fn open(id: ObjectId, path: PathBuf, len: u64, keep: bool) -> Result<LazyPack> {
        let corrupt = |why: String| Error::integrity(format!("pack {id}: {why}"));
        let file = File::open(&path).ctx_in_store("cannot open pack", &path)?;
        if len < PACK_MAGIC.len() as u64 + FOOTER_LEN {
            return Err(corrupt("pack is too short".into()));
        }
        let mut magic = [0u8; 16];
        file.read_exact_at(&mut magic, 0)
            .ctx_in_store("cannot read pack", &path)?;
        if &magic != PACK_MAGIC {
            return Err(corrupt("not a baton pack (bad magic)".into()));
        }
        let mut footer = [0u8; FOOTER_LEN as usize];
        file.read_exact_at(&mut footer, len - FOOTER_LEN)
            .ctx_in_store("cannot read pack", &path)?;
        let (count, index_offset) = decode_footer(&footer, len).map_err(|e| corrupt(e.message))?;
        let (spare, kept) = if keep {
            (None, Some(file))
        } else {
            (Some(file), None)
        };
        Ok(LazyPack {
            id,
            path,
            spare: std::sync::Mutex::new(spare),
            kept,
            count,
            index_offset,
            searches: AtomicU32::new(0),
            loaded: OnceLock::new(),
        })
    }

    /// Entries `start..end` of the index, checked as far as they go (in bounds, strictly
    /// sorted); a full `verify` checks the whole index.
    fn read_entries(&self, start: u64, end: u64) -> Result<Vec<PackEntry>> {
        let mut bytes = vec![0u8; ((end - start) * INDEX_ENTRY_LEN) as usize];
        let at = self.index_offset + start * INDEX_ENTRY_LEN;
        match &self.kept {
            Some(file) => file.read_exact_at(&mut bytes, at),
            None => {
                let spare = self.spare.lock().ok().and_then(|mut f| f.take());
                spare
                    .map_or_else(|| File::open(&self.path), Ok)
                    .and_then(|file| file.read_exact_at(&mut bytes, at))
            }
        }
        .ctx_in_store("cannot read pack", &self.path)?;
        decode_index(&bytes, self.index_offset)
            .map_err(|e| Error::integrity(format!("pack {}: {}", self.id, e.message)))
    }

    /// The position of the first entry whose id is not below `target`, and that entry.
    fn lower_bound(&self, target: &ObjectId) -> Result<(u64, Option<PackEntry>)> {
        if let Some(all) = self.loaded.get() {
            let i = all.partition_point(|e| e.id < *target);
            return Ok((i as u64, all.get(i).copied()));
        }
        // A small index is read whole by the search anyway: kept from the first one.
        if self.count <= WINDOW || self.searches.fetch_add(1, Ordering::Relaxed) >= LOAD_AFTER {
            let all = self.read_entries(0, self.count)?;
            let _ = self.loaded.set(all);
            return self.lower_bound(target);
        }
        // The answer lies in lo..=hi; `upper` is the entry at hi once it has been read.
        let (mut lo, mut hi) = (0u64, self.count);
        let mut upper: Option<PackEntry> = None;
        let mut first = true;
        while hi - lo > WINDOW {
            let (start, end) = if first {
                // Ids are uniform: the entry sits near count * (id / 2^256), give or take
                // a few times sqrt(count).
                let mut head = [0u8; 8];
                head.copy_from_slice(&target.as_bytes()[..8]);
                let key = u64::from_be_bytes(head) as u128;
                let center = ((key * self.count as u128) >> 64) as u64;
                let half = (self.count.isqrt() * 2 + 16).min(4096);
                (center.saturating_sub(half).max(lo), (center + half).min(hi))
            } else {
                let mid = lo + (hi - lo) / 2;
                (mid, mid + 1)
            };
            first = false;
            if start >= end {
                continue;
            }
            let entries = self.read_entries(start, end)?;
            let (Some(head), Some(tail)) = (entries.first(), entries.last()) else {
                continue;
            };
            if *target <= head.id {
                hi = start;
                upper = Some(*head);
            } else if *target > tail.id {
                lo = end;
            } else {
                let i = entries.partition_point(|e| e.id < *target);
                return Ok((start + i as u64, entries.get(i).copied()));
            }
        }
        let entries = if lo < hi {
            self.read_entries(lo, hi)?
        } else {
            Vec::new()
        };
        let i = entries.partition_point(|e| e.id < *target);
        if let Some(entry) = entries.get(i) {
            return Ok((lo + i as u64, Some(*entry)));
        }
        if hi >= self.count {
            return Ok((hi, None));
        }
        let entry = match upper {
            Some(entry) => entry,
            None => self.read_entries(hi, hi + 1)?[0],
        };
        Ok((hi, Some(entry)))
    }

    pub fn find(&self, name: &ObjectId) -> Result<Option<PackEntry>> {
        let (_, entry) = self.lower_bound(name)?;
        Ok(entry.filter(|e| e.id == *name))
    }

    /// Every id in the pack from `low` to `high` inclusive.
    fn ids_between(&self, low: &ObjectId, high: &ObjectId) -> Result<Vec<ObjectId>> {
        let (mut at, first) = self.lower_bound(low)?;
        let mut out = Vec::new();
        let Some(first) = first.filter(|e| e.id <= *high) else {
            return Ok(out);
        };
        out.push(first.id);
        at += 1;
        while at < self.count {
            let end = (at + WINDOW).min(self.count);
            let entries = match self.loaded.get() {
                Some(all) => all[at as usize..end as usize].to_vec(),
                None => self.read_entries(at, end)?,
            };
            for e in &entries {
                if e.id > *high {
                    return Ok(out);
                }
                out.push(e.id);
            }
            at = end;
        }
        Ok(out)
    }
}

/// The packs of a store, for lookups: listed once, each opened on first use, searched
/// newest first (new objects are in new packs), starting with the pack that answered the
/// previous lookup (one bundle's objects travel together in one pack).
pub(crate) struct PackSet {
    /// Id, path and length of each pack, newest first.
    packs: Vec<(ObjectId, PathBuf, u64)>,
    /// Each pack once opened, or why it could not be (message, and whether it vanished).
    opened: Vec<OnceLock<std::result::Result<LazyPack, (String, bool)>>>,
    last_hit: AtomicUsize,
    lookups: AtomicUsize,
    /// Every entry of every pack, sorted by storage name (first pack wins), built once a
    /// command has made `GLOBAL_AFTER` lookups: a walk of the whole history then costs
    /// one binary search per object instead of one per pack.
    global: OnceLock<GlobalTable>,
}

/// Lookups after which a `PackSet` reads every index into one sorted table.
const GLOBAL_AFTER: usize = 8192;

impl PackSet {
    /// List `dir`; stray names are skipped (verify reports them).
    pub fn list(dir: &Path) -> Result<PackSet> {
        let mut packs = Vec::new();
        match fs::read_dir(dir) {
            Ok(rd) => {
                for entry in rd {
                    let entry = entry.ctx("cannot list", dir)?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if let Some(id) = pack_name_id(&name) {
                        let path = entry.path();
                        let meta = fs::metadata(&path).ctx_in_store("cannot stat", &path)?;
                        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                        packs.push((mtime, id, path, meta.len()));
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("cannot list", dir, e)),
        }
        packs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let opened = packs.iter().map(|_| OnceLock::new()).collect();
        Ok(PackSet {
            packs: packs
                .into_iter()
                .map(|(_, id, path, len)| (id, path, len))
                .collect(),
            opened,
            last_hit: AtomicUsize::new(0),
            lookups: AtomicUsize::new(0),
            global: OnceLock::new(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.packs.is_empty()
    }

    fn pack(&self, i: usize) -> Result<&LazyPack> {
        let (id, path, len) = &self.packs[i];
        self.opened[i]
            .get_or_init(|| {
                let keep = self.packs.len() <= KEEP_OPEN_PACKS;
                LazyPack::open(*id, path.clone(), *len, keep).map_err(|e| {
                    let gone = vanished(&e);
                    (e.message, gone)
                })
            })
            .as_ref()
            .map_err(|(message, gone)| {
                let e = Error::integrity(message.clone());
                if *gone {
                    e.with_source(io::Error::from(io::ErrorKind::NotFound))
                } else {
                    e
                }
            })
    }

    /// Read every pack's index into one table sorted by storage name.
    fn build_global(&self) -> Result<GlobalTable> {
        let mut all = Vec::new();
        for i in 0..self.packs.len() {
            let pack = self.pack(i)?;
            let entries = match pack.loaded.get() {
                Some(entries) => entries.clone(),
                None => pack.read_entries(0, pack.count)?,
            };
            all.extend(entries.into_iter().map(|e| (e.id, i as u32, e)));
        }
        // Stable: for an id in several packs, the first pack in search order wins.
        all.sort_by_key(|(id, _, _)| *id);
        all.dedup_by_key(|(id, _, _)| *id);
        Ok(GlobalTable {
            prefixes: all.iter().map(|(id, _, _)| prefix(id)).collect(),
            entries: all,
        })
    }

    /// The pack holding storage name `name` and its entry there.
    pub fn find(&self, name: &ObjectId) -> Result<Option<(PathBuf, PackEntry)>> {
        if self.global.get().is_none()
            && self.lookups.fetch_add(1, Ordering::Relaxed) >= GLOBAL_AFTER
        {
            let built = self.build_global()?;
            let _ = self.global.set(built);
        }
        if let Some(all) = self.global.get() {
            return Ok(all
                .find(name)
                .map(|(_, pack, entry)| (self.packs[*pack as usize].1.clone(), *entry)));
        }
        let n = self.packs.len();
        let start = self
            .last_hit
            .load(Ordering::Relaxed)
            .min(n.saturating_sub(1));
        for k in 0..n {
            let i = (start + k) % n;
            let pack = self.pack(i)?;
            if let Some(entry) = pack.find(name)? {
                self.last_hit.store(i, Ordering::Relaxed);
                return Ok(Some((pack.path.clone(), entry)));
            }
        }
        Ok(None)
    }

    /// Every packed storage name starting with the hex digits `prefix` (lowercase, at
    /// most 64), each pack searched for the range only.
    pub(crate) fn with_prefix(&self, prefix: &str) -> Result<Vec<ObjectId>> {
        let pad = |c: char| {
            let mut hex = prefix.to_string();
            hex.extend(std::iter::repeat_n(c, 64usize.saturating_sub(prefix.len())));
            ObjectId::parse(&hex)
        };
        let (Ok(low), Ok(high)) = (pad('0'), pad('f')) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for i in 0..self.packs.len() {
            out.extend(self.pack(i)?.ids_between(&low, &high)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uniform_lower_bound_answers_as_partition_point() {
        for n in [0usize, 1, 2, 3, 17, 1000, 50_000] {
            let mut keys: Vec<u64> = (0..n)
                .map(|i| prefix(&ObjectId::of(format!("id {i}").as_bytes())))
                .collect();
            keys.sort();
            // Far from uniform, with runs of equal keys.
            let skewed: Vec<u64> = keys.iter().map(|k| (0x7f << 56) | (k >> 40)).collect();
            for set in [&keys, &skewed] {
                let probes = set
                    .iter()
                    .flat_map(|&k| [k, k.wrapping_add(1), k.wrapping_sub(1)]);
                for probe in probes.chain([0, u64::MAX, 0x7f << 56]) {
                    assert_eq!(
                        lower_bound_uniform(set, probe),
                        set.partition_point(|&k| k < probe),
                        "n {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_uniform_search_answers_as_a_binary_search() {
        for n in [0usize, 1, 2, 3, 17, 1000, 50_000] {
            let mut ids: Vec<ObjectId> = (0..n)
                .map(|i| ObjectId::of(format!("id {i}").as_bytes()))
                .collect();
            ids.sort();
            // And ids far from uniform: all in one narrow range.
            let mut skewed: Vec<ObjectId> = ids
                .iter()
                .map(|id| {
                    let mut b = *id.as_bytes();
                    b[..4].copy_from_slice(&[0x7f, 0, 0, 0]);
                    ObjectId::from_hash(blake3::Hash::from_bytes(b))
                })
                .collect();
            skewed.sort();
            skewed.dedup();
            for set in [&ids, &skewed] {
                let probes = set
                    .iter()
                    .copied()
                    .chain((0..200).map(|i| ObjectId::of(format!("absent {i}").as_bytes())));
                for probe in probes.chain([
                    ObjectId::from_hash(blake3::Hash::from_bytes([0; 32])),
                    ObjectId::from_hash(blake3::Hash::from_bytes([0xff; 32])),
                ]) {
                    assert_eq!(
                        search_uniform(set, |id| id, &probe),
                        set.binary_search(&probe),
                        "n {n}"
                    );
                }
            }
        }
    }

    /// A pack of `n` small objects in `dir`; returns the ids, sorted.
    fn pack_of(dir: &Path, n: u64, seed: u64) -> Vec<ObjectId> {
        let objects: Vec<(ObjectId, Vec<u8>)> = (0..n)
            .map(|i| {
                let content = format!("object {seed} {i}");
                let stored = zstd::bulk::compress(content.as_bytes(), 1).unwrap();
                (ObjectId::of(content.as_bytes()), stored)
            })
            .collect();
        write_pack(dir, &objects).unwrap();
        let mut ids: Vec<ObjectId> = objects.into_iter().map(|(id, _)| id).collect();
        ids.sort();
        ids
    }

    #[test]
    fn lazy_lookups_find_every_entry_and_nothing_else() {
        for n in [0u64, 1, 2, 10, 600, 5000] {
            let tmp = tempfile::tempdir().unwrap();
            let ids = pack_of(tmp.path(), n, n);
            let set = PackSet::list(tmp.path()).unwrap();
            assert!(!set.is_empty());
            let full = load_all(tmp.path()).unwrap();
            for (i, id) in ids.iter().enumerate() {
                let (_, entry) = set.find(id).unwrap().expect("packed");
                assert_eq!(Some(&entry), full[0].find(id), "{n}");
                // A fresh set searches on disk (a used one loads the whole index).
                if i % 5 == 0 {
                    let fresh = PackSet::list(tmp.path()).unwrap();
                    assert_eq!(fresh.find(id).unwrap().map(|(_, e)| e), Some(entry));
                    let absent = ObjectId::of(format!("absent {i}").as_bytes());
                    assert!(fresh.find(&absent).unwrap().is_none());
                }
            }
            for i in 0..200 {
                assert!(
                    set.find(&ObjectId::of(format!("absent {i}").as_bytes()))
                        .unwrap()
                        .is_none()
                );
            }
            // Every prefix of two hex digits lists exactly the ids that start with it.
            for byte in [0u8, 0x3f, 0x80, 0xff] {
                let prefix = format!("{byte:02x}");
                let want: Vec<ObjectId> = ids
                    .iter()
                    .filter(|id| id.to_hex().starts_with(&prefix))
                    .copied()
                    .collect();
                assert_eq!(set.with_prefix(&prefix).unwrap(), want, "{n} {prefix}");
            }
        }
    }

    #[test]
    fn lookups_search_every_pack() {
        let tmp = tempfile::tempdir().unwrap();
        let a = pack_of(tmp.path(), 50, 1);
        let b = pack_of(tmp.path(), 70, 2);
        let set = PackSet::list(tmp.path()).unwrap();
        for id in a.iter().chain(&b) {
            assert!(set.find(id).unwrap().is_some());
        }
        let any = set.with_prefix("").unwrap();
        assert_eq!(any.len(), 120);
        // Past GLOBAL_AFTER lookups the answers come from one merged table: the same.
        let full = load_all(tmp.path()).unwrap();
        for round in 0..(GLOBAL_AFTER / 120 + 2) {
            for id in a.iter().chain(&b) {
                let (path, entry) = set.find(id).unwrap().expect("packed");
                let pack = full.iter().find(|p| p.path == path).expect("a pack");
                assert_eq!(pack.find(id), Some(&entry), "round {round}");
            }
            let absent = ObjectId::of(format!("absent {round}").as_bytes());
            assert!(set.find(&absent).unwrap().is_none());
        }
        assert!(set.global.get().is_some());
    }
}
