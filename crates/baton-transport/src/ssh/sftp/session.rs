//! The SFTP protocol engine of `SftpRemote`: request ids, the length-prefixed framing of
//! packets on the channel, waiting for one reply while stashing others, deferred replies,
//! and the errors a status reply stands for.
//!
//! Requests are written back to back and replies matched by id. Replies that must be
//! checked but need not be waited for (close, mkdir) are "deferred": their ids are
//! remembered and their status checked at the next point where we wait anyway.

use bytes::Bytes;
use russh_sftp::protocol::{
    Close, Extended, FileAttributes, Open, OpenFlags, Packet, Read as ReadReq, ReadDir, StatusCode,
};

use super::{
    FSYNC_EXTENSION, MAX_DEFERRED, MAX_PACKET, NEARLY_FULL, OUT_BATCH, Prepared, STATVFS_EXTENSION,
    SftpRemote,
};
use baton_error::{Error, ErrorKind, Result};

pub(super) fn lost(describe: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Transport, format!("connection to {describe} failed: {e}"))
        .with_hint("check the network and the server; nothing was published half-way, so run the command again")
}

impl SftpRemote {
    pub(super) fn id(&mut self) -> u32 {
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.next_id
    }

    pub(super) fn send(&mut self, packet: Packet) -> Result<()> {
        if self.broken {
            return Err(lost(&self.describe, "the connection already failed"));
        }
        let bytes = Bytes::try_from(packet).map_err(|e| lost(&self.describe, e))?;
        tracing::debug!(
            target: crate::trace::SFTP,
            "send {} bytes, type {}, round {}",
            bytes.len(),
            bytes.get(4).copied().unwrap_or(0),
            self.round_trips
        );
        if !self.corked {
            // Outside a batch nothing is held back (`out` is empty).
            return self.write_out(&bytes);
        }
        if self.out.len() + bytes.len() > OUT_BATCH {
            self.flush_out()?;
        }
        if bytes.len() >= OUT_BATCH {
            // Data rather than a request: written as it is.
            return self.write_out(&bytes);
        }
        self.out.extend_from_slice(&bytes);
        Ok(())
    }

    /// Run `work`, a batch of many small requests, with its requests written together
    /// (see `SftpRemote::out`); everything it sent is written when it returns.
    pub(super) fn batched<T>(&mut self, work: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let outer = std::mem::replace(&mut self.corked, true);
        let result = work(self);
        self.corked = outer;
        if outer {
            return result;
        }
        let flushed = self.flush_out();
        let value = result?;
        flushed?;
        Ok(value)
    }

