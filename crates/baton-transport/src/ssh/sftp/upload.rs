//! An upload into one remote file: chunks written with up to `WINDOW` writes in flight,
//! then fsync, stat, read back and the mode fixed, for `Upload::finish`; small files
//! staged beside it (`create_with`) are written, fsynced and read back in the same batch.
//!
//! When the handles can be guessed (`handle_guess`), nothing waits for an open: each small file
//! is created, written, fsynced, stat'ed, read back, chmodded and closed on the guessed
//! handle in one go, and the upload's writes go out on the guess behind its open. The
//! chunks are kept until the open's reply confirms the guess; a wrong guess has them
//! (and the finishing requests) sent again on the handle the server gave.
//!
//! A large upload shares its writes with a second lane (`lane`) once one channel's
//! window is the limit.

use std::io::{self, Write};

use russh_sftp::protocol::{
    FSetStat, FileAttributes, Fstat, OpenFlags, Packet, StatusCode, Write as WriteReq,
};

use super::{CHUNK, SftpRemote, WINDOW};
use crate::{Receipt, Upload};
use baton_error::{Error, ErrorKind, Result};
use lane::{Lane, LaneStep};

mod lane;

const CREATE: OpenFlags = OpenFlags::READ
    .union(OpenFlags::WRITE)
    .union(OpenFlags::CREATE)
    .union(OpenFlags::EXCLUDE);

pub(super) struct SftpUpload<'a> {
    remote: &'a mut SftpRemote,
    handle: String,
    path: String,
    offset: u64,
    buf: Vec<u8>,
    inflight: std::collections::VecDeque<u32>,
    /// Small files staged with this one.
    beside: Vec<Small>,
    /// The open of a guessed handle not confirmed yet, and the chunks sent on it since.
    unconfirmed: Option<(u32, Kept)>,
    /// The bytes `Upload::expect_len` announced.
    expected: u64,
    /// How far opening a second lane has come.
    lane_step: LaneStep,
    lane: Option<Lane>,
    /// With the channels' windows unknown, chunks alternate between the lanes.
    alternate: bool,
}

/// Chunks written on a guessed handle (offset, bytes), kept to be sent again if wrong.
type Kept = Vec<(u64, Vec<u8>)>;

/// A small file staged beside an upload.
struct Small {
    path: String,
    bytes: Vec<u8>,
    how: Staged,
}

enum Staged {
    /// Open on this handle; written in `finish`'s batch.
    Open(String),
    /// Sent whole on a guessed handle: the open, and the requests after it.
    Chained {
        open: u32,
        guess: String,
        sent: SmallSent,
    },
}

/// The requests that stage a small file on a handle.
struct SmallSent {
    write: u32,
    fsync: Option<u32>,
    stat: u32,
    read: u32,
    /// The chmod to 0600, when it is sent whatever the stat says.
    chmod: Option<u32>,
}

impl SmallSent {
    fn ids(&self) -> impl Iterator<Item = u32> {
        [
            Some(self.write),
            self.fsync,
            Some(self.stat),
            Some(self.read),
            self.chmod,
        ]
        .into_iter()
        .flatten()
    }
}

