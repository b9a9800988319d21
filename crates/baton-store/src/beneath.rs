//! Paths beneath a directory opened once: every path below it opened, listed and created
//! relative to its descriptor, one that a symlink or `..` would take elsewhere refused.
//!
//! A path checked and then opened again by name can be raced: a hostile process swaps a
//! directory of it for a symlink (`renameat2(RENAME_EXCHANGE)`) between the two, and the
//! second open reads outside. Here nothing is opened by a name resolved twice. The root is
//! opened as a directory fd (following its own path as the caller named it); below it,
//! where the kernel has `openat2(2)` (Linux 5.6), a relative path is resolved in one call
//! with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`; where it has not (`ENOSYS`, or `EPERM`
//! from a seccomp filter), one component at a time (`O_PATH | O_NOFOLLOW`, each checked by
//! `fstat` to be a directory). Absolute paths and `..` are refused before any call. Files
//! are read from the fd that was opened (`O_NONBLOCK`, so a FIFO never hangs, and only if
//! `fstat` on that fd says regular), directories listed and descended by fd.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

use baton_error::{Error, ErrorKind};

/// Why a path beneath a directory was not opened.
#[derive(Debug)]
pub enum Refused {
    /// Absolute, or with a `..` component: it may name something outside.
    Outside,
    /// A symlink on the way (or the path itself, where a symlink is not what was asked).
    Symlink,
    /// Not a regular file where one was asked for.
    NotRegular,
    /// Something is already there that this command did not make (creating).
    Exists,
    /// It changed between two looks at it (a file swapped for another).
    Changed,
    Io(io::Error),
}

impl From<Errno> for Refused {
    fn from(e: Errno) -> Refused {
        match e {
            Errno::LOOP => Refused::Symlink,
            Errno::XDEV => Refused::Outside,
            Errno::EXIST => Refused::Exists,
            e => Refused::Io(e.into()),
        }
    }
}

impl From<io::Error> for Refused {
    fn from(e: io::Error) -> Refused {
        Refused::Io(e)
    }
}

impl Refused {
    /// The error for `path` (as shown to the user), `what` the action (`"cannot read"`).
    pub fn into_error(self, what: &str, path: &Path) -> Error {
        let shown = path.display();
        match self {
            Refused::Outside => Error::new(
                ErrorKind::Security,
                format!("{shown} leads outside the directory it was named in"),
            )
            .with_hint("name a path inside it, without '..'"),
            Refused::Symlink => Error::new(
                ErrorKind::Security,
                format!(
                    "{shown} is reached through a symlink (or is one); baton follows no symlink below the directory it reads"
                ),
            )
            .with_hint(
                "name the file itself; if nothing should be a symlink there, something changed the directory while baton ran",
            ),
            Refused::NotRegular => Error::usage(format!("{shown} is not a regular file"))
                .with_hint("name a regular file"),
            Refused::Exists => Error::new(
                ErrorKind::Security,
                format!("{shown} appeared while baton was writing it (not made by baton)"),
            )
            .with_hint("something else writes into that directory: use a new directory only you can write to"),
            Refused::Changed => Error::other(format!("{shown} changed while baton was opening it"))
                .with_hint("run the command again once nothing is changing it"),
            Refused::Io(e) => Error::io(what, path, e),
        }
    }
}

/// What a path beneath a directory is, opened (a directory, a regular file) or read (a
/// symlink's target); anything else is only named, never opened.
pub enum Entry {
    Dir(Dir),
    File(File, Metadata),
    Symlink(Vec<u8>),
    Other(std::fs::FileType),
}

/// A directory opened as an fd; every path below it is opened relative to it.
pub struct Dir {
    fd: OwnedFd,
    /// Where it was named, for messages and for [`Dir::relative`].
    path: PathBuf,
}

/// Cleared once `openat2` answered ENOSYS or EPERM: every later resolution walks.
static OPENAT2: AtomicBool = AtomicBool::new(true);

/// Flags of every open below the root (`openat2` refuses any other flag beside `O_PATH`).
fn open_flags() -> OFlags {
    OFlags::NOFOLLOW | OFlags::CLOEXEC
}

