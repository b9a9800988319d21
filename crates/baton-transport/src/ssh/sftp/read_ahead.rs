//! Files read tail first one after the other (`Remote::expect_tails`: the packs of a
//! clone or pull), opened and read ahead: while one is read, the opens of the next go out
//! behind its requests, and their fstats and reads behind those once the opens are
//! answered, so a clone of a remote of many small packs does not wait a round trip for
//! each pack. The replies still come in the order `open_tail` takes them.
//!
//! At most `AHEAD_FILES` files are opened ahead and `AHEAD_BYTES` requested ahead, so
//! that what arrives before it is taken (and is set aside in memory) stays bounded.

use std::collections::VecDeque;

use russh_sftp::protocol::{OpenFlags, Packet};

use super::SftpRemote;
use super::tail_reads::{Early, TailSent};
use baton_error::Result;

const AHEAD_FILES: usize = 32;
const AHEAD_BYTES: u64 = 32 << 20;

/// A file announced by `expect_tails`, and what was sent for it so far.
pub(super) struct Expected {
    path: String,
    size: u64,
    tail_len: u64,
    body: bool,
    state: Early,
}
impl Expected {
    /// Bytes its reads ask for: the tail, and with `body` the first window of the rest.
    fn cost(&self) -> u64 {
        let tail = self.tail_len.min(self.size);
        let rest = if self.body { self.size - tail } else { 0 };
        tail + rest.min(TailSent::AHEAD_WINDOW)
    }
}

impl SftpRemote {
    pub(super) fn expect(&mut self, files: &[(String, u64, u64, bool)]) {
        self.drop_expected();
        self.expected = files
            .iter()
            .map(|(path, size, tail_len, body)| Expected {
                path: path.clone(),
                size: *size,
                tail_len: *tail_len,
                body: *body,
                state: Early::Waiting,
            })
            .collect();
    }

    /// What was sent ahead for this read of `path` (`None`: nothing, or it was not the
    /// read expected next: then nothing expected is kept).
    pub(super) fn take_expected(
        &mut self,
        path: &str,
        size: u64,
        tail_len: u64,
        body: bool,
    ) -> Option<Early> {
        let next = self.expected.front()?;
        if (
            next.path.as_str(),
            next.size,
            next.tail_len.min(next.size),
            next.body,
        ) != (path, size, tail_len, body)
        {
            self.drop_expected();
            return None;
        }
        self.expected.pop_front().map(|e| e.state)
    }

    /// Send the opens of the files expected next, up to `AHEAD_FILES` open at once.
    pub(super) fn open_ahead(&mut self) -> Result<()> {
        let mut open = self
            .expected
            .iter()
            .filter(|e| !matches!(e.state, Early::Waiting))
            .count();
        for i in 0..self.expected.len() {
            if open >= AHEAD_FILES {
                break;
            }
            if matches!(self.expected[i].state, Early::Waiting) {
                let path = self.expected[i].path.clone();
                let id = self.open(&path, OpenFlags::READ, None)?;
                self.expected[i].state = Early::Opening(id);
                open += 1;
            }
        }
        Ok(())
    }

    /// Send the fstats and reads of the files expected next whose opens are answered (or
    /// on their way since the last round trip began), in order, up to `AHEAD_BYTES`.
    pub(super) fn read_ahead(&mut self) -> Result<()> {
        let mut requested: u64 = self
            .expected
            .iter()
            .filter(|e| matches!(e.state, Early::Sent(..)))
            .map(Expected::cost)
            .sum();
        for i in 0..self.expected.len() {
            let id = match &self.expected[i].state {
                Early::Sent(..) | Early::Replied(_) => continue,
                Early::Waiting => break,
                Early::Opening(id) => *id,
            };
            let cost = self.expected[i].cost();
            let on_its_way = self
                .sent_in_round
                .get(&id)
                .is_none_or(|round| *round < self.round_trips);
            if !on_its_way || (requested > 0 && requested + cost > AHEAD_BYTES) {
                break;
            }
            let reply = self.wait(id)?;
            let e = &self.expected[i];
            let (size, tail_start, body) = (e.size, e.size - e.tail_len.min(e.size), e.body);
            self.expected[i].state = match reply {
                Packet::Handle(h) => {
                    let sent = self.tail_send(&h.handle, size, tail_start, body)?;
                    requested += cost;
                    Early::Sent(h.handle, sent)
                }
                other => Early::Replied(other),
            };
        }
        Ok(())
    }

    /// Forget the files expected, closing what was opened for them.
    pub(super) fn drop_expected(&mut self) {
        let expected = std::mem::take(&mut self.expected);
        for e in expected {
            let (handle, path) = match e.state {
                Early::Waiting | Early::Replied(_) => continue,
                Early::Opening(id) => match self.wait(id) {
                    Ok(Packet::Handle(h)) => (h.handle, e.path),
                    _ => continue,
                },
                Early::Sent(handle, sent) => {
                    self.drop_replies(sent.ids());
                    (handle, e.path)
                }
            };
            if self.close_later(handle, &path).is_err() {
                return; // the connection failed: the next request says so
            }
        }
    }
}

/// The files expected, for `SftpRemote`.
pub(super) type ExpectedFiles = VecDeque<Expected>;
