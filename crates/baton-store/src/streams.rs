//! Small `Read`/`Write` adapters shared by the store, sync and archives: hashing,
//! bounded collection, tees and progress. They never interpret the bytes.

use std::io::{self, Read, Write};

use baton_format::ObjectId;

/// A reader that hashes and counts what passes through it.
pub(crate) struct HashingReader<R> {
    pub inner: R,
    pub hasher: blake3::Hasher,
    pub count: u64,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: blake3::Hasher::new(),
            count: 0,
        }
    }

    pub fn finish(self) -> (ObjectId, u64) {
        (ObjectId::from_hash(self.hasher.finalize()), self.count)
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// A reader that reports each read's byte count to `report` (a progress bar counts a
/// file as it is read, not all at once when it is stored).
pub(crate) struct ProgressReader<'a, R> {
    pub inner: R,
    report: &'a (dyn Fn(u64) + Sync),
}

impl<'a, R: Read> ProgressReader<'a, R> {
    pub fn new(inner: R, report: &'a (dyn Fn(u64) + Sync)) -> Self {
        ProgressReader { inner, report }
    }
}

impl<R: Read> Read for ProgressReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            (self.report)(n as u64);
        }
        Ok(n)
    }
}

/// Collects the bytes written, failing (and setting `overflow`) past `limit`.
pub struct LimitedVec {
    pub bytes: Vec<u8>,
    pub limit: u64,
    pub overflow: bool,
}

impl LimitedVec {
    pub fn new(limit: u64) -> Self {
        LimitedVec {
            bytes: Vec::new(),
            limit,
            overflow: false,
        }
    }
}

impl Write for LimitedVec {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if (self.bytes.len() + buf.len()) as u64 > self.limit {
            self.overflow = true;
            return Err(io::Error::other("object too large"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A reader that copies what it reads to `sink` (stored bytes on their way into a pack).
pub(crate) struct TeeReader<'a, R> {
    pub inner: R,
    pub sink: &'a mut dyn Write,
    pub count: u64,
    /// A write error, kept apart so that it is not mistaken for a corrupt object.
    pub sink_error: Option<io::Error>,
}

impl<R: Read> Read for TeeReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Err(e) = self.sink.write_all(&buf[..n]) {
            let message = e.to_string();
            self.sink_error = Some(e);
            return Err(io::Error::other(message));
        }
        self.count += n as u64;
        Ok(n)
    }
}

/// A writer that hashes what passes through it on the way to `inner`.
pub struct HashingWriter<W> {
    pub inner: W,
    pub hasher: blake3::Hasher,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A sink that discards bytes but fails once more than `limit` have passed.
pub struct Bounded {
    pub limit: u64,
    pub written: u64,
    pub overflow: bool,
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written + buf.len() as u64 > self.limit {
            self.overflow = true;
            return Err(io::Error::other("expansion bound exceeded"));
        }
        self.written += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
