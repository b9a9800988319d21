//! The error type shared by every layer, and the stable exit codes it maps to.

use std::fmt;
use std::path::Path;

/// Stable classes of failure. Each has a fixed exit code and a fixed JSON `code` string;
/// scripts depend on both, so they never change meaning (see `docs/exit-codes.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Other,
    /// A bug in baton: an invariant failed (reported, never expected).
    Internal,
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
            ErrorKind::Other | ErrorKind::Unsupported | ErrorKind::Internal => 1,
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
            ErrorKind::Internal => "internal",
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

/// What each exit code means, in the order `baton --help` and docs/exit-codes.md list
/// them: the one table both are made from (a unit test checks the doc against it).
pub const EXIT_MEANINGS: [(i32, &str); 8] = [
    (0, "ok"),
    (1, "other failure (or an internal error: a bug in baton)"),
    (2, "usage error (bad arguments or bad input)"),
    (
        3,
        "not found (store, revision, path, target), or an ambiguous revision",
    ),
    (
        4,
        "integrity failure (corrupt or missing object, damaged ref or log)",
    ),
    (
        5,
        "store_conflict (a ref moved under us, or different bytes under one name)",
    ),
    (
        6,
        "refused for security (host key, authentication, permissions, secrets)",
    ),
    (7, "transport failure"),
];

impl ErrorKind {
    /// Every kind, for tables and tests.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::Other,
        ErrorKind::Internal,
        ErrorKind::Unsupported,
        ErrorKind::Usage,
        ErrorKind::NotFound,
        ErrorKind::Ambiguous,
        ErrorKind::Integrity,
        ErrorKind::StoreConflict,
        ErrorKind::Security,
        ErrorKind::Transport,
    ];
}

/// The exit-code table `baton --help` prints after the commands.
pub fn exit_codes_help() -> String {
    let mut text = String::from("Exit codes:\n");
    for (code, meaning) in EXIT_MEANINGS {
        text.push_str(&format!("  {code}  {meaning}\n"));
    }
    text.push_str(
        "\nWith --json every command prints one JSON document on stdout, errors included:\n\
         {\"ok\":false,\"error\":{\"code\":\"not_found\",\"exit_code\":3,\"message\":...,\"hint\":...,\"causes\":[...]}}\n\
         --verbose prints an error's causes under it, one 'caused by:' line each.",
    );
    text
}

