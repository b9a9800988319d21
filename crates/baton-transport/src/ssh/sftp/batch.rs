//! The batched SFTP operations (read many files and listings, write many small files),
//! pipelined through a window of at most `HANDLE_WINDOW` open handles.
//!
//! OpenSSH's sftp-server (9.2 `internal-sftp`) refuses to open more than about a hundred
//! handles at once, so a batch never opens everything first: it keeps a window of open
//! handles, closes each one as soon as its item is done and opens the next item in its
//! place. Replies are handled in the order the requests were sent, which is the order a
//! server answers them in, so the pipe stays full and a batch of N items costs about
//! N / `HANDLE_WINDOW` + 2 round trips instead of N.

use std::collections::VecDeque;

use russh_sftp::protocol::{
    FileAttributes, Fstat, MkDir, OpenFlags, Packet, Rename, RmDir, Stat, StatusCode,
    Write as WriteReq,
};

use super::chained_reads::CHAIN_ITEMS;
use super::{CHUNK, SftpRemote, lost, status_error};
use crate::{Published, RemoteEntry, Step as Order};
use baton_error::{Error, ErrorKind, Result};

/// Handles one batch keeps open at once (OpenSSH's server allows about a hundred; the
/// few that `prepare_publish` and an upload hold come on top).
pub(super) const HANDLE_WINDOW: usize = 32;

/// What an outstanding request of a batch was for.
enum Step {
    Open,
    /// A READ of a file (the replies for one file come back in order).
    Read,
    ReadDir,
    Write,
    Fsync,
    Stat,
    ReadBack,
}

/// One file or directory of a `read_many` batch while it is being read.
#[derive(Default)]
struct Reading {
    handle: Option<String>,
    /// Replies to READ / READDIR requests still outstanding.
    outstanding: usize,
    /// A READ answered EOF, or READDIR said the listing is complete.
    done: bool,
    /// A READ came back with data after the end was seen (or a second full chunk).
    more: bool,
    bytes: Vec<u8>,
    entries: Vec<RemoteEntry>,
}

#[allow(clippy::type_complexity)]
impl SftpRemote {
    /// `Remote::read_many`: files `0..files.len()` and then the directories are items,
    /// opened in order as the window allows. A file gets two reads (most files are done
    /// then; a longer one is streamed), a directory two READDIRs and more until its end.
    pub(super) fn read_many_windowed(
        &mut self,
        files: &[String],
        dirs: &[String],
        limit: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        // More files than one chain takes, once guesses are right: chain after chain (a
        // pull's batch of 256 small objects went the windowed way, 16 round trips).
        if dirs.is_empty() && files.len() > CHAIN_ITEMS && self.handles.confirmed() {
            let mut read = Vec::with_capacity(files.len());
            for part in files.chunks(CHAIN_ITEMS) {
                read.extend(self.read_many_windowed(part, &[], limit)?.0);
            }
            return Ok((read, Vec::new()));
        }
        if let Some(chained) = self.chain_send(files, dirs)? {
            return self.chain_collect(chained, files, dirs, limit);
        }
        let total = files.len() + dirs.len();
        let name = |i: usize| -> &str {
            if i < files.len() {
                &files[i]
            } else {
                &dirs[i - files.len()]
            }
        };
        let mut items: Vec<Reading> = (0..total).map(|_| Reading::default()).collect();
        let mut found = vec![false; total];
        let mut queue: VecDeque<(u32, usize, Step)> = VecDeque::new();
        let (mut next, mut live) = (0usize, 0usize);
        loop {
            while live < HANDLE_WINDOW && next < total {
                let id = if next < files.len() {
                    self.open(&files[next], OpenFlags::READ, None)?
                } else {
                    self.open_dir(name(next))?
                };
                queue.push_back((id, next, Step::Open));
                next += 1;
                live += 1;
            }
            let Some((id, i, step)) = queue.pop_front() else {
                break;
            };
            let is_file = i < files.len();
            let reply = self.wait(id)?;
            let item = &mut items[i];
            match step {
                Step::Open => {
                    let what = if is_file {
                        format!("open {}", name(i))
                    } else {
                        format!("list {}", name(i))
                    };
                    let Some(handle) = self.expect_handle(reply, &what)? else {
                        live -= 1;
                        continue;
                    };
                    found[i] = true;
                    if is_file {
                        let a = self.send_read(&handle, 0, CHUNK as u32)?;
                        let b = self.send_read(&handle, CHUNK as u64, CHUNK as u32)?;
                        queue.push_back((a, i, Step::Read));
                        queue.push_back((b, i, Step::Read));
                    } else {
                        let a = self.send_readdir(&handle)?;
                        let b = self.send_readdir(&handle)?;
                        queue.push_back((a, i, Step::ReadDir));
                        queue.push_back((b, i, Step::ReadDir));
                    }
                    let item = &mut items[i];
                    item.handle = Some(handle);
                    item.outstanding = 2;
                    continue;
                }
                Step::Read => {
                    item.outstanding -= 1;
                    match reply {
                        Packet::Data(d) if !item.done && item.outstanding == 1 => {
                            item.bytes = d.data
                        }
                        // The second chunk has data too: the file is longer than two
                        // reads (or a read came back short); it is streamed below.
                        Packet::Data(_) => item.more = true,
                        Packet::Status(s) if s.status_code == StatusCode::Eof => item.done = true,
                        other => return Err(self.unexpected(&format!("read {}", name(i)), other)),
                    }
                }
                Step::ReadDir => {
                    item.outstanding -= 1;
                    let mut entries = std::mem::take(&mut item.entries);
                    let end = self.collect_names(reply, name(i), &mut entries)?;
                    let item = &mut items[i];
                    item.entries = entries;
                    item.done |= end;
                }
                _ => unreachable!("read_many sends no other requests"),
            }
            let item = &mut items[i];
            if item.outstanding > 0 {
                continue;
            }
            let Some(handle) = item.handle.clone() else {
                continue;
            };
            if is_file {
                if !item.done || item.more || item.bytes.len() as u64 > limit {
                    // Larger than two chunks (or short reads): read it again, in order.
                    let mut sink = Vec::new();
                    self.stream_handle(&handle, limit, &mut sink, name(i))?;
                    items[i].bytes = sink;
                }
                if items[i].bytes.len() as u64 > limit {
                    return Err(self.too_large(name(i), limit));
                }
            } else if !item.done {
                let a = self.send_readdir(&handle)?;
                let b = self.send_readdir(&handle)?;
                queue.push_back((a, i, Step::ReadDir));
                queue.push_back((b, i, Step::ReadDir));
                items[i].outstanding = 2;
                continue;
            }
            // Closed before the next open is sent: the server frees the handle first.
            self.close_later(handle, name(i))?;
            items[i].handle = None;
            live -= 1;
        }
        let mut items = items.into_iter().zip(found);
        let file_out = items
            .by_ref()
            .take(files.len())
            .map(|(item, found)| found.then_some(item.bytes))
            .collect();
        let dir_out = items
            .map(|(mut item, found)| {
                item.entries.sort_by(|x, y| x.name.cmp(&y.name));
                found.then_some(item.entries)
            })
            .collect();
        Ok((file_out, dir_out))
    }

