//! The transport failures callers decide on, typed: found with `Error::reason`, never by
//! reading a message.

use baton_error::{Error, ErrorKind};

/// A transport failure a caller tells apart from the others (a missing bucket is not a
/// missing key). Each becomes a `baton_error::Error` (`into_error`) with its kind and hint, and stays in
/// that error's chain as its source; the underlying object_store or libssh2 error follows.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// An S3 target's bucket does not exist: S3 answers 404 as for a missing key, and
    /// that is an error, never an absent item.
    #[error("no such bucket for {place}")]
    NoSuchBucket {
        place: String,
        #[source]
        source: object_store::Error,
    },
    /// A key that is not there (S3's 404).
    #[error("{key} not found at {place}")]
    NotFound {
        key: String,
        place: String,
        #[source]
        source: object_store::Error,
    },
    /// libssh2 failed: its error code, the part the message (which quotes libssh2's text)
    /// leaves out.
    #[error("libssh2 error {code}")]
    Ssh { code: ssh2::ErrorCode },
}

impl From<ssh2::Error> for TransportError {
    fn from(e: ssh2::Error) -> Self {
        TransportError::Ssh { code: e.code() }
    }
}

impl TransportError {
    /// This failure as baton's error. A method, not `From`: a second `From` impl into
    /// `Error` would leave every `?` in a closure without a written error type ambiguous.
    pub fn into_error(self) -> Error {
        let reason = self;
        match reason {
            TransportError::NoSuchBucket { .. } => Error::from_reason(ErrorKind::NotFound, reason)
                .with_hint("create the bucket, or check the target URL and its endpoint (--endpoint, AWS_ENDPOINT_URL)"),
            TransportError::NotFound { .. } => Error::from_reason(ErrorKind::NotFound, reason),
            TransportError::Ssh { .. } => Error::from_reason(ErrorKind::Transport, reason),
        }
    }

    /// Whether `e` is (or was caused by) a missing bucket.
    pub fn is_no_such_bucket(e: &Error) -> bool {
        matches!(
            e.reason::<TransportError>(),
            Some(TransportError::NoSuchBucket { .. })
        )
    }
}