/// One failure: what went wrong (`message`), when we know it what to do (`hint`), and the
/// lower-level error that caused it (`source`, for `std::error::Error::source` chains).
#[derive(Debug)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub hint: Option<String>,
    pub source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How deep a cause chain is followed (a chain is a few links; this only bounds a cycle
/// a hand-written `source` could make).
const MAX_CAUSES: usize = 32;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            hint: None,
            source: None,
        }
    }

    /// Keep `source` as the cause of this error.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(std::sync::Arc::new(source));
        self
    }

    /// A failure a caller may decide on, from a crate's typed error: its text is the
    /// message and the value is kept as the source, where [`Error::reason`] finds it.
    pub fn from_reason(
        kind: ErrorKind,
        reason: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::new(kind, reason.to_string()).with_source(reason)
    }

    /// The first cause of type `T` in this error's chain: the typed reason callers decide
    /// on with `matches!`, whatever the message says (and however it is reworded).
    pub fn reason<T: std::error::Error + 'static>(&self) -> Option<&T> {
        let mut next = std::error::Error::source(self);
        for _ in 0..MAX_CAUSES {
            let cause = next?;
            if let Some(found) = cause.downcast_ref::<T>() {
                return Some(found);
            }
            next = cause.source();
        }
        None
    }

    /// The causes of this error as `--verbose` and `--json` show them, outermost first:
    /// each on one line and once, and none whose text the message or hint already says
    /// (most sites fold the cause into the message; the chain then adds only what the
    /// message left out, such as the layers between a request and a refused connection).
    pub fn causes(&self) -> Vec<String> {
        let said = self.to_string();
        let mut causes: Vec<String> = Vec::new();
        let mut next = std::error::Error::source(self);
        for _ in 0..MAX_CAUSES {
            let Some(cause) = next else { break };
            // A baton error further down (one rewrapped under a wider context): its
            // message, since its hint is this error's hint too.
            let text = match cause.downcast_ref::<Error>() {
                Some(inner) => inner.message.clone(),
                None => cause.to_string(),
            };
            let text = text.replace(['\n', '\r'], " ").trim().to_string();
            if !text.is_empty()
                && !said.contains(&text)
                && !causes.iter().any(|c| c.contains(&text))
            {
                causes.push(text);
            }
            next = cause.source();
        }
        causes
    }

    /// The same failure said in a wider context: `what: message`, kind, hint and source kept.
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// This failure as a cause of another kind, said in a wider context: `what: message`,
    /// the original kept whole as the source (its chain and typed reasons with it), its
    /// hint dropped (e.g. a decode error of received bytes read as damage to them).
    pub fn recast(self, kind: ErrorKind, what: impl fmt::Display) -> Self {
        Error::new(kind, format!("{what}: {}", self.message)).with_source(self)
    }

    /// A copy of `inner` (found inside an `io::Error`) under a wider context.
    pub fn rewrapped(inner: &Error, what: impl fmt::Display) -> Self {
        Error {
            kind: inner.kind,
            message: format!("{what}: {}", inner.message),
            hint: inner.hint.clone(),
            source: inner.source.clone(),
        }
    }

    /// An invariant failed: a bug in baton, reported as such instead of guessed around.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            ErrorKind::Internal,
            format!("internal error: {}", message.into()),
        )
        .with_hint("this is a bug in baton: please report it with the command that hit it")
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
        let message = format!("{context} {}: {err}", path.display());
        let error_kind = err.kind();
        let error = Error::new(kind, message).with_source(err);
        match error_kind {
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

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Attach file context to an `io::Result`, turning it into a baton `Error`.
pub trait IoContext<T> {
    fn ctx(self, context: &str, path: &Path) -> Result<T>;
    /// For a file inside the store that the store itself located or listed: it vanishing
    /// is damage (integrity, exit 4), not a user's missing path (exit 3).
    fn ctx_in_store(self, context: &str, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, context: &str, path: &Path) -> Result<T> {
        self.map_err(|e| Error::io(context, path, e))
    }
    fn ctx_in_store(self, context: &str, path: &Path) -> Result<T> {
        self.map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::integrity(format!("{context} {}: it vanished from the store", path.display()))
                    .with_source(e)
                    .with_hint("run 'baton verify'; 'baton pull --repair' refetches damaged objects from a target")
            } else {
                Error::io(context, path, e)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_doc_matches_the_table() {
        let doc = include_str!("../../../docs/exit-codes.md");
        for kind in ErrorKind::ALL {
            let row = doc
                .lines()
                .find(|l| l.starts_with(&format!("| {} |", kind.exit_code())))
                .unwrap_or_else(|| {
                    panic!(
                        "docs/exit-codes.md has no row for exit {}",
                        kind.exit_code()
                    )
                });
            assert!(
                row.contains(&format!("`{}`", kind.code())),
                "the row for exit {} does not name `{}`: {row}",
                kind.exit_code(),
                kind.code()
            );
        }
        for (code, _) in EXIT_MEANINGS {
            assert!(
                doc.contains(&format!("| {code} |")),
                "no row for exit {code}"
            );
        }
        let help = exit_codes_help();
        for (code, meaning) in EXIT_MEANINGS {
            assert!(help.contains(&format!("  {code}  {meaning}")));
        }
    }

    #[test]
    fn io_errors_keep_their_cause_and_store_files_that_vanish_are_damage() {
        use std::error::Error as _;
        let missing = std::fs::read("/nonexistent/baton-test").ctx("cannot read", Path::new("/x"));
        let e = missing.unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert!(e.source().is_some());
        let vanished = std::fs::read("/nonexistent/baton-test")
            .ctx_in_store("cannot read object", Path::new("/s/objects/ab/cd"));
        let e = vanished.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Integrity);
        assert!(e.message.contains("vanished"), "{}", e.message);
        let internal = Error::internal("x");
        assert_eq!(internal.kind.code(), "internal");
        assert_eq!(internal.kind.exit_code(), 1);
    }

    /// A typed reason, as a crate's thiserror enum would be.
    #[derive(Debug)]
    enum Reason {
        Gone { what: String },
        Io(std::io::Error),
    }

    impl fmt::Display for Reason {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Reason::Gone { what } => write!(f, "{what} vanished"),
                Reason::Io(e) => write!(f, "{e}"),
            }
        }
    }

    impl std::error::Error for Reason {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            match self {
                Reason::Gone { .. } => None,
                Reason::Io(e) => Some(e),
            }
        }
    }

    #[test]
    fn the_reason_is_found_by_type_whatever_the_message_says() {
        let e = Error::from_reason(ErrorKind::Integrity, Reason::Gone { what: "x".into() });
        assert_eq!(e.message, "x vanished");
        // Reworded and put in a wider context twice: the decision does not change.
        let mut e = e.context("reading the remote").context("pull");
        e.message = "something else entirely".into();
        let wrapped = Error::rewrapped(&e, "outer");
        for e in [&e, &wrapped] {
            assert!(matches!(e.reason::<Reason>(), Some(Reason::Gone { .. })));
            assert!(e.reason::<std::io::Error>().is_none());
        }
        assert!(Error::other("x vanished").reason::<Reason>().is_none());
    }

    #[test]
    fn causes_are_each_shown_once_and_never_repeat_the_message() {
        let io = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        // Folded into the message: the chain adds nothing.
        let folded = Error::other(format!("cannot connect: {}", io())).with_source(io());
        assert_eq!(folded.causes(), Vec::<String>::new());
        // Not folded: the cause is shown, once, under a reason whose text is the message.
        let reason = Error::from_reason(ErrorKind::Transport, Reason::Io(io()));
        assert_eq!(reason.causes(), Vec::<String>::new());
        let outer = Error::other("push failed").with_source(Reason::Io(io()));
        assert_eq!(outer.causes(), vec!["refused".to_string()]);
        let inner = Error::other("request failed\nbadly").with_source(io());
        let twice = Error::new(ErrorKind::Transport, "push failed")
            .with_hint("try again")
            .with_source(inner);
        assert_eq!(twice.causes(), vec!["request failed badly", "refused"]);
        assert_eq!(Error::other("plain").causes(), Vec::<String>::new());
    }
}
