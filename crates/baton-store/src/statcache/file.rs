//! The `statcache` file, shared by three caches of the store's top directory: the stat
//! cache's sections (`statcache`), the transcript cache (`transcript_cache`) and the git
//! histories (`history_cache`). One file, one checksum, read once per process while it
//! is unchanged: its format is store-format/SPEC.md 5.1, the postcard encoding of
//! [`Contents`] (JSON until version 2: parsing and hex-decoding 100,000 entries was a
//! sixth of an unchanged re-save).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{FileStat, Section};
use crate::Store;
use crate::cache_file::{CacheFile, Prepared};
use crate::history_cache::History;
use crate::transcript_cache::Transcript;
use baton_error::Result;
use baton_format::layout;

/// The first line of the file; a reader ignores a cache with any other.
const MAGIC: &str = "baton-statcache 2\n";

/// A cache larger than this is ignored (and replaced by the next save).
const MAX_LEN: u64 = 256 << 20;

/// Prefix of the cache's temp files (`.tmp-` as every temp file, then the pid).
const TEMP_PREFIX: &str = ".tmp-statcache-";

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Contents {
    /// The secret-scan policy the entries were found clean under (see `for_root`).
    pub(crate) policy: String,
    pub(crate) sections: Vec<Section>,
    /// Session transcripts a handoff normalised and found clean (absent in caches of
    /// older builds), most recent first.
    #[serde(default)]
    pub(crate) transcripts: Vec<Transcript>,
    /// The git history of HEAD the last handoffs of each work tree captured (absent in
    /// caches of older builds), most recent first.
    #[serde(default)]
    pub(crate) histories: Vec<History>,
}

/// The file: only a cache, so a lost or torn one costs a re-read, nothing else.
const FILE: CacheFile = CacheFile {
    file: layout::STATCACHE,
    magic: MAGIC,
    temp_prefix: TEMP_PREFIX,
    max_len: MAX_LEN,
    what: "stat cache",
};

/// What the cache file holds, or `None` for a missing, damaged, foreign or newer-version
/// cache: every one of those is simply not used.
pub(crate) fn read(store: &Store) -> Option<Contents> {
    if store.config.encryption.is_some() {
        return None;
    }
    let path = store.root().join(layout::STATCACHE);
    let identity = |path: &Path| {
        let meta = std::fs::metadata(path).ok()?;
        Some((path.to_path_buf(), FileStat::of(&meta)))
    };
    let seen_now = identity(&path)?;
    if let Ok(last) = LAST_READ.lock()
        && let Some((seen, contents)) = last.as_ref()
        && *seen == seen_now
    {
        return Some(contents.clone());
    }
    let body = FILE.read_body(store)?;
    let contents: Contents = match postcard::take_from_bytes(body.as_slice()) {
        Ok((contents, [])) => contents,
        _ => return None,
    };
    // Kept only if the file read is the one stat'ed before and after.
    if identity(&path).as_ref() == Some(&seen_now)
        && let Ok(mut last) = LAST_READ.lock()
    {
        *last = Some((seen_now, contents.clone()));
    }
    Some(contents)
}

/// The cache last read in this process, with its file's path and metadata (a stat
/// cache's own key: device, inode, size, mode and change times). A handoff asks three
/// times (the histories, the transcripts, the next cache), and reading, checking and
/// parsing the file cost more than a stat; the file is only ever replaced by rename (a
/// new inode), so unchanged metadata means unchanged contents.
static LAST_READ: std::sync::Mutex<Option<((PathBuf, FileStat), Contents)>> =
    std::sync::Mutex::new(None);

/// Make `contents` those of `policy`: entries found clean under another are dropped
/// (the histories, which hold no scan results, stay).
pub(crate) fn under_policy(contents: &mut Contents, policy: &str) {
    if contents.policy != policy {
        *contents = Contents {
            policy: policy.to_string(),
            histories: std::mem::take(&mut contents.histories),
            ..Contents::default()
        };
    }
}

/// Write the cache file (temp file, rename, no fsync).
pub(crate) fn write(store: &Store, contents: &Contents) -> Result<()> {
    prepare(store, contents)?.publish()
}

/// Before this process replaces the file: its next read reads it (a replacement's inode
/// is always new, but the one after could reuse the first's within a clock tick).
pub(crate) fn forget_last_read() {
    if let Ok(mut last) = LAST_READ.lock() {
        *last = None;
    }
}

/// Write `contents` to a temp file, to be renamed into place by [`Prepared::publish`].
pub(crate) fn prepare(store: &Store, contents: &Contents) -> Result<Prepared> {
    forget_last_read();
    let body = postcard::to_stdvec(contents)
        .map_err(|e| baton_error::Error::other(format!("cannot encode the stat cache: {e}")))?;
    FILE.prepare_body(store, &body)
}

/// A blob id as its 32 bytes, not the 64 hex digits of its JSON form.
pub(super) mod id_bytes {
    use baton_format::ObjectId;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<S: Serializer>(id: &ObjectId, s: S) -> Result<S::Ok, S::Error> {
        id.as_bytes().serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectId, D::Error> {
        let bytes = <[u8; 32]>::deserialize(d)?;
        Ok(ObjectId::from_hash(blake3::Hash::from_bytes(bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_again_sees_every_replacement_and_damage_of_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::init(&tmp.path().join("s")).unwrap();
        let policy = |store: &Store| read(store).map(|c| c.policy);
        assert_eq!(policy(&store), None);
        for name in ["first", "second", "third"] {
            let contents = Contents {
                policy: name.into(),
                ..Contents::default()
            };
            write(&store, &contents).unwrap();
            assert_eq!(policy(&store).as_deref(), Some(name));
            assert_eq!(policy(&store).as_deref(), Some(name), "read twice");
        }
        // Damaged in place (same inode, other length): not used.
        let path = store.root().join(layout::STATCACHE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.insert(MAGIC.len() + 2, b' ');
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(policy(&store), None);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(policy(&store), None);
    }

    #[test]
    fn a_version_1_file_or_a_body_with_bytes_left_over_is_not_used() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::init(&tmp.path().join("s")).unwrap();
        // Framed as the cache file frames any body, under this version line or another.
        let framed = |magic: &'static str, body: &[u8]| {
            forget_last_read();
            CacheFile { magic, ..FILE }
                .prepare_body(&store, body)
                .unwrap()
                .publish()
                .unwrap()
        };
        let contents = Contents {
            policy: "p".into(),
            ..Contents::default()
        };
        let body = postcard::to_stdvec(&contents).unwrap();
        framed(MAGIC, &body);
        assert_eq!(read(&store).map(|c| c.policy).as_deref(), Some("p"));
        // The JSON of version 1, checksum and all.
        let json = serde_json::to_vec(&contents).unwrap();
        framed("baton-statcache 1\n", &json);
        assert!(read(&store).is_none());
        let mut longer = body.clone();
        longer.push(0);
        framed(MAGIC, &longer);
        assert!(read(&store).is_none());
        framed(MAGIC, &body[..body.len() - 1]);
        assert!(read(&store).is_none());
    }
}
