//! Small files and listings read in the round trip of their opens: each item's OPEN, its
//! READs (or READDIRs) and its CLOSE go out back to back on the handle the server is
//! expected to give (`handle_guess`), so a look at the remote state costs one round trip.
//!
//! An item the guess did not fit is read on the handle the server gave, at the cost of
//! the round trips the reads take then; a file longer than two reads or a listing longer
//! than `READDIRS` replies is opened and read again.

use russh_sftp::protocol::{Packet, StatusCode};

use super::batch::HANDLE_WINDOW;
use super::{CHUNK, SftpRemote};
use crate::RemoteEntry;
use baton_error::Result;

/// READDIRs sent with each listing (OpenSSH answers up to 100 names each).
const READDIRS: usize = 3;

/// Items sent as one chain, at most, once a guess was right: each holds one handle, and
/// only until its close, so the bound is then not the server's limit of open handles
/// but what is sent unanswered (four or five requests an item; a bisection round of the
/// ref reads up to 128).
pub(super) const CHAIN_ITEMS: usize = 160;

/// Reads sent as a chain: the guessed handle and, per item (files, then directories),
/// its open and the requests on the guess.
pub(super) struct Chained {
    guess: String,
    links: Vec<(u32, Vec<u32>)>,
}

type Answers = (Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>);

impl SftpRemote {
    /// Send the chain of `files` and `dirs`; `None` when the handle cannot be guessed
    /// (or there are too many items to send at once): nothing was sent.
    pub(super) fn chain_send(
        &mut self,
        files: &[String],
        dirs: &[String],
    ) -> Result<Option<Chained>> {
        let Some(guess) = self.handles.guess() else {
            return Ok(None);
        };
        // Every wrong guess leaves a handle open until its item is read: until a guess
        // has been right, no more items than the server lets one hold open.
        let most = if self.handles.confirmed() {
            CHAIN_ITEMS
        } else {
            HANDLE_WINDOW
        };
        if files.len() + dirs.len() > most {
            return Ok(None);
        }
        let mut links = Vec::with_capacity(files.len() + dirs.len());
        for f in files {
            let open = self.open_chained(f, false, &guess)?;
            let reads = vec![
                self.send_read(&guess, 0, CHUNK as u32)?,
                self.send_read(&guess, CHUNK as u64, CHUNK as u32)?,
            ];
            self.close_ahead(&guess)?;
            links.push((open, reads));
        }
        for d in dirs {
            let open = self.open_chained(d, true, &guess)?;
            let mut reads = Vec::with_capacity(READDIRS);
            for _ in 0..READDIRS {
                reads.push(self.send_readdir(&guess)?);
            }
            self.close_ahead(&guess)?;
            links.push((open, reads));
        }
        Ok(Some(Chained { guess, links }))
    }

    /// The answers to a sent chain, in the order of `Remote::read_many`.
    pub(super) fn chain_collect(
        &mut self,
        chained: Chained,
        files: &[String],
        dirs: &[String],
        limit: u64,
    ) -> Result<Answers> {
        let mut links = chained.links.into_iter();
        let mut file_out = Vec::with_capacity(files.len());
        for (name, (open, reads)) in files.iter().zip(links.by_ref()) {
            let got = match self.chain_open(open, &reads, &chained.guess, name)? {
                Opened::Guessed => self.chained_file(&reads, name, limit)?,
                Opened::Other(handle) => Some(self.file_on(handle, name, limit)?),
                Opened::Missing => None,
            };
            file_out.push(got);
        }
        let mut dir_out = Vec::with_capacity(dirs.len());
        for (name, (open, reads)) in dirs.iter().zip(links) {
            let got = match self.chain_open(open, &reads, &chained.guess, name)? {
                Opened::Guessed => self.chained_dir(&reads, name)?,
                Opened::Other(handle) => Some(self.listing_on(handle, name)?),
                Opened::Missing => None,
            };
            dir_out.push(got);
        }
        Ok((file_out, dir_out))
    }

    /// The reply to a chained open; the replies to its requests are dropped unless the
    /// guess was right.
    fn chain_open(&mut self, open: u32, reads: &[u32], guess: &str, name: &str) -> Result<Opened> {
        let reply = self.wait(open);
        let opened = match reply {
            Ok(Packet::Handle(h)) if h.handle == guess => return Ok(Opened::Guessed),
            Ok(Packet::Handle(h)) => Ok(Opened::Other(h.handle)),
            Ok(Packet::Status(s)) if s.status_code == StatusCode::NoSuchFile => Ok(Opened::Missing),
            Ok(other) => Err(self.unexpected(&format!("open {name}"), other)),
            Err(e) => Err(e),
        };
        self.drop_replies(reads.iter().copied());
        opened
    }

    /// A file read on the right guess: its first chunk, or read again when it is longer.
    fn chained_file(&mut self, reads: &[u32], name: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        if let Some(bytes) = self.whole_in_two_reads(reads, name, limit)? {
            return Ok(Some(bytes));
        }
        // Longer than two reads (or a short read): the handle is closed; read it anew.
        let id = self.open(name, russh_sftp::protocol::OpenFlags::READ, None)?;
        let reply = self.wait(id)?;
        match self.expect_handle(reply, &format!("open {name}"))? {
            Some(handle) => self.file_on(handle, name, limit).map(Some),
            None => Ok(None),
        }
    }

    /// A listing read on the right guess; listed anew when it did not end in time.
    fn chained_dir(&mut self, reads: &[u32], name: &str) -> Result<Option<Vec<RemoteEntry>>> {
        let mut entries = Vec::new();
        let mut end = false;
        for id in reads {
            let reply = self.wait(*id)?;
            end |= self.collect_names(reply, name, &mut entries)?;
        }
        if end {
            entries.sort_by(|x, y| x.name.cmp(&y.name));
            return Ok(Some(entries));
        }
        let id = self.open_dir(name)?;
        let reply = self.wait(id)?;
        match self.expect_handle(reply, &format!("list {name}"))? {
            Some(handle) => self.listing_on(handle, name).map(Some),
            None => Ok(None),
        }
    }

    /// All of an open file (at most `limit` bytes), then closed.
    fn file_on(&mut self, handle: String, name: &str, limit: u64) -> Result<Vec<u8>> {
        let mut bytes = Vec::new();
        let read = self.stream_handle(&handle, limit, &mut bytes, name);
        self.close_later(handle, name)?;
        read?;
        if bytes.len() as u64 > limit {
            return Err(self.too_large(name, limit));
        }
        Ok(bytes)
    }

    /// All of an open directory's listing, then closed.
    fn listing_on(&mut self, handle: String, name: &str) -> Result<Vec<RemoteEntry>> {
        let ids = [self.send_readdir(&handle)?, self.send_readdir(&handle)?];
        let listed = self.probe_dir(&handle, ids, name);
        self.close_later(handle, name)?;
        listed
    }
}

enum Opened {
    /// On the guessed handle, with the chain's requests.
    Guessed,
    /// On another handle, which is open.
    Other(String),
    Missing,
}
