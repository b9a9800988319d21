//! Receiving a pack verified as it streams in: every object is decoded and rehashed as
//! its bytes arrive (in offset order, on a second thread), and the whole file is hashed
//! against the pack's name, so a bad pack stops the download at its first bad object
//! instead of after the whole file is on disk.

use std::io::{self, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use super::codec::decode_named;
use super::envelope::Envelope;
use baton_error::{Error, Result};
use baton_format::ObjectId;
use baton_format::pack::{PACK_MAGIC, PackEntry};

/// Chunks in flight between the download and the verifier.
const QUEUE: usize = 16;

/// Run `download` (which writes the pack's bytes, in order, into the writer it is given)
/// with everything it writes going to `sink`, hashed, and verified object by object
/// against `entries` (the pack's index, already checked). A locked encrypted store checks
/// the layout and the pack's hash only, as `verify` does. Returns the id and content
/// length of every object decoded.
pub(crate) fn receive_verified(
    envelope: &Envelope,
    pack_id: &ObjectId,
    entries: &[PackEntry],
    sink: &mut dyn Write,
    download: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<Vec<(ObjectId, u64)>> {
    let mut ordered = entries.to_vec();
    ordered.sort_by_key(|e| e.offset);
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE);
        let verifier = scope.spawn(move || verify_stream(envelope, pack_id, &ordered, rx));
        let mut tee = Tee {
            sink,
            hasher: blake3::Hasher::new(),
            tx: Some(tx),
            stopped: false,
        };
        let downloaded = download(&mut tee);
        tee.tx = None; // end of the stream for the verifier
        let verdict = verifier
            .join()
            .unwrap_or_else(|_| Err(Error::other("the pack verifier panicked")));
        // Whichever stopped first is the reason: a download cut short (a transport
        // error) leaves the verifier at a premature end; a bad object stops the download.
        let sizes = match verdict {
            Ok(sizes) => sizes,
            Err(e) if tee.stopped || downloaded.is_ok() => return Err(e),
            Err(_) => Vec::new(),
        };
        downloaded?;
        let actual = ObjectId::from_hash(tee.hasher.finalize());
        if actual != *pack_id {
            return Err(Error::integrity(format!(
                "received pack {pack_id} is corrupt: its bytes hash to {actual}"
            ))
            .with_hint("nothing was published; run 'baton verify' on the remote store"));
        }
        Ok(sizes)
    })
}

/// Writes to the sink, hashes, and hands a copy to the verifier.
struct Tee<'a> {
    sink: &'a mut dyn Write,
    hasher: blake3::Hasher,
    tx: Option<SyncSender<Vec<u8>>>,
    /// The verifier stopped (at a bad object) before the download ended.
    stopped: bool,
}

impl Write for Tee<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let sent = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.send(buf.to_vec()).is_ok());
        if !sent {
            // The verifier stopped at a bad object: stop downloading.
            self.stopped = true;
            return Err(io::Error::other("the received pack is corrupt"));
        }
        self.sink.write_all(buf)?;
        self.hasher.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.sink.flush()
    }
}

/// The verifier's side of the channel, as a reader.
struct ChannelReader {
    rx: Receiver<Vec<u8>>,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.buf.len() {
            match self.rx.recv() {
                Ok(chunk) => {
                    self.buf = chunk;
                    self.pos = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

fn verify_stream(
    envelope: &Envelope,
    pack_id: &ObjectId,
    ordered: &[PackEntry],
    rx: Receiver<Vec<u8>>,
) -> Result<Vec<(ObjectId, u64)>> {
    let bad = |why: String| {
        Error::integrity(format!("received pack {pack_id} is corrupt: {why}"))
            .with_hint("nothing was published; run 'baton verify' on the remote store")
    };
    let mut reader = ChannelReader {
        rx,
        buf: Vec::new(),
        pos: 0,
    };
    let mut magic = [0u8; PACK_MAGIC.len()];
    reader
        .read_exact(&mut magic)
        .map_err(|_| bad("it ends before its magic".into()))?;
    if &magic != PACK_MAGIC {
        return Err(bad("not a baton pack (bad magic)".into()));
    }
    let mut at = PACK_MAGIC.len() as u64;
    let mut sizes = Vec::with_capacity(ordered.len());
    for entry in ordered {
        if entry.offset != at {
            return Err(bad(format!(
                "its objects overlap or leave gaps (object {} at offset {}, expected {at})",
                entry.id, entry.offset
            )));
        }
        let mut stored = (&mut reader).take(entry.length);
        if !envelope.is_locked() {
            sizes.push(
                decode_named(envelope, &entry.id, &mut stored, &mut io::sink())
                    .map_err(|e| bad(e.message))?,
            );
        }
        // Whatever the decoder left (nothing, for a valid object) is part of the object.
        io::copy(&mut stored, &mut io::sink()).map_err(|e| bad(e.to_string()))?;
        if stored.limit() != 0 {
            return Err(bad(format!("it ends inside object {}", entry.id)));
        }
        at += entry.length;
    }
    // The index and footer (already read and checked from the remote).
    io::copy(&mut reader, &mut io::sink()).map_err(|e| bad(e.to_string()))?;
    Ok(sizes)
}
