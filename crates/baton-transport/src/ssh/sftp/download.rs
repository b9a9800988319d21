//! Downloads over SFTP: whole files streamed with `WINDOW` reads in flight, files of a
//! declared size (never a byte past it), and ranges.

use std::collections::VecDeque;
use std::io::{self, Write};

use russh_sftp::protocol::{Fstat, OpenFlags, Packet, StatusCode};

use super::{CHUNK, SftpRemote, WINDOW, lost, status_error};
use baton_error::{Error, Result};

impl SftpRemote {
    pub(super) fn read_file_streamed(&mut self, path: &str, sink: &mut dyn Write) -> Result<u64> {
        let handle = self.open_for_reading(path)?;
        let n = self.stream_handle(&handle, u64::MAX, sink, path)?;
        self.close_later(handle, path)?;
        Ok(n)
    }

    pub(super) fn read_range_of(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let handle = self.open_for_reading(path)?;
        let mut out = Vec::with_capacity(len.min(CHUNK as u64 * WINDOW as u64) as usize);
        let end = offset.saturating_add(len);
        let n = self.stream_range(&handle, offset, end, len, &mut out, path, None)?;
        self.close_later(handle, path)?;
        if n != len {
            return Err(Error::integrity(format!(
                "{path} on {} is shorter than expected",
                self.describe
            )));
        }
        Ok(out)
    }

    /// `Remote::read_file_sized`: fstat the open file (a regular file of `len` bytes),
    /// stream exactly `len` bytes, and fstat it again.
    pub(super) fn read_file_exact(
        &mut self,
        path: &str,
        len: u64,
        sink: &mut dyn Write,
    ) -> Result<()> {
        let handle = self.open_for_reading(path)?;
        let n = self.stream_range(&handle, 0, len, len, sink, path, Some(len))?;
        if n != len {
            return Err(self.wrong_size(path, n, len));
        }
        self.close_later(handle, path)?;
        Ok(())
    }

    pub(super) fn open_for_reading(&mut self, path: &str) -> Result<String> {
        let id = self.open(path, OpenFlags::READ, None)?;
        let reply = self.wait(id)?;
        self.expect_handle(reply, &format!("open {path}"))?
            .ok_or_else(|| self.missing(path))
    }

    pub(super) fn missing(&self, path: &str) -> Error {
        Error::not_found(format!("{path} does not exist on {}", self.describe))
    }

    pub(super) fn send_fstat(&mut self, handle: &str) -> Result<u32> {
        let h = handle.to_string();
        self.request(|id| Packet::Fstat(Fstat { id, handle: h }))
    }

    /// The reply to an fstat of the open file must show a regular file of `len` bytes.
    pub(super) fn check_size(&mut self, id: u32, path: &str, len: u64) -> Result<()> {
        let attrs = match self.wait(id)? {
            Packet::Attrs(a) => a.attrs,
            other => return Err(self.unexpected(&format!("fstat {path}"), other)),
        };
        const TYPE_MASK: u32 = 0o170000;
        const REGULAR: u32 = 0o100000;
        if attrs
            .permissions
            .is_some_and(|mode| mode & TYPE_MASK != REGULAR)
        {
            return Err(Error::integrity(format!(
                "{path} on {} is not a regular file",
                self.describe
            ))
            .with_hint("a baton store holds only regular files and directories: remove or replace it on the remote (nothing was changed here)"));
        }
        match attrs.size {
            Some(size) if size == len => Ok(()),
            Some(size) => Err(self.wrong_size(path, size, len)),
            None => Err(lost(&self.describe, format!("fstat {path}: no size"))),
        }
    }

    fn wrong_size(&self, path: &str, actual: u64, declared: u64) -> Error {
        Error::integrity(format!(
            "{path} on {} is {actual} bytes, but {declared} were declared",
            self.describe
        ))
        .with_hint("nothing was published here; run 'baton verify' on the remote store")
    }

    /// Read a whole open file with `WINDOW` reads in flight, into `sink`.
    pub(super) fn stream_handle(
        &mut self,
        handle: &str,
        limit: u64,
        sink: &mut dyn Write,
        what: &str,
    ) -> Result<u64> {
        self.stream_range(handle, 0, u64::MAX, limit, sink, what, None)
    }