impl SftpRemote {
    /// `Remote::create_with`: create `path` and the small files `beside` (exclusively,
    /// 0600), for an upload into `path`.
    pub(super) fn create_upload(
        &mut self,
        path: &str,
        beside: &[(String, Vec<u8>)],
    ) -> Result<Box<dyn Upload + '_>> {
        if let Some((p, _)) = beside.iter().find(|(_, b)| b.len() > CHUNK) {
            return Err(Error::other(format!(
                "{p} is too large to stage beside an upload"
            )));
        }
        if let Some(guess) = self.handles.guess() {
            let mut small = Vec::with_capacity(beside.len());
            for (p, bytes) in beside {
                let open = self.open_guessed(p, CREATE, Some(0o600), &guess, true)?;
                let mut sent = self.send_small(&guess, bytes)?;
                sent.chmod = Some(self.send_chmod(&guess)?);
                self.close_ahead(&guess)?;
                small.push(Small {
                    path: p.clone(),
                    bytes: bytes.clone(),
                    how: Staged::Chained {
                        open,
                        guess: guess.clone(),
                        sent,
                    },
                });
            }
            let open = self.open_guessed(path, CREATE, Some(0o600), &guess, false)?;
            return Ok(Box::new(SftpUpload {
                remote: self,
                handle: guess,
                path: path.to_string(),
                offset: 0,
                buf: Vec::with_capacity(CHUNK),
                inflight: Default::default(),
                beside: small,
                unconfirmed: Some((open, Vec::new())),
                expected: 0,
                lane_step: LaneStep::NotYet,
                lane: None,
                alternate: false,
            }));
        }
        // Every file is opened in one batch; the small ones are written in `finish`'s.
        let id = self.open(path, CREATE, Some(0o600))?;
        let mut opens = Vec::with_capacity(beside.len());
        for (p, _) in beside {
            opens.push(self.open(p, CREATE, Some(0o600))?);
        }
        self.send_prepared()?;
        let reply = self.wait(id)?;
        let handle = self.created_handle(reply, path);
        let mut small = Vec::with_capacity(beside.len());
        let mut failed = None;
        for (id, (p, bytes)) in opens.into_iter().zip(beside) {
            let reply = self.wait(id)?;
            match self.created_handle(reply, p) {
                Ok(h) => small.push(Small {
                    path: p.clone(),
                    bytes: bytes.clone(),
                    how: Staged::Open(h),
                }),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        let failed = match (handle, failed) {
            (Ok(h), None) => Ok(h),
            (Ok(h), Some(e)) => {
                self.close_later(h, path)?;
                Err(e)
            }
            (Err(e), _) => Err(e),
        };
        let handle = match failed {
            Ok(h) => h,
            Err(e) => {
                for s in small {
                    if let Staged::Open(h) = s.how {
                        self.close_later(h, &s.path)?;
                    }
                }
                return Err(e);
            }
        };
        // Reads started before these opens had their opens answered first: their
        // reads go out now, with this upload's writes.
        self.advance_probes()?;
        Ok(Box::new(SftpUpload {
            remote: self,
            handle,
            path: path.to_string(),
            offset: 0,
            buf: Vec::with_capacity(CHUNK),
            inflight: Default::default(),
            beside: small,
            unconfirmed: None,
            expected: 0,
            lane_step: LaneStep::NotYet,
            lane: None,
            alternate: false,
        }))
    }

    fn send_write(&mut self, handle: &str, offset: u64, data: Vec<u8>) -> Result<u32> {
        let handle = handle.to_string();
        self.request(|id| {
            Packet::Write(WriteReq {
                id,
                handle,
                offset,
                data,
            })
        })
    }

    /// Make the open file's mode exactly 0600.
    pub(super) fn send_chmod(&mut self, handle: &str) -> Result<u32> {
        let (handle, attrs) = (
            handle.to_string(),
            FileAttributes {
                permissions: Some(0o600),
                ..FileAttributes::empty()
            },
        );
        self.request(|id| Packet::FSetStat(FSetStat { id, handle, attrs }))
    }

    /// Write, fsync, stat and read back a small file on `handle`.
    fn send_small(&mut self, handle: &str, bytes: &[u8]) -> Result<SmallSent> {
        let write = self.send_write(handle, 0, bytes.to_vec())?;
        let fsync = self.fsync(handle)?;
        let h = handle.to_string();
        let stat = self.request(|id| Packet::Fstat(Fstat { id, handle: h }))?;
        let read = self.send_read(handle, 0, (bytes.len() as u32).max(1))?;
        Ok(SmallSent {
            write,
            fsync,
            stat,
            read,
            chmod: None,
        })
    }

    /// Check the replies to `send_small`: the mode the stat saw (`None` when the chmod was
    /// sent with them and succeeded).
    fn check_small(&mut self, path: &str, bytes: &[u8], sent: SmallSent) -> Result<Option<u32>> {
        let reply = self.wait(sent.write)?;
        self.expect_written(reply, &format!("write {path}"), path)?;
        if let Some(id) = sent.fsync {
            let reply = self.wait(id)?;
            self.expect_written(reply, &format!("fsync {path}"), path)?;
        }
        let mode = self.wait_attrs(sent.stat)?.permissions;
        let back = match self.wait(sent.read)? {
            Packet::Data(d) => d.data,
            Packet::Status(s) if s.status_code == StatusCode::Eof => Vec::new(),
            other => return Err(self.unexpected(&format!("read back {path}"), other)),
        };
        if back != bytes {
            return Err(Error::new(
                ErrorKind::Transport,
                format!("{path} reads back differently from what was sent"),
            ));
        }
        match sent.chmod {
            Some(id) => {
                let reply = self.wait(id)?;
                self.expect_ok(reply, &format!("chmod {path}"))?;
                Ok(None)
            }
            None => Ok(mode),
        }
    }
}

impl SftpUpload<'_> {
    /// Send the buffered chunk: on the second lane when it has more room, unless it is
    /// the `last` (whose fstat must see the whole file).
    fn send_chunk(&mut self, last: bool) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if !last {
            self.start_lane()?;
            if self.sent_on_lane()? {
                return Ok(());
            }
        }
        if self.inflight.len() >= WINDOW && self.unconfirmed.is_some() {
            // The open's reply came while the window filled: bandwidth, not a round trip.
            self.remote.streaming = true;
            let confirmed = self.confirm();
            self.remote.streaming = false;
            confirmed?;
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
        let (offset, len) = (self.offset, data.len() as u64);
        if let Some((_, kept)) = &mut self.unconfirmed {
            kept.push((offset, data.clone()));
        }
        let id = self.remote.send_write(&self.handle, offset, data)?;
        self.offset += len;
        self.inflight.push_back(id);
        Ok(())
    }

