//! A pipelined SFTP v3 client over one packet stream (a libssh2 channel, or any
//! `Channel`), implementing `Remote`.
//!
//! libssh2's own SFTP API waits for every reply, so each open, read or rename costs a full
//! round trip. Here requests are written back to back and replies matched by id, so a
//! batch of independent requests costs one round trip, and bulk data streams with many
//! requests in flight. Packets are encoded and decoded by `russh_sftp::protocol`; only
//! the framing (a big-endian length) is done here, in `session`.
//!
//! Requests on one handle are processed in order (SFTP v3 requires it). Replies that must
//! be checked but need not be waited for (close, mkdir) are "deferred": their ids are
//! remembered and their status checked at the next point where we wait anyway.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::os::unix::io::{AsRawFd, RawFd};

use russh_sftp::protocol::{
    FileAttributes, Init, MkDir, Packet, Remove, RmDir, SetStat, StatusCode,
};

mod batch;
mod chained_reads;
mod download;
#[doc(hidden)]
pub mod fuzzing;
mod handle_guess;
mod probe;
mod read_ahead;
mod session;
mod tail_reads;
#[cfg(test)]
mod tests;
mod upload;

use super::connect::{ConnectOptions, Connection, SshTarget, connect};
use crate::{Pipelined, Published, Remote, RemoteEntry, Step, Upload};
use baton_error::{Error, Result};
use session::{lost, status_error};

/// Data per READ/WRITE request: OpenSSH's sftp-server accepts packets up to 256 KiB.
const CHUNK: usize = 255 * 1024 - 64;
/// Requests in flight while streaming (about 16 MiB): enough to fill a long fat pipe.
const WINDOW: usize = 64;
/// Largest reply we accept (a READDIR reply of many names, or a DATA packet).
const MAX_PACKET: u32 = 4 << 20;
/// What the server may send ahead of our reads on the SFTP channel. libssh2's default
/// (2 MiB) capped a download at 2 MiB a round trip (about 40 MB/s at 50 ms); libssh2
/// keeps the window at this size as we read (`_libssh2_channel_read`).
const RECEIVE_WINDOW: u32 = 16 << 20;
/// The largest SSH packet the server may send on it: libssh2's default.
const PACKET_SIZE: u32 = 32 << 10;
/// Requests held back (`SftpRemote::out`) up to about this many bytes: one SSH packet of
/// the size OpenSSH's channels take.
const OUT_BATCH: usize = 32 << 10;
/// Requests whose replies are not waited for (closes, removals, chmods) allowed in
/// flight; past it the oldest replies are read before anything more is sent.
const MAX_DEFERRED: usize = 256;
const FSYNC_EXTENSION: &str = "fsync@openssh.com";
const STATVFS_EXTENSION: &str = "statvfs@openssh.com";
/// A write that fails (plain `SSH_FX_FAILURE`: sftp-server reports ENOSPC no better) on a
/// file system with less than this free is reported as a full disk.
const NEARLY_FULL: u64 = 1 << 20;

/// The byte stream SFTP packets travel over: the server's replies are read from it and
/// requests written to it. A libssh2 channel in use; an in-memory one in tests.
pub trait Channel: Read + Write + Send {
    /// Tell the server no more requests follow (it still carries out those it has).
    fn send_eof(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Bytes that can be written before a write waits for the server's window; `None`
    /// when the channel has no window.
    fn write_room(&self) -> Option<u32> {
        None
    }

    /// Whether bytes have arrived that a read would return without waiting.
    fn has_input(&self) -> bool {
        true
    }

    /// End the connection the channel rides on, at once and for every channel on it: a
    /// read or write on it failed, and each later step (a second channel's close, EOF,
    /// freeing a channel) would otherwise wait a whole timeout on a silent server.
    fn cut(&self) {}
}

/// A libssh2 channel and the socket of the connection it rides on (kept open by the
/// channel's hold on its session), which `cut` shuts.
struct SshChannel {
    channel: ssh2::Channel,
    socket: RawFd,
}

impl SshChannel {
    fn new(channel: ssh2::Channel, session: &ssh2::Session) -> SshChannel {
        SshChannel {
            channel,
            socket: session.as_raw_fd(),
        }
    }
}

/// Shut the connection's socket both ways: every libssh2 call on it fails at once.
fn cut_socket(socket: RawFd) {
    // SAFETY: shutdown(2) on a socket a live session owns; no memory is involved.
    unsafe {
        libc::shutdown(socket, libc::SHUT_RDWR);
    }
}

impl Read for SshChannel {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.channel.read(buf)
    }
}

impl Write for SshChannel {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.channel.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.channel.flush()
    }
}

impl Channel for SshChannel {
    fn send_eof(&mut self) -> io::Result<()> {
        self.channel.send_eof().map_err(io::Error::from)
    }

