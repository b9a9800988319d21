//! The error type shared by every layer, and the stable exit codes it maps to.

use std::fmt;
use std::path::Path;

/// Stable classes of failure. Each has a fixed exit code and a fixed JSON `code` string;
/// scripts depend on both, so they never change meaning (see `docs/exit-codes.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Other,
    Unsupported,
    Usage,
    NotFound,
    Ambiguous,
    Integrity,
    StoreConflict,
    Security,
    Transport,
}

impl ErrorKind {
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Other | ErrorKind::Unsupported => 1,
            ErrorKind::Usage => 2,
            ErrorKind::NotFound | ErrorKind::Ambiguous => 3,
            ErrorKind::Integrity => 4,
            ErrorKind::StoreConflict => 5,
            ErrorKind::Security => 6,
            ErrorKind::Transport => 7,
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::Other => "other",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Usage => "usage",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Ambiguous => "ambiguous",
            ErrorKind::Integrity => "integrity",
            ErrorKind::StoreConflict => "store_conflict",
            ErrorKind::Security => "security",
            ErrorKind::Transport => "transport",
        }
    }
}

/// One failure: what went wrong (`message`) and, when we know it, what to do (`hint`).
#[derive(Debug)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub hint: Option<String>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn other(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Other, message)
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }
    pub fn integrity(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Integrity, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::StoreConflict, message)
    }

    /// An I/O failure on `path`, classified so that a missing file reads as `not_found`
    /// and a permission problem as `security`.
    pub fn io(context: &str, path: &Path, err: std::io::Error) -> Self {
        let kind = match err.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::PermissionDenied => ErrorKind::Security,
            _ => ErrorKind::Other,
        };
        let error = Error::new(kind, format!("{context} {}: {err}", path.display()));
        match err.kind() {
            std::io::ErrorKind::NotFound => error.with_hint("check that the path exists"),
            std::io::ErrorKind::PermissionDenied => {
                error.with_hint("check the permissions of the path for the user running baton")
            }
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                error.with_hint("free some disk space and run the command again")
            }
            _ => error,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Attach file context to an `io::Result`, turning it into a baton `Error`.
pub trait IoContext<T> {
    fn ctx(self, context: &str, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, context: &str, path: &Path) -> Result<T> {
        self.map_err(|e| Error::io(context, path, e))
    }
}
