//! The target hint kept per target (SPEC §5.2): the remote generation, bundle and packs
//! the last push or pull saw, read by the next push to save its round trips and by pull
//! to know which packs it holds already.

use baton_format::ObjectId;
use baton_store::Store;
use baton_store::target_hints::{self, Hint};

/// The URL of a configured target (hints are kept per target and URL).
pub(super) fn target_url(store: &Store, target: &str) -> Option<String> {
    store.config.targets.get(target).map(|t| t.url.clone())
}

/// What a sync learnt of the remote's packs, for the hint's `packs`.
pub(super) enum Packs<'a> {
    /// Nothing: keep the list as it was.
    Keep,
    /// A pack this push published (or found already there).
    Pushed(ObjectId),
    /// Every pack the remote listed (`listed`) and those of them this store holds the
    /// objects of (`held`: received, or found held by their index).
    Listed {
        listed: &'a [ObjectId],
        held: &'a [ObjectId],
    },
}

/// The packs of the remote `target` that this store holds the objects of, as the last
/// sync with it saw them (only a hint, see `Hint::packs`).
pub(super) fn held_packs(store: &Store, target: &str) -> Vec<ObjectId> {
    target_url(store, target)
        .and_then(|url| target_hints::get(store, target, &url))
        .map(|h| h.packs)
        .unwrap_or_default()
}

/// Remember what a sync saw of `target`'s remote: generation `generation` naming
/// `current` (`None`, or generation 0: nothing to remember), and its `packs`. Best
/// effort: the sync is done, and a missing hint only costs round trips next time.
pub(super) fn remember(
    store: &Store,
    target: &str,
    generation: u64,
    current: Option<ObjectId>,
    packs: Packs,
) {
    let Some(url) = target_url(store, target) else {
        return;
    };
    let mut known = held_packs(store, target);
    match packs {
        Packs::Keep => {}
        Packs::Pushed(id) => {
            known.retain(|p| *p != id);
            known.push(id);
        }
        Packs::Listed { listed, held } => {
            known.retain(|p| listed.contains(p) && !held.contains(p));
            known.extend(held.iter().copied());
        }
    }
    let excess = known.len().saturating_sub(target_hints::MAX_PACKS);
    known.drain(..excess);
    let hint = current.filter(|_| generation > 0).map(|current| Hint {
        url,
        generation,
        current,
        packs: known,
    });
    let _ = target_hints::record(store, target, hint);
}
