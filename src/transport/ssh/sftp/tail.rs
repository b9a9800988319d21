//! A file read tail first on one open (`Remote::open_tail`): a pack's footer and index,
//! then, on the same handle, its body. The open, the fstat and the tail's reads take one
//! round trip when the handle can be guessed (`guess`), else two; with `body`, the first window of body reads goes out right
//! behind the tail's, so the body streams in behind the tail with no round trip of its
//! own (the server answers a handle's requests in order). Nothing of the body reaches a
//! sink before `read_rest` is called, and `close_tail` reads and drops what came early.

use std::collections::VecDeque;

use russh_sftp::protocol::{OpenFlags, Packet};

use super::download::{Inflight, Range};
use super::{CHUNK, SftpRemote, WINDOW};
use crate::error::Result;

/// The requests `tail_open` sent on a handle.
struct TailSent {
    fstat: u32,
    reads: Inflight,
    ahead: Inflight,
    after: Option<u32>,
}

impl TailSent {
    fn ids(&self) -> impl Iterator<Item = u32> + '_ {
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
        // On a guessed handle the tail's requests go with the open (`guess`).
        let (handle, sent) = match self.handles.guess() {
            Some(guess) => {
                let open = self.open_guessed(path, OpenFlags::READ, None, &guess, false)?;
                let sent = self.tail_send(&guess, size, tail_start, body)?;
                match self.wait(open)? {
                    Packet::Handle(h) if h.handle == guess => (guess, sent),
                    reply => {
                        for id in sent.ids() {
                            self.drop_reply(id);
                        }
                        let handle = self
                            .expect_handle(reply, &format!("open {path}"))?
                            .ok_or_else(|| self.missing(path))?;
                        let sent = self.tail_send(&handle, size, tail_start, body)?;
                        (handle, sent)
                    }
                }
            }
            None => {
                let handle = self.open_for_reading(path)?;
                let sent = self.tail_send(&handle, size, tail_start, body)?;
                (handle, sent)
            }
        };
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
        let mut tail = Vec::with_capacity(tail_len as usize);
        let got = self.stream_sent(&handle, range, reads, &mut tail, path);
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

    /// The requests of `tail_open` on `handle`: an fstat first (a file of another size
    /// or kind is refused before its tail is looked at), the tail's reads, and with
    /// `body` the first window of the body's reads and, when they cover it, an fstat
    /// behind them (the check that the file did not change; else it goes with the last
    /// reads `read_rest` sends).
    fn tail_send(
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
        self.close_later(file.handle, path)
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
        let _ = self.close_later(file.handle, "an open pack");
    }

    fn short_file(&self, path: &str, actual: u64, declared: u64) -> crate::error::Error {
        crate::error::Error::integrity(format!(
            "{path} on {} ended at {actual} bytes, but {declared} were declared",
            self.describe
        ))
        .with_hint("nothing was published here; run 'baton verify' on the remote store")
    }
}
