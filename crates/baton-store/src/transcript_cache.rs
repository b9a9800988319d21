//! The transcript cache: what a handoff made of a session file (the blobs it stored, and
//! what the next handoff needs to normalise only lines appended since), kept in the
//! `statcache` file (store-format/SPEC.md 5.1) under the secret policy it was found clean
//! under, so that a handoff of an unchanged or grown session skips the work.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Store;
use crate::cache_file::Prepared;
use crate::history_cache::{self, History};
use crate::statcache::{self, FileStat, now_ns, read, under_policy};
use baton_error::Result;
use baton_format::ObjectId;

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
    #[serde(default)]
    pub grown: Option<Grown>,
    /// Entries of types the reader did not know, left out, by type (the handoff's note
    /// on them is made again from these; absent when none, and in older caches, whose
    /// builds refused such sessions).
    #[serde(default)]
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
    #[serde(default)]
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
/// nothing changes. Best effort, like [`statcache::record`].
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
        history_cache::remember(&mut contents, history);
    }
    statcache::prepare(store, &contents).map(Some)
}
