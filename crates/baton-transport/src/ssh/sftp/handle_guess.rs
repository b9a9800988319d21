//! Guessing the handle an OPEN will be given, so that the requests on a file travel in
//! the round trip of its OPEN instead of the one after it: a small read costs one round
//! trip, not two.
//!
//! OpenSSH's sftp-server names a handle by its slot (4 bytes, big-endian) and hands out
//! the most recently freed slot first (`handle_new` and `handle_unused` in sftp-server.c).
//! So while the session holds no handle, the next OPEN gets the slot freed last, or slot
//! 0 in a fresh session. A guess is made only then. A file read on a guessed handle is
//! closed on it in the same batch ("closed ahead"): each such read frees the slot it
//! took, or took none because its OPEN failed, so a chain of them reuses one slot.
//!
//! A guess is trusted only when the OPEN's reply names that handle; otherwise the
//! replies to the requests sent on it are dropped, the file is read on the handle the
//! server gave, and guessing stops for the session. That is safe on any server, since
//! only reads, readdirs, fstats and closes are ever sent on a guess: when one is carried
//! out, no handle of that name is held but the one its own OPEN just returned, if any.
//! The session held none when the guess was made, every guessed request follows its own
//! OPEN, and an earlier open that got another handle got one of another name.

use std::collections::{HashMap, HashSet};

use russh_sftp::protocol::{OpenDir, OpenFlags, Packet};

use super::SftpRemote;
use baton_error::Result;

/// How an OPEN (or OPENDIR) still unanswered uses its handle.
enum Opening {
    /// Only once its reply names the handle.
    Plain,
    /// Requests were sent on this guessed name, and it stays open.
    Kept(String),
    /// Requests were sent on this guessed name, and it was closed after them.
    ClosedAhead(String),
}

/// What the session knows of the server's handles, kept in the order the server
/// carries requests out (the order they are sent).
#[derive(Default)]
pub(super) struct Handles {
    /// A guess was wrong: this server names its handles some other way.
    off: bool,
    /// A guess was right: this server names its handles as OpenSSH does.
    confirmed: bool,
    /// Handles the server holds for this session.
    held: HashSet<String>,
    opening: HashMap<u32, Opening>,
    /// The handle closed last: OpenSSH's next OPEN gets it when none is held.
    last_freed: Option<String>,
    /// Requests whose replies nobody wants (requests on a wrong guess, closes ahead):
    /// dropped as they arrive.
    pub(super) dropped: HashSet<u32>,
}

/// The name OpenSSH gives the handle in `slot`.
fn slot_name(slot: u32) -> String {
    String::from_utf8_lossy(&slot.to_be_bytes()).into_owned()
}

impl Handles {
    /// The handle the next OPEN will get, when it can be told.
    pub(super) fn guess(&self) -> Option<String> {
        let settled = self
            .opening
            .values()
            .all(|o| matches!(o, Opening::ClosedAhead(_)));
        (!self.off && self.held.is_empty() && settled)
            .then(|| self.last_freed.clone().unwrap_or_else(|| slot_name(0)))
    }

    /// Whether a guess was right in this session (and none wrong): then a wrong one is
    /// unlikely enough that a batch may hold more items than the server's handle limit
    /// would allow open at once.
    pub(super) fn confirmed(&self) -> bool {
        self.confirmed && !self.off
    }

    pub(super) fn closing(&mut self, handle: &str) {
        self.held.remove(handle);
        self.last_freed = Some(handle.to_string());
    }

    /// Note the reply to request `id` (a new handle is held unless it was closed ahead).
    pub(super) fn answered(&mut self, id: u32, packet: &Packet) {
        let Some(how) = self.opening.remove(&id) else {
            return;
        };
        let Packet::Handle(h) = packet else {
            return;
        };
        match how {
            Opening::Plain => {}
            Opening::ClosedAhead(g) if g == h.handle => {
                self.confirmed = true;
                return;
            }
            Opening::Kept(g) if g == h.handle => self.confirmed = true,
            Opening::Kept(_) | Opening::ClosedAhead(_) => self.off = true,
        }
        self.held.insert(h.handle.clone());
    }

    #[cfg(test)]
    pub(super) fn is_off(&self) -> bool {
        self.off
    }

    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.held.len()
    }
}

impl SftpRemote {
    /// Send an OPEN of `rel` (`dir`: an OPENDIR), recording how its handle is used.
    fn send_open(
        &mut self,
        rel: &str,
        dir: bool,
        flags: OpenFlags,
        mode: Option<u32>,
        how: Opening,
    ) -> Result<u32> {
        let id = if dir {
            let path = self.path(rel);
            self.request(|id| Packet::OpenDir(OpenDir { id, path }))?
        } else {
            self.open_request(rel, flags, mode)?
        };
        self.handles.opening.insert(id, how);
        Ok(id)
    }

    pub(super) fn open(&mut self, rel: &str, flags: OpenFlags, mode: Option<u32>) -> Result<u32> {
        self.send_open(rel, false, flags, mode, Opening::Plain)
    }

    pub(super) fn open_dir(&mut self, rel: &str) -> Result<u32> {
        self.send_open(rel, true, OpenFlags::READ, None, Opening::Plain)
    }

    /// Open `rel` on the guessed handle `guess`: kept open, or `closed_ahead` once the
    /// requests on it are sent (`close_ahead`).
    pub(super) fn open_guessed(
        &mut self,
        rel: &str,
        flags: OpenFlags,
        mode: Option<u32>,
        guess: &str,
        closed_ahead: bool,
    ) -> Result<u32> {
        let how = if closed_ahead {
            Opening::ClosedAhead(guess.to_string())
        } else {
            Opening::Kept(guess.to_string())
        };
        self.send_open(rel, false, flags, mode, how)
    }

    /// Open `rel` (`dir`: list it) on the guessed handle `handle_guess`, to be closed ahead
    /// (`close_ahead`) once its requests are sent.
    pub(super) fn open_chained(&mut self, rel: &str, dir: bool, guess: &str) -> Result<u32> {
        let how = Opening::ClosedAhead(guess.to_string());
        self.send_open(rel, dir, OpenFlags::READ, None, how)
    }

    /// Close the guessed handle of a chained open; its reply is dropped.
    pub(super) fn close_ahead(&mut self, guess: &str) -> Result<()> {
        let id = self.send_close(guess.to_string())?;
        self.drop_replies([id]);
        Ok(())
    }

    /// Let the replies to `ids` be dropped whenever they arrive.
    pub(super) fn drop_replies(&mut self, ids: impl IntoIterator<Item = u32>) {
        for id in ids {
            if self.stash.remove(&id).is_none() {
                self.handles.dropped.insert(id);
            }
        }
    }
}
