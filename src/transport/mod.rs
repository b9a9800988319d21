//! Transports: where the bytes of a remote store live, behind one batch-oriented trait.
//!
//! The sync layer speaks only `Remote`; the local-path and SFTP transports implement it.
//! Every method is one batch: over SFTP its requests are pipelined, so a method costs one
//! or two network round trips however many paths it names.

pub mod local;
pub mod ssh;
pub mod url;

use std::io::Write;

use crate::error::Result;

/// One entry of a remote directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteEntry {
    pub name: String,
    pub size: u64,
    /// Seconds since the epoch.
    pub mtime: u64,
    pub is_dir: bool,
}

/// What a finished upload looks like on the remote side.
#[derive(Debug)]
pub struct Receipt {
    pub size: u64,
    /// The bytes read back from the remote file at the requested ranges.
    pub readback: Vec<Vec<u8>>,
}

/// A new file being written into a staging directory.
pub trait Upload: Write {
    /// Flush and fsync the file, make sure its mode is 0600, read back the `readback`
    /// ranges (offset, length) and report its size, then close it.
    fn finish(self: Box<Self>, readback: &[(u64, u64)]) -> Result<Receipt>;
}

/// Whether a no-clobber publish happened or found the destination already there.
#[derive(Debug, PartialEq, Eq)]
pub enum Published {
    Done,
    Exists,
}

/// A store's directory on the other side. Paths are relative to the store root and use
/// `/`; the transport never interprets them beyond joining them to the root.
pub trait Remote {
    /// Where this is, for messages (`ssh://user@host:port/path`, `/abs/path`).
    fn describe(&self) -> String;

    /// Read small files and list directories in one batch. Missing files and directories
    /// are `None`; a file larger than `limit` is an error.
    #[allow(clippy::type_complexity)]
    fn read_many(
        &mut self,
        files: &[String],
        dirs: &[String],
        limit: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)>;

    /// Create directories (mode 0700) in the order given; existing ones are fine. The
    /// transport may defer the requests to the next batch: errors surface there.
    fn make_dirs(&mut self, dirs: &[String]) -> Result<()>;

    /// Create a new file (exclusively, mode 0600) and stream into it.
    fn create(&mut self, path: &str) -> Result<Box<dyn Upload + '_>>;

    /// Rename `from` to `to` without ever overwriting, then fsync `to`'s directory.
    fn publish(&mut self, from: &str, to: &str) -> Result<Published>;

    /// Stream a whole file into `sink`; returns its length.
    fn read_file(&mut self, path: &str, sink: &mut dyn Write) -> Result<u64>;

    /// Read `len` bytes at `offset`.
    fn read_range(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>>;

    /// Remove a directory and everything in it (staging cleanup). Best effort is fine:
    /// a leftover is cleaned up by a later run.
    fn remove_dir_all(&mut self, dir: &str) -> Result<()>;
}
