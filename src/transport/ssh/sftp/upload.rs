//! An upload into one remote file: chunks written with up to `WINDOW` writes in flight,
//! then fsync, stat, read back and the mode fixed, for `Upload::finish`; small files
//! staged beside it (`create_with`) are written, fsynced and read back in the same batch.

use std::io::{self, Write};

use russh_sftp::protocol::{FSetStat, FileAttributes, Fstat, Packet, Write as WriteReq};

use super::{CHUNK, SftpRemote, WINDOW};
use crate::error::{Error, Result};
use crate::transport::{Receipt, Upload};

pub(super) struct SftpUpload<'a> {
    pub(super) remote: &'a mut SftpRemote,
    pub(super) handle: String,
    pub(super) path: String,
    pub(super) offset: u64,
    pub(super) buf: Vec<u8>,
    pub(super) inflight: std::collections::VecDeque<u32>,
    /// Small files opened with this one: (path, bytes, handle).
    pub(super) beside: Vec<(String, Vec<u8>, String)>,
}

impl SftpUpload<'_> {
    fn send_chunk(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.inflight.len() >= WINDOW
            && let Some(oldest) = self.inflight.pop_front()
        {
            // Room in a full window: bandwidth, not a round trip.
            self.remote.streaming = true;
            let reply = self.remote.wait(oldest);
            self.remote.streaming = false;
            let reply = reply?;
            let what = format!("write {}", self.path);
            self.remote.expect_written(reply, &what, &self.path)?;
        }
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        let (handle, offset, len) = (self.handle.clone(), self.offset, data.len() as u64);
        let id = self.remote.request(|id| {
            Packet::Write(WriteReq {
                id,
                handle,
                offset,
                data,
            })
        })?;
        self.offset += len;
        self.inflight.push_back(id);
        Ok(())
    }
}

/// Carry the error itself (not just its text) through `io::Write`, so that callers can
/// recover its kind: a broken connection must stay a transport error (exit 7).
fn io_err(e: Error) -> io::Error {
    io::Error::other(e)
}

impl Write for SftpUpload<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = CHUNK - self.buf.len();
        let n = room.min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK {
            self.send_chunk().map_err(io_err)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Upload for SftpUpload<'_> {
    fn finish(mut self: Box<Self>, readback: &[(u64, u64)]) -> Result<Receipt> {
        self.send_chunk()?;
        // Everything goes out before anything is waited for: the server handles a
        // handle's requests in order, so the fsync, stat and reads follow the writes, and
        // a failed write is still seen (its reply is checked) before anything is published.
        let handle = self.handle.clone();
        let fsync = self.remote.fsync(&handle)?;
        let stat = {
            let handle = handle.clone();
            self.remote
                .request(|id| Packet::Fstat(Fstat { id, handle }))?
        };
        let mut reads = Vec::new();
        for &(offset, len) in readback {
            let mut parts = Vec::new();
            let mut at = offset;
            while at < offset + len {
                let take = (offset + len - at).min(CHUNK as u64);
                parts.push(self.remote.send_read(&handle, at, take as u32)?);
                at += take;
            }
            reads.push(parts);
        }
        let beside = std::mem::take(&mut self.beside);
        let mut small = Vec::with_capacity(beside.len());
        for (path, bytes, h) in &beside {
            let (hh, data) = (h.clone(), bytes.clone());
            let write = self.remote.request(|id| {
                Packet::Write(WriteReq {
                    id,
                    handle: hh,
                    offset: 0,
                    data,
                })
            })?;
            let fsync = self.remote.fsync(h)?;
            let hh = h.clone();
            let stat = self
                .remote
                .request(|id| Packet::Fstat(Fstat { id, handle: hh }))?;
            let read = self.remote.send_read(h, 0, (bytes.len() as u32).max(1))?;
            small.push((path, bytes, write, fsync, stat, read));
        }
        let what = format!("write {}", self.path);
        while let Some(id) = self.inflight.pop_front() {
            let reply = self.remote.wait(id)?;
            self.remote.expect_written(reply, &what, &self.path)?;
        }
        if let Some(id) = fsync {
            let reply = self.remote.wait(id)?;
            let what = format!("fsync {}", self.path);
            self.remote.expect_written(reply, &what, &self.path)?;
        }
        let attrs = self.remote.wait_attrs(stat)?;
        let mut back = Vec::with_capacity(reads.len());
        for parts in reads {
            let mut bytes = Vec::new();
            for id in parts {
                if let Some(data) = self.remote.wait_data(id, "read back")? {
                    bytes.extend_from_slice(&data);
                }
            }
            back.push(bytes);
        }
        let mut small_modes = Vec::with_capacity(small.len());
        for (path, bytes, write, fsync, stat, read) in small {
            let reply = self.remote.wait(write)?;
            self.remote
                .expect_written(reply, &format!("write {path}"), path)?;
            if let Some(id) = fsync {
                let reply = self.remote.wait(id)?;
                self.remote
                    .expect_written(reply, &format!("fsync {path}"), path)?;
            }
            small_modes.push(self.remote.wait_attrs(stat)?.permissions);
            let read = self
                .remote
                .wait_data(read, "read back")?
                .unwrap_or_default();
            if &read != bytes {
                return Err(Error::new(
                    crate::error::ErrorKind::Transport,
                    format!("{path} reads back differently from what was sent"),
                ));
            }
        }
        for ((path, _, h), mode) in beside.into_iter().zip(small_modes) {
            if mode.map(|p| p & 0o7777) != Some(0o600) {
                let (hh, attrs) = (
                    h.clone(),
                    FileAttributes {
                        permissions: Some(0o600),
                        ..FileAttributes::empty()
                    },
                );
                let id = self.remote.request(|id| {
                    Packet::FSetStat(FSetStat {
                        id,
                        handle: hh,
                        attrs,
                    })
                })?;
                self.remote.defer(id, format!("chmod {path}"), false);
            }
            self.remote.close_later(h, &path)?;
        }
        // The server's umask may have narrowed (or a hostile setup widened) the mode.
        if attrs.permissions.map(|p| p & 0o7777) != Some(0o600) {
            let handle = handle.clone();
            let attrs = FileAttributes {
                permissions: Some(0o600),
                ..FileAttributes::empty()
            };
            let id = self
                .remote
                .request(|id| Packet::FSetStat(FSetStat { id, handle, attrs }))?;
            let reply = self.remote.wait(id)?;
            self.remote
                .expect_ok(reply, &format!("chmod {}", self.path))?;
        }
        let path = self.path.clone();
        self.remote.close_later(handle, &path)?;
        Ok(Receipt {
            size: attrs.size.unwrap_or(0),
            readback: back,
        })
    }
}
