//! A file read tail first on one open (`Remote::open_tail`): a pack's footer and index,
//! then, on the same handle, its body. The open, the fstat and the tail's reads take one
//! round trip when the handle can be guessed (`handle_guess`), else two, and none of their own
//! when they were sent ahead (`read_ahead`); with `body`, the first window of body reads goes
//! out right behind the tail's, so the body streams in behind the tail with no round
//! trip of its own (the server answers a handle's requests in order). Nothing of the body
//! reaches a sink before `read_rest` is called, and `close_tail` reads and drops what
//! came early.

use std::collections::VecDeque;

use russh_sftp::protocol::{OpenFlags, Packet};

use super::download::{Inflight, Range};
use super::{CHUNK, SftpRemote, WINDOW};
use baton_error::Result;

/// Where a file expected by the read-ahead (`read_ahead`) stands: what `tail_open` finds of it.
pub(super) enum Early {
    /// Nothing is sent for it yet.
    Waiting,
    /// Its OPEN is sent (the request id).
    Opening(u32),
    /// Its OPEN's reply, taken while reading ahead (not a handle: a missing file).
    Replied(Packet),
    /// Open, with its fstat and reads sent.
    Sent(String, TailSent),
}

/// The requests `tail_open` sent on a handle.
pub(super) struct TailSent {
    fstat: u32,
    reads: Inflight,
    ahead: Inflight,
    after: Option<u32>,
}

impl TailSent {
    /// The most of the body asked for with the tail.
    pub(super) const AHEAD_WINDOW: u64 = (WINDOW * CHUNK) as u64;

    pub(super) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        let reads = self.reads.iter().chain(&self.ahead).map(|r| r.0);
        std::iter::once(self.fstat).chain(reads).chain(self.after)
    }
}

/// A file kept open between `open_tail` and `read_rest` or `close_tail`.
pub(super) struct OpenFile {
    handle: String,
    tail_start: u64,
    /// Body reads sent with the tail's, in order from offset 0.
    ahead: Inflight,
    /// The fstat sent behind them when they cover the whole body.
    after: Option<u32>,
}

impl SftpRemote {
    pub(super) fn tail_open(
        &mut self,
        path: &str,
        size: u64,
        tail_len: u64,
        body: bool,
    ) -> Result<(Vec<u8>, Option<u64>)> {
        let tail_len = tail_len.min(size);
        let tail_start = size - tail_len;
        let (handle, sent) = self.tail_requests(path, size, tail_start, body)?;
        let TailSent {
            fstat,
            reads,
            ahead,
            after,
        } = sent;
        let range = Range {
            start: tail_start,
            end: size,
            limit: tail_len,
            before: Some((fstat, size)),
            after: None,
            after_sent: None,
        };
        // Unless more of this file's body is still to be asked for, the files expected
        // next are read behind it (`read_ahead`).
        let all_asked = !(body && tail_start > 0 && after.is_none());
        let mut tail = Vec::with_capacity(tail_len as usize);
        let got = self.stream_sent(&handle, range, reads, &mut tail, path);
        if got.is_ok() && all_asked {
            self.read_ahead()?;
        }
        let file = OpenFile {
            handle,
            tail_start,
            ahead,
            after,
        };
        let token = self.next_open;
        self.next_open += 1;
        self.open_files.insert(token, file);
        match got {
            Ok(n) if n == tail_len => Ok((tail, Some(token))),
            Ok(n) => {
                self.tail_close(Some(token));
                Err(self.short_file(path, tail_start + n, size))
            }
            Err(e) => {
                self.tail_close(Some(token));
                Err(e)
            }
        }
    }

    /// The handle of `path` and the requests `tail_open` sent on it: sent ahead
    /// (`expect_tails`), or now, on a guessed handle when one can be told (`handle_guess`). The
    /// opens of the files expected next go out behind them.
    fn tail_requests(
        &mut self,
        path: &str,
        size: u64,
        tail_start: u64,
        body: bool,
    ) -> Result<(String, TailSent)> {
        let open = match self.take_expected(path, size, size - tail_start, body) {
            Some(Early::Sent(handle, sent)) => {
                self.open_ahead()?;
                return Ok((handle, sent));
            }
            Some(Early::Opening(id)) => {
                self.open_ahead()?;
                self.wait(id)?
            }
            Some(Early::Replied(reply)) => reply,
            Some(Early::Waiting) | None => match self.handles.guess() {
                Some(guess) => {
                    let id = self.open_guessed(path, OpenFlags::READ, None, &guess, false)?;
                    let sent = self.tail_send(&guess, size, tail_start, body)?;
                    self.open_ahead()?;
                    match self.wait(id)? {
                        Packet::Handle(h) if h.handle == guess => return Ok((guess, sent)),
                        reply => {
                            self.drop_replies(sent.ids());
                            reply
                        }
                    }
                }
                None => {
                    let id = self.open(path, OpenFlags::READ, None)?;
                    self.open_ahead()?;
                    self.wait(id)?
                }
            },
        };
        let handle = self
            .expect_handle(open, &format!("open {path}"))?
            .ok_or_else(|| self.missing(path))?;
        let sent = self.tail_send(&handle, size, tail_start, body)?;
        Ok((handle, sent))
    }