    /// Read an open file from `start` up to `end` (exclusive; or its end of file) with
    /// `WINDOW` reads in flight, into `sink`, in order; never asks for a byte at or past
    /// `end`, and refuses more than `limit` bytes. Returns the bytes written.
    ///
    /// `sized: Some(len)`: the file must be a regular file of `len` bytes before and after
    /// the reads. One fstat goes ahead of the reads and is answered first (the server
    /// handles a handle's requests in order), so a file of another size or kind is
    /// refused before a byte reaches `sink`; the other follows the last read. Neither
    /// costs a round trip of its own.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stream_range(
        &mut self,
        handle: &str,
        start: u64,
        end: u64,
        limit: u64,
        sink: &mut dyn Write,
        what: &str,
        sized: Option<u64>,
    ) -> Result<u64> {
        let before = match sized {
            Some(len) => Some((self.send_fstat(handle)?, len)),
            None => None,
        };
        let range = Range {
            start,
            end,
            limit,
            before,
            after: sized,
            after_sent: None,
        };
        self.stream_sent(handle, range, Inflight::new(), sink, what)
    }

    /// `stream_range` with reads of the range already sent (`inflight`, in order, from
    /// its start), and the fstat ahead of them, if any, sent too (`range.before`).
    pub(super) fn stream_sent(
        &mut self,
        handle: &str,
        range: Range,
        mut inflight: Inflight,
        sink: &mut dyn Write,
        what: &str,
    ) -> Result<u64> {
        let Range {
            start,
            end,
            limit,
            mut before,
            after: sized,
            after_sent,
        } = range;
        let mut after = after_sent;
        // Whether the fstat after the reads went out while earlier reads were in flight,
        // in the same wait as they were (`after_sent`: before the wait that sent them).
        let mut behind = false;
        let mut next_offset = inflight.back().map_or(start, |&(_, o, l)| o + l);
        let mut at = start;
        let mut eof = false;
        let mut pending: std::collections::BTreeMap<u64, Vec<u8>> = Default::default();
        let mut waited = false;
        loop {
            while !eof && inflight.len() < WINDOW && next_offset < end {
                let len = (end - next_offset).min(CHUNK as u64);
                let id = self.send_read(handle, next_offset, len as u32)?;
                inflight.push_back((id, next_offset, len));
                next_offset += len;
            }
            if sized.is_some() && after.is_none() && (next_offset >= end || eof) {
                after = Some(self.send_fstat(handle)?);
                // Behind reads still in flight its reply trails their data: no round
                // trip of its own (it is one when sent after the last reply arrived).
                behind = waited && !inflight.is_empty();
            }
            if let Some((id, len)) = before.take() {
                self.check_size(id, what, len)?;
            }
            let Some((id, offset, len)) = inflight.pop_front() else {
                break;
            };
            // The first reply is a round trip; the later ones stream behind it.
            self.streaming = waited;
            let reply = self.wait(id);
            self.streaming = false;
            waited = true;
            match reply? {
                Packet::Data(d) if d.data.is_empty() => eof = true,
                Packet::Data(d) => {
                    let n = d.data.len() as u64;
                    if n > len {
                        return Err(lost(
                            &self.describe,
                            format!("{what}: the server sent {n} bytes for a read of {len}"),
                        ));
                    }
                    if n < len {
                        // A short read: the rest of this chunk must be asked for again.
                        let id = self.send_read(handle, offset + n, (len - n) as u32)?;
                        inflight.push_front((id, offset + n, len - n));
                    }
                    pending.insert(offset, d.data);
                }
                Packet::Status(s) if s.status_code == StatusCode::Eof => eof = true,
                Packet::Status(s) => {
                    return Err(status_error(
                        &self.describe,
                        what,
                        s.status_code,
                        &s.error_message,
                    ));
                }
                other => {
                    return Err(lost(
                        &self.describe,
                        format!("unexpected reply to read: {other:?}"),
                    ));
                }
            }
            while let Some(chunk) = pending.remove(&at) {
                at += chunk.len() as u64;
                if at - start > limit {
                    return Err(Error::integrity(format!(
                        "{what} is larger than {limit} bytes"
                    )));
                }
                sink.write_all(&chunk)
                    .map_err(|e| local_write_error(what, e))?;
            }
            if eof && inflight.is_empty() {
                break;
            }
        }
        if !pending.is_empty() {
            return Err(lost(
                &self.describe,
                format!("{what}: the server skipped part of the file"),
            ));
        }
        if let Some(len) = sized {
            let id = match after {
                Some(id) => id,
                None => self.send_fstat(handle)?,
            };
            self.streaming = behind;
            let checked = self.check_size(id, what, len);
            self.streaming = false;
            checked?;
        }
        Ok(at - start)
    }
}

/// Reads in flight on one handle: (request id, offset, length), in the order sent.
pub(super) type Inflight = VecDeque<(u32, u64, u64)>;

/// What `stream_sent` reads: `start..end` (exclusive; or to end of file), at most
/// `limit` bytes; `before: Some((id, len))`: an fstat sent ahead of the reads, whose
/// reply must show a regular file of `len` bytes before a byte reaches the sink;
/// `after: Some(len)`: an fstat sent behind the last read must show one too
/// (`after_sent`: already sent, behind reads of the whole range).
pub(super) struct Range {
    pub start: u64,
    pub end: u64,
    pub limit: u64,
    pub before: Option<(u32, u64)>,
    pub after: Option<u64>,
    pub after_sent: Option<u32>,
}

/// A download that cannot be stored here; a full disk says so and what to do.
pub(super) fn local_write_error(what: &str, e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => Error::other(format!(
            "the local disk is full: cannot write {what} locally: {e}"
        ))
        .with_hint("free some disk space and run the command again; nothing was published"),
        _ => Error::other(format!("cannot write {what} locally: {e}")),
    }
}
