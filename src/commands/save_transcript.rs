//! The transcript of a handoff (`--transcript`): the session file read, taken from the
//! transcript cache or normalised, and its files scanned (while the git evidence is
//! read); a clean one remembered for the next handoff after the save (SPEC 5.1).

use std::path::Path;

use rayon::prelude::*;

use crate::error::Result;
use crate::format::ObjectId;
use crate::handoff::capture::{self, Scanned};
use crate::handoff::{sessions, transcript};
use crate::store::memtree::MemFile;
use crate::store::{Store, statcache};

/// What `--transcript` became, ready for the bundle.
pub(super) struct Prepared {
    /// `transcript.jsonl` and the session file's attachment, scanned, in bundle order.
    pub files: Vec<Scanned>,
    /// The bundle's `transcript.source`.
    pub label: Option<String>,
    /// Whether the files came from the transcript cache (their bytes not scanned again).
    pub cached: bool,
    /// What to remember after the save: the cache key and the files' bundle paths, when
    /// this handoff normalised the session and found every file clean.
    pub remember: Option<(String, Vec<String>)>,
}

/// Read `source` and turn it into the transcript's files. A session file a previous
/// handoff of this store normalised and found clean, byte for byte the same (same key)
/// under the same secret `policy`, is taken as the blobs stored then; any other is
/// normalised, validated and scanned (its two files in parallel).
pub(super) fn prepare(
    store: &Store,
    policy: &str,
    source: Option<&str>,
    workspace: &Path,
) -> Result<Prepared> {
    let Some(source) = source else {
        return Ok(Prepared {
            files: Vec::new(),
            label: None,
            cached: false,
            remember: None,
        });
    };
    let session = sessions::read_source(
        &sessions::Homes::from_env(),
        &sessions::Source::parse(source),
        workspace,
    )?;
    let key = session.key();
    if let Some(hit) = key
        .as_deref()
        .and_then(|k| statcache::transcript(store, policy, k))
    {
        let files = hit
            .files
            .into_iter()
            .map(|(path, id, size)| capture::scan(MemFile::stored(path, id, size)))
            .collect();
        return Ok(Prepared {
            files,
            label: hit.label,
            cached: true,
            remember: None,
        });
    }
    let loaded = session.load()?;
    transcript::validate(&loaded.jsonl)?;
    let mut files = vec![MemFile::new("transcript.jsonl", loaded.jsonl)];
    if let Some((path, bytes)) = loaded.raw {
        files.push(MemFile::new(format!("attachments/{path}"), bytes));
    }
    let files: Vec<Scanned> = files.into_par_iter().map(capture::scan).collect();
    let remember = key
        .filter(|_| files.iter().all(Scanned::clean))
        .map(|k| (k, files.iter().map(|f| f.file.path.clone()).collect()));
    Ok(Prepared {
        files,
        label: loaded.label,
        cached: false,
        remember,
    })
}

/// After the ref move (every blob named is reachable from `current` then): remember what
/// the session became, by the bundle's `files` and their `ids` (same order). Best
/// effort: the save is complete whatever happens here.
pub(super) fn remember(
    store: &Store,
    policy: &str,
    label: Option<String>,
    remember: Option<(String, Vec<String>)>,
    files: &[MemFile],
    ids: &[(ObjectId, u64)],
) {
    let Some((key, paths)) = remember else {
        return;
    };
    let named: Option<Vec<_>> = paths
        .into_iter()
        .map(|path| {
            let i = files.iter().position(|f| f.path == path)?;
            let (id, size) = ids.get(i)?;
            Some((path, *id, *size))
        })
        .collect();
    if let Some(files) = named.filter(|f| !f.is_empty()) {
        let entry = statcache::Transcript { key, label, files };
        let _ = statcache::record_transcript(store, policy, entry);
    }
}
