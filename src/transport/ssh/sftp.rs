//! A pipelined SFTP v3 client over one libssh2 channel, implementing `Remote`.
//!
//! libssh2's own SFTP API waits for every reply, so each open, read or rename costs a full
//! round trip. Here requests are written back to back and replies matched by id, so a
//! batch of independent requests costs one round trip, and bulk data streams with many
//! requests in flight. Packets are encoded and decoded by `russh_sftp::protocol`; only
//! the framing (a big-endian length) is done here.
//!
//! Requests on one handle are processed in order (SFTP v3 requires it). Replies that must
//! be checked but need not be waited for (close, mkdir) are "deferred": their ids are
//! remembered and their status checked at the next point where we wait anyway.

use std::collections::HashMap;
use std::io::{Read, Write};

use bytes::Bytes;
use russh_sftp::protocol::{
    Close, Extended, FileAttributes, Init, MkDir, Open, OpenFlags, Packet, Read as ReadReq,
    ReadDir, Remove, RmDir, SetStat, StatusCode,
};

mod batch;
mod download;
mod upload;

use super::connect::{ConnectOptions, Connection, SshTarget, connect};
use crate::error::{Error, ErrorKind, Result};
use crate::transport::{Published, Remote, RemoteEntry, Upload};

/// Data per READ/WRITE request: OpenSSH's sftp-server accepts packets up to 256 KiB.
const CHUNK: usize = 255 * 1024 - 64;
/// Requests in flight while streaming (about 16 MiB): enough to fill a long fat pipe.
const WINDOW: usize = 64;
/// Largest reply we accept (a READDIR reply of many names, or a DATA packet).
const MAX_PACKET: u32 = 4 << 20;
/// Requests whose replies are not waited for (closes, removals, chmods) allowed in
/// flight; past it the oldest replies are read before anything more is sent.
const MAX_DEFERRED: usize = 256;
const FSYNC_EXTENSION: &str = "fsync@openssh.com";
const STATVFS_EXTENSION: &str = "statvfs@openssh.com";
/// A write that fails (plain `SSH_FX_FAILURE`: sftp-server reports ENOSPC no better) on a
/// file system with less than this free is reported as a full disk.
const NEARLY_FULL: u64 = 1 << 20;

pub struct SftpRemote {
    channel: ssh2::Channel,
    _conn: Connection,
    root: String,
    describe: String,
    next_id: u32,
    /// Replies that arrived while we waited for another id.
    stash: HashMap<u32, Packet>,
    /// Requests whose replies nobody waits for, with what they were for and whether a
    /// plain failure is acceptable; their replies are checked as they arrive.
    deferred: HashMap<u32, (String, bool)>,
    /// The first failure among deferred replies, reported by the next wait.
    deferred_error: Option<Error>,
    has_fsync: bool,
    has_statvfs: bool,
    /// A channel read or write failed (timeout, dead connection): the packet stream is
    /// out of step, so later requests fail at once instead of each waiting a timeout.
    broken: bool,
    /// `BATON_TRACE_SFTP=1`: log every packet to stderr.
    trace: bool,
    /// Directories opened ahead of a publish (`prepare_publish`), for their fsync: the
    /// request id while the reply is outstanding, then the handle.
    prepared: HashMap<String, Prepared>,
}

enum Prepared {
    Pending(u32),
    Ready(String),
}

fn lost(describe: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Transport, format!("connection to {describe} failed: {e}"))
        .with_hint("check the network and the server; nothing was published half-way, so run the command again")
}

