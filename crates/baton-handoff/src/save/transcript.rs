//! The transcript of a handoff (`--transcript`): the session file read, taken from the
//! transcript cache, or only its appended lines normalised and scanned, or normalised and
//! scanned whole (while the git evidence is read); a clean one remembered for the next
//! handoff after the save (SPEC 5.1).

use std::path::Path;

use rayon::prelude::*;

use crate::capture::{self, Scanned};
use crate::events::Pairing;
use crate::sessions::skipped::Skipped;
use crate::sessions::{self, SessionFile};
use crate::transcript;
use baton_error::Result;
use baton_format::ObjectId;
use baton_store::memtree::MemFile;
use baton_store::{Store, transcript_cache};

/// What `--transcript` became, ready for the bundle.
pub(crate) struct Prepared {
    /// `transcript.jsonl` and the session file's attachment, scanned, in bundle order.
    pub files: Vec<Scanned>,
    /// The bundle's `transcript.source`.
    pub label: Option<String>,
    /// Whether the files came from the transcript cache (their bytes not scanned again).
    pub cached: bool,
    /// Whether only the lines appended since a cached handoff were normalised and scanned.
    pub appended: bool,
    /// What to remember after the save, when this handoff normalised the session and
    /// found every file clean.
    pub remember: Option<Remember>,
    /// Entries of types the reader did not know, left out (also when cached).
    pub skipped: Skipped,
    /// The handoff's notes on the transcript, one line each: what was skipped or left
    /// out.
    pub notes: Vec<String>,
}

impl Prepared {
    fn new(files: Vec<Scanned>, label: Option<String>, skipped: Skipped) -> Prepared {
        let notes = sessions::skipped_note(label.as_deref(), &skipped)
            .into_iter()
            .collect();
        Prepared {
            files,
            label,
            cached: false,
            appended: false,
            remember: None,
            skipped,
            notes,
        }
    }
}

/// A transcript cache entry to be: the key, the files' bundle paths, and what a later
/// handoff of the same session file with lines appended needs.
pub(crate) struct Remember {
    key: String,
    paths: Vec<String>,
    grown: Option<transcript_cache::Grown>,
    skipped: Skipped,
}

impl Remember {
    /// The entry to record for `files` under `key`, when every one of them scanned clean
    /// (a session that held a secret is never recorded: it is scanned on every handoff).
    fn if_clean(
        key: Option<String>,
        files: &[Scanned],
        grown: Option<transcript_cache::Grown>,
        skipped: &Skipped,
    ) -> Option<Remember> {
        key.filter(|_| files.iter().all(Scanned::clean))
            .map(|key| Remember {
                key,
                paths: files.iter().map(|f| f.file.path.clone()).collect(),
                grown,
                skipped: skipped.clone(),
            })
    }
}

/// What `--transcript` names: its text (`claude-code:latest`, a FILE), or a file the
/// caller opened itself, as the MCP server does beneath its workspace (its path for
/// messages and the transcript key).
#[derive(Debug)]
pub enum Source {
    Named(String),
    Opened(std::path::PathBuf, std::fs::File),
}

