//! A second lane for a large upload: another SFTP session on the same SSH connection,
//! carrying part of the upload's writes.
//!
//! OpenSSH's sshd gives each channel a 2 MiB window, so one channel moves at most 2 MiB a
//! round trip (about 40 MB/s at 50 ms): `ssh host 'cat > FILE'` and a one-channel SFTP
//! upload both stop there. A lane has a window of its own. Once an upload announced as
//! large (`Upload::expect_len`) has filled the first channel's window, the lane's channel
//! is opened; when the window is full again, SFTP is started on it. Each step blocks for
//! a round trip, during which the first window drains as it would anyway. Then the file
//! is opened on the lane for writing (the first session's create was answered long
//! before, so the server carries the open out after the create), and from then on each
//! chunk goes to the channel with more room.
//!
//! Two server processes then write one file, each request at its own offset, so their
//! order does not matter. What `Upload::finish` promises still holds:
//! - every byte is durable: each session fsyncs after its own writes (an fsync covers
//!   every write carried out on the file before it, whatever the descriptor);
//! - the size and the read-back ranges are those of the whole file: the last chunk goes
//!   on the first session, so its fstat (after its own writes) sees the full size, and a
//!   range that overlaps a chunk sent on the lane is read only once the lane's writes
//!   are answered.
//!
//! A lane that cannot be opened (a server allowing one session per connection, an open
//! refused) leaves the upload on one channel; a write that fails on it fails the upload.

use std::collections::VecDeque;

use russh_sftp::protocol::{OpenFlags, Packet};

use super::super::session::lost;
use super::super::{CHUNK, LaneStarted, NoLane, SftpRemote, WINDOW};
use super::SftpUpload;
use baton_error::{Error, Result};

/// An upload expected to be at least this large opens a lane: below it, the round trips
/// of opening one cost more than the second window saves.
const LANE_MIN: u64 = 16 << 20;
/// Where the first channel's window is not known: each step of opening a lane waits for
/// this much more to be sent.
const LANE_START: u64 = 2 << 20;
/// Where it is known, each step of opening waits for it to fill, or at the latest for
/// this much more to be sent.
const LANE_LATEST: u64 = 4 << 20;

/// A lane half-way: its channel open, its subsystem not started; `at`: the bytes the
/// upload had sent then.
pub(super) struct Starting {
    finish: LaneStarted,
    at: u64,
}

pub(super) struct Lane {
    remote: SftpRemote,
    file: LaneFile,
    inflight: VecDeque<u32>,
    fsync: Option<u32>,
    /// The chunks written on the lane (offset, length).
    chunks: Vec<(u64, u64)>,
}

/// How far opening an upload's second lane has come.
pub(super) enum LaneStep {
    NotYet,
    Starting(Starting),
    /// Opened, refused or not worth it.
    Done,
}

/// The upload's file on a lane.
enum LaneFile {
    /// Its OPEN, not answered yet (or not read).
    Opening(u32),
    Open(String),
}

/// Whether a lane takes writes yet.
enum Readiness {
    Open,
    /// Its open is not answered yet.
    NotYet,
    /// Its open failed: the upload goes on without it.
    Refused,
}

impl SftpRemote {
    /// Open a second channel on this connection, the first step of a lane; `None` when
    /// there is no way to or the server refuses (then no upload of this session tries
    /// again).
    pub(super) fn start_lane(&mut self, at: u64) -> Result<Option<Starting>> {
        let Some(opener) = self.lane_opener.as_mut() else {
            return Ok(None);
        };
        let started = opener();
        Ok(self
            .lane_step(started)?
            .map(|finish| Starting { finish, at }))
    }

