//! Transcript keys and session idents (SPEC 5.1): the hashes that tell a transcript cache
//! entry's session file, and its bytes, from any other.

use std::path::Path;

use super::{Harness, claude_code};

/// The start of a transcript key (SPEC 5.1): every part length-prefixed, then the
/// BLAKE3 of the file's bytes (the blob id of the session file's attachment, so that
/// the one pass over the bytes gives both) and their length.
pub(super) fn key_start(
    harness: Harness,
    session: Option<&str>,
    path: &Path,
    digest: &blake3::Hash,
    len: u64,
) -> blake3::Hasher {
    let mut hasher = hash_parts(
        // The 3 is the version of what the readers make of the same bytes (or of how the
        // key is made): raised when that changes, so that no cached transcript of an
        // older reading is taken.
        b"baton transcript key 3",
        harness,
        session.unwrap_or_default(),
        path,
    );
    hasher.update(digest.as_bytes());
    hasher.update(&len.to_le_bytes());
    hasher
}

/// Above this many bytes a session's digest is hashed on every core: a checkpoint of a
/// 30 MB session hashes it at each hook.
const PARALLEL_DIGEST_BYTES: usize = 1 << 20;

/// BLAKE3 of `bytes[..len]` and of all of `bytes`, in one pass (the state after `len`
/// bytes is finished for the first, and goes on for the second).
pub(super) fn digests(bytes: &[u8], len: usize) -> (blake3::Hash, blake3::Hash) {
    let (head, tail) = bytes.split_at(len.min(bytes.len()));
    let mut hasher = blake3::Hasher::new();
    update(&mut hasher, head);
    let first = hasher.finalize();
    update(&mut hasher, tail);
    (first, hasher.finalize())
}

/// BLAKE3 of `bytes`.
pub(super) fn digest(bytes: &[u8]) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    update(&mut hasher, bytes);
    hasher.finalize()
}

fn update(hasher: &mut blake3::Hasher, bytes: &[u8]) {
    if bytes.len() > PARALLEL_DIGEST_BYTES {
        hasher.update_rayon(bytes);
    } else {
        hasher.update(bytes);
    }
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
