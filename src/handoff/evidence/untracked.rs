//! Untracked files: size and BLAKE3 of each, read without following symlinks and without
//! opening anything but a regular file.

use std::fs::File;
use std::io;
use std::path::Path;

use super::Untracked;
use super::git::{bytes_to_path, lossy};

/// Size and BLAKE3 of one untracked path, read without following symlinks and without
/// opening anything but a regular file.
pub(crate) fn describe_untracked(root: &Path, rel: &[u8]) -> Untracked {
    let mut entry = Untracked {
        path: lossy(rel),
        size: 0,
        id: None,
    };
    if rel.ends_with(b"/") {
        return entry; // a nested repository: git does not look inside
    }
    let full = root.join(bytes_to_path(rel));
    let Ok(meta) = std::fs::symlink_metadata(&full) else {
        return entry;
    };
    if meta.file_type().is_symlink() {
        if let Ok(target) = std::fs::read_link(&full) {
            let bytes = path_bytes(&target);
            entry.size = bytes.len() as u64;
            entry.id = Some(blake3::hash(&bytes).to_hex().to_string());
        }
        return entry;
    }
    if !meta.is_file() {
        return entry;
    }
    entry.size = meta.len();
    if let Ok(mut file) = open_regular(&full) {
        let mut hasher = blake3::Hasher::new();
        if let Ok(n) = io::copy(&mut file, &mut hasher) {
            entry.size = n;
            entry.id = Some(hasher.finalize().to_hex().to_string());
        }
    }
    entry
}

#[cfg(unix)]
fn path_bytes(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().to_vec()
}

#[cfg(not(unix))]
fn path_bytes(path: &Path) -> Vec<u8> {
    path.to_string_lossy().into_owned().into_bytes()
}

/// Open a file for reading only if it is (still) a regular file: no symlink is followed
/// and a FIFO swapped in cannot block the capture.
fn open_regular(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}
