//! The stored form of an object: its content as one zstd frame, passed through the
//! store's envelope (plain, or age-encrypted) on the way in and verified on the way out.
//! The envelope also decides the storage name an object is filed under.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

use super::Objects;
use crate::codec::{decode_named, decode_verified};
use crate::envelope::Envelope;
use crate::streams::{HashingReader, ProgressReader};
use baton_error::{Error, IoContext, Result};
use baton_format::ObjectId;

/// zstd level for new objects: level 3 (zstd's default) balances speed and size.
pub(crate) const ZSTD_LEVEL: i32 = 3;

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

impl Objects {
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

    /// `decode_named` of stored bytes in memory.
    pub fn decode_named_bytes(
        &self,
        name: &ObjectId,
        stored: &[u8],
        sink: &mut dyn Write,
    ) -> Result<(ObjectId, u64)> {
        crate::codec::decode_named_bytes(&self.envelope, name, stored, sink)
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

    /// The first bytes of an object's content, unverified: only a cheap filter before a
    /// verified read (e.g. "is this a bundle?").
    pub fn peek(&self, id: &ObjectId, len: usize) -> Option<Vec<u8>> {
        let opened = self.envelope.open(id, self.open_stored(id).ok()?).ok()?;
        let decoder = zstd::Decoder::new(opened).ok()?;
        let mut head = Vec::with_capacity(len);
        decoder.take(len as u64).read_to_end(&mut head).ok()?;
        Some(head)
    }
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
