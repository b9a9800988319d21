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

use std::collections::{BTreeMap, HashMap};
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Store;
use super::sidecar::{Prepared, Sidecar};
use baton_error::Result;
use baton_format::{ObjectId, layout};

/// The first line of the file; a reader ignores a cache with any other.
const MAGIC: &str = "baton-statcache 1\n";

/// A cache larger than this is ignored (and replaced by the next save).
const MAX_LEN: u64 = 256 << 20;

/// Directories remembered at once; the least recently saved is dropped first.
const MAX_ROOTS: usize = 4;

/// Prefix of the cache's temp files (`.tmp-` as every temp file, then the pid).
const TEMP_PREFIX: &str = ".tmp-statcache-";

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
    fn is_racy(&self, started_ns: i64) -> bool {
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
struct Entry(String, FileStat, ObjectId, Option<Findings>);

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Section {
    /// The directory saved, canonical.
    root: String,
    /// When the save that wrote this section started (before it listed the directory).
    started_ns: i64,
    entries: Vec<Entry>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Contents {
    /// The secret-scan policy the entries were found clean under (see `for_root`).
    policy: String,
    sections: Vec<Section>,
    /// Session transcripts a handoff normalised and found clean (absent in caches of
    /// older builds), most recent first.
    #[serde(default)]
    transcripts: Vec<Transcript>,
    /// The git history of HEAD the last handoffs of each work tree captured (absent in
    /// caches of older builds), most recent first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    histories: Vec<History>,
}

/// Work trees whose history is remembered at once; the least recently saved is dropped.
const MAX_HISTORIES: usize = 4;

/// What a handoff's evidence recorded of HEAD in one work tree: its id, its parentless
/// ancestors and its first parents (newest first), so that the next handoff, after a few
/// commits, need not ask git to walk the whole history again (SPEC 5.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub root: String,
    pub head: String,
    pub root_commits: Vec<String>,
    pub first_parents: Vec<String>,
}

/// Transcripts remembered at once; the least recently saved is dropped first.
const MAX_TRANSCRIPTS: usize = 4;

/// What a handoff made of one session file, found clean under the cache's policy: the
/// blobs it stored (`path`, id, size of each file of the bundle), keyed by a hash of
/// everything the result depends on (the caller's key: the session file's bytes, its
/// harness, name and path). A hit needs every blob present in the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    pub key: String,
    /// The bundle's `transcript.source` metadata.
    pub label: Option<String>,
    pub files: Vec<(String, ObjectId, u64)>,
    /// For a session that may grow by appended lines: what the next handoff needs to
    /// normalise only those (absent in caches of older builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grown: Option<Grown>,
    /// Entries of types the reader did not know, left out, by type (the handoff's note
    /// on them is made again from these; absent when none, and in older caches, whose
    /// builds refused such sessions).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skipped: BTreeMap<String, u64>,
}

/// What a session file was when its [`Transcript`] entry was made, so that the same file
/// with lines appended is normalised and scanned only in its new lines (SPEC 5.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grown {
    /// The caller's hash of which session file this is (not of its bytes).
    pub ident: String,
    /// The file's length; the entry's key is that of exactly these bytes.
    pub len: u64,
    /// Events in the entry's `transcript.jsonl`.
    pub events: u64,
    /// Tool calls (id, tool) of those events, in order.
    pub calls: Vec<(String, String)>,
    /// Result ids no call named.
    pub unpaired: Vec<String>,
    /// The file's metadata just before it was read, for the racy-clean rule: a file whose
    /// metadata still equals it is those bytes without being read (absent in caches of
    /// older builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stat: Option<SessionStat>,
}

/// A session file's metadata and when it was taken, just before the file was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStat {
    pub file: FileStat,
    pub read_at_ns: i64,
}

impl SessionStat {
    /// Take it: call just before reading the file.
    pub fn take(path: &Path) -> std::io::Result<SessionStat> {
        let read_at_ns = now_ns();
        let meta = std::fs::metadata(path)?;
        Ok(SessionStat {
            file: FileStat::of(&meta),
            read_at_ns,
        })
    }

    /// [`SessionStat::take`] of a file already open.
    pub fn of_open(file: &std::fs::File) -> std::io::Result<SessionStat> {
        let read_at_ns = now_ns();
        Ok(SessionStat {
            file: FileStat::of(&file.metadata()?),
            read_at_ns,
        })
    }