    fn write_room(&self) -> Option<u32> {
        Some(self.channel.write_window().remaining)
    }

    fn has_input(&self) -> bool {
        self.channel.read_window().available > 0
    }

    fn cut(&self) {
        cut_socket(self.socket);
    }
}

/// Opens another SFTP channel on the session's connection, for `upload`'s second lane,
/// in two steps of a round trip each: the channel, then (`LaneStarted`) its subsystem.
type LaneOpener = Box<dyn FnMut() -> std::result::Result<LaneStarted, NoLane> + Send>;
type LaneStarted = Box<dyn FnOnce() -> std::result::Result<Box<dyn Channel>, NoLane> + Send>;

/// Why no second channel was opened.
enum NoLane {
    /// The server said no (a limit on sessions, no subsystem): the upload goes on alone.
    Refused(String),
    /// The connection failed (a timeout, a reset).
    Failed(String),
}

impl NoLane {
    /// libssh2's refusals of a channel open or of the subsystem request are `Refused`;
    /// anything else means the connection is in trouble.
    fn from_ssh(e: ssh2::Error) -> NoLane {
        const CHANNEL_FAILURE: i32 = -21;
        const REQUEST_DENIED: i32 = -22;
        match e.code() {
            ssh2::ErrorCode::Session(CHANNEL_FAILURE | REQUEST_DENIED) => {
                NoLane::Refused(e.to_string())
            }
            _ => NoLane::Failed(e.to_string()),
        }
    }
}

pub struct SftpRemote {
    /// Second lanes an upload is done with, their input ended: dropped before `channel`,
    /// so that their channels' closes and this one's overlap.
    retired: Vec<SftpRemote>,
    channel: Box<dyn Channel>,
    /// The SSH connection the channel runs over, kept alive as long as the channel (and
    /// dropped after it); `None` for a channel of another kind.
    conn: Option<Connection>,
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
    /// INIT is sent and its VERSION not read yet (the extensions are unknown until it is).
    greeting_pending: bool,
    /// fsyncs sent before the VERSION was read, not yet answered: if the VERSION names
    /// no fsync extension, their refusal means what no fsync means (`fsync`).
    unconfirmed_fsyncs: HashSet<u32>,
    /// The server was told no more requests follow (`Channel::send_eof`).
    input_ended: bool,
    /// Within a batch of many small requests (`corked`): those not written to the channel
    /// yet, written together (one SSH packet, one encryption and one system call for
    /// many requests, where each request was one of each) when they fill
    /// [`OUT_BATCH`], before any reply is read, and when the batch ends. Outside a batch
    /// every request is written as it is sent and this is empty, so whatever a method
    /// sent is on its way when it returns (reads started ahead, closes whose replies
    /// nobody waits for), and the channel's window and input can be looked at directly.
    out: Vec<u8>,
    corked: bool,
    /// Opens a second lane for a large upload; `None` when there is no way to (a channel
    /// of another kind) or the server refused one.
    lane_opener: Option<LaneOpener>,
    /// A channel read or write failed (timeout, dead connection): the packet stream is
    /// out of step, so later requests fail at once instead of each waiting a timeout.
    broken: bool,
    /// Directories opened ahead of a publish (`prepare_publish`), for their fsync: queued,
    /// then the request id while the reply is outstanding, then the handle.
    prepared: HashMap<String, Prepared>,
    /// Round trips waited for since the session started (after INIT): a reply to a
    /// request sent after the last counted wait began counts one.
    round_trips: u64,
    /// Outstanding requests and the value of `round_trips` when each was sent.
    sent_in_round: HashMap<u32, u64>,
    /// Waiting for room in a full streaming window: bandwidth, not a round trip.
    streaming: bool,
    /// Reads started by `start_reads`, by token, until collected.
    probes: HashMap<u64, probe::Probe>,
    next_probe: u64,
    /// Files kept open by `open_tail`, by token, until read or closed.
    open_files: HashMap<u64, tail_reads::OpenFile>,
    next_open: u64,
    /// The server's handles as far as the session knows them, for guessing.
    handles: handle_guess::Handles,
    /// Files `expect_tails` announced, opened and read ahead.
    expected: read_ahead::ExpectedFiles,
}

/// The store at `root` as messages name it: an absolute path as `ssh://user@host:port/path`,
/// a home-relative one as given (`user@host:work/.baton`, or `ssh://user@host:port/~/work/.baton`
/// off port 22), never made to look absolute.
fn describe(user: &str, host: &str, port: u16, root: &str) -> String {
    match root.strip_prefix('/') {
        Some(absolute) => format!("ssh://{user}@{host}:{port}/{absolute}"),
        None if port == 22 => format!("{user}@{host}:{root}"),
        None => format!("ssh://{user}@{host}:{port}/~/{root}"),
    }
}

