//! The stat cache (git's index idea): for each directory saved, path -> (size, mtime,
//! ctime, inode, device, mode, blob id), so that a re-save takes the blob id of a file
//! whose metadata did not change without reading the file (store-format/SPEC.md §5.1).
//!
//! It is a cache and nothing more: written after the ref move (every blob id in it is
//! reachable from a bundle some ref held, and GC never deletes those), without fsync (a
//! lost or torn cache only costs a re-read), read with a version header and a checksum,
//! and ignored whole when anything about it is off. `verify` never reads it. An
//! encrypted store keeps none (paths and ids are secrets there).
//!
//! Racy-clean rule: an entry is trusted only if its mtime and ctime are older than the
//! start of the save that wrote it by more than the timestamp granularity, so a change
//! made after that save stat'ed the file always moves the timestamp.

mod file;

use foldhash::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Store;
use baton_error::Result;
use baton_format::ObjectId;
pub(crate) use file::{Contents, prepare, read, under_policy};

/// Directories remembered at once; the least recently saved is dropped first.
const MAX_ROOTS: usize = 4;

/// Timestamp granularity allowed for on a file system with sub-second timestamps: Linux
/// stamps files from a clock that lags the wall clock by up to one tick (10 ms at 100 Hz).
const FINE_GRANULARITY_NS: i64 = 50_000_000;

/// On a file system with whole-second (or FAT's two-second) timestamps.
const COARSE_GRANULARITY_NS: i64 = 3_000_000_000;

/// The metadata a cache entry is keyed by: all of it must match for a hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    pub dev: u64,
    pub mode: u32,
}

impl FileStat {
    /// The same fields from a `stat` made by descriptor (`beneath::Dir::lstat_entry`).
    pub fn of_stat(st: &rustix::fs::Stat) -> FileStat {
        FileStat {
            size: st.st_size as u64,
            mtime_ns: nanos(st.st_mtime, st.st_mtime_nsec as i64),
            ctime_ns: nanos(st.st_ctime, st.st_ctime_nsec as i64),
            ino: st.st_ino,
            dev: st.st_dev,
            mode: st.st_mode,
        }
    }

    pub fn of(meta: &Metadata) -> FileStat {
        FileStat {
            size: meta.size(),
            mtime_ns: nanos(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: nanos(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
            mode: meta.mode(),
        }
    }

    /// Whether this file's timestamps are too close to `started_ns` to prove that a later
    /// change would have moved them (git's "racily clean").
    pub(crate) fn is_racy(&self, started_ns: i64) -> bool {
        let whole_seconds = self.mtime_ns.rem_euclid(1_000_000_000) == 0
            && self.ctime_ns.rem_euclid(1_000_000_000) == 0;
        let granularity = if whole_seconds {
            COARSE_GRANULARITY_NS
        } else {
            FINE_GRANULARITY_NS
        };
        self.mtime_ns.max(self.ctime_ns) >= started_ns.saturating_sub(granularity)
    }
}

fn nanos(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

/// Now, in nanoseconds since the epoch: taken before a save lists its directory.
pub fn now_ns() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        // A clock before 1970: every entry looks racy, so nothing is trusted.
        Err(_) => 0,
    }
}

/// What a scan found in a file stored as it is (`save --secrets allow`): counts by kind.
pub type Findings = Vec<(String, u64)>;

/// One cached file: path relative to the root (`/`-separated), metadata, blob id, and
/// the secrets found in it when it was stored as it is (`None`: found clean).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Entry(
    String,
    FileStat,
    #[serde(with = "file::id_bytes")] ObjectId,
    Option<Findings>,
);

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Section {
    /// The directory saved, canonical.
    root: String,
    /// When the save that wrote this section started (before it listed the directory).
    started_ns: i64,
    entries: Vec<Entry>,
}

/// The cached entries of one directory, ready for lookups.
#[derive(Debug, Default)]
pub struct Lookup {
    started_ns: i64,
    entries: HashMap<String, (FileStat, ObjectId, Option<Findings>)>,
    /// Whether these entries are the cache file's most recent section (so a save that
    /// would write exactly them again can leave the file as it is: [`Lookup::unchanged`]).
    latest: bool,
}

impl Lookup {
    /// The blob id of `rel` if the cache holds it with exactly `stat` and the entry is
    /// not racy; `None` means: read the file.
    pub fn get(&self, rel: &str, stat: &FileStat) -> Option<(ObjectId, Option<&Findings>)> {
        let (cached, id, findings) = self.entries.get(rel)?;
        (cached == stat && !stat.is_racy(self.started_ns)).then_some((*id, findings.as_ref()))
    }