    /// Start SFTP on the channel `start_lane` opened, and open `path` on it for writing:
    /// the caller's create of `path` must have been answered, so that the server carries
    /// the open out after it.
    pub(super) fn finish_lane(&mut self, starting: Starting, path: &str) -> Result<Option<Lane>> {
        let Some(channel) = self.lane_step((starting.finish)())? else {
            return Ok(None);
        };
        let opened = SftpRemote::over(channel, None, &self.root, self.describe.clone())
            .and_then(|mut remote| {
                tracing::debug!(target: crate::trace::SFTP, kind = "lane_opened", "second channel opened");
                let open = remote.open(path, OpenFlags::WRITE, None)?;
                Ok((remote, open))
            });
        // Only a failed write can fail these (the open's reply is read later), and the
        // lane rides this session's connection.
        let (remote, open) = opened.inspect_err(|_| self.break_link())?;
        Ok(Some(Lane {
            remote,
            file: LaneFile::Opening(open),
            inflight: VecDeque::new(),
            fsync: None,
            chunks: Vec::new(),
        }))
    }

    /// The outcome of a step of opening a lane: a refusal is `None` (and the last try),
    /// a failure breaks the session.
    fn lane_step<T>(&mut self, step: std::result::Result<T, NoLane>) -> Result<Option<T>> {
        match step {
            Ok(next) => Ok(Some(next)),
            Err(NoLane::Refused(e)) => {
                tracing::debug!(
                    target: crate::trace::SFTP,
                    kind = "no_lane",
                    "no second channel: {e}"
                );
                self.lane_opener = None;
                Ok(None)
            }
            Err(NoLane::Failed(e)) => {
                self.break_link();
                Err(lost(&self.describe, e))
            }
        }
    }

    /// Close the lane's file, end its input and keep it until this session ends: the
    /// server finishes what it has and closes the channel meanwhile. A lane whose stream
    /// broke leaves this session broken too: both ride one connection.
    pub(super) fn retire_lane(&mut self, mut lane: Lane) {
        self.broken |= lane.remote.broken;
        let bytes: u64 = lane.chunks.iter().map(|(_, len)| len).sum();
        tracing::debug!(
            target: crate::trace::SFTP,
            kind = "lane_done",
            writes = lane.chunks.len(),
            bytes,
            "second channel done: {} writes, {bytes} bytes",
            lane.chunks.len()
        );
        if let LaneFile::Open(handle) = lane.file {
            let _ = lane.remote.close_later(handle, "second channel's file");
        }
        lane.remote.end_input();
        self.retired.push(lane.remote);
    }
}

impl SftpUpload<'_> {
    /// Take the next step of opening a second lane, for an upload announced large enough,
    /// when it is time (`time_to_step`).
    pub(super) fn start_lane(&mut self) -> Result<()> {
        if self.expected < LANE_MIN {
            return Ok(());
        }
        let room = self.remote.channel.write_room();
        match std::mem::replace(&mut self.lane_step, LaneStep::Done) {
            LaneStep::NotYet if time_to_step(room, self.offset, 0) => {
                if let Some(starting) = self.remote.start_lane(self.offset)? {
                    self.lane_step = LaneStep::Starting(starting);
                }
            }
            LaneStep::Starting(starting) if time_to_step(room, self.offset, starting.at) => {
                // The lane's open must reach the server after the create. The create's
                // reply came during the first step: no round trip is waited for here.
                self.remote.streaming = true;
                let confirmed = self.confirm();
                self.remote.streaming = false;
                confirmed?;
                self.lane = self.remote.finish_lane(starting, &self.path)?;
            }
            step => self.lane_step = step,
        }
        Ok(())
    }

    /// Send the buffered chunk on the second lane if it has more room in its window than
    /// the first channel (every other chunk when the windows are not known): `false`
    /// when it goes on the first.
    pub(super) fn sent_on_lane(&mut self) -> Result<bool> {
        let Some(lane) = &mut self.lane else {
            return Ok(false);
        };
        match lane.poll() {
            Readiness::Open => {}
            Readiness::NotYet => return Ok(false),
            Readiness::Refused => {
                if let Some(lane) = self.lane.take() {
                    self.remote.retire_lane(lane);
                }
                return Ok(false);
            }
        }
        let on_lane = match (self.remote.channel.write_room(), lane.room()) {
            (Some(first), Some(second)) => second > first,
            _ => {
                self.alternate = !self.alternate;
                self.alternate
            }
        };
        if on_lane {
            let data = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
            let len = data.len() as u64;
            lane.send(self.offset, data, &self.path)?;
            self.offset += len;
        }
        Ok(on_lane)
    }
}