/// What a request on the store's directory `rel` did, for an error that names the store
/// beside it: `mkdir objects`, or plain `mkdir` for the store's own directory (`rel` "").
fn labelled(op: &str, rel: &str) -> String {
    if rel.is_empty() {
        op.to_string()
    } else {
        format!("{op} {rel}")
    }
}

enum Prepared {
    /// Not opened yet (`send_prepared`).
    Queued,
    Pending(u32),
    Ready(String),
}

impl SftpRemote {
    pub fn connect(target: &SshTarget, options: &ConnectOptions, root: &str) -> Result<SftpRemote> {
        let conn = connect(target, options)?;
        let describe = describe(&conn.user, &conn.host, conn.port, root);
        let mut channel = conn
            .session
            .channel_open("session", RECEIVE_WINDOW, PACKET_SIZE, None)
            .map_err(|e| lost(&describe, &e).with_source(e))?;
        channel
            .subsystem("sftp")
            .map_err(|e| lost(&describe, &e).with_source(e))?;
        let session = conn.session.clone();
        let channel = SshChannel::new(channel, &session);
        let mut remote = SftpRemote::over(Box::new(channel), Some(conn), root, describe)?;
        remote.lane_opener = Some(Box::new(move || {
            // A failure is cut before the half-open channel is freed, which would wait
            // for the server's close.
            let socket = session.as_raw_fd();
            let refused = move |e: ssh2::Error| {
                let why = NoLane::from_ssh(e);
                if let NoLane::Failed(_) = why {
                    cut_socket(socket);
                }
                why
            };
            // Only status replies come back on a lane: the default window is plenty.
            let mut channel = session.channel_session().map_err(refused)?;
            let channel_session = session.clone();
            Ok(Box::new(move || {
                channel.subsystem("sftp").map_err(refused)?;
                Ok(Box::new(SshChannel::new(channel, &channel_session)) as Box<dyn Channel>)
            }) as LaneStarted)
        }));
        Ok(remote)
    }

