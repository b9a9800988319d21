//! Write-behind for large files that end in an fsync: start the kernel's write-back of
//! each finished window while the next one is produced, so the final fsync waits for a
//! window or two instead of the whole file.
//!
//! Without it a pack of 256 MiB received over SSH sat dirty in the page cache until its
//! fsync, which then wrote all of it with the network idle (0.4 s here, a quarter of the
//! clone). This changes when pages reach the disk, never what the caller's fsync
//! guarantees: the caller still fsyncs, and a crash before that leaves a temp file that
//! is never published (SPEC 12). Elsewhere than Linux it is a plain pass-through.

use std::fs::File;
use std::io::{self, Write};

/// Write-back is started every this many bytes; at most two windows are ever dirty.
const WINDOW: u64 = 8 << 20;

/// A `Write` over a file (or `&mut File`) that starts write-back behind the writer.
pub(crate) struct WriteBehind<F: AsFile> {
    file: F,
    /// Bytes written through this writer, from the start of a new file.
    written: u64,
    /// Write-back has been started for `[0, started)`.
    started: u64,
}

/// What `WriteBehind` can wrap: a file it owns or borrows.
pub(crate) trait AsFile {
    fn file(&self) -> &File;
    fn file_mut(&mut self) -> &mut File;
}

impl AsFile for File {
    fn file(&self) -> &File {
        self
    }
    fn file_mut(&mut self) -> &mut File {
        self
    }
}

impl AsFile for &mut File {
    fn file(&self) -> &File {
        self
    }
    fn file_mut(&mut self) -> &mut File {
        self
    }
}

impl<F: AsFile> WriteBehind<F> {
    /// Wrap a new, empty `file`.
    pub fn new(file: F) -> Self {
        WriteBehind {
            file,
            written: 0,
            started: 0,
        }
    }

    #[cfg(test)]
    pub fn into_inner(self) -> F {
        self.file
    }

    fn advance(&mut self) {
        while self.written - self.started >= WINDOW {
            let window = self.started;
            start_write_back(self.file.file(), window, WINDOW);
            // Wait for the window before this one, so dirty pages stay bounded and the
            // writer runs at the disk's pace rather than piling up work for the fsync.
            if window >= WINDOW {
                wait_write_back(self.file.file(), window - WINDOW, WINDOW);
            }
            self.started += WINDOW;
        }
    }
}

impl<F: AsFile> Write for WriteBehind<F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.file_mut().write(buf)?;
        self.written += n as u64;
        self.advance();
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.file_mut().flush()
    }
}

/// Hints only: a failure here (an old kernel, a file system without support) changes
/// nothing the final fsync does not also cover, so it is ignored.
#[cfg(target_os = "linux")]
fn start_write_back(file: &File, offset: u64, len: u64) {
    sync_range(file, offset, len, libc::SYNC_FILE_RANGE_WRITE);
}

#[cfg(target_os = "linux")]
fn wait_write_back(file: &File, offset: u64, len: u64) {
    sync_range(
        file,
        offset,
        len,
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER,
    );
}

#[cfg(target_os = "linux")]
fn sync_range(file: &File, offset: u64, len: u64, flags: libc::c_uint) {
    use std::os::fd::AsRawFd;
    // SAFETY: sync_file_range reads no memory of ours; the descriptor is open for the
    // lifetime of `file`.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            flags,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn start_write_back(_file: &File, _offset: u64, _len: u64) {}

#[cfg(not(target_os = "linux"))]
fn wait_write_back(_file: &File, _offset: u64, _len: u64) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn bytes_pass_through_unchanged_across_windows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..(3 * WINDOW as usize + 12345))
            .map(|i| (i % 251) as u8)
            .collect();
        {
            let mut w = WriteBehind::new(File::create(&path).expect("create"));
            for chunk in data.chunks(1 << 20 | 77) {
                w.write_all(chunk).expect("write");
            }
            assert_eq!(
                w.started,
                3 * WINDOW,
                "write-back started for each whole window"
            );
            w.into_inner().sync_all().expect("fsync");
        }
        let mut back = Vec::new();
        File::open(&path)
            .expect("open")
            .read_to_end(&mut back)
            .expect("read");
        assert_eq!(back, data);
    }
}
