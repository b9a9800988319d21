//! The local-path transport: a store in another directory (a mounted disk, a share).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::{Pipelined, Published, Receipt, Remote, RemoteEntry, Step, Upload};
use baton_error::{Error, IoContext, Result};
use baton_store::fsutil::{self, rename_noclobber};

pub struct LocalRemote {
    root: PathBuf,
}

impl LocalRemote {
    pub fn new(root: PathBuf) -> Self {
        LocalRemote { root }
    }

    fn full(&self, path: &str) -> PathBuf {
        self.root.join(path)
    }
}

struct LocalUpload {
    path: PathBuf,
    file: File,
}

impl Write for LocalUpload {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Upload for LocalUpload {
    fn finish(mut self: Box<Self>, readback: &[(u64, u64)]) -> Result<Receipt> {
        self.file.sync_all().ctx("cannot fsync", &self.path)?;
        let size = self.file.metadata().ctx("cannot stat", &self.path)?.len();
        let mut back = Vec::with_capacity(readback.len());
        for &(offset, len) in readback {
            let mut buf = vec![0u8; len as usize];
            self.file
                .seek(SeekFrom::Start(offset))
                .ctx("cannot read back", &self.path)?;
            self.file
                .read_exact(&mut buf)
                .ctx("cannot read back", &self.path)?;
            back.push(buf);
        }
        Ok(Receipt {
            size,
            readback: back,
        })
    }
}

/// Open a file of the remote store for reading without blocking (a FIFO where a file
/// should be would otherwise hang the open for ever), then check on the descriptor that
/// it is a regular file: a store holds nothing else, and a device or FIFO never ends.
fn open_regular(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ctx("cannot read", path)?;
    let meta = file.metadata().ctx("cannot stat", path)?;
    if !meta.is_file() {
        let kind = meta.file_type();
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(Error::integrity(format!(
            "{} in the remote store is {what}, not a regular file",
            path.display()
        ))
        .with_hint("a baton store holds only regular files and directories: remove or replace it on the remote (nothing was changed here)"));
    }
    Ok(file)
}

/// Read a whole small remote file, refusing anything larger than `limit` bytes.
fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .ctx("cannot read", path)?;
    if bytes.len() as u64 > limit {
        return Err(Error::integrity(format!(
            "{} is larger than {limit} bytes",
            path.display()
        )));
    }
    Ok(bytes)
}

fn entry_of(entry: &fs::DirEntry) -> Option<RemoteEntry> {
    let meta = entry.metadata().ok()?;
    let mtime = meta
        .modified()
        .ok()?
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Some(RemoteEntry {
        name: entry.file_name().to_string_lossy().into_owned(),
        size: meta.len(),
        mtime,
        is_dir: meta.is_dir(),
    })
}

/// A remote file that is not the size its listing declared (it changed, or lies).
fn wrong_size(path: &Path, actual: u64, declared: u64) -> Error {
    Error::integrity(format!(
        "{} in the remote store is {actual} bytes, but {declared} were declared",
        path.display()
    ))
    .with_hint("nothing was published here; run 'baton verify' on the remote store")
}