/// Read `source` and turn it into the transcript's files. A session file a previous
/// handoff of this store normalised and found clean, byte for byte the same (same key)
/// under the same secret `policy`, is taken as the blobs stored then; any other is
/// normalised, validated and scanned (its two files in parallel).
pub(crate) fn prepare(
    store: &Store,
    policy: &str,
    source: Option<Source>,
    workspace: &Path,
) -> Result<Prepared> {
    let resolved = match source {
        None => None,
        Some(Source::Named(text)) => Some(sessions::resolve_source(
            &sessions::Homes::from_env(),
            &sessions::Source::parse(&text),
            workspace,
        )?),
        Some(Source::Opened(path, file)) => Some(sessions::ResolvedSession::opened(path, file)),
    };
    let Some(resolved) = resolved else {
        return Ok(Prepared::new(Vec::new(), None, Skipped::default()));
    };
    let cache = transcript_cache::transcripts(store, policy);
    // The entry of this session file, if any: the one an unchanged or grown file uses.
    let entry = resolved.ident().and_then(|ident| cache.by_ident(&ident));
    if let Some(entry) = entry.as_ref()
        && let Some(refreshed) = unchanged_since(entry, &resolved)?
    {
        return Ok(cached(entry.clone(), refreshed));
    }
    let session = resolved.read()?;
    // The entry, if the file grew past it and still starts with the bytes it was made
    // from: that key first, since its pass over the bytes also gives the digest that
    // the whole file's key takes.
    let grown_from = entry.filter(|e| first_part_key(e, &session).is_some_and(|k| k == e.key));
    let key = session.key();
    if let Some(hit) = key.as_deref().and_then(|k| cache.by_key(k)) {
        return Ok(cached(hit, None));
    }
    let session = match appended(store, grown_from, session) {
        Ok(prepared) => return Ok(prepared),
        Err(session) => *session,
    };
    // Only a file that ends with a line end can be taken to grow by whole lines.
    let ident = session.ident().filter(|_| session.bytes().ends_with(b"\n"));
    let len = session.bytes().len() as u64;
    let stat = session.stat();
    let loaded = session.load()?;
    transcript::validate(&loaded.jsonl)?;
    let grown = ident.map(|ident| transcript_cache::Grown {
        ident,
        len,
        events: loaded.events as u64,
        calls: loaded.pairing.calls.clone(),
        unpaired: loaded.pairing.unpaired.clone(),
        stat,
    });
    let mut files = vec![MemFile::new("transcript.jsonl", loaded.jsonl)];
    if let Some((path, bytes)) = loaded.raw {
        files.push(MemFile::new(format!("attachments/{path}"), bytes));
    }
    for (path, bytes) in loaded.more_raw {
        files.push(MemFile::new(format!("attachments/{path}"), bytes));
    }
    let files = scan_all(files);
    let remember = Remember::if_clean(key, &files, grown, &loaded.skipped);
    let mut prepared = Prepared::new(files, loaded.label, loaded.skipped);
    prepared.notes.extend(loaded.notes);
    prepared.remember = remember;
    Ok(prepared)
}

/// Above this many bytes in all, the transcript's files are scanned one after the other:
/// the secret scan holds a few copies of what it scans, and two scans at once held twice
/// as many (a 50 MB session peaked at 9 times its size, at 6 one after the other).
const PARALLEL_SCAN_BYTES: usize = 32 << 20;

/// The files scanned for secrets: in parallel when small, else one at a time.
fn scan_all(files: Vec<MemFile>) -> Vec<Scanned> {
    let total: usize = files.iter().map(|f| f.bytes.len()).sum();
    if total <= PARALLEL_SCAN_BYTES {
        files.into_par_iter().map(capture::scan).collect()
    } else {
        files.into_iter().map(capture::scan).collect()
    }
}

/// Whether the session file is still the one the cache `entry` was made from: exactly as long
/// as it was then and either its metadata proves it unchanged (the stat cache's
/// racy-clean rule, SPEC 5.1) or its bytes give the entry's key: hashed as read, never
/// held whole (a 3 MB session was read into memory only to be hashed). A file of another
/// length goes the usual way (read, then looked up, appended or normalised).
///
/// `None`: not unchanged. `Some(refreshed)`: unchanged, and when the bytes had to be
/// hashed, the metadata taken just before, if it proves the next handoff's file unchanged
/// without reading (the entry was racy, or from an older build): as git writes back the
/// index entries a refresh found clean, so one racy handoff does not make every later one
/// hash the file.
fn unchanged_since(
    entry: &transcript_cache::Transcript,
    resolved: &sessions::ResolvedSession,
) -> Result<Option<Option<transcript_cache::Grown>>> {
    let Some(grown) = entry.grown.as_ref() else {
        return Ok(None);
    };
    // Taken before any hash below, so that it can be remembered if the hash matches.
    let now = resolved.session_stat()?;
    if now.file.size != grown.len {
        return Ok(None);
    }
    // The stat cache's rule first: the same metadata, old enough, is the same bytes.
    if grown
        .stat
        .is_some_and(|s| s.file.size == grown.len && s.proves_unchanged(&now.file))
    {
        return Ok(Some(None));
    }
    let key = resolved.key_of_streamed(grown.len)?;
    if key.is_none_or(|k| k != entry.key) {
        return Ok(None);
    }
    let refreshed = now
        .proves_unchanged(&now.file)
        .then(|| transcript_cache::Grown {
            stat: Some(now),
            ..grown.clone()
        });
    Ok(Some(refreshed))
}

