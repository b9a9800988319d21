//! The store failures callers decide on, typed: found with `Error::reason`, never by
//! reading a message or by a coarse `ErrorKind`.

use baton_error::{Error, ErrorKind};
use baton_format::ObjectId;

/// A store failure a caller tells apart from the others. Each becomes a
/// `baton_error::Error` (`into_error`) whose message is its text and whose source it is.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A path asked for in a bundle's tree is not there (the tree itself was read fine):
    /// an answer, not damage.
    #[error("path '{path}' is not in the bundle{why}")]
    NoSuchPath { path: String, why: String },
    /// An object a bundle or tree names is in neither the loose objects nor a pack:
    /// damage (or a parent this store was never given), never "absent".
    #[error("object {id} is missing from the store")]
    MissingObject { id: ObjectId },
}

impl StoreError {
    /// This failure as baton's error (a method, not `From`, for the reason
    /// `SyncError::into_error` gives).
    pub fn into_error(self) -> Error {
        match self {
            StoreError::NoSuchPath { .. } => Error::from_reason(ErrorKind::NotFound, self),
            StoreError::MissingObject { .. } => Error::from_reason(ErrorKind::Integrity, self)
                .with_hint(
                    "run 'baton verify', then 'baton pull --repair [TARGET]' to refetch it from a target",
                ),
        }
    }

    /// The typed reason of `e`, if it has one of this crate's.
    pub fn of(e: &Error) -> Option<&StoreError> {
        e.reason::<StoreError>()
    }

    /// Whether `e` says a path is not in a bundle (and nothing worse).
    pub fn is_no_such_path(e: &Error) -> bool {
        matches!(Self::of(e), Some(StoreError::NoSuchPath { .. }))
    }

    /// Whether `e` says an object is missing from the store.
    pub fn is_missing_object(e: &Error) -> bool {
        matches!(Self::of(e), Some(StoreError::MissingObject { .. }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_go_by_variant_not_by_kind_or_message() {
        let absent = StoreError::NoSuchPath {
            path: "handoff.md".into(),
            why: String::new(),
        }
        .into_error();
        assert_eq!(absent.message, "path 'handoff.md' is not in the bundle");
        assert_eq!(absent.kind, ErrorKind::NotFound);
        let absent = absent.context("reading current");
        assert!(StoreError::is_no_such_path(&absent));
        assert!(!StoreError::is_missing_object(&absent));

        let id = ObjectId::of(b"x");
        let missing = StoreError::MissingObject { id }.into_error();
        assert_eq!(missing.kind, ErrorKind::Integrity);
        assert!(StoreError::is_missing_object(&missing));
        // A NotFound of another origin (a revision, a target) is no absent path.
        let other = Error::not_found("no such revision 'x'");
        assert!(!StoreError::is_no_such_path(&other));
    }
}
