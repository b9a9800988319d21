//! Fuzzes baton's own SFTP session: the input is everything the server says after its
//! VERSION reply (`baton::transport::ssh::sftp::fuzzing::session`), read by the session's
//! framing (4-byte length, refusing 0 and more than 4 MiB), id matching, stash and
//! deferred replies through a read_many, a read_file, a put_files and a publish_many.
//! Every input must end in results: no panic, and no hang (end of input is end of file).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = baton::transport::ssh::sftp::fuzzing::session(data);
});
