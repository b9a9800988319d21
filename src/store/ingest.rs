//! Receiving history from elsewhere (pull, clone, archive import; object storage next):
//! the one rule for moving a ref onto what arrived, once it is complete and verified.
//!
//! Objects themselves arrive verified by their hash as they stream (`sync::pack_stream`,
//! `archive::import`) and are checked for completeness and shape by `store::receive`;
//! what every receiver then does the same way is decide how the local ref relates to
//! theirs and move it by compare-and-swap, which is `fast_forward`.

use serde::Serialize;

use super::Store;
use super::refs::{Expect, MoveReason};
use crate::error::{Error, Result};
use crate::format::ObjectId;
use crate::format::names::RefName;

/// How a local ref related to the received tip, and what `fast_forward` did about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Forward {
    /// The ref was empty: it now names theirs.
    Initial,
    /// Theirs descends from ours: the ref moved to theirs.
    FastForward,
    /// The ref already named theirs.
    UpToDate,
    /// Ours descends from theirs: nothing to do.
    LocalAhead,
}

impl Forward {
    /// The word reports carry (`outcome` in pull, clone and import reports).
    pub fn as_str(self) -> &'static str {
        match self {
            Forward::Initial => "initial",
            Forward::FastForward => "fast-forward",
            Forward::UpToDate => "up-to-date",
            Forward::LocalAhead => "local-ahead",
        }
    }
}

/// Move `name` to `theirs` if that is a fast-forward (or the ref is empty), under the
/// store lock and by compare-and-swap; `diverged(ours)` makes the error when neither
/// side descends from the other (callers say where theirs came from and what to do).
/// Returns what the ref was before and how it related.
pub fn fast_forward(
    store: &Store,
    name: &RefName,
    theirs: ObjectId,
    reason: &MoveReason,
    diverged: impl FnOnce(ObjectId) -> Error,
) -> Result<(Option<ObjectId>, Forward)> {
    let lock = store.lock()?;
    let ours = store.read_ref(name)?;
    let forward = match ours {
        None => Forward::Initial,
        Some(o) if o == theirs => Forward::UpToDate,
        Some(o) if store.is_ancestor(&theirs, &o)? => Forward::LocalAhead,
        Some(o) if store.is_ancestor(&o, &theirs)? => Forward::FastForward,
        Some(o) => return Err(diverged(o)),
    };
    if matches!(forward, Forward::Initial | Forward::FastForward) {
        store.update_ref_locked(&lock, name, Expect::Value(ours), Some(theirs), reason)?;
    }
    Ok((ours, forward))
}