impl Remote for LocalRemote {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn read_many(
        &mut self,
        files: &[String],
        dirs: &[String],
        limit: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        let mut file_out = Vec::with_capacity(files.len());
        for f in files {
            match read_limited(&self.full(f), limit) {
                Ok(bytes) => file_out.push(Some(bytes)),
                Err(e) if e.kind == baton_error::ErrorKind::NotFound => file_out.push(None),
                Err(e) => return Err(e),
            }
        }
        let mut dir_out = Vec::with_capacity(dirs.len());
        for d in dirs {
            let path = self.full(d);
            match fs::read_dir(&path) {
                Ok(rd) => {
                    let mut entries: Vec<RemoteEntry> = rd
                        .filter_map(|e| e.ok())
                        .filter_map(|e| entry_of(&e))
                        .collect();
                    entries.sort_by(|a, b| a.name.cmp(&b.name));
                    dir_out.push(Some(entries));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => dir_out.push(None),
                Err(e) => return Err(Error::io("cannot list", &path, e)),
            }
        }
        Ok((file_out, dir_out))
    }

    fn make_dirs(&mut self, dirs: &[String]) -> Result<()> {
        for d in dirs {
            // The store's own directory may need its parents, as `git init` would make them:
            // private from their mkdir, so no umask opens them to other users.
            if d.is_empty()
                && let Some(parent) = self.root.parent()
            {
                fsutil::create_dir_all_private(parent)?;
            }
            fsutil::ensure_private_dir(&self.full(d))?;
        }
        Ok(())
    }

    fn create(&mut self, path: &str) -> Result<Box<dyn Upload + '_>> {
        let full = self.full(path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(fsutil::FILE_MODE)
            .open(&full)
            .ctx("cannot create", &full)?;
        file.set_permissions(fs::Permissions::from_mode(fsutil::FILE_MODE))
            .ctx("cannot set permissions of", &full)?;
        Ok(Box::new(LocalUpload { path: full, file }))
    }

    fn publish_many(&mut self, moves: &[(String, String)]) -> Result<Vec<Published>> {
        let mut outcomes = Vec::with_capacity(moves.len());
        let mut dirs = std::collections::BTreeSet::new();
        for (from, to) in moves {
            let (src, dst) = (self.full(from), self.full(to));
            match rename_noclobber(&src, &dst) {
                Ok(()) => {
                    outcomes.push(Published::Done);
                    if let Some(parent) = dst.parent() {
                        dirs.insert(parent.to_path_buf());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    outcomes.push(Published::Exists)
                }
                Err(e) => return Err(Error::io("cannot publish", &dst, e)),
            }
        }
        for dir in dirs {
            fsutil::fsync_dir(&dir)?;
        }
        Ok(outcomes)
    }

    fn read_file_sized(&mut self, path: &str, len: u64, sink: &mut dyn Write) -> Result<()> {
        let full = self.full(path);
        let file = open_regular(&full)?;
        let size = |file: &File| file.metadata().map(|m| m.len()).ctx("cannot stat", &full);
        let before = size(&file)?;
        if before != len {
            return Err(wrong_size(&full, before, len));
        }
        let mut limited = (&file).take(len);
        let copied = io::copy(&mut limited, sink).map_err(|e| {
            // The sink is the local side: a full disk says so.
            if e.kind() == io::ErrorKind::StorageFull {
                Error::other(format!("the local disk is full: cannot store {path}: {e}")).with_hint(
                    "free some disk space and run the command again; nothing was published",
                )
            } else {
                Error::io("cannot read", &full, e)
            }
        })?;
        let after = size(&file)?;
        if copied != len || after != len {
            return Err(wrong_size(
                &full,
                if copied != len { copied } else { after },
                len,
            ));
        }
        Ok(())
    }

    fn read_range(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let full = self.full(path);
        let mut file = open_regular(&full)?;
        file.seek(SeekFrom::Start(offset))
            .ctx("cannot read", &full)?;
        let mut buf = vec![0u8; len as usize];
        file.read_exact(&mut buf).ctx("cannot read", &full)?;
        Ok(buf)
    }

    fn remove_file(&mut self, path: &str) -> Result<bool> {
        let full = self.full(path);
        match fs::remove_file(&full) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io("cannot remove", &full, e)),
        }
        if let Some(parent) = full.parent() {
            fsutil::fsync_dir(parent)?;
        }
        Ok(true)
    }

    fn remove_dir_all(&mut self, dir: &str) -> Result<()> {
        let full = self.full(dir);
        match fs::remove_dir_all(&full) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("cannot remove", &full, e)),
        }
    }
}

/// The end of a connection, for `BATON_TRACE` (the subscriber counts the calls that waited).
impl Drop for LocalRemote {
    fn drop(&mut self) {
        crate::trace::closed(None);
    }
}

/// A local directory has no round trips to save: only the ordered steps and the empty
/// directory removal are its own (fewer calls than the defaults).
impl Pipelined for LocalRemote {
    fn run_in_order(&mut self, steps: &[Step]) -> Result<Vec<bool>> {
        let mut done = Vec::with_capacity(steps.len());
        for step in steps {
            let outcome = match step {
                Step::Rename { from, to, sync } => {
                    let dst = self.full(to);
                    rename_noclobber(&self.full(from), &dst).and_then(|()| match dst.parent() {
                        Some(parent) if *sync => {
                            fsutil::fsync_dir(parent).map_err(io::Error::other)
                        }
                        _ => Ok(()),
                    })
                }
                Step::MkDir(dir) => fs::DirBuilder::new()
                    .mode(fsutil::DIR_MODE)
                    .create(self.full(dir)),
                Step::RmDir(dir) => {
                    done.push(fs::remove_dir(self.full(dir)).is_ok());
                    continue;
                }
            };
            done.push(match outcome {
                Ok(()) => true,
                // What a step that depends on a failed one runs into.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::AlreadyExists
                            | io::ErrorKind::NotFound
                            | io::ErrorKind::NotADirectory
                    ) =>
                {
                    false
                }
                Err(e) => return Err(Error::other(format!("cannot carry out {step:?}: {e}"))),
            });
        }
        Ok(done)
    }

    fn remove_empty_dir(&mut self, dir: &str) {
        let _ = fs::remove_dir(self.full(dir));
    }
}
