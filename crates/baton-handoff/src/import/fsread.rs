//! Reading import inputs: sorted listings, regular files only, UTF-8 text; links refused.

use super::*;
use std::fs;
use std::path::{Path, PathBuf};

use baton_error::{IoContext, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Link,
    Other,
}

pub(super) struct Entry {
    pub(super) name: String,
    pub(super) path: PathBuf,
    pub(super) kind: Kind,
}

impl Entry {
    pub(super) fn hidden(&self) -> bool {
        self.name.starts_with('.')
    }

    pub(super) fn require_file(&self) -> Result<()> {
        match self.kind {
            Kind::File => Ok(()),
            Kind::Link => Err(file_error(
                &self.path,
                "is a symbolic link; import does not follow links",
            )),
            _ => Err(file_error(&self.path, "not a regular file")),
        }
    }
}

/// A directory's entries sorted by name, symbolic links not followed.
pub(super) fn list_dir(dir: &Path) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).ctx("cannot list", dir)? {
        let entry = entry.ctx("cannot list", dir)?;
        let path = entry.path();
        let Ok(name) = entry.file_name().into_string() else {
            return Err(file_error(&path, "file name is not UTF-8"));
        };
        let ft = entry.file_type().ctx("cannot read", &path)?;
        let kind = if ft.is_symlink() {
            Kind::Link
        } else if ft.is_dir() {
            Kind::Dir
        } else if ft.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        out.push(Entry { name, path, kind });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Every regular file under `dir`, as `prefix` + relative slash path, sorted.
pub(super) fn collect_files(
    dir: &Path,
    prefix: &str,
    out: &mut Vec<(String, Vec<u8>)>,
) -> Result<()> {
    for e in list_dir(dir)? {
        let rel = format!("{prefix}{}", e.name);
        match e.kind {
            Kind::Dir => collect_files(&e.path, &format!("{rel}/"), out)?,
            _ => {
                e.require_file()?;
                out.push((rel, read(&e.path)?));
            }
        }
    }
    Ok(())
}

pub(super) fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).ctx("cannot read", path)
}

/// Read a file that must be a regular file (not a link).
pub(super) fn read_regular(path: &Path) -> Result<Vec<u8>> {
    let meta = fs::symlink_metadata(path).ctx("cannot read", path)?;
    if meta.file_type().is_symlink() {
        return Err(file_error(
            path,
            "is a symbolic link; import does not follow links",
        ));
    }
    if !meta.is_file() {
        return Err(file_error(path, "not a regular file"));
    }
    read(path)
}

/// The bytes as UTF-8 text without a leading byte-order mark.
pub(super) fn text<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a str> {
    let s = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        line_error(path, line, "not UTF-8 text")
    })?;
    Ok(s.strip_prefix('\u{feff}').unwrap_or(s))
}
