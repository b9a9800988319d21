//! Loose objects: one file per object under `objects/`, named by its storage name in a
//! two-hex-digit fan-out directory, written once by temp file and rename.

use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::fsutil::{self, read_dir_sorted};
use baton_error::Result;
use baton_format::ObjectId;

/// The loose-object directory: paths, listing and publishing, by storage name only (the
/// envelope, in [`super::Objects`], turns an object id into that name).
pub(crate) struct LooseDir {
    dir: PathBuf,
}

/// One name found under `objects/` by [`LooseDir::list`].
pub enum ListedObject {
    Object(ObjectId, PathBuf),
    Temp(PathBuf),
    Stray(PathBuf),
}

impl LooseDir {
    pub(crate) fn new(dir: PathBuf) -> Self {
        LooseDir { dir }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The loose path of storage name `name`.
    pub(crate) fn path(&self, name: &ObjectId) -> PathBuf {
        let hex = name.to_hex();
        self.dir.join(&hex[..2]).join(&hex[2..])
    }

    /// The fan-out directory `dest` lives in, created if missing.
    fn fanout_of(&self, dest: &Path) -> Result<PathBuf> {
        let fanout = dest.parent().unwrap_or(&self.dir).to_path_buf();
        fsutil::ensure_private_dir(&fanout)?;
        Ok(fanout)
    }

    /// A temp file in the directory where `name` will live.
    pub(crate) fn temp_for(&self, name: &ObjectId) -> Result<tempfile::NamedTempFile> {
        let fanout = self.fanout_of(&self.path(name))?;
        fsutil::temp_file_in(&fanout)
    }

    /// Write a new file under `name` through a temp file in its fan-out directory and
    /// rename it into place; returns that directory, which still needs an fsync.
    pub(crate) fn publish_with(
        &self,
        name: &ObjectId,
        write: impl FnOnce(&mut File) -> Result<()>,
    ) -> Result<PathBuf> {
        let dest = self.path(name);
        let fanout = self.fanout_of(&dest)?;
        let mut temp = fsutil::temp_file_in(&fanout)?;
        write(temp.as_file_mut())?;
        fsutil::publish(temp, &dest, false)?;
        Ok(fanout)
    }

    /// Mark a loose file as recently used (see `Objects::reuse`).
    pub(crate) fn freshen(&self, name: &ObjectId) {
        if let Ok(file) = File::open(self.path(name)) {
            let _ = file.set_modified(SystemTime::now());
        }
    }

    /// Modification time and length of the loose file of `name`.
    pub(crate) fn stat(&self, name: &ObjectId) -> Option<(SystemTime, u64)> {
        let meta = fs::metadata(self.path(name)).ok()?;
        Some((meta.modified().ok()?, meta.size()))
    }

    /// Whether no fan-out directory holds anything but temp files.
    pub(crate) fn is_empty(&self) -> Result<bool> {
        for fanout in read_dir_sorted(&self.dir)? {
            let path = self.dir.join(&fanout);
            if path.is_dir()
                && read_dir_sorted(&path)?
                    .iter()
                    .any(|n| !fsutil::is_temp_name(n))
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Every object file, with names that are not objects as their own entries for
    /// `verify` to report.
    pub(crate) fn list(&self) -> Result<Vec<ListedObject>> {
        let mut out = Vec::new();
        for fanout in read_dir_sorted(&self.dir)? {
            let fanout_path = self.dir.join(&fanout);
            if fsutil::is_temp_name(&fanout) {
                continue;
            }
            if fanout.len() != 2
                || !baton_format::id::is_lower_hex(&fanout)
                || !fanout_path.is_dir()
            {
                out.push(ListedObject::Stray(fanout_path));
                continue;
            }
            for name in read_dir_sorted(&fanout_path)? {
                let path = fanout_path.join(&name);
                if fsutil::is_temp_name(&name) {
                    out.push(ListedObject::Temp(path));
                    continue;
                }
                match ObjectId::parse(&format!("{fanout}{name}")) {
                    Ok(id) => out.push(ListedObject::Object(id, path)),
                    Err(_) => out.push(ListedObject::Stray(path)),
                }
            }
        }
        Ok(out)
    }
}