/// The files of a transcript cache hit: its stored blobs (names scanned as always).
/// `refreshed`: the entry's new session metadata, remembered after the save.
fn cached(
    hit: transcript_cache::Transcript,
    refreshed: Option<transcript_cache::Grown>,
) -> Prepared {
    let skipped = Skipped::from_counts(&hit.skipped);
    let remember = refreshed.map(|grown| Remember {
        key: hit.key.clone(),
        paths: hit.files.iter().map(|(path, _, _)| path.clone()).collect(),
        grown: Some(grown),
        skipped: skipped.clone(),
    });
    let files = hit
        .files
        .into_iter()
        .map(|(path, id, size)| capture::scan(MemFile::stored(path, id, size)))
        .collect();
    let mut prepared = Prepared::new(files, hit.label, skipped);
    prepared.cached = true;
    prepared.remember = remember;
    prepared
}

/// The session file as a cached one with lines appended (SPEC 5.1): its first `len`
/// bytes are exactly those a previous handoff of this store normalised and found clean
/// (same key), the appended lines normalise on their own to exactly what a whole
/// normalisation adds (`normalise_appended`), and those lines, raw and normalised, scan
/// clean. Then the files are the cached transcript followed by the new events, and the
/// whole session file. Anything else (a secret in the new lines included) gives the
/// session back, to be normalised and scanned whole.
fn appended(
    store: &Store,
    entry: Option<transcript_cache::Transcript>,
    session: SessionFile,
) -> std::result::Result<Prepared, Box<SessionFile>> {
    let Some(Parts {
        entry,
        prefix_jsonl,
        tail_jsonl,
        grown,
        tail_skipped,
    }) = entry.and_then(|entry| appended_parts(store, entry, &session))
    else {
        return Err(Box::new(session));
    };
    // The new lines, raw and normalised, scanned on their own: no rule matches across a
    // line end but a private key block, and an unfinished one in the cached part would
    // have been a finding (SPEC 5.1). Each scan starts at the newline that ends the
    // cached part, so a rule that wants a separator before a token sees the one a whole
    // scan sees.
    let start = session.bytes().len().min(entry_len(&entry));
    let raw_start = start.saturating_sub(1);
    let raw_tail = capture::scan(MemFile::new("", session.bytes()[raw_start..].to_vec()));
    let mut tail_with_line_end = Vec::with_capacity(tail_jsonl.len() + 1);
    tail_with_line_end.push(b'\n');
    tail_with_line_end.extend_from_slice(&tail_jsonl);
    let new_lines = capture::scan(MemFile::new("", tail_with_line_end));
    if !(raw_tail.found.is_empty() && new_lines.found.is_empty()) {
        return Err(Box::new(session));
    }
    let key = session.key();
    // The session file's blob id is the digest its key was made from: not hashed again.
    let raw_id = ObjectId::from_hash(*session.digest());
    let mut jsonl = prefix_jsonl;
    jsonl.extend_from_slice(&tail_jsonl);
    let raw = session.into_bytes();
    let grown = Some(grown).filter(|_| raw.ends_with(b"\n"));
    // The names are scanned as always; the bytes were, the cached part then and the new
    // lines now.
    // Personal data likewise: the cached part was found free of it (an entry is recorded
    // only then), so its scan starts at the same newlines.
    let jsonl_start = jsonl.len() - tail_jsonl.len();
    let pii_starts = [jsonl_start.saturating_sub(1), raw_start];
    let mut files = Vec::new();
    let contents = [(jsonl, None), (raw, Some(raw_id))];
    for (((path, _, _), (bytes, digest)), pii_from) in
        entry.files.iter().zip(contents).zip(pii_starts)
    {
        let mut scanned = capture::scan(MemFile::new(path.clone(), Vec::new()));
        scanned.file = match digest {
            Some(digest) => MemFile::hashed(scanned.file.path, bytes, digest),
            None => MemFile::new(scanned.file.path, bytes),
        };
        scanned.pii_from = pii_from;
        files.push(scanned);
    }
    let mut skipped = Skipped::from_counts(&entry.skipped);
    skipped.extend(&tail_skipped);
    let remember = Remember::if_clean(key, &files, grown, &skipped);
    let mut prepared = Prepared::new(files, entry.label, skipped);
    prepared.appended = true;
    prepared.remember = remember;
    Ok(prepared)
}