    /// `Remote::put_files`: create each file (exclusively, 0600), then write, fsync, stat
    /// and read it back, at most `HANDLE_WINDOW` files open at once.
    pub(super) fn put_files_windowed(&mut self, files: &[(String, Vec<u8>)]) -> Result<()> {
        if let Some((path, _)) = files.iter().find(|(_, b)| b.len() > CHUNK) {
            return Err(Error::other(format!("{path} is too large for put_files")));
        }
        let flags = OpenFlags::READ | OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::EXCLUDE;
        let mut handles: Vec<Option<String>> = vec![None; files.len()];
        let mut modes: Vec<Option<u32>> = vec![None; files.len()];
        let mut queue: VecDeque<(u32, usize, Step)> = VecDeque::new();
        let (mut next, mut live) = (0usize, 0usize);
        loop {
            while live < HANDLE_WINDOW && next < files.len() {
                let id = self.open(&files[next].0, flags, Some(0o600))?;
                queue.push_back((id, next, Step::Open));
                next += 1;
                live += 1;
            }
            let Some((id, i, step)) = queue.pop_front() else {
                break;
            };
            let (path, bytes) = &files[i];
            let reply = self.wait(id)?;
            match step {
                Step::Open => {
                    let handle = self.created_handle(reply, path)?;
                    let (h, data) = (handle.clone(), bytes.clone());
                    let write = self.request(|id| {
                        Packet::Write(WriteReq {
                            id,
                            handle: h,
                            offset: 0,
                            data,
                        })
                    })?;
                    queue.push_back((write, i, Step::Write));
                    if let Some(fsync) = self.fsync(&handle)? {
                        queue.push_back((fsync, i, Step::Fsync));
                    }
                    let h = handle.clone();
                    let stat = self.request(|id| Packet::Fstat(Fstat { id, handle: h }))?;
                    queue.push_back((stat, i, Step::Stat));
                    let read = self.send_read(&handle, 0, (bytes.len() as u32).max(1))?;
                    queue.push_back((read, i, Step::ReadBack));
                    handles[i] = Some(handle);
                }
                Step::Write => self.expect_written(reply, &format!("write {path}"), path)?,
                Step::Fsync => self.expect_written(reply, &format!("fsync {path}"), path)?,
                Step::Stat => {
                    modes[i] = match reply {
                        Packet::Attrs(a) => a.attrs.permissions.map(|p| p & 0o7777),
                        other => {
                            return Err(lost(
                                &self.describe,
                                format!("unexpected reply to fstat: {other:?}"),
                            ));
                        }
                    }
                }
                Step::ReadBack => {
                    let back = match reply {
                        Packet::Data(d) => d.data,
                        Packet::Status(s) if s.status_code == StatusCode::Eof => Vec::new(),
                        other => return Err(self.unexpected(&format!("read back {path}"), other)),
                    };
                    if &back != bytes {
                        return Err(Error::new(
                            ErrorKind::Transport,
                            format!("{path} reads back differently from what was sent"),
                        ));
                    }
                    let Some(handle) = handles[i].take() else {
                        continue;
                    };
                    if modes[i] != Some(0o600) {
                        let id = self.send_chmod(&handle)?;
                        self.defer(id, format!("chmod {path}"), false);
                    }
                    self.close_later(handle, path)?;
                    live -= 1;
                }
                _ => unreachable!("put_files sends no other requests"),
            }
        }
        Ok(())
    }