    /// Write the requests held back (`out`) to the channel.
    fn flush_out(&mut self) -> Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.out);
        let written = self.write_out(&out);
        self.out = out;
        self.out.clear();
        written
    }

    fn write_out(&mut self, bytes: &[u8]) -> Result<()> {
        if let Err(e) = self.channel.write_all(bytes) {
            self.break_link();
            return Err(lost(&self.describe, &e).with_source(e));
        }
        Ok(())
    }

    /// A read or write failed (a timeout, a dead connection, a packet out of step): this
    /// session's later requests fail at once, and the connection is cut so that its other
    /// channels' (a second lane's) do too, instead of each waiting a timeout.
    pub(super) fn break_link(&mut self) {
        self.broken = true;
        self.channel.cut();
    }

    /// Tell the server no more requests follow (once; not on a broken stream).
    pub(super) fn end_input(&mut self) {
        if !self.input_ended && !self.broken {
            self.input_ended = true;
            let _ = self.channel.send_eof();
        }
    }

    /// The next reply anybody may want (those of `drop_reply` are dropped here).
    pub(super) fn recv(&mut self) -> Result<Packet> {
        if self.greeting_pending {
            self.read_greeting()?;
        }
        loop {
            let packet = self.recv_packet()?;
            if !self.handles.dropped.remove(&packet.get_request_id_any()) {
                return Ok(packet);
            }
        }
    }

    /// The server's VERSION, which answers the INIT `over` sent and comes before any
    /// other reply: the extensions it names are noted.
    pub(super) fn read_greeting(&mut self) -> Result<()> {
        self.greeting_pending = false;
        // INIT went out before anything else: waiting for its answer before any round
        // trip was counted is one.
        if self.round_trips == 0 && !self.streaming {
            self.round_trips = 1;
        }
        match self.recv_packet()? {
            Packet::Version(v) => {
                self.has_fsync = v.extensions.contains_key(FSYNC_EXTENSION);
                self.has_statvfs = v.extensions.contains_key(STATVFS_EXTENSION);
                Ok(())
            }
            other => {
                self.break_link();
                Err(lost(
                    &self.describe,
                    format!("unexpected SFTP greeting {other:?}"),
                ))
            }
        }
    }

    /// The next packet's bytes after its length.
    fn read_packet_body(&mut self) -> Result<Vec<u8>> {
        let mut len = [0u8; 4];
        self.channel
            .read_exact(&mut len)
            .map_err(|e| lost(&self.describe, &e).with_source(e))?;
        let len = u32::from_be_bytes(len);
        if len == 0 || len > MAX_PACKET {
            return Err(lost(&self.describe, format!("SFTP packet of {len} bytes")));
        }
        let mut body = vec![0u8; len as usize];
        self.channel
            .read_exact(&mut body)
            .map_err(|e| lost(&self.describe, &e).with_source(e))?;
        Ok(body)
    }

    fn recv_packet(&mut self) -> Result<Packet> {
        if self.broken {
            return Err(lost(&self.describe, "the connection already failed"));
        }
        // A reply can only come to a request the server has; while replies are here to
        // be read, the requests held back wait for more to join them.
        if !self.channel.has_input() {
            self.flush_out()?;
        }
        // Until the whole packet is in, a failure leaves the stream out of step.
        let body = match self.read_packet_body() {
            Ok(body) => body,
            Err(e) => {
                self.break_link();
                return Err(e);
            }
        };
        let len = body.len();
        let mut bytes = Bytes::from(body);
        let kind = bytes.first().copied().unwrap_or(0);
        let mut packet = Packet::try_from(&mut bytes)
            .map_err(|e| lost(&self.describe, format!("bad SFTP packet: {e}")))?;
        if self.unconfirmed_fsyncs.remove(&packet.get_request_id_any())
            && !self.has_fsync
            && let Packet::Status(s) = &mut packet
        {
            // The VERSION, which came first, named no fsync: the refusal of one sent
            // before it was read means the same as sending none.
            s.status_code = StatusCode::Ok;
        }
        tracing::debug!(
            target: crate::trace::SFTP,
            "recv {len} bytes, type {kind}, id {} (sent in round {:?}; {} round trips)",
            packet.get_request_id_any(),
            self.sent_in_round.get(&packet.get_request_id_any()),
            self.round_trips
        );
        // A reply to a request sent after the last counted wait began had to wait a
        // round trip of its own; one sent before it was already on its way.
        if let Some(round) = self.sent_in_round.remove(&packet.get_request_id_any())
            && round == self.round_trips
            && !self.streaming
        {
            self.round_trips += 1;
        }
        self.handles.answered(packet.get_request_id_any(), &packet);
        Ok(packet)
    }

    /// Send a request and return its id without waiting.
    pub(super) fn request(&mut self, make: impl FnOnce(u32) -> Packet) -> Result<u32> {
        let id = self.id();
        self.send(make(id))?;
        self.sent_in_round.insert(id, self.round_trips);
        Ok(id)
    }

    pub(super) fn defer(&mut self, id: u32, what: String, ignore_failure: bool) {
        self.deferred.insert(id, (what, ignore_failure));
        // Bound the requests in flight: a server whose replies nobody reads stops
        // reading requests, and the next write would wait for ever.
        while self.deferred.len() > MAX_DEFERRED {
            let Ok(packet) = self.recv() else {
                return; // the connection failed: the next request or wait says so
            };
            let got = packet.get_request_id_any();
            match self.deferred.remove(&got) {
                Some((what, ignore)) => self.check_deferred(packet, &what, ignore),
                None => {
                    self.stash.insert(got, packet);
                }
            }
        }
    }

    /// Wait for the reply to `id`. Replies to deferred requests are checked on the way;
    /// the first failure among them is returned instead of the reply.
    pub(super) fn wait(&mut self, id: u32) -> Result<Packet> {
        let packet = self.wait_quietly(id)?;
        match self.deferred_error.take() {
            Some(e) => Err(e),
            None => Ok(packet),
        }
    }

    /// `wait`, leaving a failure among deferred replies for the next `wait` to report.
    pub(super) fn wait_quietly(&mut self, id: u32) -> Result<Packet> {
        let packet = loop {
            if let Some(packet) = self.stash.remove(&id) {
                break packet;
            }
            let packet = self.recv()?;
            let got = packet.get_request_id_any();
            if got == id {
                break packet;
            }
            if let Some((what, ignore_failure)) = self.deferred.remove(&got) {
                self.check_deferred(packet, &what, ignore_failure);
            } else {
                self.stash.insert(got, packet);
            }
        };
        Ok(packet)
    }

    pub(super) fn check_deferred(&mut self, packet: Packet, what: &str, ignore_failure: bool) {
        if let Packet::Status(s) = packet {
            let failed = s.status_code != StatusCode::Ok
                && !(ignore_failure && s.status_code == StatusCode::Failure);
            if failed && self.deferred_error.is_none() {
                self.deferred_error = Some(status_error(
                    &self.describe,
                    what,
                    s.status_code,
                    &s.error_message,
                ));
            }
        }
    }

    pub(super) fn expect_ok(&self, packet: Packet, what: &str) -> Result<()> {
        match packet {
            Packet::Status(s) if s.status_code == StatusCode::Ok => Ok(()),
            other => Err(self.unexpected(what, other)),
        }
    }

    /// `expect_ok` for a reply to a write (or the fsync after it) of `rel`: a plain
    /// failure on a nearly full file system is reported as the full disk it is.
    pub(super) fn expect_written(&mut self, packet: Packet, what: &str, rel: &str) -> Result<()> {
        match packet {
            Packet::Status(s) if s.status_code == StatusCode::Failure => {
                let err = status_error(&self.describe, what, s.status_code, &s.error_message);
                Err(self.disk_full(what, rel).unwrap_or(err))
            }
            other => self.expect_ok(other, what),
        }
    }

    /// `Some(error)` when the file system holding `rel` is (nearly) out of space or
    /// inodes, asked with statvfs@openssh.com; `None` when it is not or we cannot tell.
    pub(super) fn disk_full(&mut self, what: &str, rel: &str) -> Option<Error> {
        if self.greeting_pending {
            self.read_greeting().ok()?;
        }
        if !self.has_statvfs {
            return None;
        }
        let data = russh_sftp::ser::to_bytes(&russh_sftp::extensions::StatvfsExtension {
            path: self.path(rel),
        })
        .ok()?
        .to_vec();
        let id = self
            .request(|id| {
                Packet::Extended(Extended {
                    id,
                    request: STATVFS_EXTENSION.into(),
                    data,
                })
            })
            .ok()?;
        let Packet::ExtendedReply(reply) = self.wait(id).ok()? else {
            return None;
        };
        let fs: russh_sftp::extensions::Statvfs =
            russh_sftp::de::from_bytes(&mut Bytes::from(reply.data)).ok()?;
        let free = fs.blocks_avail.saturating_mul(fs.fragment_size);
        if free >= NEARLY_FULL && fs.inodes_avail > 0 {
            return None;
        }
        let left = if fs.inodes_avail == 0 {
            "no free inodes".to_string()
        } else {
            format!("{free} bytes free")
        };
        Some(
            Error::new(
                ErrorKind::Other,
                format!(
                    "the remote disk is full: {what} on {} failed ({left} on its file system)",
                    self.describe
                ),
            )
            .with_hint(
                "free space on the remote (or use another target), then run the command again; \
                 nothing was published and the partial upload is removed",
            ),
        )
    }

    /// The error for a reply that is not the one `what` expects: a failure status as
    /// itself, anything else as a broken conversation.
    pub(super) fn unexpected(&self, what: &str, packet: Packet) -> Error {
        match packet {
            Packet::Status(s) => {
                status_error(&self.describe, what, s.status_code, &s.error_message)
            }
            other => lost(
                &self.describe,
                format!("unexpected reply to {what}: {other:?}"),
            ),
        }
    }

    /// `Some(handle)`, or `None` when the path does not exist.
    pub(super) fn expect_handle(&self, packet: Packet, what: &str) -> Result<Option<String>> {
        match packet {
            Packet::Handle(h) => Ok(Some(h.handle)),
            Packet::Status(s) if s.status_code == StatusCode::NoSuchFile => Ok(None),
            other => Err(self.unexpected(what, other)),
        }
    }

    /// The handle of a file just created at `path`; a missing directory is not_found.
    pub(super) fn created_handle(&self, packet: Packet, path: &str) -> Result<String> {
        self.expect_handle(packet, &format!("create {path}"))?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "cannot create {path} on {}: no such directory",
                    self.describe
                ))
            })
    }

    /// An OPEN request (sent through `open` and its kin, which note how its handle is used).
    pub(super) fn open_request(
        &mut self,
        rel: &str,
        flags: OpenFlags,
        mode: Option<u32>,
    ) -> Result<u32> {
        let filename = self.path(rel);
        let attrs = FileAttributes {
            permissions: mode,
            ..FileAttributes::empty()
        };
        self.request(|id| {
            Packet::Open(Open {
                id,
                filename,
                pflags: flags,
                attrs,
            })
        })
    }

    pub(super) fn send_read(&mut self, handle: &str, offset: u64, len: u32) -> Result<u32> {
        let handle = handle.to_string();
        self.request(|id| {
            Packet::Read(ReadReq {
                id,
                handle,
                offset,
                len,
            })
        })
    }

    /// The bytes of a READ reply, or `None` at end of file.
    pub(super) fn wait_data(&mut self, id: u32, what: &str) -> Result<Option<Vec<u8>>> {
        match self.wait(id)? {
            Packet::Data(d) => Ok(Some(d.data)),
            Packet::Status(s) if s.status_code == StatusCode::Eof => Ok(None),
            other => Err(self.unexpected(what, other)),
        }
    }

    /// The attributes an fstat answered with.
    pub(super) fn wait_attrs(&mut self, id: u32) -> Result<FileAttributes> {
        match self.wait(id)? {
            Packet::Attrs(a) => Ok(a.attrs),
            other => Err(lost(
                &self.describe,
                format!("unexpected reply to fstat: {other:?}"),
            )),
        }
    }

    /// Open the directories `prepare_publish` queued.
    pub(super) fn send_prepared(&mut self) -> Result<()> {
        let queued: Vec<String> = self
            .prepared
            .iter()
            .filter(|(_, p)| matches!(p, Prepared::Queued))
            .map(|(dir, _)| dir.clone())
            .collect();
        for dir in queued {
            let id = self.open(&dir, OpenFlags::READ, None)?;
            self.prepared.insert(dir, Prepared::Pending(id));
        }
        Ok(())
    }

    /// The handle of a directory opened by `prepare_publish`, once its reply is in (one
    /// still queued, with no upload since, is opened by the publish itself).
    pub(super) fn prepared_handle(&mut self, dir: &str) -> Result<Option<String>> {
        match self.prepared.remove(dir) {
            Some(Prepared::Ready(handle)) => {
                self.prepared
                    .insert(dir.to_string(), Prepared::Ready(handle.clone()));
                Ok(Some(handle))
            }
            Some(Prepared::Pending(id)) => {
                let reply = self.wait(id)?;
                // A directory that could not be opened is simply opened again later.
                let handle = match reply {
                    Packet::Handle(h) => h.handle,
                    _ => return Ok(None),
                };
                self.prepared
                    .insert(dir.to_string(), Prepared::Ready(handle.clone()));
                Ok(Some(handle))
            }
            Some(Prepared::Queued) | None => Ok(None),
        }
    }

    pub(super) fn send_readdir(&mut self, handle: &str) -> Result<u32> {
        let handle = handle.to_string();
        self.request(|id| Packet::ReadDir(ReadDir { id, handle }))
    }

    pub(super) fn close_later(&mut self, handle: String, what: &str) -> Result<()> {
        let id = self.send_close(handle)?;
        self.defer(id, format!("close {what}"), false);
        Ok(())
    }

    /// A CLOSE of `handle`, noted in the handle model (`handle_guess`).
    pub(super) fn send_close(&mut self, handle: String) -> Result<u32> {
        self.handles.closing(&handle);
        self.request(|id| Packet::Close(Close { id, handle }))
    }

    /// Send an fsync of `handle`: `None` when the server has no fsync extension. Before
    /// its VERSION is read the fsync is sent all the same (waiting for the VERSION would
    /// cost a round trip on a connection's first write), and a server that turns out to
    /// have none refuses it, which `recv_packet` takes as the `None` it stands for.
    pub(super) fn fsync(&mut self, handle: &str) -> Result<Option<u32>> {
        if !self.greeting_pending && !self.has_fsync {
            return Ok(None);
        }
        let data = russh_sftp::ser::to_bytes(&russh_sftp::extensions::FsyncExtension {
            handle: handle.to_string(),
        })
        .map_err(|e| lost(&self.describe, e))?
        .to_vec();
        let id = self.request(|id| {
            Packet::Extended(Extended {
                id,
                request: FSYNC_EXTENSION.into(),
                data,
            })
        })?;
        if self.greeting_pending {
            self.unconfirmed_fsyncs.insert(id);
        }
        Ok(Some(id))
    }
}

trait AnyId {
    fn get_request_id_any(&self) -> u32;
}

impl AnyId for Packet {
    fn get_request_id_any(&self) -> u32 {
        match self {
            Packet::Status(p) => p.id,
            Packet::Handle(p) => p.id,
            Packet::Data(p) => p.id,
            Packet::Name(p) => p.id,
            Packet::Attrs(p) => p.id,
            Packet::ExtendedReply(p) => p.id,
            other => other.get_request_id(),
        }
    }
}

pub(super) fn status_error(describe: &str, what: &str, code: StatusCode, message: &str) -> Error {
    let kind = match code {
        StatusCode::NoSuchFile => ErrorKind::NotFound,
        StatusCode::PermissionDenied => ErrorKind::Security,
        _ => ErrorKind::Transport,
    };
    // OpenSSH's message is the code's own text ("No such file"): said once.
    let code = code.to_string();
    let message = message.trim();
    let detail = if message.is_empty() || message.eq_ignore_ascii_case(&code) {
        code
    } else {
        format!("{code} ({message})")
    };
    Error::new(kind, format!("{what} on {describe} failed: {detail}"))
}
