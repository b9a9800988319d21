//! Target hints: for each target, the remote's `refs/current` generation last seen (its
//! number and the id it names), so that a push can read that generation and the next
//! one with its upload instead of searching for the newest (store-format/SPEC.md §5.2).
//!
//! Only a hint: a push checks it against the remote in the same batches and falls back
//! to the full look when it is off, and the remote's no-clobber create of the next
//! generation stays the conflict check. So it is written without fsync (a lost or torn
//! file only costs round trips), read with a version header and a checksum, and ignored
//! whole when anything about it is off. `verify` never reads it.

use std::collections::BTreeMap;
use std::io::Write;

use serde::{Deserialize, Serialize};

use super::Store;
use super::leftovers::{self, Rule};
use crate::error::{IoContext, Result};
use crate::format::{ObjectId, layout};

/// The first line of the file; a reader ignores a file with any other.
const MAGIC: &str = "baton-targethints 1\n";

/// A file larger than this is ignored (and replaced by the next sync).
const MAX_LEN: u64 = 1 << 20;

/// Prefix of the file's temp files (`.tmp-` as every temp file, then the pid).
const TEMP_PREFIX: &str = ".tmp-targethints-";

/// What a sync last saw of a target's remote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hint {
    /// The target's URL then: a hint for another URL is not used.
    pub url: String,
    /// The newest generation of the remote `refs/current` (at least 1).
    pub generation: u64,
    /// The bundle that generation names.
    pub current: ObjectId,
}

#[derive(Default, Serialize, Deserialize)]
struct Contents {
    targets: BTreeMap<String, Hint>,
}

fn hints_path(store: &Store) -> std::path::PathBuf {
    store.root().join(layout::TARGET_HINTS)
}

/// What the file holds, or `None` for a missing, damaged or newer-version file.
fn read(store: &Store) -> Option<Contents> {
    let bytes = super::fsutil::read_limited(&hints_path(store), MAX_LEN).ok()?;
    let body = bytes.strip_prefix(MAGIC.as_bytes())?;
    // The last line is the hex BLAKE3 of everything before it.
    let body = body.strip_suffix(b"\n")?;
    let at = body.iter().rposition(|b| *b == b'\n')?;
    let (json, sum) = (&body[..at], &body[at + 1..]);
    let mut hashed = Vec::with_capacity(MAGIC.len() + json.len());
    hashed.extend_from_slice(MAGIC.as_bytes());
    hashed.extend_from_slice(json);
    if ObjectId::of(&hashed).to_hex().as_bytes() != sum {
        return None;
    }
    serde_json::from_slice(json).ok()
}

/// The hint for `target` if it was recorded for `url`.
pub fn get(store: &Store, target: &str, url: &str) -> Option<Hint> {
    read(store)?
        .targets
        .remove(target)
        .filter(|h| h.url == url && h.generation > 0)
}

/// Record what a sync saw of `target`'s remote (`None`: forget it). Best effort by
/// design: the sync is complete whatever happens here, so a failure is returned for the
/// caller to ignore, and a crash leaves at most a temp file.
pub fn record(store: &Store, target: &str, hint: Option<Hint>) -> Result<()> {
    let mut contents = read(store).unwrap_or_default();
    let before = contents.targets.get(target).cloned();
    if before == hint {
        return Ok(());
    }
    match hint {
        Some(h) => contents.targets.insert(target.to_string(), h),
        None => contents.targets.remove(target),
    };
    // Targets removed from the config need no hint.
    contents
        .targets
        .retain(|name, _| store.config.targets.contains_key(name));
    let json = serde_json::to_vec(&contents)
        .map_err(|e| crate::error::Error::other(format!("cannot encode the target hints: {e}")))?;
    let mut bytes = Vec::with_capacity(MAGIC.len() + json.len() + 66);
    bytes.extend_from_slice(MAGIC.as_bytes());
    bytes.extend_from_slice(&json);
    let sum = ObjectId::of(&bytes).to_hex();
    bytes.push(b'\n');
    bytes.extend_from_slice(sum.as_bytes());
    bytes.push(b'\n');

    let dir = store.root();
    let prefix = format!("{TEMP_PREFIX}{}-", std::process::id());
    leftovers::sweep(
        dir,
        &[Rule {
            prefix: TEMP_PREFIX,
            pid_after_prefix: true,
            by_age: true,
        }],
    );
    let mut temp = tempfile::Builder::new()
        .prefix(&prefix)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .tempfile_in(dir)
        .ctx("cannot create a temp file in", dir)?;
    temp.as_file()
        .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .ctx("cannot set permissions of", temp.path())?;
    temp.write_all(&bytes).ctx("cannot write", temp.path())?;
    // No fsync: after a power loss the file is old, absent or torn, and the checksum
    // makes a torn one ignored; an old one is a stale hint, which costs round trips.
    let dest = hints_path(store);
    temp.persist(&dest)
        .map_err(|e| crate::error::Error::io("cannot rename into", &dest, e.error))?;
    Ok(())
}