    /// Wait for the reply to a guessed handle's open. Wrong: the chunks go again on the
    /// handle the server gave (`false`: what else was sent on the guess must be too).
    fn confirm(&mut self) -> Result<bool> {
        let Some((open, kept)) = self.unconfirmed.take() else {
            return Ok(true);
        };
        let reply = self.remote.wait(open);
        let right = matches!(&reply, Ok(Packet::Handle(h)) if h.handle == self.handle);
        if !right {
            self.remote.drop_replies(self.inflight.drain(..));
            self.handle = self.remote.created_handle(reply?, &self.path)?;
            for (offset, data) in kept {
                let id = self.remote.send_write(&self.handle, offset, data)?;
                self.inflight.push_back(id);
            }
        }
        self.remote.send_prepared()?;
        Ok(right)
    }

    /// The requests that finish the upload: fsync, stat, and the reads of `readback`.
    fn send_finish(
        &mut self,
        readback: &[(u64, u64)],
    ) -> Result<(Option<u32>, u32, Vec<Vec<u32>>)> {
        let handle = self.handle.clone();
        let fsync = self.remote.fsync(&handle)?;
        let h = handle.clone();
        let stat = self
            .remote
            .request(|id| Packet::Fstat(Fstat { id, handle: h }))?;
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
        Ok((fsync, stat, reads))
    }

    /// Stage the small files: those opened (written now, with the upload's last batch)
    /// and those sent whole on a guess (checked, or staged again on the handle the
    /// server gave). Each is closed once checked.
    fn finish_small(&mut self) -> Result<()> {
        let beside = std::mem::take(&mut self.beside);
        let mut opened = Vec::with_capacity(beside.len());
        for small in beside {
            let sent = match small.how {
                Staged::Open(h) => {
                    let sent = self.remote.send_small(&h, &small.bytes)?;
                    (small.path, small.bytes, h, sent)
                }
                Staged::Chained { open, guess, sent } => {
                    let reply = self.remote.wait(open);
                    if matches!(&reply, Ok(Packet::Handle(h)) if h.handle == guess) {
                        // Closed ahead: only its replies are left to check.
                        self.remote.check_small(&small.path, &small.bytes, sent)?;
                        continue;
                    }
                    self.remote.drop_replies(sent.ids());
                    let h = self.remote.created_handle(reply?, &small.path)?;
                    let sent = self.remote.send_small(&h, &small.bytes)?;
                    (small.path, small.bytes, h, sent)
                }
            };
            opened.push(sent);
        }
        for (path, bytes, h, sent) in opened {
            let mode = self.remote.check_small(&path, &bytes, sent)?;
            if mode.map(|p| p & 0o7777) != Some(0o600) {
                let id = self.remote.send_chmod(&h)?;
                self.remote.defer(id, format!("chmod {path}"), false);
            }
            self.remote.close_later(h, &path)?;
        }
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
            self.send_chunk(false).map_err(io_err)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Upload for SftpUpload<'_> {
    fn expect_len(&mut self, len: u64) {
        self.expected = len;
    }

    fn finish(mut self: Box<Self>, readback: &[(u64, u64)]) -> Result<Receipt> {
        self.send_chunk(true)?;
        if let Some(lane) = &mut self.lane {
            lane.send_fsync()?;
            // The fstat and reads below must see what the lane wrote.
            if lane.holds_any(self.offset, readback) {
                lane.settle(&self.path)?;
            }
        }
        // Everything goes out before anything is waited for: the server handles a
        // handle's requests in order, so the fsync, stat and reads follow the writes, and
        // a failed write is still seen (its reply is checked) before anything is published.
        let mut sent = self.send_finish(readback)?;
        // The directories to publish into are opened behind the last request on a guess.
        self.remote.send_prepared()?;
        if !self.confirm()? {
            let (fsync, stat, reads) = sent;
            let ids = fsync.into_iter().chain([stat]);
            self.remote
                .drop_replies(ids.chain(reads.into_iter().flatten()));
            sent = self.send_finish(readback)?;
        }
        let (fsync, stat, reads) = sent;
        // Written with the last batch: small files opened with this one.
        let staged = self.finish_small();
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
        staged?;
        if let Some(lane) = &mut self.lane {
            lane.settle(&self.path)?;
        }
        // The server's umask may have narrowed (or a hostile setup widened) the mode.
        let handle = self.handle.clone();
        if attrs.permissions.map(|p| p & 0o7777) != Some(0o600) {
            let id = self.remote.send_chmod(&handle)?;
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

impl Drop for SftpUpload<'_> {
    fn drop(&mut self) {
        if let Some(lane) = self.lane.take() {
            self.remote.retire_lane(lane);
        }
    }
}