impl SftpRemote {
    pub fn connect(target: &SshTarget, options: &ConnectOptions, root: &str) -> Result<SftpRemote> {
        let conn = connect(target, options)?;
        let describe = format!(
            "ssh://{}@{}:{}/{}",
            conn.user,
            conn.host,
            conn.port,
            root.trim_start_matches('/')
        );
        let mut channel = conn
            .session
            .channel_session()
            .map_err(|e| lost(&describe, e))?;
        channel.subsystem("sftp").map_err(|e| lost(&describe, e))?;
        let mut remote = SftpRemote {
            channel,
            _conn: conn,
            root: root.trim_end_matches('/').to_string(),
            describe,
            next_id: 1,
            stash: HashMap::new(),
            deferred: HashMap::new(),
            deferred_error: None,
            has_fsync: false,
            has_statvfs: false,
            broken: false,
            trace: std::env::var_os("BATON_TRACE_SFTP").is_some_and(|v| v != "0"),
            prepared: HashMap::new(),
        };
        remote.send(Packet::Init(Init::new()))?;
        match remote.recv()? {
            Packet::Version(v) => {
                remote.has_fsync = v.extensions.contains_key(FSYNC_EXTENSION);
                remote.has_statvfs = v.extensions.contains_key(STATVFS_EXTENSION);
            }
            other => {
                return Err(lost(
                    &remote.describe,
                    format!("unexpected SFTP greeting {other:?}"),
                ));
            }
        }
        Ok(remote)
    }

    fn path(&self, rel: &str) -> String {
        match (self.root.as_str(), rel) {
            (root, "") => {
                if root.is_empty() {
                    ".".into()
                } else {
                    root.into()
                }
            }
            ("", rel) => rel.into(),
            (root, rel) => format!("{root}/{rel}"),
        }
    }

    fn id(&mut self) -> u32 {
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.next_id
    }

    fn send(&mut self, packet: Packet) -> Result<()> {
        if self.broken {
            return Err(lost(&self.describe, "the connection already failed"));
        }
        let bytes = Bytes::try_from(packet).map_err(|e| lost(&self.describe, e))?;
        if self.trace {
            eprintln!(
                "sftp: send {} bytes, type {}",
                bytes.len(),
                bytes.get(4).copied().unwrap_or(0)
            );
        }
        if let Err(e) = self.channel.write_all(&bytes) {
            self.broken = true;
            return Err(lost(&self.describe, e));
        }
        Ok(())
    }

    fn recv(&mut self) -> Result<Packet> {
        if self.broken {
            return Err(lost(&self.describe, "the connection already failed"));
        }
        // Until the whole packet is in, a failure leaves the stream out of step.
        self.broken = true;
        let mut len = [0u8; 4];
        self.channel
            .read_exact(&mut len)
            .map_err(|e| lost(&self.describe, e))?;
        let len = u32::from_be_bytes(len);
        if len == 0 || len > MAX_PACKET {
            return Err(lost(&self.describe, format!("SFTP packet of {len} bytes")));
        }
        let mut body = vec![0u8; len as usize];
        self.channel
            .read_exact(&mut body)
            .map_err(|e| lost(&self.describe, e))?;
        self.broken = false;
        let mut bytes = Bytes::from(body);
        if self.trace {
            eprintln!(
                "sftp: recv {len} bytes, type {}",
                bytes.first().copied().unwrap_or(0)
            );
        }
        Packet::try_from(&mut bytes)
            .map_err(|e| lost(&self.describe, format!("bad SFTP packet: {e}")))
    }

    /// Send a request and return its id without waiting.
    fn request(&mut self, make: impl FnOnce(u32) -> Packet) -> Result<u32> {
        let id = self.id();
        self.send(make(id))?;
        Ok(id)
    }

