//! Writing a tree from files held in memory (handoffs, imports), not from a directory.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::Store;
use super::pack_batch::PackBatch;
use super::tree_limits::MAX_TREE_DEPTH;
use baton_error::{Error, Result};
use baton_format::{EntryKind, ObjectId, Tree, TreeEntry};

/// New bytes from which a tree's files are hashed and compressed in parallel.
const PARALLEL_PUT_BYTES: usize = 1 << 20;

/// One file of an in-memory tree: slash-separated relative path, bytes, executable bit;
/// or, with `stored`, a blob already in the store (id, size; `bytes` empty).
#[derive(Clone, Debug)]
pub struct MemFile {
    pub path: String,
    pub bytes: Vec<u8>,
    pub exec: bool,
    pub stored: Option<(ObjectId, u64)>,
    /// The BLAKE3 of `bytes`, when the caller hashed them already (a checkpoint's
    /// session file, hashed for its transcript key): put under it without hashing them
    /// again. Cleared by [`MemFile::replace_bytes`], the only way bytes change after.
    digest: Option<ObjectId>,
}

impl MemFile {
    pub fn new(path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        MemFile {
            path: path.into(),
            bytes: bytes.into(),
            exec: false,
            stored: None,
            digest: None,
        }
    }

    /// A file of `bytes` whose BLAKE3 the caller computed: `digest`.
    pub fn hashed(path: impl Into<String>, bytes: Vec<u8>, digest: ObjectId) -> Self {
        debug_assert_eq!(ObjectId::of(&bytes), digest);
        MemFile {
            digest: Some(digest),
            ..MemFile::new(path, bytes)
        }
    }

    /// The file's bytes changed (redacted): no digest of the old ones is kept.
    pub fn replace_bytes(&mut self, bytes: Vec<u8>) {
        self.bytes = bytes;
        self.digest = None;
    }

    /// A file whose blob the store already holds (the caller checked it is there).
    pub fn stored(path: impl Into<String>, id: ObjectId, size: u64) -> Self {
        MemFile {
            path: path.into(),
            bytes: Vec::new(),
            exec: false,
            stored: Some((id, size)),
            digest: None,
        }
    }
}

#[derive(Default)]
struct Dir {
    files: BTreeMap<String, (ObjectId, u64, bool)>,
    dirs: BTreeMap<String, Dir>,
}

impl Store {
    /// Store `files` as blobs and trees; returns the root tree id. Paths are validated
    /// like tree entry names; a path given twice, or both as a file and a directory, is
    /// refused before anything is written.
    pub fn write_mem_tree(&self, files: &[MemFile]) -> Result<ObjectId> {
        self.write_mem_tree_ids(files).map(|(tree, _)| tree)
    }

    /// [`Store::write_mem_tree`], also returning each file's (blob id, size) in order.
    pub(crate) fn write_mem_tree_ids(
        &self,
        files: &[MemFile],
    ) -> Result<(ObjectId, Vec<(ObjectId, u64)>)> {
        // New objects go into one pack, durable before this returns (SPEC 12.2).
        let batch = PackBatch::new(&self.objects);
        let written = self.mem_tree_into(files, &batch)?;
        batch.finish()?;
        Ok(written)
    }

