//! Transports: where the bytes of a remote store live, behind batch-oriented traits.
//!
//! The sync layer speaks only `BackendExt` over the core `Backend` (`backend.rs`); the
//! local-path and SFTP transports implement the core `Remote` (nine methods) and, where
//! they are faster, the extension `Pipelined` (every method has a default over the core),
//! and get both backend traits from there (`backend/path_adapter.rs`); the S3 backend
//! (`s3.rs`) implements `Backend` and a few of `BackendExt`'s defaults itself. Every
//! method is one batch: over SFTP its requests are pipelined, so a method costs one or
//! two network round trips however many paths it names.

pub mod backend;
pub mod error;
pub mod local;
pub mod s3;
pub mod ssh;
pub mod trace;
pub mod url;

use std::io::Write;

use baton_error::Result;

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
    /// About `len` bytes follow: a transport may prepare for a large stream (SFTP opens
    /// a second channel).
    fn expect_len(&mut self, _len: u64) {}

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

/// One step of `Pipelined::run_in_order`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Rename without ever overwriting, then (`sync`) fsync `to`'s directory.
    Rename {
        from: String,
        to: String,
        sync: bool,
    },
    /// Create a directory (mode 0700); refused when the path exists.
    MkDir(String),
    /// Remove an empty directory; not done (never an error) when it is missing, not
    /// empty, or cannot be removed: a tidy-up riding with the steps before it.
    RmDir(String),
}

/// A store's directory on the other side: the core every path transport implements (a
/// local directory in `local.rs`, SFTP in `ssh/`). Paths are relative to the store root and
/// use `/`; the transport never interprets them beyond joining them to the root. What a
/// transport can do in fewer round trips is `Pipelined`, whose defaults are written over
/// these methods.
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

    /// Read `len` bytes at `offset`.
    fn read_range(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>>;

    /// Stream a regular file of exactly `len` bytes (what a listing and the file's own
    /// index declared) into `sink`, reading nothing past `len`: a file that is not
    /// regular, or not `len` bytes long before or after the read, is an integrity error.
    fn read_file_sized(&mut self, path: &str, len: u64, sink: &mut dyn Write) -> Result<()>;

    /// Create a new file (exclusively, mode 0600) and stream into it.
    fn create(&mut self, path: &str) -> Result<Box<dyn Upload + '_>>;

    /// Rename each `from` to its `to` without ever overwriting, then fsync the target
    /// directories, all in one batch. Callers that need an order between publishes make
    /// separate calls.
    fn publish_many(&mut self, moves: &[(String, String)]) -> Result<Vec<Published>>;

    /// Create directories (mode 0700) in the order given; existing ones are fine. The
    /// transport may defer the requests to the next batch: errors surface there.
    fn make_dirs(&mut self, dirs: &[String]) -> Result<()>;

    /// Remove one file, durably: `false` when it was not there.
    fn remove_file(&mut self, path: &str) -> Result<bool>;

    /// Remove a directory and everything in it (staging cleanup). Best effort is fine:
    /// a leftover is cleaned up by a later run.
    fn remove_dir_all(&mut self, dir: &str) -> Result<()>;
}

/// What a path transport can do in fewer round trips than the core calls one after the
/// other: split batches, pipelined steps, files kept open, reads ahead. Every method has a
/// default written over `Remote`, so a transport overrides only what it does faster (SFTP
/// nearly all of it; a local directory only `run_in_order` and `remove_empty_dir`).
pub trait Pipelined: Remote {
    /// Start a `read_many` whose answers are collected later (`collect_reads`), so that
    /// it rides with the batches sent in between: SFTP sends the opens now, the reads
    /// once the next `create_with` has its own opens answered, and waits for nothing
    /// here. `None`: the transport does not split it, and the caller calls `read_many`
    /// instead of `collect_reads`.
    fn start_reads(
        &mut self,
        _files: &[String],
        _dirs: &[String],
        _limit: u64,
    ) -> Result<Option<u64>> {
        Ok(None)
    }

    /// The answers of started reads, as `read_many` gives them.
    #[allow(clippy::type_complexity)]
    fn collect_reads(
        &mut self,
        _token: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        Err(baton_error::Error::internal(
            "collect_reads without start_reads",
        ))
    }

    /// Create new small files (exclusively, mode 0600) with the given bytes, fsync them,
    /// and check that each reads back exactly, all in one batch.
    fn put_files(&mut self, files: &[(String, Vec<u8>)]) -> Result<()> {
        for (path, bytes) in files {
            let mut upload = self.create(path)?;
            upload.write_all(bytes).map_err(|e| {
                baton_error::Error::io("cannot write", std::path::Path::new(path), e)
            })?;
            let receipt = upload.finish(&[(0, bytes.len() as u64)])?;
            if receipt.readback.first() != Some(bytes) {
                return Err(baton_error::Error::other(format!(
                    "{path} reads back differently from what was written"
                )));
            }
        }
        Ok(())
    }