    fn defer(&mut self, id: u32, what: String, ignore_failure: bool) {
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
    fn wait(&mut self, id: u32) -> Result<Packet> {
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
        match self.deferred_error.take() {
            Some(e) => Err(e),
            None => Ok(packet),
        }
    }

    fn check_deferred(&mut self, packet: Packet, what: &str, ignore_failure: bool) {
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

    fn expect_ok(&self, packet: Packet, what: &str) -> Result<()> {
        match packet {
            Packet::Status(s) if s.status_code == StatusCode::Ok => Ok(()),
            other => Err(self.unexpected(what, other)),
        }
    }

    /// `expect_ok` for a reply to a write (or the fsync after it) of `rel`: a plain
    /// failure on a nearly full file system is reported as the full disk it is.
    fn expect_written(&mut self, packet: Packet, what: &str, rel: &str) -> Result<()> {
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
    fn disk_full(&mut self, what: &str, rel: &str) -> Option<Error> {
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
    fn unexpected(&self, what: &str, packet: Packet) -> Error {
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
    fn expect_handle(&self, packet: Packet, what: &str) -> Result<Option<String>> {
        match packet {
            Packet::Handle(h) => Ok(Some(h.handle)),
            Packet::Status(s) if s.status_code == StatusCode::NoSuchFile => Ok(None),
            other => Err(self.unexpected(what, other)),
        }
    }

    /// The handle of a file just created at `path`; a missing directory is not_found.
    fn created_handle(&self, packet: Packet, path: &str) -> Result<String> {
        self.expect_handle(packet, &format!("create {path}"))?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "cannot create {path} on {}: no such directory",
                    self.describe
                ))
            })
    }

    fn open(&mut self, rel: &str, flags: OpenFlags, mode: Option<u32>) -> Result<u32> {
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

    fn send_read(&mut self, handle: &str, offset: u64, len: u32) -> Result<u32> {
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
    fn wait_data(&mut self, id: u32, what: &str) -> Result<Option<Vec<u8>>> {
        match self.wait(id)? {
            Packet::Data(d) => Ok(Some(d.data)),
            Packet::Status(s) if s.status_code == StatusCode::Eof => Ok(None),
            other => Err(self.unexpected(what, other)),
        }
    }

    /// The handle of a directory opened by `prepare_publish`, once its reply is in.
    fn prepared_handle(&mut self, dir: &str) -> Result<Option<String>> {
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
            None => Ok(None),
        }
    }

    fn send_readdir(&mut self, handle: &str) -> Result<u32> {
        let handle = handle.to_string();
        self.request(|id| Packet::ReadDir(ReadDir { id, handle }))
    }

    fn close_later(&mut self, handle: String, what: &str) -> Result<()> {
        let id = self.request(|id| Packet::Close(Close { id, handle }))?;
        self.defer(id, format!("close {what}"), false);
        Ok(())
    }

    fn fsync(&mut self, handle: &str) -> Result<Option<u32>> {
        if !self.has_fsync {
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

fn status_error(describe: &str, what: &str, code: StatusCode, message: &str) -> Error {
    let kind = match code {
        StatusCode::NoSuchFile => ErrorKind::NotFound,
        StatusCode::PermissionDenied => ErrorKind::Security,
        _ => ErrorKind::Transport,
    };
    Error::new(
        kind,
        format!("{what} on {describe} failed: {code} ({message})"),
    )
}

impl Remote for SftpRemote {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn read_many(
        &mut self,
        files: &[String],
        dirs: &[String],
        limit: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        self.read_many_windowed(files, dirs, limit)
    }

    fn make_dirs(&mut self, dirs: &[String]) -> Result<()> {
        for d in dirs {
            // The store's own directory may need its parents: ask for each ancestor
            // (existing ones answer "failure", which is fine).
            if d.is_empty() {
                let mut prefix = String::new();
                let root = self.root.clone();
                let components: Vec<&str> = root.split('/').collect();
                for part in &components[..components.len().saturating_sub(1)] {
                    prefix.push_str(part);
                    if !part.is_empty() {
                        let (path, attrs) = (
                            prefix.clone(),
                            FileAttributes {
                                permissions: Some(0o700),
                                ..FileAttributes::empty()
                            },
                        );
                        let id = self.request(|id| Packet::MkDir(MkDir { id, path, attrs }))?;
                        self.defer(id, format!("mkdir {prefix}"), true);
                    }
                    prefix.push('/');
                }
            }
            let path = self.path(d);
            let attrs = FileAttributes {
                permissions: Some(0o700),
                ..FileAttributes::empty()
            };
            let p = path.clone();
            let id = self.request(|id| Packet::MkDir(MkDir { id, path: p, attrs }))?;
            // An existing directory answers "failure": fine. The chmod that follows makes
            // the mode exactly 0700 whatever the server's umask did.
            self.defer(id, format!("mkdir {d}"), true);
            let attrs = FileAttributes {
                permissions: Some(0o700),
                ..FileAttributes::empty()
            };
            let id = self.request(|id| Packet::SetStat(SetStat { id, path, attrs }))?;
            self.defer(id, format!("chmod {d}"), false);
        }
        Ok(())
    }

    fn create(&mut self, path: &str) -> Result<Box<dyn Upload + '_>> {
        let flags = OpenFlags::READ | OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::EXCLUDE;
        let id = self.open(path, flags, Some(0o600))?;
        let reply = self.wait(id)?;
        let handle = self.created_handle(reply, path)?;
        Ok(Box::new(upload::SftpUpload {
            remote: self,
            handle,
            path: path.to_string(),
            offset: 0,
            buf: Vec::with_capacity(CHUNK),
            inflight: Default::default(),
        }))
    }

    fn put_files(&mut self, files: &[(String, Vec<u8>)]) -> Result<()> {
        self.put_files_windowed(files)
    }

    fn publish_many(&mut self, moves: &[(String, String)]) -> Result<Vec<Published>> {
        // Each chunk opens at most HANDLE_WINDOW target directories for their fsync.
        let mut outcomes = Vec::with_capacity(moves.len());
        for chunk in moves.chunks(batch::HANDLE_WINDOW) {
            outcomes.extend(self.publish_chunk(chunk)?);
        }
        Ok(outcomes)
    }

    fn prepare_publish(&mut self, dirs: &[String]) -> Result<()> {
        for dir in dirs {
            // Preparing is only a head start: past the window, publish opens them itself.
            if !self.prepared.contains_key(dir) && self.prepared.len() < batch::HANDLE_WINDOW {
                let id = self.open(dir, OpenFlags::READ, None)?;
                self.prepared.insert(dir.clone(), Prepared::Pending(id));
            }
        }
        Ok(())
    }

    fn remove_empty_dir(&mut self, dir: &str) {
        let path = self.path(dir);
        if let Ok(id) = self.request(|id| Packet::RmDir(RmDir { id, path })) {
            self.defer(id, format!("remove {dir}"), true);
        }
    }

    fn read_file(&mut self, path: &str, sink: &mut dyn Write) -> Result<u64> {
        self.read_file_streamed(path, sink)
    }

    fn read_file_sized(&mut self, path: &str, len: u64, sink: &mut dyn Write) -> Result<()> {
        self.read_file_exact(path, len, sink)
    }

    fn read_range(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.read_range_of(path, offset, len)
    }

    fn remove_dir_all(&mut self, dir: &str) -> Result<()> {
        let path = self.path(dir);
        let id = self.request(|id| Packet::RmDir(RmDir { id, path }))?;
        if let Packet::Status(s) = self.wait(id)?
            && matches!(s.status_code, StatusCode::Ok | StatusCode::NoSuchFile)
        {
            return Ok(());
        }
        // Not empty: remove what is inside, then the directory.
        let (_, listing) = self.read_many(&[], &[dir.to_string()], 0)?;
        for entry in listing.into_iter().flatten().flatten() {
            if entry.name == "." || entry.name == ".." {
                continue;
            }
            let child = format!("{dir}/{}", entry.name);
            if entry.is_dir {
                self.remove_dir_all(&child)?;
            } else {
                let path = self.path(&child);
                let id = self.request(|id| Packet::Remove(Remove { id, filename: path }))?;
                self.defer(id, format!("remove {child}"), false);
            }
        }
        let path = self.path(dir);
        let id = self.request(|id| Packet::RmDir(RmDir { id, path }))?;
        let reply = self.wait(id)?;
        self.expect_ok(reply, &format!("remove {dir}"))
    }
}

impl Drop for SftpRemote {
    fn drop(&mut self) {
        if self.broken {
            // Waiting on a silent server would cost a timeout per step (EOF, then the
            // channel close that freeing the channel sends): cut the socket instead, so
            // that both fail at once.
            use std::os::unix::io::AsRawFd;
            // SAFETY: shutdown(2) on the session's own socket; no memory is involved.
            unsafe {
                libc::shutdown(self._conn.session.as_raw_fd(), libc::SHUT_RDWR);
            }
            return;
        }
        // The server handles requests in order, so outstanding closes and removals are
        // carried out before it sees the end of input; their replies are not waited for.
        let _ = self.channel.send_eof();
    }
}
