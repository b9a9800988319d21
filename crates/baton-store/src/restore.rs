//! Checkout: materialize a tree into a fresh directory, verified, renamed into place.

use std::fs::{self, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rayon::prelude::*;
use serde::Serialize;

use super::tree_limits::MAX_CHECKOUT_BYTES;
use super::{Store, fsutil};
use baton_error::{Error, IoContext, Result};
use baton_format::{EntryKind, ObjectId, TreeEntry};

/// Longest symlink target we restore (PATH_MAX).
const MAX_LINK_TARGET: u64 = 4096;

#[derive(Debug, Default, Serialize)]
pub struct CheckoutStats {
    pub files: u64,
    pub bytes: u64,
}

/// Removes the staging directory unless the checkout completed.
struct Staging(Option<PathBuf>);

impl Drop for Staging {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_dir_all(path);
        }
    }
}

impl Store {
    /// Write the tree `tree` to `dest`, which must be absent or an empty directory. Every
    /// byte is verified before anything appears in `dest`: the work happens in a hidden
    /// sibling directory, renamed onto an absent `dest`, or whose entries move into an
    /// existing empty one.
    pub fn checkout(
        &self,
        tree: &ObjectId,
        dest: &Path,
        progress: &indicatif::ProgressBar,
    ) -> Result<CheckoutStats> {
        // Listed (and refused past the limits) before anything is created.
        let (shape, entries) = self.list_tree_shaped(tree)?;
        if shape.file_bytes > MAX_CHECKOUT_BYTES {
            return Err(Error::integrity(format!(
                "tree {tree} holds {} bytes of files, over the checkout limit of {MAX_CHECKOUT_BYTES} (MAX_CHECKOUT_BYTES)",
                shape.file_bytes
            ))
            .with_hint("a tree that names one large file many times is forged or damaged; 'baton cat' reads single files"));
        }
        let mut fill_existing = false;
        let canonical;
        let mut dest = dest;
        match fs::symlink_metadata(dest) {
            Ok(meta) if meta.is_dir() => {
                // An existing empty directory (perhaps `.`) is filled in place; staging
                // happens beside it, so resolve `.` and `..` first.
                fill_existing = true;
                canonical = fs::canonicalize(dest).ctx("cannot resolve", dest)?;
                dest = &canonical;
                if fs::read_dir(dest)
                    .ctx("cannot list", dest)?
                    .next()
                    .is_some()
                {
                    return Err(Error::usage(format!("{} is not empty", dest.display()))
                        .with_hint("check out into a new or empty directory"));
                }
            }
            Ok(_) => {
                return Err(Error::usage(format!(
                    "{} exists and is not a directory",
                    dest.display()
                ))
                .with_hint("check out into a new or empty directory"));
            }
            Err(_) => {}
        }
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&parent).ctx("cannot create directory", &parent)?;
        let base = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let staging_path = parent.join(format!(
            ".{base}.baton-checkout-{}-{nanos}",
            std::process::id()
        ));
        // A plain create_dir lets the umask decide the mode, as for any new directory.
        fs::create_dir(&staging_path).ctx("cannot create directory", &staging_path)?;
        let mut staging = Staging(Some(staging_path.clone()));

        progress.set_length(
            entries
                .iter()
                .filter(|(_, e)| matches!(e.kind, EntryKind::File | EntryKind::Exec))
                .map(|(_, e)| e.size)
                .sum(),
        );
        let mut files: Vec<(PathBuf, &TreeEntry)> = Vec::new();
        for (path, entry) in &entries {
            let target = staging_path.join(path);
            match entry.kind {
                EntryKind::Dir => {
                    fs::create_dir(&target).ctx("cannot create directory", &target)?
                }
                EntryKind::Symlink => {
                    let bytes = self.objects.get_bytes(&entry.id, MAX_LINK_TARGET)?;
                    // symlink(2) cannot take a NUL: only a crafted tree holds one.
                    if bytes.contains(&0) {
                        return Err(Error::integrity(format!(
                            "symlink {} in tree {tree}: its stored target {} holds a NUL byte",
                            path,
                            entry.id
                        ))
                        .with_hint("the store is damaged or was crafted: restore it from another copy, or check out another bundle"));
                    }
                    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&bytes), &target)
                        .ctx("cannot create symlink", &target)?;
                }
                EntryKind::File | EntryKind::Exec => files.push((target, entry)),
            }
        }
        let stats = files
            .par_iter()
            .map(|(target, entry)| {
                let mode = if entry.kind == EntryKind::Exec {
                    0o777
                } else {
                    0o666
                };
                let file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(target)
                    .ctx("cannot create", target)?;
                let mut out = BufWriter::with_capacity(256 << 10, file);
                let bytes = self
                    .objects
                    .copy_to(&entry.id, Some(entry.size), &mut out)?;
                out.flush().ctx("cannot write", target)?;
                progress.inc(bytes);
                Ok(CheckoutStats { files: 1, bytes })
            })
            .try_reduce(CheckoutStats::default, |a, b| {
                Ok(CheckoutStats {
                    files: a.files + b.files,
                    bytes: a.bytes + b.bytes,
                })
            })?;
        if fill_existing {
            // Each top-level entry moves in atomically; nothing already in DIR is replaced.
            for entry in fs::read_dir(&staging_path).ctx("cannot list", &staging_path)? {
                let entry = entry.ctx("cannot list", &staging_path)?;
                let target = dest.join(entry.file_name());
                fsutil::rename_noclobber(&entry.path(), &target)
                    .ctx("cannot move checkout into place at", &target)?;
            }
            fs::remove_dir(&staging_path).ctx("cannot remove", &staging_path)?;
        } else {
            fs::rename(&staging_path, dest).ctx("cannot move checkout into place at", dest)?;
        }
        staging.0 = None;
        Ok(stats)
    }
}
