//! Untracked files: size and BLAKE3 of each, read without following symlinks and without
//! opening anything but a regular file.

use std::io;

use super::Untracked;
use super::git::{bytes_to_path, lossy};
use baton_store::beneath::{Dir, Entry};

/// Size and BLAKE3 of one untracked path, opened beneath the work tree's fd (`root`):
/// no symlink followed on the way or at the end (one is described by its target), and
/// nothing opened but a regular file, so a directory swapped for a symlink while the
/// capture runs cannot make it describe a file outside.
pub(crate) fn describe_untracked(root: Option<&Dir>, rel: &[u8]) -> Untracked {
    let mut entry = Untracked {
        path: lossy(rel),
        size: 0,
        id: None,
    };
    if rel.ends_with(b"/") {
        return entry; // a nested repository: git does not look inside
    }
    let Some(root) = root else {
        return entry;
    };
    match root.entry(&bytes_to_path(rel)) {
        Ok(Entry::Symlink(target)) => {
            entry.size = target.len() as u64;
            entry.id = Some(blake3::hash(&target).to_hex().to_string());
        }
        Ok(Entry::File(mut file, meta)) => {
            entry.size = meta.len();
            let mut hasher = blake3::Hasher::new();
            if let Ok(n) = io::copy(&mut file, &mut hasher) {
                entry.size = n;
                entry.id = Some(hasher.finalize().to_hex().to_string());
            }
        }
        Ok(Entry::Other(_) | Entry::Dir(_)) | Err(_) => {}
    }
    entry
}
