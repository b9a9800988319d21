//! Pack files in `packs/`: reading their indexes, finding objects in them, writing them.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::format::ObjectId;
use crate::format::pack::{
    FOOTER_LEN, PACK_MAGIC, PackEntry, decode_footer, decode_index, encode_index,
};

pub const PACK_SUFFIX: &str = ".pack";

/// The index of one pack, loaded in memory.
pub struct PackIndex {
    pub id: ObjectId,
    pub path: PathBuf,
    pub entries: Vec<PackEntry>,
}

impl PackIndex {
    pub fn find(&self, id: &ObjectId) -> Option<&PackEntry> {
        self.entries
            .binary_search_by(|e| e.id.cmp(id))
            .ok()
            .map(|i| &self.entries[i])
    }
}

/// The pack id a file name claims (`<64 hex>.pack`), if it is one.
pub fn pack_name_id(name: &str) -> Option<ObjectId> {
    ObjectId::parse(name.strip_suffix(PACK_SUFFIX)?).ok()
}

pub fn pack_file_name(id: &ObjectId) -> String {
    format!("{id}{PACK_SUFFIX}")
}

/// Read and check the index of the pack at `path` (not the objects: `verify` does that).
pub fn load_index(path: &Path) -> Result<PackIndex> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let id = pack_name_id(name)
        .ok_or_else(|| Error::integrity(format!("{} is not a pack name", path.display())))?;
    let mut file = File::open(path).ctx("cannot open pack", path)?;
    let len = file.metadata().ctx("cannot stat", path)?.len();
    let context = |e: Error| Error::integrity(format!("pack {id}: {}", e.message));
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
    let io_err = |e: io::Error| Error::integrity(format!("cannot read pack: {e}"));
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

/// Writes a pack to any sink, hashing as it goes; `finish` appends index and footer and
/// returns the pack's id (the BLAKE3 of every byte written).
pub struct PackWriter<W: Write> {
    sink: W,
    hasher: blake3::Hasher,
    offset: u64,
    entries: Vec<PackEntry>,
}

impl<W: Write> PackWriter<W> {
    pub fn new(mut sink: W) -> io::Result<Self> {
        sink.write_all(PACK_MAGIC)?;
        let mut hasher = blake3::Hasher::new();
        hasher.update(PACK_MAGIC);
        Ok(PackWriter {
            sink,
            hasher,
            offset: PACK_MAGIC.len() as u64,
            entries: Vec::new(),
        })
    }

    /// Append one object's stored bytes.
    pub fn add(&mut self, id: ObjectId, stored: &[u8]) -> io::Result<()> {
        self.write_all(stored)?;
        self.entries.push(PackEntry {
            id,
            offset: self.offset - stored.len() as u64,
            length: stored.len() as u64,
        });
        Ok(())
    }

    /// Begin an object whose stored bytes arrive through `write`; close it with `end_object`.
    pub fn begin_object(&self) -> u64 {
        self.offset
    }

    pub fn end_object(&mut self, id: ObjectId, start: u64) {
        self.entries.push(PackEntry {
            id,
            offset: start,
            length: self.offset - start,
        });
    }

    pub fn len(&self) -> u64 {
        self.offset
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> &[PackEntry] {
        &self.entries
    }

    /// Append index and footer; returns the pack id, its length and the sink.
    pub fn finish(mut self) -> io::Result<(ObjectId, u64, Vec<PackEntry>, W)> {
        let tail = encode_index(self.entries.clone(), self.offset);
        self.write_all(&tail)?;
        let id = ObjectId::from_hash(self.hasher.finalize());
        Ok((id, self.offset, self.entries, self.sink))
    }
}

impl<W: Write> Write for PackWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.sink.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.offset += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sink.flush()
    }
}

/// What verifying one pack found.
#[derive(Default)]
pub struct PackCheck {
    pub objects: u64,
    pub bytes: u64,
    pub problems: Vec<String>,
}

/// Rehash a pack file against its name, then open, decompress and rehash every object
/// in it (index entries hold storage names). A locked encrypted store checks the pack's
/// hash only.
pub fn verify_pack(pack: &PackIndex, envelope: &super::envelope::Envelope) -> PackCheck {
    use rayon::prelude::*;
    let mut check = PackCheck::default();
    match File::open(&pack.path).and_then(|f| {
        let mut hasher = blake3::Hasher::new();
        hasher.update_reader(f)?;
        Ok(ObjectId::from_hash(hasher.finalize()))
    }) {
        Ok(actual) if actual == pack.id => {}
        Ok(actual) => check.problems.push(format!(
            "pack {} is corrupt: its bytes hash to {actual}",
            pack.id
        )),
        Err(e) => check
            .problems
            .push(format!("cannot read pack {}: {e}", pack.id)),
    }
    if envelope.is_locked() {
        check.objects = pack.entries.len() as u64;
        return check;
    }
    let results: Vec<Result<u64>> = pack
        .entries
        .par_iter()
        .map(|entry| {
            let mut file = File::open(&pack.path).ctx("cannot open pack", &pack.path)?;
            file.seek(SeekFrom::Start(entry.offset))
                .ctx("cannot read pack", &pack.path)?;
            super::objects::decode_named(
                envelope,
                &entry.id,
                file.take(entry.length),
                &mut io::sink(),
            )
            .map(|(_, size)| size)
        })
        .collect();
    for result in results {
        check.objects += 1;
        match result {
            Ok(bytes) => check.bytes += bytes,
            Err(e) => check
                .problems
                .push(format!("in pack {}: {}", pack.id, e.message)),
        }
    }
    check
}
