//! Writing a scanned tree: every file stored in parallel into one pack batch (or taken
//! from the stat cache), then the trees bottom-up.

use std::path::Path;

use rayon::prelude::*;

use super::{Node, Snapshot, SnapshotStats};
use crate::Store;
use crate::objects::Stored;
use crate::pack_batch::PackBatch;
use baton_error::{Error, Result};
use baton_format::{EntryKind, MAX_METADATA_OBJECT, ObjectId, Tree, TreeEntry};

/// Store every file (in parallel), then the trees bottom-up; returns the root tree id
/// and every file's blob id in tree order. New objects go into one pack (large files
/// loose, see `pack_batch`), durable when this returns. `replace` may give the bytes to store instead of a file's
/// own (a redacted copy); size and id are those of the bytes stored. A file the stat
/// cache gave ([`scan_cached`]) is not read: its blob is already in the store.
pub fn write(
    store: &Store,
    snapshot: &Snapshot,
    progress: &(dyn Fn(u64) + Sync),
    replace: &(dyn Fn(&Path) -> Result<Option<Vec<u8>>> + Sync),
) -> Result<(ObjectId, SnapshotStats, Vec<ObjectId>)> {
    let root = &snapshot.tree;
    let files = root.file_nodes();
    let batch = PackBatch::new(&store.objects);
    let stored: Vec<Stored> = files
        .par_iter()
        .map(|file| {
            let path = file.path;
            if let Some(id) = file.cached {
                progress(file.stat.size);
                return Ok(Stored {
                    id,
                    size: file.stat.size,
                    written: false,
                });
            }
            // A file is counted as it is read; a redacted copy, already read, at once.
            let stored = match replace(path)? {
                Some(bytes) => {
                    let stored = batch.put_bytes(&bytes)?;
                    progress(file.stat.size);
                    stored
                }
                None => batch.put_file(snapshot.open_file(path)?, path, progress)?,
            };
            Ok(stored)
        })
        .collect::<Result<_>>()?;
    let mut stats = SnapshotStats {
        files_cached: files.iter().filter(|f| f.cached.is_some()).count() as u64,
        ..SnapshotStats::default()
    };
    for s in &stored {
        stats.files += 1;
        stats.bytes += s.size;
        if s.written {
            stats.objects_written += 1;
            stats.bytes_written += s.size;
        }
    }
    let mut next = stored.iter();
    let (entry_id, _) = write_node(root, &mut next, &batch, &mut stats)?;
    batch.finish()?;
    Ok((entry_id, stats, stored.iter().map(|s| s.id).collect()))
}

fn write_node<'a>(
    node: &Node,
    files: &mut impl Iterator<Item = &'a Stored>,
    batch: &PackBatch,
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
            let s = batch.put_bytes(target)?;
            Ok((s.id, s.size))
        }
        Node::Dir { children, path } => {
            let mut entries = Vec::with_capacity(children.len());
            for (name, child) in children {
                let (id, size) = write_node(child, files, batch, stats)?;
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
            let s = batch.put_bytes(&bytes)?;
            if s.written {
                stats.objects_written += 1;
            }
            Ok((s.id, s.size))
        }
    }
}