    /// One chunk of `Remote::publish_many`: every rename, and each target directory
    /// opened for its fsync (at most `HANDLE_WINDOW` of them, the chunk's length).
    pub(super) fn publish_chunk(&mut self, moves: &[(String, String)]) -> Result<Vec<Published>> {
        // Round 1: every rename, and open each target directory for its fsync.
        let mut renames = Vec::with_capacity(moves.len());
        for (from, to) in moves {
            let (oldpath, newpath) = (self.path(from), self.path(to));
            renames.push(self.request(|id| {
                Packet::Rename(Rename {
                    id,
                    oldpath,
                    newpath,
                })
            })?);
        }
        let mut parents: Vec<String> = moves
            .iter()
            .map(|(_, to)| {
                to.rsplit_once('/')
                    .map(|(dir, _)| dir.to_string())
                    .unwrap_or_default()
            })
            .collect();
        parents.sort();
        parents.dedup();
        // A directory opened ahead (prepare_publish) is fsynced in this same batch: the
        // server handles requests in order, so the fsync follows the renames. Others are
        // opened now and fsynced in a second batch.
        let mut early_fsyncs = Vec::new();
        let mut to_open = Vec::new();
        for parent in &parents {
            match self.prepared_handle(parent)? {
                Some(handle) => early_fsyncs.extend(self.fsync(&handle)?),
                None => to_open.push(parent.clone()),
            }
        }
        let parents = to_open;
        let mut dir_opens = Vec::with_capacity(parents.len());
        for parent in &parents {
            dir_opens.push(self.open(parent, OpenFlags::READ, None)?);
        }
        let mut outcomes = Vec::with_capacity(moves.len());
        let mut failed = Vec::new();
        for (i, id) in renames.into_iter().enumerate() {
            match self.wait(id)? {
                Packet::Status(s) if s.status_code == StatusCode::Ok => {
                    outcomes.push(Published::Done)
                }
                Packet::Status(s) if s.status_code == StatusCode::Failure => {
                    // OpenSSH refuses to rename onto an existing path: find out if that is why.
                    outcomes.push(Published::Exists);
                    failed.push((i, s.error_message));
                }
                Packet::Status(s) => {
                    let (from, to) = &moves[i];
                    return Err(status_error(
                        &self.describe,
                        &format!("rename {from} to {to}"),
                        s.status_code,
                        &s.error_message,
                    ));
                }
                other => {
                    return Err(lost(
                        &self.describe,
                        format!("unexpected reply to rename: {other:?}"),
                    ));
                }
            }
        }
        for id in early_fsyncs {
            let reply = self.wait(id)?;
            self.expect_ok(reply, "fsync directory")?;
        }
        let mut dir_handles = Vec::with_capacity(parents.len());
        for (id, parent) in dir_opens.into_iter().zip(&parents) {
            let reply = self.wait(id)?;
            dir_handles.push(self.expect_handle(reply, &format!("open directory {parent}"))?);
        }
        // Round 2: fsync the directories, and stat the destinations that refused.
        let mut fsyncs = Vec::new();
        for handle in dir_handles.iter().flatten() {
            if let Some(id) = self.fsync(handle)? {
                fsyncs.push(id);
            }
        }
        let mut stats = Vec::new();
        for (i, _) in &failed {
            let path = self.path(&moves[*i].1);
            stats.push(self.request(|id| Packet::Stat(Stat { id, path }))?);
        }
        for id in fsyncs {
            let reply = self.wait(id)?;
            self.expect_ok(reply, "fsync directory")?;
        }
        for (id, (i, message)) in stats.into_iter().zip(failed) {
            if !matches!(self.wait(id)?, Packet::Attrs(_)) {
                let (from, to) = &moves[i];
                return Err(status_error(
                    &self.describe,
                    &format!("rename {from} to {to}"),
                    StatusCode::Failure,
                    &message,
                ));
            }
        }
        for (handle, parent) in dir_handles.into_iter().zip(parents) {
            if let Some(handle) = handle {
                self.close_later(handle, &parent)?;
            }
        }
        Ok(outcomes)
    }

