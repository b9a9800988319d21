//! An upload into one remote file: chunks written with up to `WINDOW` writes in flight,
//! then fsync, stat, read back and the mode fixed, for `Upload::finish`.

use std::io::{self, Write};

use russh_sftp::protocol::{FSetStat, FileAttributes, Fstat, Packet, Write as WriteReq};

use super::{CHUNK, SftpRemote, WINDOW, lost};
use crate::error::{Error, Result};
use crate::transport::{Receipt, Upload};

pub(super) struct SftpUpload<'a> {
    pub(super) remote: &'a mut SftpRemote,
    pub(super) handle: String,
    pub(super) path: String,
    pub(super) offset: u64,
    pub(super) buf: Vec<u8>,
    pub(super) inflight: std::collections::VecDeque<u32>,
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
        let what = format!("write {}", self.path);
        while let Some(id) = self.inflight.pop_front() {
            let reply = self.remote.wait(id)?;
            self.remote.expect_written(reply, &what, &self.path)?;
        }
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
        if let Some(id) = fsync {
            let reply = self.remote.wait(id)?;
            let what = format!("fsync {}", self.path);
            self.remote.expect_written(reply, &what, &self.path)?;
        }
        let attrs = match self.remote.wait(stat)? {
            Packet::Attrs(a) => a.attrs,
            other => {
                return Err(lost(
                    &self.remote.describe,
                    format!("unexpected reply to fstat: {other:?}"),
                ));
            }
        };
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
