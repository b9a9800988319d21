//! Writing packs: `PackWriter` streams objects into any sink, hashing as it goes, and
//! `write_pack` / `publish_pack` put a finished pack in `packs/` durably.

use std::io::{self, Write};
use std::path::Path;

use baton_error::{Error, IoContext, Result};
use baton_format::ObjectId;
use baton_format::layout::pack_file_name;
use baton_format::pack::{PACK_MAGIC, PackEntry, encode_index};

/// Write `objects` (storage name, stored bytes) as one new pack in `dir`: temp file,
/// fsync, no-clobber publish as `<id>.pack`, fsync of `dir`. The bulk path for many
/// objects at once (one file and one fsync instead of one per object); a pack that
/// already exists under that name is the same bytes, so finding it is success.
pub fn write_pack(dir: &Path, objects: &[(ObjectId, Vec<u8>)]) -> Result<ObjectId> {
    super::fsutil::ensure_private_dir(dir)?;
    let mut temp = super::fsutil::temp_file_in(dir)?;
    let id = {
        let sink = io::BufWriter::with_capacity(
            1 << 20,
            super::write_behind::WriteBehind::new(temp.as_file_mut()),
        );
        let mut writer = PackWriter::new(sink).ctx("cannot write", dir)?;
        for (name, stored) in objects {
            writer.add(*name, stored).ctx("cannot write", dir)?;
        }
        let (id, _, _, mut sink) = writer.finish().ctx("cannot write", dir)?;
        sink.flush().ctx("cannot write", dir)?;
        id
    };
    publish_pack(dir, temp, &id)?;
    Ok(id)
}

/// Publish a complete pack written to `temp` (in `dir`) as `<id>.pack`: fsync, no-clobber
/// rename (a pack already there under that name is the same bytes), fsync of `dir`.
pub(crate) fn publish_pack(dir: &Path, temp: tempfile::NamedTempFile, id: &ObjectId) -> Result<()> {
    temp.as_file().sync_all().ctx("cannot fsync", temp.path())?;
    let dest = dir.join(pack_file_name(id));
    match temp.persist_noclobber(&dest) {
        Ok(_) => {}
        Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io("cannot publish", &dest, e.error)),
    }
    super::fsutil::fsync_dir(dir)
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

    /// Append index and footer; returns the pack id, its length, the entries as the
    /// index lists them (by id, each once) and the sink.
    pub fn finish(mut self) -> io::Result<(ObjectId, u64, Vec<PackEntry>, W)> {
        self.entries.sort_by_key(|e| e.id);
        self.entries.dedup_by(|a, b| a.id == b.id);
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
