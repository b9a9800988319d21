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

/// Decode one zstd frame, hashing it; with `expected`, the hash must equal it.
pub(crate) fn decode_checked(
    label: &ObjectId,
    expected: Option<&ObjectId>,
    file: impl Read,
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
    let result = decode_with(&mut reusable, file, expected_size, sink, &corrupt);
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
    file: impl Read,
    expected_size: Option<u64>,
    sink: &mut dyn Write,
    corrupt: &dyn Fn(String) -> Error,
) -> Result<(ObjectId, u64, Vec<u8>, bool)> {
    let Reusable { context, buf } = reusable;
    // Exactly one frame: stop at its end, then require that nothing follows it (no
    // second frame, no skippable frame, no garbage).
    let input =
        io::BufReader::with_capacity(zstd::zstd_safe::DCtx::in_size(), FrameHead::new(file));
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
        use std::io::BufRead;
        let reader = hashing.inner.get_mut().get_mut();
        let rest = reader.fill_buf().map_err(|e| corrupt(e.to_string()))?;
        !rest.is_empty()
    };
    let head = hashing.inner.get_ref().get_ref().get_ref().head.clone();
    let (actual, size) = hashing.finish();
    Ok((actual, size, head, trailing))
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