    /// `create`, with the small files `beside` created as `put_files` does; SFTP writes,
    /// fsyncs and reads them back in the upload's own batches (no round trip of their
    /// own), and the upload's `finish` fails if one does not read back exactly.
    fn create_with(
        &mut self,
        path: &str,
        beside: &[(String, Vec<u8>)],
    ) -> Result<Box<dyn Upload + '_>> {
        self.put_files(beside)?;
        self.create(path)
    }

    /// Carry out `steps` in this order, in one batch where the transport keeps the order
    /// (SFTP pipelines them: the server handles requests in order), each one even after
    /// an earlier one failed: a chain of steps that must stop at a failure is written so
    /// that each later step fails when the one it depends on did. Returns whether each
    /// step happened (a rename onto an existing path, or from a missing one, did not);
    /// other failures are errors.
    fn run_in_order(&mut self, steps: &[Step]) -> Result<Vec<bool>> {
        let mut done = Vec::with_capacity(steps.len());
        for step in steps {
            done.push(match step {
                Step::Rename { from, to, .. } => match self.publish(from, to) {
                    Ok(outcome) => outcome == Published::Done,
                    Err(e) if e.kind == baton_error::ErrorKind::NotFound => false,
                    Err(e) => return Err(e),
                },
                Step::MkDir(dir) => {
                    self.make_dirs(std::slice::from_ref(dir))?;
                    true
                }
                // Sent, not waited for: whether it happened is not known here.
                Step::RmDir(dir) => {
                    self.remove_empty_dir(dir);
                    false
                }
            });
        }
        Ok(done)
    }

    /// Get ready to publish into `dirs` soon (SFTP opens them now, without waiting, so
    /// that each later publish and its directory fsync cost one round trip).
    fn prepare_publish(&mut self, _dirs: &[String]) -> Result<()> {
        Ok(())
    }

    /// Let go of the directories opened ahead for a publish (`prepare_publish`) that will
    /// not happen: an upload abandoned (SFTP closes them, so that later requests can go
    /// out with their opens again).
    fn forget_prepared(&mut self) {}

    /// Rename `from` to `to` without ever overwriting, then fsync `to`'s directory.
    fn publish(&mut self, from: &str, to: &str) -> Result<Published> {
        let mut outcomes = self.publish_many(&[(from.to_string(), to.to_string())])?;
        Ok(outcomes.pop().unwrap_or(Published::Done))
    }

    /// Remove a directory expected to be empty, without waiting to hear how it went (a
    /// leftover is stale staging that a later push removes). The default looks first, so
    /// that a directory that is not empty stays.
    fn remove_empty_dir(&mut self, dir: &str) {
        if let Ok((_, listed)) = self.read_many(&[], &[dir.to_string()], 0)
            && let Some(Some(entries)) = listed.first()
            && entries.iter().all(|e| e.name == "." || e.name == "..")
        {
            let _ = self.remove_dir_all(dir);
        }
    }

    /// Open a regular file of exactly `size` bytes and read its last `tail_len` bytes,
    /// keeping it open for `read_open`, `read_rest` or `close_tail` (the returned token).
    /// `body`: the rest will most likely be read too, so a transport may start reading
    /// it now. `None`: nothing is kept open (each later call reads the file again).
    fn open_tail(
        &mut self,
        path: &str,
        size: u64,
        tail_len: u64,
        _body: bool,
    ) -> Result<(Vec<u8>, Option<u64>)> {
        let tail_len = tail_len.min(size);
        Ok((self.read_range(path, size - tail_len, tail_len)?, None))
    }

    /// `len` bytes at `offset` of a file opened by `open_tail`.
    fn read_open(
        &mut self,
        _token: Option<u64>,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        self.read_range(path, offset, len)
    }

    /// A file opened by `open_tail`, whole, into `sink`: the bytes before its `tail`
    /// from the open file (never past them), then `tail`; its size checked again at the
    /// end, as `read_file_sized` does. Closes the file.
    fn read_rest(
        &mut self,
        _token: Option<u64>,
        path: &str,
        size: u64,
        _tail: &[u8],
        sink: &mut dyn Write,
    ) -> Result<()> {
        self.read_file_sized(path, size, sink)
    }

    /// Close a file opened by `open_tail` without reading the rest.
    fn close_tail(&mut self, _token: Option<u64>, _path: &str) {}

    /// The files `open_tail` will be asked for next, in this order: (path, size,
    /// tail_len, body) each. A transport may open and read them ahead, behind what it is
    /// reading; a call for another file drops what is left of them.
    fn expect_tails(&mut self, _files: &[(String, u64, u64, bool)]) {}

    /// Network round trips waited for since connecting, when the transport counts them
    /// (SFTP: each time it waits for a reply after sending requests, streaming windows
    /// aside); `None`: `BATON_TRACE` counts the batches (method calls) that wait.
    fn round_trips(&self) -> Option<u64> {
        None
    }

    /// The negotiated cipher, for `BATON_TRACE` (SSH only).
    fn cipher(&self) -> Option<String> {
        None
    }
}