/// The length of the session file an entry was made from.
fn entry_len(entry: &transcript_cache::Transcript) -> usize {
    entry
        .grown
        .as_ref()
        .and_then(|g| usize::try_from(g.len).ok())
        .unwrap_or(usize::MAX)
}

/// What [`appended_parts`] finds: the entry, its `transcript.jsonl`, the appended
/// lines' events as transcript lines, the whole file's [`transcript_cache::Grown`], and the
/// entries those lines skipped.
struct Parts {
    entry: transcript_cache::Transcript,
    prefix_jsonl: Vec<u8>,
    tail_jsonl: Vec<u8>,
    grown: transcript_cache::Grown,
    tail_skipped: Skipped,
}

/// The key of the session file's first bytes, as many as when `entry` was made, if it
/// has grown since.
fn first_part_key(entry: &transcript_cache::Transcript, session: &SessionFile) -> Option<String> {
    let len = usize::try_from(entry.grown.as_ref()?.len).ok()?;
    if len >= session.bytes().len() {
        return None;
    }
    session.key_of(len)
}

/// For [`appended`]: the cache entry of this session file at an earlier length whose key
/// is that of the file's first bytes (the caller checked, [`first_part_key`]), its `transcript.jsonl` (read from the store,
/// verified), the events of the appended lines as transcript lines, and the [`Grown`]
/// of the whole file.
///
/// [`Grown`]: transcript_cache::Grown
fn appended_parts(
    store: &Store,
    entry: transcript_cache::Transcript,
    session: &SessionFile,
) -> Option<Parts> {
    let ident = session.ident()?;
    let grown = entry.grown.clone()?;
    let len = usize::try_from(grown.len).ok()?;
    // The bundle's files in the order a whole normalisation gives them.
    let [(jsonl_path, jsonl_id, jsonl_size), (raw_path, _, _)] = &entry.files[..] else {
        return None;
    };
    if jsonl_path != "transcript.jsonl" || !raw_path.starts_with("attachments/") {
        return None;
    }
    let prior = Pairing {
        calls: grown.calls.clone(),
        unpaired: grown.unpaired.clone(),
    };
    let (tail_jsonl, pairing, tail_events, tail_skipped) =
        session.normalise_appended(len, grown.events, &prior)?;
    transcript::validate(&tail_jsonl).ok()?;
    let prefix_jsonl = store
        .objects
        .get_bytes_sized(jsonl_id, Some(*jsonl_size), sessions::MAX_TRANSCRIPT_BYTES)
        .ok()?;
    let next = transcript_cache::Grown {
        ident,
        len: session.bytes().len() as u64,
        events: grown.events + tail_events,
        calls: pairing.calls,
        unpaired: pairing.unpaired,
        stat: session.stat(),
    };
    Some(Parts {
        entry,
        prefix_jsonl,
        tail_jsonl,
        grown: next,
        tail_skipped,
    })
}

/// The transcript cache entry of what the session became, by the bundle's `files` and
/// their `ids` (same order); recorded after the ref move (every blob named is reachable
/// from `current` then).
pub(crate) fn entry(
    label: Option<String>,
    remember: Option<Remember>,
    files: &[MemFile],
    ids: &[(ObjectId, u64)],
) -> Option<transcript_cache::Transcript> {
    let Remember {
        key,
        paths,
        grown,
        skipped,
    } = remember?;
    let named: Option<Vec<_>> = paths
        .into_iter()
        .map(|path| {
            let i = files.iter().position(|f| f.path == path)?;
            let (id, size) = ids.get(i)?;
            Some((path, *id, *size))
        })
        .collect();
    named
        .filter(|f| !f.is_empty())
        .map(|files| transcript_cache::Transcript {
            key,
            label,
            files,
            grown,
            skipped: skipped.counts().clone(),
        })
}
