//! A target's audit trail read over its transport: the generations of its `current` (one
//! per push, SPEC 8.4) merged with its own log, as `log --audit` shows a local store's.

use super::remote_store::read_push_state;
use baton_error::{Error, Result};
use baton_format::LogEntry;
use baton_format::layout::{self, Kind};
use baton_format::names::{RefName, generation_name};
use baton_store::audit::{decode_generation, decode_log, merge_audit, newest};
use baton_transport::backend::BackendExt;

/// Generation files read per batch (one round trip each).
const GENERATIONS_PER_BATCH: u64 = 256;
/// The largest remote log read (a hub's log grows with its local moves only).
pub const MAX_REMOTE_LOG: u64 = 64 << 20;

/// Every move of the target's `current` and every line of its log, oldest first (with
/// `max`, the newest `max` generations and entries). Round trips: the push-state probe,
/// one per 256 generations, one for the log.
pub fn read_remote_audit(remote: &mut dyn BackendExt, max: Option<usize>) -> Result<Vec<LogEntry>> {
    let state = read_push_state(remote)?;
    if state.config.is_none() {
        return Err(
            Error::not_found(format!("there is no baton store at {}", remote.describe()))
                .with_hint("check the target's URL with 'baton target list'"),
        );
    }
    let newest_generation = state.generation;
    let first = match max {
        Some(max) => newest_generation.saturating_sub(max as u64) + 1,
        None => 1,
    };
    let mut generations = Vec::new();
    let mut start = first;
    while start <= newest_generation {
        let end = (start + GENERATIONS_PER_BATCH - 1).min(newest_generation);
        let paths: Vec<String> = (start..=end)
            .map(|n| layout::generation_path(&RefName::Current, n))
            .collect();
        let items: Vec<(Kind, String)> = (start..=end)
            .map(|n| (Kind::Generation(RefName::Current), generation_name(n)))
            .collect();
        let (read, _) = remote.read_and_list(&items, &[], 64 << 10)?;
        for (path, bytes) in paths.iter().zip(read) {
            // A generation pruned by hand is a move no longer on record.
            if let Some(bytes) = bytes {
                let at = format!("{path} at {}", remote.describe());
                generations.push(decode_generation(&RefName::Current, &at, &bytes)?);
            }
        }
        start = end + 1;
    }
    // An old or hand-made store without a log: its generations are the record.
    let (mut read, _) = remote.read_and_list(&[(Kind::Log, String::new())], &[], MAX_REMOTE_LOG)?;
    let log = match read.pop().flatten() {
        Some(bytes) => decode_log(&bytes).map_err(|e| Error {
            message: format!("remote log at {}: {}", remote.describe(), e.message),
            ..e
        })?,
        None => Vec::new(),
    };
    Ok(newest(merge_audit(newest(log, max), generations), max))
}
