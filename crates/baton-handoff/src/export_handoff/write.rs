//! Writing an export into an absent or empty directory: every directory made with
//! `mkdirat` and every file created beside its final name and renamed to it without
//! replacing, relative to the directory fds the export made; removed again on failure.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use baton_error::{Error, IoContext, Result};
use baton_store::beneath::{Dir, Refused};

/// Write `files` (relative slash paths) into `dir`, which was absent or empty: `dir` made
/// (or, when it exists, opened as named) once, then every directory below it made with
/// `mkdirat` and every file created beside its final name and renamed to it without
/// replacing, all relative to the directory fds this export made. A name that appears
/// meanwhile, a symlink above all, is never written through: the export stops with a
/// security error and removes what it wrote.
pub(super) fn write_export(dir: &Path, files: &[(String, String)]) -> Result<()> {
    // Without a trailing `/`, which would make even an O_NOFOLLOW open follow a symlink.
    let dir: &Path = &dir.components().collect::<PathBuf>();
    // Its parents are where the user named it: made as named, as they always were.
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).ctx("cannot create", parent)?;
    }
    let created = match fs::DirBuilder::new().create(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(e).ctx("cannot create", dir),
    };
    let root = if created {
        Dir::open_nofollow(dir).map_err(|r| refused(r, dir))?
    } else {
        let root = Dir::open(dir).ctx("cannot open", dir)?;
        if !root.names().ctx("cannot read", dir)?.is_empty() {
            return Err(Error::usage(format!(
                "{}: directory is not empty; export-handoff writes only into an absent or empty directory",
                dir.display()
            ))
            .with_hint("name a new directory"));
        }
        root
    };
    let mut written = Written {
        root,
        dirs: BTreeMap::new(),
        files: Vec::new(),
    };
    let result = written.write_all(files);
    if result.is_err() {
        written.remove();
        if created {
            let _ = fs::remove_dir(dir);
        }
    } else if created && let Some(parent) = dir.parent() {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        baton_store::fsutil::fsync_dir(parent)?;
    }
    result
}

/// What an export made so far, by fd: to fsync, or to remove when it fails.
struct Written {
    root: Dir,
    /// The directories made below the root, by relative path.
    dirs: BTreeMap<PathBuf, Dir>,
    /// The files renamed into place: (directory's relative path, name).
    files: Vec<(PathBuf, String)>,
}

impl Written {
    fn write_all(&mut self, files: &[(String, String)]) -> Result<()> {
        for (rel, text) in files {
            let rel_path = Path::new(rel);
            let (parent, name) = match rel.rsplit_once('/') {
                Some((parent, name)) => (PathBuf::from(parent), name),
                None => (PathBuf::new(), rel.as_str()),
            };
            self.make_dirs(&parent)?;
            let at = self.dirs.get(&parent).unwrap_or(&self.root);
            at.create_file(OsStr::new(name), text.as_bytes())
                .map_err(|r| refused(r, &self.root.path().join(rel_path)))?;
            self.files.push((parent, name.to_string()));
        }
        // Durable: each directory's new names, deepest first, then the root's.
        for dir in self.dirs.values().rev() {
            dir.sync().ctx("cannot fsync", dir.path())?;
        }
        self.root.sync().ctx("cannot fsync", self.root.path())
    }

    /// Make every directory of `parent` below the root not made yet, each by `mkdirat`
    /// in the one above it.
    fn make_dirs(&mut self, parent: &Path) -> Result<()> {
        let mut at = PathBuf::new();
        for part in parent.iter() {
            let next = at.join(part);
            if !self.dirs.contains_key(&next) {
                let above = self.dirs.get(&at).unwrap_or(&self.root);
                let made = above
                    .create_dir(part)
                    .map_err(|r| refused(r, &self.root.path().join(&next)))?;
                self.dirs.insert(next.clone(), made);
            }
            at = next;
        }
        Ok(())
    }

    /// Remove what this export made (best effort: it is failing already).
    fn remove(&self) {
        for (parent, name) in &self.files {
            let at = self.dirs.get(parent).unwrap_or(&self.root);
            let _ = at.remove(OsStr::new(name), false);
        }
        for rel in self.dirs.keys().rev() {
            let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
                continue;
            };
            let at = self.dirs.get(parent).unwrap_or(&self.root);
            let _ = at.remove(name, true);
        }
    }
}

/// A refusal while writing the export, named by its path.
fn refused(r: Refused, path: &Path) -> Error {
    match r {
        Refused::Exists | Refused::Symlink => Error::new(
            baton_error::ErrorKind::Security,
            format!(
                "{} appeared in the export directory while baton wrote it (not made by baton); refusing to write through it",
                path.display()
            ),
        )
        .with_hint("something else writes into that directory: export into a new directory only you can write to"),
        r => r.into_error("cannot write", path),
    }
}
