//! Archives: bundles and their objects written to, and read back from, one tar file.
//!
//! Format and checks: docs/archives.md. Export copies each object's stored bytes (its
//! zstd frame) verified, into a temp file beside the destination that is renamed into
//! place at the end. Import reads the tar as a stream into a private staging directory
//! inside the store, checks every entry, every object hash, every manifest and tree and
//! the completeness of the history, and only then publishes objects and fast-forwards
//! `current` by compare-and-swap (the same order as a pull).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

mod checks;
mod export;
mod import;

pub use export::export;
pub use import::import;

use baton_error::{Error, IoContext, Result};
use baton_format::names::RefName;
use baton_format::{Bundle, LogEntry, MAX_METADATA_OBJECT, ObjectId};
use baton_store::receive::{Incoming, TreeCheck};
use baton_store::refs::MoveReason;
use baton_store::tree_limits::{MAX_TREE_DEPTH, too_deep};
use baton_store::{Store, fsutil};

/// The first entry of every archive.
pub const MANIFEST_NAME: &str = "baton-archive.json";
/// The store's log, in archives made with `--history`.
pub const LOG_NAME: &str = "log";
pub const FORMAT: &str = "baton-archive";
pub const VERSION: u64 = 1;

/// Default bound on an object's expansion: its content may be at most this many times
/// its stored size (or `MIN_OBJECT_BOUND`, whichever is larger).
pub const DEFAULT_MAX_EXPANSION: u64 = 1024;
/// Every object may expand to this much, whatever its stored size.
pub const MIN_OBJECT_BOUND: u64 = 64 << 20;
/// The whole archive may expand to this much, whatever its size.
pub const MIN_TOTAL_BOUND: u64 = 1 << 30;
/// Largest `baton-archive.json` and `log` entries accepted.
pub(super) const MAX_MANIFEST: u64 = 16 << 20;
pub(super) const MAX_LOG: u64 = 256 << 20;
pub(super) const BLOCK: u64 = 512;

/// The `baton-archive.json` entry.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveManifest {
    pub format: String,
    pub version: u64,
    pub bundles: Vec<String>,
    pub history: bool,
    pub current: String,
}

#[derive(Debug, Default, Serialize)]
pub struct ExportReport {
    pub file: PathBuf,
    pub bundles: Vec<ObjectId>,
    pub current: Option<ObjectId>,
    pub history: bool,
    pub objects: u64,
    /// Stored (compressed) bytes of the objects.
    pub object_bytes: u64,
    /// Size of the archive file.
    pub bytes: u64,
    pub log_bytes: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct ImportReport {
    pub file: PathBuf,
    pub bundles: Vec<ObjectId>,
    pub history: bool,
    pub archive_current: Option<ObjectId>,
    pub current_before: Option<ObjectId>,
    pub current_after: Option<ObjectId>,
    /// `initial`, `fast-forward`, `up-to-date`, `local-ahead`.
    pub outcome: String,
    /// Objects in the archive.
    pub objects: u64,
    /// Objects this store lacked and now holds.
    pub objects_published: u64,
    /// Stored bytes of the objects published.
    pub bytes_published: u64,
    /// Lines of the archive's log (checked, not merged into this store's log).
    pub log_lines: u64,
}

/// An object received from the archive, verified, waiting in staging.
pub(super) struct Staged {
    pub(super) path: tempfile::TempPath,
    pub(super) stored_hash: blake3::Hash,
    pub(super) stored_len: u64,
    pub(super) content_len: u64,
}

/// Everything read from the archive, before anything is published.
pub(super) struct Received {
    pub(super) manifest: ArchiveManifest,
    pub(super) staged: BTreeMap<ObjectId, Staged>,
    pub(super) log_lines: u64,
}

/// A malformed archive: its structure is not that of a baton archive (exit 2).
pub(super) fn malformed(file: &Path, why: impl std::fmt::Display) -> Error {
    Error::usage(format!(
        "{} is not a valid baton archive: {why}",
        file.display()
    ))
    .with_hint("nothing was imported; export it again with 'baton export'")
}