    /// `Remote::run_in_order`: every step sent back to back, each rename followed by the
    /// fsync of its target directory (opened ahead by `prepare_publish`; others are
    /// opened and fsynced once the steps are done), then the replies read in order.
    pub(super) fn run_steps(&mut self, steps: &[Order]) -> Result<Vec<bool>> {
        // (request id, the step it carries out; None for a directory fsync)
        let mut sent: Vec<(u32, Option<usize>)> = Vec::new();
        let mut unprepared: Vec<String> = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            match step {
                Order::Rename { from, to, sync } => {
                    let (oldpath, newpath) = (self.path(from), self.path(to));
                    let id = self.request(|id| {
                        Packet::Rename(Rename {
                            id,
                            oldpath,
                            newpath,
                        })
                    })?;
                    sent.push((id, Some(i)));
                    if !sync {
                        continue;
                    }
                    let parent = to
                        .rsplit_once('/')
                        .map(|(dir, _)| dir.to_string())
                        .unwrap_or_default();
                    match self.prepared_handle(&parent)? {
                        Some(handle) => {
                            if let Some(id) = self.fsync(&handle)? {
                                sent.push((id, None));
                            }
                        }
                        None if !unprepared.contains(&parent) => unprepared.push(parent),
                        None => {}
                    }
                }
                Order::MkDir(dir) => {
                    let (path, attrs) = (
                        self.path(dir),
                        FileAttributes {
                            permissions: Some(0o700),
                            ..FileAttributes::empty()
                        },
                    );
                    let id = self.request(|id| Packet::MkDir(MkDir { id, path, attrs }))?;
                    sent.push((id, Some(i)));
                }
                Order::RmDir(dir) => {
                    let path = self.path(dir);
                    let id = self.request(|id| Packet::RmDir(RmDir { id, path }))?;
                    sent.push((id, Some(i)));
                }
            }
        }
        let mut done = vec![false; steps.len()];
        let mut first_error = None;
        for (id, step) in sent {
            let reply = self.wait(id)?;
            match (step, reply) {
                (Some(i), Packet::Status(s)) => match s.status_code {
                    StatusCode::Ok => done[i] = true,
                    // A tidy-up that could not be done is no failure of the steps.
                    _ if matches!(steps[i], Order::RmDir(_)) => {}
                    // Onto an existing path, from a missing one, or into a non-directory:
                    // what a step whose predecessor failed runs into.
                    StatusCode::Failure | StatusCode::NoSuchFile => {}
                    code => {
                        first_error.get_or_insert(status_error(
                            &self.describe,
                            &format!("{:?}", steps[i]),
                            code,
                            &s.error_message,
                        ));
                    }
                },
                (None, reply) => {
                    if let Err(e) = self.expect_ok(reply, "fsync directory") {
                        first_error.get_or_insert(e);
                    }
                }
                (Some(i), other) => {
                    first_error.get_or_insert(self.unexpected(&format!("{:?}", steps[i]), other));
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        for parent in unprepared {
            let id = self.open(&parent, OpenFlags::READ, None)?;
            let reply = self.wait(id)?;
            if let Some(handle) = self.expect_handle(reply, &format!("open directory {parent}"))? {
                if let Some(id) = self.fsync(&handle)? {
                    let reply = self.wait(id)?;
                    self.expect_ok(reply, "fsync directory")?;
                }
                self.close_later(handle, &parent)?;
            }
        }
        Ok(done)
    }

    /// Collect one READDIR reply into `out`; true at the end of the directory.
    pub(super) fn collect_names(
        &mut self,
        reply: Packet,
        dir: &str,
        out: &mut Vec<RemoteEntry>,
    ) -> Result<bool> {
        match reply {
            Packet::Name(n) => {
                for file in n.files {
                    if file.filename == "." || file.filename == ".." {
                        continue;
                    }
                    out.push(RemoteEntry {
                        size: file.attrs.size.unwrap_or(0),
                        mtime: u64::from(file.attrs.mtime.unwrap_or(0)),
                        is_dir: file.attrs.is_dir(),
                        name: file.filename,
                    });
                }
                Ok(false)
            }
            Packet::Status(s) if s.status_code == StatusCode::Eof => Ok(true),
            Packet::Status(s) => Err(status_error(
                &self.describe,
                &format!("list {dir}"),
                s.status_code,
                &s.error_message,
            )),
            other => Err(lost(
                &self.describe,
                format!("unexpected reply to readdir: {other:?}"),
            )),
        }
    }
}
