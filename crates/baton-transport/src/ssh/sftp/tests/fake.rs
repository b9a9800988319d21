//! The in-memory SFTP server the session tests talk to: a state machine over a map of
//! files that answers every request as it is written, with a hook to script replies.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use russh_sftp::extensions::Statvfs;
use russh_sftp::protocol::{
    Attrs, Data, ExtendedReply, File, FileAttributes, Handle, Name, OpenFlags, Packet, Status,
    StatusCode, Version,
};

use super::super::{Channel, FSYNC_EXTENSION, STATVFS_EXTENSION, SftpRemote};

/// Replaces the reply to a request: `Some(frames)` are sent instead (raw bytes, each
/// already framed or deliberately not; an empty one stands for the file system's own
/// reply), `None` leaves the request to the file system.
pub(super) type Hook = Box<dyn FnMut(&Packet) -> Option<Vec<Vec<u8>>> + Send>;

/// How the server names its handles.
#[derive(Default, Clone, Copy, PartialEq)]
pub(super) enum Naming {
    /// "h1", "h2", ...
    #[default]
    Counted,
    /// As OpenSSH does: by slot, 4 bytes big-endian, reusing the slot freed last first
    /// (`handle_new` in sftp-server.c).
    OpenSsh,
    /// By slot, a free one or a new one picked at random (a generator's state).
    Random(u64),
}

#[derive(Default)]
pub(super) struct Server {
    pub(super) files: BTreeMap<String, Vec<u8>>,
    pub(super) dirs: BTreeSet<String>,
    /// Open handles: the path and whether it is a directory already listed.
    pub(super) handles: HashMap<String, (String, Option<bool>)>,
    pub(super) next_handle: u64,
    pub(super) naming: Naming,
    pub(super) free_slots: Vec<u32>,
    pub(super) slots: u32,
    pub(super) max_open: usize,
    /// Hold every reply until the client reads, then send them newest first.
    pub(super) reorder: bool,
    /// Bytes free on the file system, for statvfs.
    pub(super) free: u64,
    /// The VERSION names no fsync extension, and an fsync is refused as unsupported.
    pub(super) no_fsync: bool,
    pub(super) hook: Option<Hook>,
    pub(super) input: Vec<u8>,
    pub(super) held: Vec<Vec<u8>>,
    pub(super) output: Vec<u8>,
    pub(super) read_at: usize,
    /// The client said no more requests follow (`Channel::send_eof`).
    pub(super) eof: bool,
    /// Requests seen, by packet type name.
    pub(super) seen: Vec<String>,
    /// Writes of the client on the channel (each one SSH packet or more on a real one).
    pub(super) writes: usize,
    /// The client cut the connection (`Channel::cut`), from this channel or a lane.
    pub(super) cut: bool,
}

/// The packet's type, as its `Debug` form begins (formatting stops there: a WRITE's
/// data is not formatted byte by byte).
fn type_name(packet: &Packet) -> String {
    struct Name(String);
    impl std::fmt::Write for Name {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            for c in s.chars() {
                if !c.is_alphanumeric() {
                    return Err(std::fmt::Error);
                }
                self.0.push(c);
            }
            Ok(())
        }
    }
    let mut name = Name(String::new());
    let _ = std::fmt::Write::write_fmt(&mut name, format_args!("{packet:?}"));
    name.0
}

pub(super) fn frame(packet: Packet) -> Vec<u8> {
    Bytes::try_from(packet).expect("a reply encodes").to_vec()
}

pub(super) fn status(id: u32, code: StatusCode) -> Packet {
    Packet::Status(Status {
        id,
        status_code: code,
        error_message: format!("{code}"),
        language_tag: "en".into(),
    })
}

pub(super) fn file_attrs(size: u64, dir: bool) -> FileAttributes {
    FileAttributes {
        size: Some(size),
        permissions: Some(if dir { 0o040700 } else { 0o100600 }),
        mtime: Some(7),
        ..FileAttributes::empty()
    }
}

pub(super) fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or(".", |(dir, _)| dir)
}

impl Server {
    fn handle(&mut self, path: &str, listed: Option<bool>) -> String {
        self.next_handle += 1;
        let reuse = match &mut self.naming {
            Naming::Counted => None,
            Naming::OpenSsh => Some(self.free_slots.len().checked_sub(1)),
            Naming::Random(state) => {
                *state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let pick = (*state >> 33) as usize;
                let n = self.free_slots.len();
                Some((n > 0 && !pick.is_multiple_of(3)).then(|| pick % n))
            }
        };
        let h = match reuse {
            None => format!("h{}", self.next_handle),
            Some(reuse) => {
                let slot = match reuse {
                    Some(i) => self.free_slots.remove(i),
                    None => {
                        self.slots += 1;
                        self.slots - 1
                    }
                };
                String::from_utf8(slot.to_be_bytes().to_vec()).expect("a small slot")
            }
        };
        self.handles.insert(h.clone(), (path.to_string(), listed));
        self.max_open = self.max_open.max(self.handles.len());
        h
    }