    /// The requests of `tail_open` on `handle`: an fstat first (a file of another size
    /// or kind is refused before its tail is looked at), the tail's reads, and with
    /// `body` the first window of the body's reads and, when they cover it, an fstat
    /// behind them (the check that the file did not change; else it goes with the last
    /// reads `read_rest` sends).
    pub(super) fn tail_send(
        &mut self,
        handle: &str,
        size: u64,
        tail_start: u64,
        body: bool,
    ) -> Result<TailSent> {
        let fstat = self.send_fstat(handle)?;
        let mut reads = Inflight::new();
        let mut at = tail_start;
        while at < size {
            let len = (size - at).min(CHUNK as u64);
            reads.push_back((self.send_read(handle, at, len as u32)?, at, len));
            at += len;
        }
        let mut ahead = VecDeque::new();
        let mut after = None;
        if body && tail_start > 0 {
            let mut at = 0;
            while ahead.len() < WINDOW && at < tail_start {
                let len = (tail_start - at).min(CHUNK as u64);
                ahead.push_back((self.send_read(handle, at, len as u32)?, at, len));
                at += len;
            }
            if at >= tail_start {
                after = Some(self.send_fstat(handle)?);
            }
        }
        Ok(TailSent {
            fstat,
            reads,
            ahead,
            after,
        })
    }

    /// `len` bytes at `offset` of an open file (behind any body reads already sent).
    pub(super) fn tail_read_more(
        &mut self,
        token: Option<u64>,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        let Some(file) = token.and_then(|t| self.open_files.get(&t)) else {
            return self.read_range_of(path, offset, len);
        };
        let handle = file.handle.clone();
        let mut out = Vec::with_capacity(len as usize);
        let range = Range {
            start: offset,
            end: offset.saturating_add(len),
            limit: len,
            before: None,
            after: None,
            after_sent: None,
        };
        let n = self.stream_sent(&handle, range, Inflight::new(), &mut out, path)?;
        if n != len {
            return Err(self.short_file(path, offset + n, offset + len));
        }
        Ok(out)
    }

    pub(super) fn tail_read_rest(
        &mut self,
        token: Option<u64>,
        path: &str,
        size: u64,
        tail: &[u8],
        sink: &mut dyn std::io::Write,
    ) -> Result<()> {
        let Some(file) = token.and_then(|t| self.open_files.remove(&t)) else {
            return self.read_file_exact(path, size, sink);
        };
        let body = file.tail_start;
        if body > 0 {
            let range = Range {
                start: 0,
                end: body,
                limit: body,
                before: None,
                // The fstat behind the last read: the file did not change meanwhile.
                after: Some(size),
                after_sent: file.after,
            };
            let n = self.stream_sent(&file.handle, range, file.ahead, sink, path)?;
            if n != body {
                return Err(self.short_file(path, n, size));
            }
        }
        sink.write_all(tail)
            .map_err(|e| super::download::local_write_error(path, e))?;
        self.close_later(file.handle, path)?;
        self.read_ahead()
    }

    /// Close an open file; body reads sent early are read and dropped (their replies
    /// are on their way: no round trip).
    pub(super) fn tail_close(&mut self, token: Option<u64>) {
        let Some(file) = token.and_then(|t| self.open_files.remove(&t)) else {
            return;
        };
        for id in file.ahead.iter().map(|r| r.0).chain(file.after) {
            if self.wait(id).is_err() {
                return; // the connection failed: the next request says so
            }
        }
        if self.close_later(file.handle, "an open pack").is_ok() {
            let _ = self.read_ahead(); // a failure shows at the next wait
        }
    }

    fn short_file(&self, path: &str, actual: u64, declared: u64) -> baton_error::Error {
        baton_error::Error::integrity(format!(
            "{path} on {} ended at {actual} bytes, but {declared} were declared",
            self.describe
        ))
        .with_hint("nothing was published here; run 'baton verify' on the remote store")
    }
}