impl Dir {
    /// `path` as a directory, its own path followed as the caller named it.
    pub fn open(path: &Path) -> io::Result<Dir> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// `path` as a directory that must not be a symlink itself (one this command just
    /// made: a symlink there was put there by someone else).
    pub fn open_nofollow(path: &Path) -> Result<Dir, Refused> {
        Ok(Dir {
            fd: open_dir_nofollow(rustix::fs::CWD, path)?,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// (device, inode) of the directory itself.
    pub fn id(&self) -> io::Result<(u64, u64)> {
        let st = rustix::fs::fstat(&self.fd)?;
        Ok((st.st_dev, st.st_ino))
    }

    /// `path` (as named below [`Dir::path`]) relative to this directory, if it is below.
    pub fn relative<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        path.strip_prefix(&self.path).ok()
    }

    /// The fd of `rel` beneath this directory, opened with `flags`: a symlink anywhere on
    /// the way refused, the last component's left to `flags` (`O_PATH` gives a symlink
    /// itself, anything else refuses it).
    fn resolve(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, Refused> {
        let parts = components(rel)?;
        let flags = flags | open_flags();
        if parts.is_empty() {
            return Ok(rustix::fs::openat(&self.fd, ".", flags, Mode::empty())?);
        }
        if OPENAT2.load(Ordering::Relaxed) && !walk_forced() {
            let joined = join(&parts);
            let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
            // EAGAIN: a concurrent rename seen by the kernel; the walk below is immune.
            for _ in 0..4 {
                match rustix::fs::openat2(&self.fd, &joined, flags, Mode::empty(), resolve) {
                    Ok(fd) => return Ok(fd),
                    Err(Errno::NOSYS | Errno::PERM) => {
                        OPENAT2.store(false, Ordering::Relaxed);
                        break;
                    }
                    Err(Errno::AGAIN) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        walk(&self.fd, &parts, flags)
    }

    /// The metadata of `rel` itself (a symlink's own), never following one.
    pub(crate) fn lstat(&self, rel: &Path) -> Result<Metadata, Refused> {
        let handle = File::from(self.resolve(rel, OFlags::PATH)?);
        Ok(handle.metadata()?)
    }

    /// The `lstat` of the entry `name` of this directory (one component): one `statx`
    /// on this directory's fd, where `lstat` of a path below opens it first.
    pub(crate) fn lstat_entry(&self, name: &OsStr) -> Result<rustix::fs::Stat, Refused> {
        if name.is_empty() || name.as_bytes().contains(&b'/') || name == ".." || name == "." {
            return Err(Refused::Outside);
        }
        Ok(rustix::fs::statat(
            &self.fd,
            name,
            AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }

    /// The target of the symlink `rel`.
    pub fn read_link(&self, rel: &Path) -> Result<Vec<u8>, Refused> {
        let handle = self.resolve(rel, OFlags::PATH)?;
        Ok(rustix::fs::readlinkat(&handle, "", Vec::new())
            .map_err(|e| match e {
                Errno::INVAL | Errno::NOENT => Refused::Changed,
                e => e.into(),
            })?
            .into_bytes())
    }

    /// The regular file `rel`, opened for reading (never blocking on a FIFO: the type is
    /// checked on the opened fd).
    pub fn open_file(&self, rel: &Path) -> Result<File, Refused> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let file = File::from(self.resolve(rel, flags)?);
        if !file.metadata()?.is_file() {
            return Err(Refused::NotRegular);
        }
        Ok(file)
    }

    /// The directory `rel`, opened.
    pub fn open_dir(&self, rel: &Path) -> Result<Dir, Refused> {
        match self.entry(rel)? {
            Entry::Dir(dir) => Ok(dir),
            Entry::Symlink(_) => Err(Refused::Symlink),
            _ => Err(Refused::Io(Errno::NOTDIR.into())),
        }
    }

    /// `rel` opened as what it is: a directory or regular file opened, a symlink's target
    /// read, anything else (FIFO, socket, device) not opened at all.
    pub fn entry(&self, rel: &Path) -> Result<Entry, Refused> {
        let handle = self.resolve(rel, OFlags::PATH)?;
        let meta = File::from(handle.try_clone()?).metadata()?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = rustix::fs::readlinkat(&handle, "", Vec::new())?;
            return Ok(Entry::Symlink(target.into_bytes()));
        }
        if kind.is_dir() {
            // "." of the handle is that very directory: no name is looked up again.
            let fd = rustix::fs::openat(
                &handle,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            return Ok(Entry::Dir(Dir {
                fd,
                path: self.path.join(rel),
            }));
        }
        if !kind.is_file() {
            return Ok(Entry::Other(kind));
        }
        let file = self.open_file(rel)?;
        let opened = file.metadata()?;
        if (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
            return Err(Refused::Changed);
        }
        Ok(Entry::File(file, opened))
    }

    /// The names in this directory (not `.` and `..`), sorted, listed from its fd.
    pub fn names(&self) -> io::Result<Vec<OsString>> {
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::read_from(&self.fd)? {
            let name = entry?.file_name().to_bytes().to_vec();
            if name != b"." && name != b".." {
                names.push(OsString::from_vec(name));
            }
        }
        names.sort();
        Ok(names)
    }

    /// Make the new directory `name` in this one (mode 0777 less the umask) and open it;
    /// [`Refused::Exists`] if anything is there already.
    pub fn create_dir(&self, name: &OsStr) -> Result<Dir, Refused> {
        let name = one_name(name)?;
        rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o777))?;
        Ok(Dir {
            fd: open_dir_nofollow(self.fd.as_fd(), name)?,
            path: self.path.join(name),
        })
    }

    /// Create the new file `name` in this one holding exactly `bytes` (mode 0666 less the
    /// umask): written to a temp file made with `O_CREAT | O_EXCL | O_NOFOLLOW`, fsynced,
    /// then renamed to `name` without replacing anything ([`Refused::Exists`] if something
    /// is there). The caller fsyncs this directory ([`Dir::sync`]) once it is complete.
    pub fn create_file(&self, name: &OsStr, bytes: &[u8]) -> Result<(), Refused> {
        let name = one_name(name)?;
        let (temp, file) = self.create_temp()?;
        let mut file = File::from(file);
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(Refused::Io)
            .and_then(|()| {
                Ok(rustix::fs::renameat_with(
                    &self.fd,
                    &temp,
                    &self.fd,
                    name,
                    RenameFlags::NOREPLACE,
                )?)
            });
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, &temp, AtFlags::empty());
        }
        written
    }

    /// A new `.tmp-*` file in this directory, created exclusively and never through a
    /// symlink.
    fn create_temp(&self) -> Result<(OsString, OwnedFd), Refused> {
        let pid = std::process::id();
        let mut last = None;
        for attempt in 0..16u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let temp = OsString::from(format!(
                "{}{pid}-{nanos:x}-{attempt}",
                super::fsutil::TEMP_PREFIX
            ));
            match rustix::fs::openat(
                &self.fd,
                &temp,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | open_flags(),
                Mode::from_raw_mode(0o666),
            ) {
                Ok(fd) => return Ok((temp, fd)),
                Err(Errno::EXIST) => last = Some(Errno::EXIST),
                Err(e) => return Err(Refused::Io(e.into())),
            }
        }
        Err(Refused::Io(last.unwrap_or(Errno::EXIST).into()))
    }

    /// Remove the entry `name` of this directory (a directory only if it is empty), best
    /// effort: what an export made before it failed.
    pub fn remove(&self, name: &OsStr, dir: bool) -> io::Result<()> {
        let flags = if dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        Ok(rustix::fs::unlinkat(&self.fd, name, flags)?)
    }

    /// fsync the directory: the names created in it are durable.
    pub fn sync(&self) -> io::Result<()> {
        Ok(rustix::fs::fsync(&self.fd)?)
    }
}

/// The directory `name` (relative to `at`), never a symlink in its place: with
/// `O_DIRECTORY` the kernel answers ENOTDIR for a symlink, told apart here.
fn open_dir_nofollow<P: rustix::path::Arg + Copy>(
    at: std::os::fd::BorrowedFd<'_>,
    name: P,
) -> Result<OwnedFd, Refused> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | open_flags();
    match rustix::fs::openat(at, name, flags, Mode::empty()) {
        Err(Errno::NOTDIR) => {
            let st = rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW)?;
            match rustix::fs::FileType::from_raw_mode(st.st_mode) {
                rustix::fs::FileType::Symlink => Err(Refused::Symlink),
                _ => Err(Refused::Io(Errno::NOTDIR.into())),
            }
        }
        other => Ok(other?),
    }
}

