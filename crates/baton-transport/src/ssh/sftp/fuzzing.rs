//! The entry point of the `sftp_session` fuzz target: the fuzz input is the server's side
//! of the byte stream (after a valid VERSION reply), and the session runs a few operations
//! over it. Whatever the bytes, every operation must end with a result (end of input is
//! end of file: an error), never a panic or a hang.

use std::io::{self, Read, Write};

use bytes::Bytes;
use russh_sftp::protocol::{Packet, Version};

use super::{Channel, FSYNC_EXTENSION, STATVFS_EXTENSION, SftpRemote};
use crate::{Pipelined, Remote};

/// Replies read from a fixed byte string; requests written are dropped.
struct Replay {
    bytes: io::Cursor<Vec<u8>>,
}

impl Read for Replay {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.bytes.read(buf)
    }
}

impl Write for Replay {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Channel for Replay {}

/// Run a session whose server sends a VERSION (with the fsync and statvfs extensions),
/// then `server`, through `operations`; which of them succeeded. Request ids start at 2
/// and count up by one.
#[doc(hidden)]
pub fn session(server: &[u8]) -> [bool; 4] {
    let mut version = Version::new();
    version
        .extensions
        .insert(FSYNC_EXTENSION.into(), "1".into());
    version
        .extensions
        .insert(STATVFS_EXTENSION.into(), "2".into());
    let Ok(greeting) = Bytes::try_from(Packet::Version(version)) else {
        return [false; 4];
    };
    let mut bytes = greeting.to_vec();
    bytes.extend_from_slice(server);
    let channel = Replay {
        bytes: io::Cursor::new(bytes),
    };
    match SftpRemote::over(Box::new(channel), None, "s", "fuzz:s".into()) {
        Ok(mut remote) => operations(&mut remote),
        Err(_) => [false; 4],
    }
}

/// A `read_many` of three files and two directories, a `read_file`, a `put_files` and a
/// `publish_many`, in a store at `s`; which of them succeeded.
pub(super) fn operations(remote: &mut SftpRemote) -> [bool; 4] {
    let files = ["config".to_string(), "refs/current".into(), "log".into()];
    let dirs = ["packs".to_string(), "objects/ab".into()];
    [
        remote.read_many(&files, &dirs, 1 << 16).is_ok(),
        remote.read_file("packs/p.pack", &mut io::sink()).is_ok(),
        remote
            .put_files(&[("tmp/a".into(), b"abc".to_vec()), ("tmp/b".into(), vec![])])
            .is_ok(),
        remote
            .publish_many(&[("tmp/a".into(), "packs/a".into())])
            .is_ok(),
    ]
}