    pub(super) fn answer(&mut self, request: Packet) -> Packet {
        use Packet as P;
        let id = request.get_request_id();
        match request {
            P::Open(o) => {
                let exists = self.files.contains_key(&o.filename);
                if o.pflags.contains(OpenFlags::CREATE) {
                    if !self.dirs.contains(parent(&o.filename)) {
                        return status(id, StatusCode::NoSuchFile);
                    }
                    if exists && o.pflags.contains(OpenFlags::EXCLUDE) {
                        return status(id, StatusCode::Failure);
                    }
                    self.files.entry(o.filename.clone()).or_default();
                } else if !exists && !self.dirs.contains(&o.filename) {
                    return status(id, StatusCode::NoSuchFile);
                }
                let handle = self.handle(&o.filename, None);
                P::Handle(Handle { id, handle })
            }
            P::OpenDir(o) if self.dirs.contains(&o.path) => {
                let handle = self.handle(&o.path, Some(false));
                P::Handle(Handle { id, handle })
            }
            P::OpenDir(_) => status(id, StatusCode::NoSuchFile),
            P::Close(c) => match self.handles.remove(&c.handle) {
                Some(_) => {
                    if self.naming != Naming::Counted {
                        let slot: [u8; 4] = c.handle.as_bytes().try_into().expect("a slot");
                        self.free_slots.push(u32::from_be_bytes(slot));
                    }
                    status(id, StatusCode::Ok)
                }
                None => status(id, StatusCode::NoSuchFile),
            },
            // A request on a handle that is not open fails, as on OpenSSH.
            P::Read(r) if !self.handles.contains_key(&r.handle) => status(id, StatusCode::Failure),
            P::Write(w) if !self.handles.contains_key(&w.handle) => status(id, StatusCode::Failure),
            P::Fstat(f) if !self.handles.contains_key(&f.handle) => status(id, StatusCode::Failure),
            P::ReadDir(r) if !self.handles.contains_key(&r.handle) => {
                status(id, StatusCode::Failure)
            }
            P::Read(r) => {
                let path = self.handles[&r.handle].0.clone();
                let data = self.files.get(&path).cloned().unwrap_or_default();
                let start = (r.offset as usize).min(data.len());
                let end = (start + r.len as usize).min(data.len());
                if start == data.len() {
                    return status(id, StatusCode::Eof);
                }
                P::Data(Data {
                    id,
                    data: data[start..end].to_vec(),
                })
            }
            P::Write(w) => {
                let path = self.handles[&w.handle].0.clone();
                let file = self.files.entry(path).or_default();
                let end = w.offset as usize + w.data.len();
                if file.len() < end {
                    file.resize(end, 0);
                }
                file[w.offset as usize..end].copy_from_slice(&w.data);
                status(id, StatusCode::Ok)
            }
            P::Fstat(f) => {
                let path = &self.handles[&f.handle].0;
                let size = self.files.get(path).map_or(0, |f| f.len() as u64);
                P::Attrs(Attrs {
                    id,
                    attrs: file_attrs(size, false),
                })
            }
            P::Stat(s) => match (self.files.get(&s.path), self.dirs.contains(&s.path)) {
                (Some(f), _) => P::Attrs(Attrs {
                    id,
                    attrs: file_attrs(f.len() as u64, false),
                }),
                (None, true) => P::Attrs(Attrs {
                    id,
                    attrs: file_attrs(0, true),
                }),
                (None, false) => status(id, StatusCode::NoSuchFile),
            },
            P::ReadDir(r) => {
                let (dir, listed) = self.handles[&r.handle].clone();
                if listed == Some(true) {
                    return status(id, StatusCode::Eof);
                }
                self.handles
                    .insert(r.handle.clone(), (dir.clone(), Some(true)));
                let prefix = format!("{dir}/");
                let child = |p: &String| {
                    p.strip_prefix(&prefix)
                        .filter(|rest| !rest.contains('/'))
                        .map(str::to_string)
                };
                let mut files = vec![File::new(".", file_attrs(0, true))];
                for (name, data) in &self.files {
                    if let Some(c) = child(name) {
                        files.push(File::new(c, file_attrs(data.len() as u64, false)));
                    }
                }
                for name in &self.dirs {
                    if let Some(c) = child(name) {
                        files.push(File::new(c, file_attrs(0, true)));
                    }
                }
                P::Name(Name { id, files })
            }
            P::Rename(r) => {
                if self.files.contains_key(&r.newpath) {
                    return status(id, StatusCode::Failure);
                }
                match self.files.remove(&r.oldpath) {
                    Some(data) => {
                        self.files.insert(r.newpath, data);
                        status(id, StatusCode::Ok)
                    }
                    None => status(id, StatusCode::NoSuchFile),
                }
            }
            P::MkDir(m) if self.dirs.insert(m.path.clone()) => status(id, StatusCode::Ok),
            P::MkDir(_) => status(id, StatusCode::Failure),
            P::RmDir(r) if self.dirs.remove(&r.path) => status(id, StatusCode::Ok),
            P::Remove(r) if self.files.remove(&r.filename).is_some() => status(id, StatusCode::Ok),
            P::Remove(_) => status(id, StatusCode::NoSuchFile),
            P::Extended(e) if e.request == FSYNC_EXTENSION && self.no_fsync => {
                status(id, StatusCode::OpUnsupported)
            }
            P::Extended(e) if e.request == STATVFS_EXTENSION => {
                let fs = Statvfs {
                    block_size: 1,
                    fragment_size: 1,
                    blocks: 1 << 30,
                    blocks_free: self.free,
                    blocks_avail: self.free,
                    inodes: 100,
                    inodes_free: 50,
                    inodes_avail: 50,
                    fs_id: 1,
                    flags: 0,
                    name_max: 255,
                };
                let data = russh_sftp::ser::to_bytes(&fs).expect("statvfs encodes");
                P::ExtendedReply(ExtendedReply {
                    id,
                    data: data.to_vec(),
                })
            }
            _ => status(id, StatusCode::Ok),
        }
    }

