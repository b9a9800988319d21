//! Target hints: for each target, the remote's `refs/current` generation last seen (its
//! number and the id it names), so that a push can read that generation and the next
//! one with its upload instead of searching for the newest (store-format/SPEC.md §5.2).
//!
//! Only a hint: a push checks it against the remote in the same batches and falls back
//! to the full look when it is off, and the remote's no-clobber create of the next
//! generation stays the conflict check. So it is written without fsync (a lost or torn
//! file only costs round trips), read with a version header and a checksum, and ignored
//! whole when anything about it is off. `verify` never reads it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::Store;
use super::cache_file::CacheFile;
use baton_error::Result;
use baton_format::{ObjectId, layout};

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
    /// Remote packs (by id) whose objects this store held at that sync: pushed from
    /// here, or read there. A pull reads such a pack's index first and its body only if
    /// the index says so; another pack's body it asks for with the index (a guess that
    /// costs bandwidth when wrong, never correctness). Absent in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packs: Vec<ObjectId>,
}

/// At most this many pack ids are kept per target (the newest); a pack dropped from
/// the list only has its body asked for with its index.
pub const MAX_PACKS: usize = 2048;

#[derive(Default, Serialize, Deserialize)]
struct Contents {
    targets: BTreeMap<String, Hint>,
}

/// The file: only a hint, so a lost or torn one costs round trips, nothing else.
const FILE: CacheFile = CacheFile {
    file: layout::TARGET_HINTS,
    magic: MAGIC,
    temp_prefix: TEMP_PREFIX,
    max_len: MAX_LEN,
    what: "target hints",
};

fn read(store: &Store) -> Option<Contents> {
    FILE.read(store)
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
    FILE.write(store, &contents)
}
