//! The sync failures callers decide on, typed: found with `Error::reason`, never by
//! reading a message.

use baton_error::{Error, ErrorKind};
use baton_format::ObjectId;

/// A sync failure a caller tells apart from the others. Each becomes a
/// `baton_error::Error` (`into_error`) (its text the message, kind and hint per variant) and stays in
/// that error's chain as its source.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A ref generation that was listed or probed was gone when read: a publisher may
    /// have raced with the look (worth another look), or the remote store is damaged.
    #[error("remote ref file {path} vanished while reading {remote}")]
    RefVanished { path: String, remote: String },
    /// An import found an object that neither the archive nor this store holds: the
    /// archive is incomplete (its own hint says so), not damaged.
    #[error("{what} object {id} of bundle {bundle} is neither in the archive nor in this store")]
    NotInArchive {
        what: String,
        id: ObjectId,
        bundle: ObjectId,
    },
}

impl SyncError {
    /// This failure as baton's error. A method, not `From`: a second `From` impl into
    /// `Error` would leave every `?` in a closure without a written error type ambiguous.
    pub fn into_error(self) -> Error {
        let reason = self;
        match reason {
            SyncError::RefVanished { .. } => Error::from_reason(ErrorKind::Integrity, reason),
            SyncError::NotInArchive { .. } => Error::from_reason(ErrorKind::Integrity, reason)
                .with_hint("nothing was imported; the archive is incomplete"),
        }
    }

    /// The typed reason of `e`, if it has one of this crate's.
    pub fn of(e: &Error) -> Option<&SyncError> {
        e.reason::<SyncError>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_go_by_variant_not_by_message() {
        let vanished = SyncError::RefVanished {
            path: "refs/current/0000000000000003".into(),
            remote: "ssh://h/s".into(),
        }
        .into_error();
        assert_eq!(
            vanished.message,
            "remote ref file refs/current/0000000000000003 vanished while reading ssh://h/s"
        );
        assert_eq!(vanished.kind, ErrorKind::Integrity);
        // Reworded, or said in a wider context: still the same failure.
        let mut reworded = vanished.context("remote store ssh://h/s");
        reworded.message = "the ref went away".into();
        assert!(matches!(
            SyncError::of(&reworded),
            Some(SyncError::RefVanished { .. })
        ));
        // The old text, but not the failure: no decision on it.
        let lookalike = Error::integrity("remote ref file x vanished while reading y");
        assert!(SyncError::of(&lookalike).is_none());
    }
}