    /// Whether a file whose metadata is `now` is still the bytes read then, by the stat
    /// cache's rule: every field equal, and the file's timestamps older than that read by
    /// more than their granularity (so that any later write moved them).
    pub fn proves_unchanged(&self, now: &FileStat) -> bool {
        self.file == *now && !self.file.is_racy(self.read_at_ns)
    }
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

/// The file: only a cache, so a lost or torn one costs a re-read, nothing else.
const FILE: Sidecar = Sidecar {
    file: layout::STATCACHE,
    magic: MAGIC,
    temp_prefix: TEMP_PREFIX,
    max_len: MAX_LEN,
    what: "stat cache",
};

/// What the cache file holds, or `None` for a missing, damaged, foreign or newer-version
/// cache: every one of those is simply not used.
fn read(store: &Store) -> Option<Contents> {
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
    let contents: Contents = FILE.read(store)?;
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

/// The transcript cache entries found clean under `policy`, read from the file once per
/// handoff; a lookup returns an entry only when every blob it names is in the store.
pub struct Transcripts<'s> {
    store: &'s Store,
    entries: Vec<Transcript>,
}

pub fn transcripts<'s>(store: &'s Store, policy: &str) -> Transcripts<'s> {
    let entries = read(store)
        .filter(|c| c.policy == policy)
        .map(|c| c.transcripts)
        .unwrap_or_default();
    Transcripts { store, entries }
}

impl Transcripts<'_> {
    /// The transcript cached under `key` (see [`Transcript`]); `None` means: normalise
    /// and scan.
    pub fn by_key(&self, key: &str) -> Option<Transcript> {
        self.usable(|t| t.key == key)
    }

    /// The entry of the session file `ident` (see [`Grown`]): the caller checks that the
    /// file still starts with exactly the bytes the entry was made from.
    pub fn by_ident(&self, ident: &str) -> Option<Transcript> {
        self.usable(|t| t.grown.as_ref().is_some_and(|g| g.ident == ident))
    }

    fn usable(&self, wanted: impl Fn(&Transcript) -> bool) -> Option<Transcript> {
        let found = self.entries.iter().find(|t| wanted(t))?;
        found
            .files
            .iter()
            .all(|(_, id, _)| self.store.objects.contains(id))
            .then(|| found.clone())
    }
}

/// What a handoff leaves for the next one, in one write of the cache file: `transcript`
/// (other transcripts kept, up to `MAX_TRANSCRIPTS`; only for files that were scanned
/// under `policy` and found clean) and `history`, replacing that of the same work tree,
/// written to a temp file while the handoff's pack and ref are made durable: publish it
/// only after the ref move that makes the transcript's blobs reachable. `None` when
/// nothing changes. Best effort, like [`record`].
pub fn prepare_handoff(
    store: &Store,
    policy: &str,
    transcript: Option<Transcript>,
    history: Option<History>,
) -> Result<Option<Prepared>> {
    if store.config.encryption.is_some() || (transcript.is_none() && history.is_none()) {
        return Ok(None);
    }
    let mut contents = read(store).unwrap_or_default();
    let unchanged = transcript.is_none() && contents.histories.first() == history.as_ref();
    if unchanged {
        return Ok(None);
    }
    if let Some(entry) = transcript {
        under_policy(&mut contents, policy);
        // An entry of the same session file at an earlier length is replaced.
        let ident = entry.grown.as_ref().map(|g| g.ident.clone());
        contents.transcripts.retain(|t| {
            t.key != entry.key
                && (ident.is_none() || t.grown.as_ref().map(|g| &g.ident) != ident.as_ref())
        });
        contents.transcripts.insert(0, entry);
        contents.transcripts.truncate(MAX_TRANSCRIPTS);
    }
    if let Some(history) = history {
        contents.histories.retain(|h| h.root != history.root);
        contents.histories.insert(0, history);
        contents.histories.truncate(MAX_HISTORIES);
    }
    forget_last_read();
    FILE.prepare(store, &contents).map(Some)
}

/// The histories remembered, most recent first (whatever the secret policy: they hold
/// commit ids only); none for an encrypted store, which keeps no plaintext cache.
pub fn histories(store: &Store) -> Vec<History> {
    read(store).map(|c| c.histories).unwrap_or_default()
}

/// Make `contents` those of `policy`: entries found clean under another are dropped
/// (the histories, which hold no scan results, stay).
fn under_policy(contents: &mut Contents, policy: &str) {
    if contents.policy != policy {
        *contents = Contents {
            policy: policy.to_string(),
            histories: std::mem::take(&mut contents.histories),
            ..Contents::default()
        };
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
    write(store, &contents)
}

/// Write the cache file (temp file, rename, no fsync).
fn write(store: &Store, contents: &Contents) -> Result<()> {
    forget_last_read();
    FILE.write(store, contents)
}

/// Before this process replaces the file: its next read reads it (a replacement's inode
/// is always new, but the one after could reuse the first's within a clock tick).
fn forget_last_read() {
    if let Ok(mut last) = LAST_READ.lock() {
        *last = None;
    }
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
            entries: [("a".to_string(), (entry, ObjectId::of(b"abc"), None))].into(),
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