    /// The secrets recorded for `rel` (see [`Findings`]); `None` when it was clean or is
    /// not cached.
    pub fn findings(&self, rel: &str) -> Option<&Findings> {
        self.entries.get(rel)?.2.as_ref()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether recording `entries` would change nothing a later lookup sees: they are
    /// exactly this section's entries, which is the file's most recent one, and each is
    /// trusted under this section's start time already (a racy entry is re-recorded with
    /// the new save's start, so that it stops being racy). A re-save of an unchanged tree
    /// then leaves the file alone instead of encoding and renaming the same entries.
    pub fn unchanged(&self, entries: &[(String, FileStat, ObjectId, Option<Findings>)]) -> bool {
        self.latest
            && entries.len() == self.entries.len()
            && entries.iter().all(|(path, stat, id, findings)| {
                self.entries.get(path).is_some_and(|(s, i, f)| {
                    s == stat && i == id && f == findings && !stat.is_racy(self.started_ns)
                })
            })
    }
}

/// The entries cached for `root` (canonical), if they were found clean under `policy`
/// (a fingerprint of the secret rules, given by the caller): entries made under another
/// policy are not used, so a file is scanned again whenever the rules change.
pub fn for_root(store: &Store, root: &Path, policy: &str) -> Lookup {
    let Some(mut contents) = read(store) else {
        return Lookup::default();
    };
    if contents.policy != policy {
        return Lookup::default();
    }
    let Some(root) = root.to_str() else {
        return Lookup::default();
    };
    let Some(at) = contents.sections.iter().position(|s| s.root == root) else {
        return Lookup::default();
    };
    let section = contents.sections.swap_remove(at);
    Lookup {
        latest: at == 0,
        started_ns: section.started_ns,
        entries: section
            .entries
            .into_iter()
            .map(|Entry(path, stat, id, findings)| (path, (stat, id, findings)))
            .collect(),
    }
}

/// Replace the entries of `root` by `entries` (other directories kept, up to
/// `MAX_ROOTS`). Call only after the ref move that makes every id in `entries` reachable.
/// Best effort by design: the save is complete whatever happens here, so a failure is
/// returned for the caller to ignore, and a crash leaves at most a temp file.
pub fn record(
    store: &Store,
    root: &Path,
    policy: &str,
    started_ns: i64,
    entries: Vec<(String, FileStat, ObjectId, Option<Findings>)>,
) -> Result<()> {
    if store.config.encryption.is_some() {
        return Ok(());
    }
    let Some(root) = root.to_str() else {
        return Ok(());
    };
    let mut contents = read(store).unwrap_or_default();
    under_policy(&mut contents, policy);
    contents.sections.retain(|s| s.root != root);
    contents.sections.insert(
        0,
        Section {
            root: root.to_string(),
            started_ns,
            entries: entries
                .into_iter()
                .map(|(path, stat, id, findings)| Entry(path, stat, id, findings))
                .collect(),
        },
    );
    contents.sections.truncate(MAX_ROOTS);
    file::write(store, &contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(mtime_ns: i64, ctime_ns: i64) -> FileStat {
        FileStat {
            size: 3,
            mtime_ns,
            ctime_ns,
            ino: 7,
            dev: 1,
            mode: 0o100644,
        }
    }

    fn lookup(started_ns: i64, entry: FileStat) -> Lookup {
        Lookup {
            started_ns,
            entries: [("a".to_string(), (entry, ObjectId::of(b"abc"), None))]
                .into_iter()
                .collect(),
            latest: true,
        }
    }

    #[test]
    fn only_an_exact_old_enough_match_is_trusted() {
        let started = 100_000_000_000_i64;
        let old = stat(started - 1_000_000_001, started - 1_000_000_001);
        let cache = lookup(started, old);
        assert_eq!(cache.get("a", &old), Some((ObjectId::of(b"abc"), None)));
        assert_eq!(cache.get("b", &old), None);
        for changed in [
            FileStat { size: 4, ..old },
            FileStat {
                mtime_ns: old.mtime_ns + 1,
                ..old
            },
            FileStat {
                ctime_ns: old.ctime_ns + 1,
                ..old
            },
            FileStat { ino: 8, ..old },
            FileStat { dev: 2, ..old },
            FileStat {
                mode: 0o100755,
                ..old
            },
        ] {
            assert_eq!(cache.get("a", &changed), None, "{changed:?}");
        }
    }

    #[test]
    fn only_the_same_trusted_entries_of_the_latest_section_are_unchanged() {
        let started = 100_000_000_000_i64;
        let old = stat(started - 1_000_000_001, started - 1_000_000_001);
        let id = ObjectId::of(b"abc");
        let same = vec![("a".to_string(), old, id, None)];
        assert!(lookup(started, old).unchanged(&same));
        // Not the most recent section: rewritten, so that it moves to the front.
        let not_latest = Lookup {
            latest: false,
            ..lookup(started, old)
        };
        assert!(!not_latest.unchanged(&same));
        // A new, missing, changed or differently found entry.
        let other = ObjectId::of(b"abd");
        let more = vec![same[0].clone(), ("b".to_string(), old, id, None)];
        assert!(!lookup(started, old).unchanged(&more));
        assert!(!lookup(started, old).unchanged(&[]));
        assert!(!lookup(started, old).unchanged(&[("a".to_string(), old, other, None)]));
        let found = Some(vec![("github_token".to_string(), 1)]);
        assert!(!lookup(started, old).unchanged(&[("a".to_string(), old, id, found)]));
        // A racy entry is recorded again under the new save's start.
        let racy = stat(started - 10, started - 10);
        assert!(!lookup(started, racy).unchanged(&[("a".to_string(), racy, id, None)]));
    }

    #[test]
    fn racy_entries_are_not_trusted() {
        let started = 100_000_000_000_i64;
        // Sub-second timestamps: within 50 ms of the save's start is racy.
        let fine = stat(started - 10_000_001, started - 10_000_001);
        assert_eq!(lookup(started, fine).get("a", &fine), None);
        let fine_old = stat(started - 60_000_001, started - 60_000_001);
        assert!(lookup(started, fine_old).get("a", &fine_old).is_some());
        // A ctime after the save started (a forced mtime): racy whatever the mtime.
        let forced = stat(started - 10_000_000_001, started + 5);
        assert_eq!(lookup(started, forced).get("a", &forced), None);
        // Whole-second timestamps: the same second, or the two before it, are racy.
        let coarse = stat(started - 2_000_000_000, started - 2_000_000_000);
        assert_eq!(lookup(started, coarse).get("a", &coarse), None);
        let coarse_old = stat(started - 4_000_000_000, started - 4_000_000_000);
        assert!(lookup(started, coarse_old).get("a", &coarse_old).is_some());
    }
}
