//! Decoding stored objects: exactly one zstd frame, its declared and expected size, and
//! the BLAKE3 hash of the content (and, encrypted, the storage name it must derive).

use std::io::{self, Read, Write};

use crate::envelope::Envelope;
use crate::streams::HashingReader;
use baton_error::{Error, Result};
use baton_format::ObjectId;

const BUF_SIZE: usize = 256 << 10;

/// A zstd decompression context and an output buffer, kept per thread between objects:
/// making a context (its tables zeroed) and a zeroed buffer for every object was half
/// the CPU time of a clone of 100,000 small loose objects.
struct Reusable {
    context: zstd::zstd_safe::DCtx<'static>,
    buf: Vec<u8>,
}

thread_local! {
    /// This thread's spare [`Reusable`]; taken while a decode runs (a decode within a
    /// decode, through its sink, makes its own).
    static SPARE: std::cell::Cell<Option<Reusable>> = const { std::cell::Cell::new(None) };
}

fn take_reusable() -> io::Result<Reusable> {
    if let Some(spare) = SPARE.with(std::cell::Cell::take) {
        return Ok(spare);
    }
    let context = zstd::zstd_safe::DCtx::try_create()
        .ok_or_else(|| io::Error::other("cannot make a zstd decompression context"))?;
    Ok(Reusable {
        context,
        buf: vec![0u8; BUF_SIZE],
    })
}

pub(crate) fn hash_stream(reader: &mut impl Read) -> io::Result<(ObjectId, u64)> {
    let mut hashing = HashingReader::new(reader);
    io::copy(&mut hashing, &mut io::sink())?;
    Ok(hashing.finish())
}

/// Decompress stored bytes into `sink`, checking the frame, the size (when known) and
/// the hash. What reached `sink` is trustworthy only if this returns `Ok`.
pub fn decode_verified(
    id: &ObjectId,
    file: impl Read,
    expected_size: Option<u64>,
    sink: &mut dyn Write,
) -> Result<u64> {
    decode_checked(id, Some(id), file, expected_size, sink).map(|(_, size)| size)
}

/// Open stored bytes found under storage name `name` with `envelope`, decode them and
/// check that the content's id derives `name`. Returns the id and the content size.
pub fn decode_named(
    envelope: &Envelope,
    name: &ObjectId,
    stored: impl Read,
    sink: &mut dyn Write,
) -> Result<(ObjectId, u64)> {
    if !envelope.is_encrypted() {
        return decode_checked(name, Some(name), stored, None, sink);
    }
    let (id, size) = decode_checked(name, None, envelope.open(name, stored)?, None, sink)?;
    if envelope.name_of(&id) != *name {
        return Err(Error::integrity(format!(
            "object stored as {name} is misnamed: its content {id} has another storage name"
        ))
        .with_hint(
            "run 'baton verify', then 'baton pull --repair [TARGET]' to refetch it from a target",
        ));
    }
    Ok((id, size))
}

/// `decode_named` of stored bytes in memory (a plain store's decoded where they are).
pub fn decode_named_bytes(
    envelope: &Envelope,
    name: &ObjectId,
    stored: &[u8],
    sink: &mut dyn Write,
) -> Result<(ObjectId, u64)> {
    if envelope.is_encrypted() {
        return decode_named(envelope, name, stored, sink);
    }
    decode_checked_bytes(name, Some(name), stored, None, sink)
}

/// Decode one zstd frame, hashing it; with `expected`, the hash must equal it.
pub(crate) fn decode_checked(
    label: &ObjectId,
    expected: Option<&ObjectId>,
    file: impl Read,
    expected_size: Option<u64>,
    sink: &mut dyn Write,
) -> Result<(ObjectId, u64)> {
    let input =
        io::BufReader::with_capacity(zstd::zstd_safe::DCtx::in_size(), FrameHead::new(file));
    decode_input(label, expected, input, expected_size, sink)
}

/// `decode_checked` of stored bytes in memory: decoded where they are, not copied
/// into a read buffer first.
pub(crate) fn decode_checked_bytes(
    label: &ObjectId,
    expected: Option<&ObjectId>,
    stored: &[u8],
    expected_size: Option<u64>,
    sink: &mut dyn Write,
) -> Result<(ObjectId, u64)> {
    let head = stored[..stored.len().min(FRAME_HEADER_MAX)].to_vec();
    decode_input(
        label,
        expected,
        InMemory { rest: stored, head },
        expected_size,
        sink,
    )
}

fn decode_input(
    label: &ObjectId,
    expected: Option<&ObjectId>,
    input: impl FrameInput,
    expected_size: Option<u64>,
    sink: &mut dyn Write,
) -> Result<(ObjectId, u64)> {
    let id = label;
    let corrupt = |why: String| {
        Error::integrity(format!("object {id} is corrupt: {why}")).with_hint(
            "run 'baton verify', then 'baton pull --repair [TARGET]' to refetch it from a target",
        )
    };
    let mut reusable = take_reusable().map_err(|e| corrupt(e.to_string()))?;
    let result = decode_with(&mut reusable, input, expected_size, sink, &corrupt);
    SPARE.with(|spare| spare.set(Some(reusable)));
    let (actual, size, head, trailing) = result?;
    if let Some(expected) = expected_size
        && size != expected
    {
        return Err(corrupt(format!("{size} bytes, expected {expected}")));
    }
    // zstd's streaming decoder skips its own check of the declared content size when the
    // last block is empty (found by fuzzing), so a frame could read as valid on one path
    // and corrupt on another; check the declaration here.
    if let Ok(Some(declared)) = zstd::zstd_safe::get_frame_content_size(&head)
        && declared != size
    {
        return Err(corrupt(format!(
            "the zstd frame declares {declared} bytes and holds {size}"
        )));
    }
    if trailing {
        return Err(corrupt("bytes follow the zstd frame".to_string()));
    }
    if let Some(expected) = expected
        && actual != *expected
    {
        return Err(corrupt(format!("content hashes to {actual}")));
    }
    Ok((actual, size))
}

