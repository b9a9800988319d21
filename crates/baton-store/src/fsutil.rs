//! Durable, private file-system primitives: every store write goes through here.
//!
//! The rule (store-format/SPEC.md, "Write ordering"): write a temp file in the final
//! directory, fsync it, rename it into place, fsync the directory. Modes are set
//! explicitly (0700 directories, 0600 files) so the umask never widens or narrows them.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use baton_error::{Error, ErrorKind, IoContext, Result};

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;
/// Prefix of every temp file baton creates inside a store; `verify` ignores such files
/// and `gc` removes stale ones.
pub(crate) const TEMP_PREFIX: &str = ".tmp-";

/// Create `path` as a private directory if it does not exist yet.
pub fn ensure_private_dir(path: &Path) -> Result<()> {
    // Created 0700 (less the umask) from the start, so a crash before the chmod below can
    // never leave a directory wider than 0700.
    match fs::DirBuilder::new().mode(DIR_MODE).create(path) {
        Ok(()) => {
            fs::set_permissions(path, Permissions::from_mode(DIR_MODE))
                .ctx("cannot set permissions of", path)?;
            if let Some(parent) = path.parent() {
                fsync_dir(parent)?;
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(baton_error::Error::io("cannot create directory", path, e)),
    }
}

/// Create `path` and every missing parent, each 0700 from its mkdir(2): the umask can
/// only narrow that, so no directory baton makes is ever open to others, even briefly.
pub fn create_dir_all_private(path: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(path)
        .ctx("cannot create directory", path)
}

/// A new temp directory in `parent` named `prefix*`, 0700 from its mkdir(2) (tempfile's
/// own default is 0777 less the umask: under umask 000 anyone could swap its contents).
pub fn private_temp_dir_in(parent: &Path, prefix: &str) -> Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(Permissions::from_mode(DIR_MODE))
        .tempdir_in(parent)
        .ctx("cannot create a temp directory in", parent)?;
    // A umask such as 0777 narrows it below what we need ourselves.
    fs::set_permissions(dir.path(), Permissions::from_mode(DIR_MODE))
        .ctx("cannot set permissions of", dir.path())?;
    check_private_dir(dir.path())?;
    Ok(dir)
}

/// The identity (device, inode) of `path`, which must be a directory itself (not a
/// symlink to one), owned by this user, and closed to group and others. Checked on what
/// is renamed into place: anything else was put there by someone else.
pub fn check_private_dir(path: &Path) -> Result<(u64, u64)> {
    let meta = fs::symlink_metadata(path).ctx("cannot inspect", path)?;
    let uid = rustix::process::geteuid().as_raw();
    let problem = if !meta.file_type().is_dir() {
        Some("is not a directory".to_string())
    } else if meta.uid() != uid {
        Some(format!(
            "belongs to uid {}, not to this user ({uid})",
            meta.uid()
        ))
    } else if meta.mode() & 0o077 != 0 {
        Some(format!(
            "has mode {:o}, open to others",
            meta.mode() & 0o7777
        ))
    } else {
        None
    };
    match problem {
        None => Ok((meta.dev(), meta.ino())),
        Some(problem) => Err(Error::new(
            ErrorKind::Security,
            format!("{} {problem}; refusing to use it", path.display()),
        )
        .with_hint("another local user may have replaced it: check the directory's owner and permissions, then run the command again")),
    }
}

/// Require `path` to be the directory `id` (from [`check_private_dir`]) after a rename.
pub fn check_same_dir(path: &Path, id: (u64, u64)) -> Result<()> {
    let now = check_private_dir(path)?;
    if now != id {
        return Err(Error::new(
            ErrorKind::Security,
            format!(
                "{} is not the directory baton just moved there; refusing to use it",
                path.display()
            ),
        )
        .with_hint("another local user may have replaced it: remove it and run the command again in a directory only you can write to"));
    }
    Ok(())
}

pub fn fsync_dir(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .ctx("cannot fsync directory", path)
}

/// A new private temp file in `dir` (mode 0600, named `.tmp-*`).
pub fn temp_file_in(dir: &Path) -> Result<tempfile::NamedTempFile> {
    let temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .permissions(Permissions::from_mode(FILE_MODE))
        .tempfile_in(dir)
        .ctx("cannot create a temp file in", dir)?;
    // The create mode is subject to the umask; set it explicitly, as for every file.
    temp.as_file()
        .set_permissions(Permissions::from_mode(FILE_MODE))
        .ctx("cannot set permissions of", temp.path())?;
    Ok(temp)
}

/// Durably publish an already written temp file as `dest` (same directory): fsync the
/// data, rename over `dest`, and fsync the directory unless the caller batches that.
pub fn publish(temp: tempfile::NamedTempFile, dest: &Path, sync_dir: bool) -> Result<()> {
    temp.as_file().sync_all().ctx("cannot fsync", temp.path())?;
    temp.persist(dest)
        .map_err(|e| baton_error::Error::io("cannot rename into", dest, e.error))?;
    if sync_dir && let Some(parent) = dest.parent() {
        fsync_dir(parent)?;
    }
    Ok(())
}

/// Atomically replace `dest` with `bytes`.
pub fn write_atomic(dest: &Path, bytes: &[u8]) -> Result<()> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    let mut temp = temp_file_in(dir)?;
    temp.write_all(bytes).ctx("cannot write", temp.path())?;
    publish(temp, dest, true)
}

/// Create a new private file with exactly `bytes`, failing if it exists.
pub(crate) fn create_new_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .ctx("cannot create", path)?;
    file.set_permissions(Permissions::from_mode(FILE_MODE))
        .ctx("cannot set permissions of", path)?;
    file.write_all(bytes).ctx("cannot write", path)?;
    file.sync_all().ctx("cannot fsync", path)
}

/// Read a whole small file, refusing anything larger than `limit` bytes.
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let file = File::open(path).ctx("cannot read", path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .ctx("cannot read", path)?;
    if bytes.len() as u64 > limit {
        return Err(baton_error::Error::integrity(format!(
            "{} is larger than {limit} bytes",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Whether a directory entry name is one of our temp files.
pub(crate) fn is_temp_name(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// rename(2) that fails with `AlreadyExists` instead of replacing (renameat2 NOREPLACE),
/// for files and directories alike.
pub fn rename_noclobber(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE).map_err(io::Error::from)
}

pub(crate) fn read_dir_sorted(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).ctx("cannot list", dir)? {
        let entry = entry.ctx("cannot list", dir)?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// Open a path as a regular file without following a symlink and without blocking on a
/// FIFO, then check the file type on the open descriptor.
pub fn open_regular(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ctx("cannot open", path)?;
    let meta = file.metadata().ctx("cannot stat", path)?;
    if !meta.is_file() {
        return Err(Error::usage(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok(file)
}