impl Lane {
    /// Whether the lane takes writes; its open's reply is read only once it has arrived.
    fn poll(&mut self) -> Readiness {
        let LaneFile::Opening(open) = self.file else {
            return Readiness::Open;
        };
        if !self.remote.channel.has_input() {
            return Readiness::NotYet;
        }
        match self.remote.wait(open) {
            Ok(Packet::Handle(h)) => {
                self.file = LaneFile::Open(h.handle);
                Readiness::Open
            }
            reply => {
                tracing::debug!(
                    target: crate::trace::SFTP,
                    "second channel's open failed: {reply:?}"
                );
                Readiness::Refused
            }
        }
    }

    /// Bytes the lane's channel takes before a write waits.
    fn room(&self) -> Option<u32> {
        self.remote.channel.write_room()
    }

    /// Write `data` at `offset` of `path` (the file the lane has open).
    pub(super) fn send(&mut self, offset: u64, data: Vec<u8>, path: &str) -> Result<()> {
        let LaneFile::Open(handle) = &self.file else {
            return Err(Error::other("a write on a second channel that is not open"));
        };
        let handle = handle.clone();
        if self.inflight.len() >= WINDOW
            && let Some(oldest) = self.inflight.pop_front()
        {
            self.remote.streaming = true;
            let reply = self.remote.wait(oldest);
            self.remote.streaming = false;
            self.remote
                .expect_written(reply?, &format!("write {path}"), path)?;
        }
        let len = data.len() as u64;
        let id = self.remote.send_write(&handle, offset, data)?;
        self.inflight.push_back(id);
        self.chunks.push((offset, len));
        Ok(())
    }

    /// Whether the lane wrote the byte before `end` (the file's last) or any byte of
    /// the `ranges` (offset, length).
    pub(super) fn holds_any(&self, end: u64, ranges: &[(u64, u64)]) -> bool {
        let overlaps = |(o, l): (u64, u64), (co, cl): (u64, u64)| o < co + cl && co < o + l;
        self.chunks.iter().any(|&c| {
            overlaps((end.saturating_sub(1), 1), c) || ranges.iter().any(|&r| overlaps(r, c))
        })
    }

    /// Send the fsync that follows the lane's writes (nothing when it wrote nothing).
    pub(super) fn send_fsync(&mut self) -> Result<()> {
        if let (LaneFile::Open(handle), false) = (&self.file, self.chunks.is_empty()) {
            let handle = handle.clone();
            self.fsync = self.remote.fsync(&handle)?;
        }
        Ok(())
    }

    /// Wait for the replies to every write on the lane and to its fsync.
    pub(super) fn settle(&mut self, path: &str) -> Result<()> {
        while let Some(id) = self.inflight.pop_front() {
            let reply = self.remote.wait(id)?;
            self.remote
                .expect_written(reply, &format!("write {path}"), path)?;
        }
        if let Some(id) = self.fsync.take() {
            let reply = self.remote.wait(id)?;
            self.remote
                .expect_written(reply, &format!("fsync {path}"), path)?;
        }
        Ok(())
    }
}

/// Whether to take the next step of opening a lane (0: the first; else the bytes sent
/// at the last): when the first channel's window is full, since a step's round trip then
/// costs nothing more than waiting for room; where the window never fills (a fast link,
/// where a round trip costs little) or is not known, once enough more is sent.
fn time_to_step(first_room: Option<u32>, sent: u64, since: u64) -> bool {
    match first_room {
        Some(room) => (room as usize) < CHUNK || sent >= since + LANE_LATEST,
        None => sent >= since + LANE_START,
    }
}