/// Decode one frame of `file` into `sink` with `reusable`'s context and buffer: the
/// content's hash and size, the frame header and whether bytes follow the frame.
fn decode_with(
    reusable: &mut Reusable,
    input: impl FrameInput,
    expected_size: Option<u64>,
    sink: &mut dyn Write,
    corrupt: &dyn Fn(String) -> Error,
) -> Result<(ObjectId, u64, Vec<u8>, bool)> {
    let Reusable { context, buf } = reusable;
    // Exactly one frame: stop at its end, then require that nothing follows it (no
    // second frame, no skippable frame, no garbage).
    let decoder = zstd::Decoder::with_context(input, context).single_frame();
    let limit = expected_size.map(|s| s + 1).unwrap_or(u64::MAX);
    let mut hashing = HashingReader::new(decoder.take(limit));
    loop {
        let n = match hashing.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(corrupt(e.to_string())),
        };
        sink.write_all(&buf[..n])
            .map_err(|e| Error::other(format!("cannot write output: {e}")).with_source(e))?;
    }
    // Checked after the size: a read cut short by `limit` stops inside the frame.
    let trailing = {
        let reader = hashing.inner.get_mut().get_mut();
        let rest = reader.fill_buf().map_err(|e| corrupt(e.to_string()))?;
        !rest.is_empty()
    };
    let head = hashing.inner.get_ref().get_ref().head();
    let (actual, size) = hashing.finish();
    Ok((actual, size, head, trailing))
}

/// What a frame is decoded from: buffered bytes, and the frame's first bytes (its header).
trait FrameInput: io::BufRead {
    fn head(&self) -> Vec<u8>;
}

impl<R: Read> FrameInput for io::BufReader<FrameHead<R>> {
    fn head(&self) -> Vec<u8> {
        self.get_ref().head.clone()
    }
}

/// Stored bytes in memory: what is left of them, and their first bytes.
struct InMemory<'a> {
    rest: &'a [u8],
    head: Vec<u8>,
}

impl Read for InMemory<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.rest.read(out)
    }
}

impl io::BufRead for InMemory<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        Ok(self.rest)
    }
    fn consume(&mut self, n: usize) {
        self.rest = &self.rest[n.min(self.rest.len())..];
    }
}

impl FrameInput for InMemory<'_> {
    fn head(&self) -> Vec<u8> {
        self.head.clone()
    }
}

/// Keeps the first bytes read through it: the zstd frame header, whose declared content
/// size is checked after decoding.
pub(crate) struct FrameHead<R> {
    inner: R,
    head: Vec<u8>,
}

/// The longest zstd frame header (magic, descriptor, window, dictionary id, size).
pub(crate) const FRAME_HEADER_MAX: usize = 18;

impl<R> FrameHead<R> {
    fn new(inner: R) -> Self {
        FrameHead {
            inner,
            head: Vec::with_capacity(FRAME_HEADER_MAX),
        }
    }
}

impl<R: Read> Read for FrameHead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let room = FRAME_HEADER_MAX - self.head.len();
        self.head.extend_from_slice(&buf[..n.min(room)]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each path makes of `stored`: the id and size, or the error's message.
    fn both(stored: &[u8], id: &ObjectId) -> (String, String) {
        let show = |r: Result<(ObjectId, u64)>| match r {
            Ok((id, size)) => format!("ok {id} {size}"),
            Err(e) => format!("err {}", e.message),
        };
        let read = show(decode_checked(id, Some(id), stored, None, &mut io::sink()));
        let bytes = show(decode_checked_bytes(
            id,
            Some(id),
            stored,
            None,
            &mut io::sink(),
        ));
        (read, bytes)
    }

    #[test]
    fn bytes_in_memory_decode_exactly_as_a_stream_does() {
        let small = b"a small object".to_vec();
        let large: Vec<u8> = (0..3_000_000u32)
            .map(|i| (i % 251) as u8 ^ (i >> 11) as u8)
            .collect();
        for content in [Vec::new(), small, large] {
            let id = ObjectId::of(&content);
            let frame = zstd::bulk::compress(&content, 3).unwrap();
            let mut cases = vec![frame.clone()];
            let mut trailing = frame.clone();
            trailing.push(0);
            cases.push(trailing);
            cases.push([frame.clone(), frame.clone()].concat());
            // A skippable frame after the object's.
            cases.push([frame.clone(), vec![0x50, 0x2a, 0x4d, 0x18, 1, 0, 0, 0, 7]].concat());
            cases.push(frame[..frame.len() - 1].to_vec());
            cases.push(frame[..frame.len().min(5)].to_vec());
            let mut flipped = frame.clone();
            let mid = flipped.len() / 2;
            flipped[mid] ^= 0x40;
            cases.push(flipped);
            cases.push(Vec::new());
            for (k, stored) in cases.iter().enumerate() {
                let (read, bytes) = both(stored, &id);
                assert_eq!(read, bytes, "case {k} of a {}-byte object", content.len());
                if k == 0 {
                    assert!(read.starts_with("ok "), "{read}");
                } else {
                    assert!(read.starts_with("err "), "case {k}: {read}");
                }
            }
        }
    }
}
