//! The git-history cache: what the last handoffs of each work tree recorded of HEAD, kept
//! in the `statcache` file (store-format/SPEC.md 5.1) so that the next handoff's evidence
//! need not ask git to walk the whole history again.

use serde::{Deserialize, Serialize};

use crate::Store;
use crate::statcache::{Contents, read};

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

/// The histories remembered, most recent first (whatever the secret policy: they hold
/// commit ids only); none for an encrypted store, which keeps no plaintext cache.
pub fn histories(store: &Store) -> Vec<History> {
    read(store).map(|c| c.histories).unwrap_or_default()
}

/// Put `history` first in `contents`, replacing that of the same work tree.
pub(crate) fn remember(contents: &mut Contents, history: History) {
    contents.histories.retain(|h| h.root != history.root);
    contents.histories.insert(0, history);
    contents.histories.truncate(MAX_HISTORIES);
}