    /// Append `files` and their trees to `batch` (nothing durable until the caller
    /// finishes it): the root tree id and each file's (blob id, size) in order.
    pub fn mem_tree_into(
        &self,
        files: &[MemFile],
        batch: &PackBatch,
    ) -> Result<(ObjectId, Vec<(ObjectId, u64)>)> {
        let mut root = Dir::default();
        let mut seen = std::collections::BTreeSet::new();
        for file in files {
            let parts: Vec<&str> = file.path.split('/').collect();
            // Readers refuse deeper trees (and the writer below recurses per level).
            if parts.len() > MAX_TREE_DEPTH as usize {
                return Err(Error::usage(format!(
                    "path '{}…' is more than {MAX_TREE_DEPTH} directories deep (MAX_TREE_DEPTH)",
                    parts[..8].join("/").escape_debug()
                )));
            }
            for part in &parts {
                baton_format::names::validate_entry_name(part).map_err(|_| {
                    Error::usage(format!(
                        "invalid path '{}' in bundle",
                        file.path.escape_debug()
                    ))
                })?;
            }
            if !seen.insert(file.path.clone()) {
                return Err(Error::usage(format!("path '{}' given twice", file.path)));
            }
        }
        for pair in seen.iter().collect::<Vec<_>>().windows(2) {
            if pair[1].starts_with(&format!("{}/", pair[0])) {
                return Err(Error::usage(format!(
                    "'{}' is both a file and a directory",
                    pair[0]
                )));
            }
        }
        // Hashing and compressing are the work here (a handoff's transcript and session
        // file run to megabytes): in parallel when there is enough of it, as a directory
        // save does. Appends take the batch's lock, so the order of objects in the pack
        // may vary; a pack's bytes are not normative (SPEC 7).
        let put = |file: &MemFile| match file.stored {
            Some(known) => Ok(known),
            None => batch
                .put_bytes_hashed(&file.bytes, file.digest)
                .map(|s| (s.id, s.size)),
        };
        let new_bytes: usize = files
            .iter()
            .filter(|f| f.stored.is_none())
            .map(|f| f.bytes.len())
            .sum();
        let ids: Vec<(ObjectId, u64)> = if new_bytes >= PARALLEL_PUT_BYTES {
            files.par_iter().map(put).collect::<Result<_>>()?
        } else {
            files.iter().map(put).collect::<Result<_>>()?
        };
        for (file, &(id, size)) in files.iter().zip(&ids) {
            let mut parts: Vec<&str> = file.path.split('/').collect();
            let name = parts.pop().unwrap_or_default().to_string();
            let mut dir = &mut root;
            for part in parts {
                dir = dir.dirs.entry(part.to_string()).or_default();
            }
            dir.files.insert(name, (id, size, file.exec));
        }
        let (id, _) = Self::write_dir(&root, batch)?;
        Ok((id, ids))
    }

    /// `tree` with the top-level file `file.path` (no `/`) put in, replacing whatever
    /// had that name: a merge keeps one side's tree and writes a new briefing into it.
    pub fn replace_root_file(&self, tree: &ObjectId, file: &MemFile) -> Result<ObjectId> {
        baton_format::names::validate_entry_name(&file.path).map_err(|_| {
            Error::usage(format!(
                "invalid top-level file name '{}'",
                file.path.escape_debug()
            ))
        })?;
        let root = self.read_tree(tree)?;
        let batch = PackBatch::new(&self.objects);
        let (id, size) = match file.stored {
            Some(known) => known,
            None => {
                let stored = batch.put_bytes(&file.bytes)?;
                (stored.id, stored.size)
            }
        };
        let mut entries: Vec<TreeEntry> = root
            .entries
            .into_iter()
            .filter(|e| e.name != file.path)
            .collect();
        entries.push(TreeEntry {
            name: file.path.clone(),
            kind: if file.exec {
                EntryKind::Exec
            } else {
                EntryKind::File
            },
            size,
            id,
        });
        let stored = batch.put_bytes(&Tree::new(entries)?.encode())?;
        batch.finish()?;
        Ok(stored.id)
    }

    fn write_dir(dir: &Dir, batch: &PackBatch) -> Result<(ObjectId, u64)> {
        let mut entries = Vec::new();
        for (name, (id, size, exec)) in &dir.files {
            let kind = if *exec {
                EntryKind::Exec
            } else {
                EntryKind::File
            };
            entries.push(TreeEntry {
                name: name.clone(),
                kind,
                size: *size,
                id: *id,
            });
        }
        for (name, sub) in &dir.dirs {
            let (id, size) = Self::write_dir(sub, batch)?;
            entries.push(TreeEntry {
                name: name.clone(),
                kind: EntryKind::Dir,
                size,
                id,
            });
        }
        let stored = batch.put_bytes(&Tree::new(entries)?.encode())?;
        Ok((stored.id, stored.size))
    }
}
