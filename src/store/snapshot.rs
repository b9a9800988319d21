//! Snapshotting a directory into blobs and trees: scan everything first, then write.
//!
//! The scan validates the whole input before a single object is written, so bad input
//! (a FIFO, a device, a non-UTF-8 name, an unreadable file) leaves the store untouched.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::Store;
use super::objects::{PendingDirs, Stored, open_regular};
use super::shape::MAX_TREE_DEPTH;
use crate::error::{Error, IoContext, Result};
use crate::format::{EntryKind, MAX_METADATA_OBJECT, ObjectId, Tree, TreeEntry};

/// A scanned directory tree, not yet stored.
pub enum Node {
    File {
        path: PathBuf,
        exec: bool,
        size: u64,
    },
    Symlink {
        target: Vec<u8>,
    },
    Dir {
        path: PathBuf,
        children: Vec<(String, Node)>,
    },
}

#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct SnapshotStats {
    pub files: u64,
    pub bytes: u64,
    pub objects_written: u64,
    pub bytes_written: u64,
}

/// Walk `dir` without following symlinks and without opening anything but regular files.
/// `skip` is a directory (the store itself) to leave out, identified by device and inode.
pub fn scan(dir: &Path, skip: Option<(u64, u64)>) -> Result<Node> {
    let meta = match fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(
                Error::not_found(format!("directory {} does not exist", dir.display()))
                    .with_hint("give the path of an existing directory to save"),
            );
        }
        Err(e) => return Err(Error::io("cannot read", dir, e)),
    };
    if !meta.is_dir() {
        return Err(
            Error::usage(format!("{} is not a directory", dir.display()))
                .with_hint("give the path of a directory to save"),
        );
    }
    scan_dir(dir, skip, 0)
}

fn scan_dir(dir: &Path, skip: Option<(u64, u64)>, depth: u32) -> Result<Node> {
    // Readers refuse deeper trees (and this scan and the writer recurse per level).
    if depth >= MAX_TREE_DEPTH {
        return Err(Error::usage(format!(
            "{} is more than {MAX_TREE_DEPTH} directories deep (MAX_TREE_DEPTH)",
            dir.display()
        ))
        .with_hint("baton stores trees up to that depth; save a shallower directory"));
    }
    let mut children = Vec::new();
    let reader = fs::read_dir(dir).ctx("cannot read directory", dir)?;
    for entry in reader {
        let entry = entry.ctx("cannot read directory", dir)?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(
                Error::usage(format!("file name {} is not valid UTF-8", path.display())).with_hint(
                    "rename it (baton stores UTF-8 names only) or move it out of the directory",
                ),
            );
        };
        let meta = fs::symlink_metadata(&path).ctx("cannot stat", &path)?;
        let kind = meta.file_type();
        let node = if kind.is_symlink() {
            let target = fs::read_link(&path).ctx("cannot read link", &path)?;
            Node::Symlink {
                target: target.as_os_str().as_bytes().to_vec(),
            }
        } else if kind.is_dir() {
            if skip == Some((meta.dev(), meta.ino())) {
                continue;
            }
            scan_dir(&path, skip, depth + 1)?
        } else if kind.is_file() {
            // Opening proves the file is readable now, before anything is written.
            open_regular(&path)?;
            Node::File {
                exec: meta.mode() & 0o100 != 0,
                size: meta.len(),
                path,
            }
        } else {
            let what = if kind.is_fifo() {
                "a FIFO"
            } else if kind.is_socket() {
                "a socket"
            } else if kind.is_block_device() || kind.is_char_device() {
                "a device file"
            } else {
                "an unsupported file type"
            };
            return Err(Error::usage(format!("{} is {what}", path.display()))
                .with_hint("baton saves regular files, directories and symlinks only; move it out of the directory"));
        };
        children.push((name, node));
    }
    children.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Node::Dir {
        path: dir.to_path_buf(),
        children,
    })
}

impl Node {
    /// Total bytes of file contents below this node, for progress.
    pub fn total_bytes(&self) -> u64 {
        match self {
            Node::File { size, .. } => *size,
            Node::Symlink { .. } => 0,
            Node::Dir { children, .. } => children.iter().map(|(_, c)| c.total_bytes()).sum(),
        }
    }

    fn collect_files<'a>(&'a self, out: &mut Vec<&'a Path>) {
        match self {
            Node::File { path, .. } => out.push(path),
            Node::Symlink { .. } => {}
            Node::Dir { children, .. } => children.iter().for_each(|(_, c)| c.collect_files(out)),
        }
    }
}

/// Store every file (in parallel), then the trees bottom-up; returns the root tree id.
/// All new objects are durable (directories fsynced) when this returns.
pub fn write(
    store: &Store,
    root: &Node,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(ObjectId, SnapshotStats)> {
    let mut files = Vec::new();
    root.collect_files(&mut files);
    let pending = PendingDirs::default();
    let stored: Vec<Stored> = files
        .par_iter()
        .map(|path| {
            let stored = store.objects.put_file(path, &pending)?;
            progress(stored.size);
            Ok(stored)
        })
        .collect::<Result<_>>()?;
    let mut stats = SnapshotStats::default();
    for s in &stored {
        stats.files += 1;
        stats.bytes += s.size;
        if s.written {
            stats.objects_written += 1;
            stats.bytes_written += s.size;
        }
    }
    let mut next = stored.iter();
    let (entry_id, _) = write_node(store, root, &mut next, &pending, &mut stats)?;
    pending.sync()?;
    Ok((entry_id, stats))
}

fn write_node<'a>(
    store: &Store,
    node: &Node,
    files: &mut impl Iterator<Item = &'a Stored>,
    pending: &PendingDirs,
    stats: &mut SnapshotStats,
) -> Result<(ObjectId, u64)> {
    match node {
        Node::File { path, .. } => {
            let s = files.next().ok_or_else(|| {
                Error::other(format!("internal error: no object for {}", path.display()))
            })?;
            Ok((s.id, s.size))
        }
        Node::Symlink { target } => {
            let s = store.objects.put_bytes(target, pending)?;
            Ok((s.id, s.size))
        }
        Node::Dir { children, path } => {
            let mut entries = Vec::with_capacity(children.len());
            for (name, child) in children {
                let (id, size) = write_node(store, child, files, pending, stats)?;
                let kind = match child {
                    Node::File { exec: true, .. } => EntryKind::Exec,
                    Node::File { .. } => EntryKind::File,
                    Node::Symlink { .. } => EntryKind::Symlink,
                    Node::Dir { .. } => EntryKind::Dir,
                };
                entries.push(TreeEntry {
                    name: name.clone(),
                    kind,
                    size,
                    id,
                });
            }
            let tree = Tree::new(entries)?;
            let bytes = tree.encode();
            // Readers refuse trees over the limit: writing one would make the bundle
            // unreadable (and every later verify and gc fail), so refuse it here.
            if bytes.len() as u64 > MAX_METADATA_OBJECT {
                return Err(Error::usage(format!(
                    "directory {} has too many entries: its tree would be {} bytes, over the limit of {MAX_METADATA_OBJECT}",
                    path.display(),
                    bytes.len()
                ))
                .with_hint("split it into subdirectories"));
            }
            let s = store.objects.put_bytes(&bytes, pending)?;
            if s.written {
                stats.objects_written += 1;
            }
            Ok((s.id, s.size))
        }
    }
}