    /// The whole requests at the front of `input`, taken from it.
    pub(super) fn split_requests(input: &mut Vec<u8>) -> Vec<Packet> {
        let mut requests = Vec::new();
        while input.len() >= 4 {
            let len = u32::from_be_bytes(input[..4].try_into().expect("4 bytes")) as usize;
            if input.len() < 4 + len {
                break;
            }
            let body = input[4..4 + len].to_vec();
            input.drain(..4 + len);
            requests.push(Packet::try_from(&mut Bytes::from(body)).expect("a valid request"));
        }
        requests
    }

    /// The frames that answer `request`: the VERSION, the hook's, or the file system's.
    pub(super) fn reply_to(&mut self, request: Packet) -> Vec<Vec<u8>> {
        self.seen.push(type_name(&request));
        if let Packet::Init(_) = request {
            let mut v = Version::new();
            if !self.no_fsync {
                v.extensions.insert(FSYNC_EXTENSION.into(), "1".into());
            }
            v.extensions.insert(STATVFS_EXTENSION.into(), "2".into());
            return vec![frame(Packet::Version(v))];
        }
        let mut hook = self.hook.take();
        let script = hook.as_mut().and_then(|h| h(&request));
        self.hook = hook;
        match script {
            Some(frames) if frames.iter().any(Vec::is_empty) => {
                let real = frame(self.answer(request));
                frames
                    .into_iter()
                    .map(|f| if f.is_empty() { real.clone() } else { f })
                    .collect()
            }
            Some(frames) => frames,
            None => vec![frame(self.answer(request))],
        }
    }

    fn take_requests(&mut self) {
        for request in Self::split_requests(&mut self.input) {
            let frames = self.reply_to(request);
            if self.reorder {
                self.held.extend(frames);
            } else {
                frames.into_iter().for_each(|f| self.output.extend(f));
            }
        }
    }
}

#[derive(Clone)]
pub(super) struct Fake(Arc<Mutex<Server>>);

impl Write for Fake {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut server = self.0.lock().expect("server lock");
        server.writes += 1;
        server.input.extend_from_slice(data);
        server.take_requests();
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Fake {
    /// What the server has said so far; then end of file (a server that went silent).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut s = self.0.lock().expect("server lock");
        if s.read_at == s.output.len() {
            let held: Vec<Vec<u8>> = s.held.drain(..).rev().collect();
            held.into_iter().for_each(|f| s.output.extend(f));
        }
        let n = buf.len().min(s.output.len() - s.read_at);
        buf[..n].copy_from_slice(&s.output[s.read_at..s.read_at + n]);
        s.read_at += n;
        Ok(n)
    }
}

impl Channel for Fake {
    fn send_eof(&mut self) -> io::Result<()> {
        self.with(|s| s.eof = true);
        Ok(())
    }

    fn has_input(&self) -> bool {
        self.with(|s| s.read_at < s.output.len() || !s.held.is_empty())
    }

    fn cut(&self) {
        self.with(|s| s.cut = true);
    }
}

/// A store `s` with `s/objects` and the given files (paths under `s/`).
pub(super) fn fake(files: &[(&str, &[u8])]) -> (SftpRemote, Fake) {
    fake_with(files, |_| {})
}

/// `fake`, with the server set up by `configure` before the session's INIT reaches it.
pub(super) fn fake_with(
    files: &[(&str, &[u8])],
    configure: impl FnOnce(&mut Server),
) -> (SftpRemote, Fake) {
    let mut server = Server {
        free: 1 << 40,
        ..Server::default()
    };
    configure(&mut server);
    server
        .dirs
        .extend(["s".to_string(), "s/objects".to_string()]);
    for (path, data) in files {
        server.files.insert(format!("s/{path}"), data.to_vec());
    }
    let fake = Fake(Arc::new(Mutex::new(server)));
    let remote = SftpRemote::over(Box::new(fake.clone()), None, "s", "fake:s".into())
        .expect("the session starts");
    (remote, fake)
}

impl Fake {
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut Server) -> T) -> T {
        f(&mut self.0.lock().expect("server lock"))
    }
    pub(super) fn hook(&self, hook: impl FnMut(&Packet) -> Option<Vec<Vec<u8>>> + Send + 'static) {
        self.with(|s| s.hook = Some(Box::new(hook)));
    }
}