    /// Start an SFTP session on `channel` (INIT, then the server's VERSION and
    /// extensions), for a store at `root` on the server; `describe` names it in messages.
    fn over(
        channel: Box<dyn Channel>,
        conn: Option<Connection>,
        root: &str,
        describe: String,
    ) -> Result<SftpRemote> {
        let mut remote = SftpRemote {
            retired: Vec::new(),
            channel,
            conn,
            root: root.trim_end_matches('/').to_string(),
            describe,
            next_id: 1,
            stash: HashMap::new(),
            deferred: HashMap::new(),
            deferred_error: None,
            has_fsync: false,
            has_statvfs: false,
            greeting_pending: false,
            unconfirmed_fsyncs: HashSet::new(),
            input_ended: false,
            out: Vec::new(),
            corked: false,
            lane_opener: None,
            broken: false,
            prepared: HashMap::new(),
            round_trips: 0,
            sent_in_round: HashMap::new(),
            streaming: false,
            probes: HashMap::new(),
            next_probe: 0,
            open_files: HashMap::new(),
            next_open: 0,
            handles: handle_guess::Handles::default(),
            expected: Default::default(),
        };
        // The VERSION reply is read with the first reply anything waits for: requests
        // may follow INIT at once, since a server takes its input in order (SFTP v3
        // needs that of it anyway), so the greeting shares the first batch's round trip.
        remote.send(Packet::Init(Init::new()))?;
        remote.greeting_pending = true;
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
        self.batched(|remote| remote.read_many_windowed(files, dirs, limit))
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
            self.defer(id, labelled("mkdir", d), true);
            let attrs = FileAttributes {
                permissions: Some(0o700),
                ..FileAttributes::empty()
            };
            let id = self.request(|id| Packet::SetStat(SetStat { id, path, attrs }))?;
            self.defer(id, labelled("chmod", d), false);
        }
        Ok(())
    }

    fn create(&mut self, path: &str) -> Result<Box<dyn Upload + '_>> {
        self.create_with(path, &[])
    }

    fn publish_many(&mut self, moves: &[(String, String)]) -> Result<Vec<Published>> {
        // Each chunk opens at most HANDLE_WINDOW target directories for their fsync.
        let mut outcomes = Vec::with_capacity(moves.len());
        for chunk in moves.chunks(batch::HANDLE_WINDOW) {
            outcomes.extend(self.publish_chunk(chunk)?);
        }
        Ok(outcomes)
    }

    fn read_file_sized(&mut self, path: &str, len: u64, sink: &mut dyn Write) -> Result<()> {
        self.read_file_exact(path, len, sink)
    }

    fn read_range(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.read_range_of(path, offset, len)
    }

    fn remove_file(&mut self, path: &str) -> Result<bool> {
        let filename = self.path(path);
        let id = self.request(|id| Packet::Remove(Remove { id, filename }))?;
        match self.wait(id)? {
            Packet::Status(s) if s.status_code == StatusCode::NoSuchFile => Ok(false),
            reply => self
                .expect_ok(reply, &format!("remove {path}"))
                .map(|()| true),
        }
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

impl Pipelined for SftpRemote {
    fn start_reads(
        &mut self,
        files: &[String],
        dirs: &[String],
        limit: u64,
    ) -> Result<Option<u64>> {
        self.probe_start(files, dirs, limit)
    }

    fn collect_reads(
        &mut self,
        token: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        self.probe_collect(token)
    }

    fn create_with(
        &mut self,
        path: &str,
        beside: &[(String, Vec<u8>)],
    ) -> Result<Box<dyn Upload + '_>> {
        self.create_upload(path, beside)
    }

    fn run_in_order(&mut self, steps: &[Step]) -> Result<Vec<bool>> {
        self.batched(|remote| remote.run_steps(steps))
    }

    fn put_files(&mut self, files: &[(String, Vec<u8>)]) -> Result<()> {
        self.batched(|remote| remote.put_files_windowed(files))
    }

    fn prepare_publish(&mut self, dirs: &[String]) -> Result<()> {
        // While handles can be guessed, the opens wait for the next upload's (or the
        // next look at a directory's handle): a handle held would end the guessing.
        let queue = self.handles.guess().is_some();
        for dir in dirs {
            // Preparing is only a head start: past the window, publish opens them itself.
            if !self.prepared.contains_key(dir) && self.prepared.len() < batch::HANDLE_WINDOW {
                self.prepared.insert(dir.clone(), Prepared::Queued);
            }
        }
        if !queue {
            self.send_prepared()?;
        }
        Ok(())
    }

    fn round_trips(&self) -> Option<u64> {
        Some(self.round_trips)
    }

    fn cipher(&self) -> Option<String> {
        self.conn.as_ref().map(|c| c.cipher.clone())
    }

    fn forget_prepared(&mut self) {
        for (dir, prepared) in std::mem::take(&mut self.prepared) {
            let handle = match prepared {
                Prepared::Queued => continue,
                Prepared::Ready(handle) => handle,
                // A deferred failure stays for the next wait to report.
                Prepared::Pending(id) => match self.wait_quietly(id) {
                    Ok(Packet::Handle(h)) => h.handle,
                    _ => continue,
                },
            };
            if self.close_later(handle, &dir).is_err() {
                return; // the connection failed: the next request says so
            }
        }
    }

    fn remove_empty_dir(&mut self, dir: &str) {
        let path = self.path(dir);
        if let Ok(id) = self.request(|id| Packet::RmDir(RmDir { id, path })) {
            self.defer(id, format!("remove {dir}"), true);
        }
    }

    fn open_tail(
        &mut self,
        path: &str,
        size: u64,
        tail_len: u64,
        body: bool,
    ) -> Result<(Vec<u8>, Option<u64>)> {
        self.tail_open(path, size, tail_len, body)
    }

    fn read_open(
        &mut self,
        token: Option<u64>,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        self.tail_read_more(token, path, offset, len)
    }

    fn read_rest(
        &mut self,
        token: Option<u64>,
        path: &str,
        size: u64,
        tail: &[u8],
        sink: &mut dyn Write,
    ) -> Result<()> {
        self.tail_read_rest(token, path, size, tail, sink)
    }

    fn close_tail(&mut self, token: Option<u64>, _path: &str) {
        self.tail_close(token)
    }

    fn expect_tails(&mut self, files: &[(String, u64, u64, bool)]) {
        self.expect(files)
    }
}

impl SftpRemote {
    /// Stream a whole file into `sink`; returns its length (the tests' reader).
    pub fn read_file(&mut self, path: &str, sink: &mut dyn Write) -> Result<u64> {
        self.read_file_streamed(path, sink)
    }
}

impl Drop for SftpRemote {
    fn drop(&mut self) {
        // The connection's own channel (a second channel's session has none) ends here.
        if self.conn.is_some() {
            crate::trace::closed(Some(self.round_trips));
        }
        if self.broken {
            // The failure cut the connection (`Channel::cut`): nothing more is said.
            return;
        }
        // The server handles requests in order, so outstanding closes and removals are
        // carried out before it sees the end of input; their replies are not waited for.
        self.end_input();
        // Freeing a channel waits for the server to close it; a retired lane's input
        // ended long ago, and this channel's close arrives while its close is awaited.
        self.retired.clear();
    }
}