/// The normal components of `rel`, `.` dropped; `..`, a root or a prefix refused.
fn components(rel: &Path) -> Result<Vec<&OsStr>, Refused> {
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(name) => parts.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Refused::Outside);
            }
        }
    }
    Ok(parts)
}

/// A single file name: not empty, `.`, `..`, nor holding a `/`.
fn one_name(name: &OsStr) -> Result<&OsStr, Refused> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(Refused::Outside);
    }
    Ok(name)
}

fn join(parts: &[&OsStr]) -> OsString {
    let mut joined = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            joined.push(b'/');
        }
        joined.extend_from_slice(part.as_bytes());
    }
    OsString::from_vec(joined)
}

/// The fallback without `openat2`: each directory on the way opened `O_PATH |
/// O_NOFOLLOW` relative to the one before and checked by `fstat` to be a directory (a
/// symlink is refused, never followed); the last component opened with `flags`.
fn walk(root: &OwnedFd, parts: &[&OsStr], flags: OFlags) -> Result<OwnedFd, Refused> {
    let (last, dirs) = parts.split_last().ok_or(Refused::Outside)?;
    let mut held: Option<OwnedFd> = None;
    for part in dirs {
        let at = held.as_ref().unwrap_or(root);
        let fd = rustix::fs::openat(at, *part, OFlags::PATH | open_flags(), Mode::empty())?;
        let kind = rustix::fs::FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode);
        match kind {
            rustix::fs::FileType::Directory => held = Some(fd),
            rustix::fs::FileType::Symlink => return Err(Refused::Symlink),
            _ => return Err(Refused::Io(Errno::NOTDIR.into())),
        }
    }
    let at = held.as_ref().unwrap_or(root);
    Ok(rustix::fs::openat(at.as_fd(), *last, flags, Mode::empty())?)
}

thread_local! {
    /// Set by the tests and the fuzz target of the fallback walk, on their own thread.
    static FORCE_WALK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn walk_forced() -> bool {
    FORCE_WALK.with(std::cell::Cell::get)
}

/// Run `run` on this thread with the fallback walk instead of `openat2` (tests and the
/// fuzz target compare the two).
#[doc(hidden)]
pub(crate) fn without_openat2<T>(run: impl FnOnce() -> T) -> T {
    FORCE_WALK.with(|f| f.set(true));
    let out = run();
    FORCE_WALK.with(|f| f.set(false));
    out
}

pub mod fuzzing;

#[cfg(test)]
mod tests;
