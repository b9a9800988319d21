//! Transcript keys and session idents (SPEC 5.1): the hashes that tell a transcript cache
//! entry's session file, and its bytes, from any other.

use std::path::Path;

use super::{Harness, claude_code};

/// The start of a transcript key (SPEC 5.1): every part length-prefixed, the file's
/// `len` bytes to follow.
pub(super) fn key_start(
    harness: Harness,
    session: Option<&str>,
    path: &Path,
    len: u64,
) -> blake3::Hasher {
    let mut hasher = hash_parts(
        // The 2 is the version of what the readers make of the same bytes: raised when
        // that changes, so that no cached transcript of an older reading is taken.
        b"baton transcript key 2",
        harness,
        session.unwrap_or_default(),
        path,
    );
    hasher.update(&len.to_le_bytes());
    hasher
}

/// A hasher fed `domain`, the harness name, the session id and the path, each
/// length-prefixed (the common start of a transcript key and a session ident).
fn hash_parts(domain: &[u8], harness: Harness, session: &str, path: &Path) -> blake3::Hasher {
    use std::os::unix::ffi::OsStrExt;
    let mut hasher = blake3::Hasher::new();
    for part in [
        domain,
        harness.name().as_bytes(),
        session.as_bytes(),
        path.as_os_str().as_bytes(),
    ] {
        update_part(&mut hasher, part);
    }
    hasher
}

/// Hash `part` after its length, so that no two sequences of parts hash alike.
pub(super) fn update_part(hasher: &mut blake3::Hasher, part: &[u8]) {
    hasher.update(&(part.len() as u64).to_le_bytes());
    hasher.update(part);
}

pub(super) fn key_finish(mut hasher: blake3::Hasher, named_session: bool) -> String {
    hasher.update(&[u8::from(named_session)]);
    hasher.finalize().to_hex().to_string()
}

/// See [`SessionFile::ident`].
pub(super) fn ident_of(
    harness: Option<Harness>,
    session: Option<&str>,
    path: &Path,
) -> Option<String> {
    // A session with sub-agent logs is more than one file: never taken as unchanged or
    // grown from its own file alone.
    if harness != Some(Harness::ClaudeCode) || claude_code::subagents::exists(path) {
        return None;
    }
    let hasher = hash_parts(
        b"baton transcript ident 1",
        Harness::ClaudeCode,
        session?,
        path,
    );
    Some(hasher.finalize().to_hex().to_string())
}
