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
use std::fs::{self, File};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::remote_store::STALE_STAGING_SECS;
use crate::error::{Error, IoContext, Result};
use crate::format::names::RefName;
use crate::format::{Bundle, LogEntry, MAX_METADATA_OBJECT, ObjectId};
use crate::store::receive::{Incoming, TreeCheck};
use crate::store::refs::{Expect, MoveReason};
use crate::store::shape::{MAX_TREE_DEPTH, too_deep};
use crate::store::{Store, fsutil};

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
const MAX_MANIFEST: u64 = 16 << 20;
const MAX_LOG: u64 = 256 << 20;
const BLOCK: u64 = 512;

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

// ---------------------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------------------

/// Write `bundles` (the first is the archive's `current`) and everything below their
/// trees, plus with `history` every ancestor and the log, to the tar file `dest`.
pub fn export(
    store: &Store,
    bundles: &[ObjectId],
    history: bool,
    dest: &Path,
) -> Result<ExportReport> {
    let mut listed = Vec::new();
    for id in bundles {
        if !listed.contains(id) {
            listed.push(*id);
        }
    }
    let Some(current) = listed.first().copied() else {
        return Err(Error::usage("nothing to export: no revision given"));
    };
    let reach = if history {
        store.reachable(&listed)?
    } else {
        let mut reach = store.below(&listed)?;
        reach.objects.extend(listed.iter().copied());
        reach
    };
    // An archive that import would refuse is not written.
    if let Some((tree, depth)) = reach.deepest
        && depth > MAX_TREE_DEPTH
    {
        return Err(too_deep(&tree));
    }
    let objects: BTreeSet<ObjectId> = reach.objects.into_iter().collect();
    let log = if history {
        let path = store.root().join("log");
        let mut bytes = fsutil::read_limited(&path, MAX_LOG)?;
        // Only committed lines: a torn last line is an append that never happened.
        let committed = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(committed);
        Some(bytes)
    } else {
        None
    };
    let manifest = ArchiveManifest {
        format: FORMAT.into(),
        version: VERSION,
        bundles: listed.iter().map(|i| i.to_hex()).collect(),
        history,
        current: current.to_hex(),
    };
    let manifest_bytes = serde_json::to_vec(&manifest)
        .map_err(|e| Error::other(format!("cannot encode the archive manifest: {e}")))?;

    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let temp = tempfile::Builder::new()
        .prefix(".baton-export-")
        .tempfile_in(&parent)
        .ctx("cannot create a temp file in", &parent)?;
    let mut spool = tempfile::tempfile_in(&parent).ctx("cannot create a temp file in", &parent)?;
    let mut builder = tar::Builder::new(io::BufWriter::new(temp));
    let mut report = ExportReport {
        file: dest.to_path_buf(),
        bundles: listed.clone(),
        current: Some(current),
        history,
        ..ExportReport::default()
    };
    let werr = |e: io::Error| Error::io("cannot write", dest, e);
    builder
        .append(
            &header(MANIFEST_NAME, manifest_bytes.len() as u64)?,
            &manifest_bytes[..],
        )
        .map_err(werr)?;
    for id in &objects {
        // Each object's stored bytes, checked on the way through, spooled so that the
        // header can carry their length.
        spool.set_len(0).map_err(werr)?;
        spool.seek(SeekFrom::Start(0)).map_err(werr)?;
        let len = {
            let mut sink = io::BufWriter::new(&mut spool);
            let len = store.objects.copy_stored_verified(id, &mut sink)?;
            sink.flush().map_err(werr)?;
            len
        };
        spool.seek(SeekFrom::Start(0)).map_err(werr)?;
        // The storage name: in an encrypted store the archive, like the store, does not
        // reveal which known files it holds.
        let name = format!("objects/{}", store.objects.name_of(id));
        builder
            .append(&header(&name, len)?, (&mut spool).take(len))
            .map_err(werr)?;
        report.objects += 1;
        report.object_bytes += len;
    }
    if let Some(log) = &log {
        builder
            .append(&header(LOG_NAME, log.len() as u64)?, &log[..])
            .map_err(werr)?;
        report.log_bytes = log.len() as u64;
    }
    let temp = builder
        .into_inner()
        .map_err(werr)?
        .into_inner()
        .map_err(|e| werr(e.into_error()))?;
    temp.as_file().sync_all().map_err(werr)?;
    report.bytes = temp.as_file().metadata().map_err(werr)?.len();
    temp.persist(dest)
        .map_err(|e| Error::io("cannot rename into", dest, e.error))?;
    fsutil::fsync_dir(&parent)?;
    Ok(report)
}

/// A regular-file header: fixed mode 0600, owner 0, mtime 0, so that the same objects
/// always give the same archive.
fn header(name: &str, size: u64) -> Result<tar::Header> {
    let mut header = tar::Header::new_ustar();
    header
        .set_path(name)
        .map_err(|e| Error::other(format!("cannot name archive entry {name}: {e}")))?;
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(0o600);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header.set_cksum();
    Ok(header)
}

// ---------------------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------------------

/// An object received from the archive, verified, waiting in staging.
struct Staged {
    path: tempfile::TempPath,
    stored_hash: blake3::Hash,
    stored_len: u64,
    content_len: u64,
}

/// Everything read from the archive, before anything is published.
struct Received {
    manifest: ArchiveManifest,
    staged: BTreeMap<ObjectId, Staged>,
    log_lines: u64,
}

/// A malformed archive: its structure is not that of a baton archive (exit 2).
fn malformed(file: &Path, why: impl std::fmt::Display) -> Error {
    Error::usage(format!(
        "{} is not a valid baton archive: {why}",
        file.display()
    ))
    .with_hint("nothing was imported; export it again with 'baton export'")
}

/// Import the archive `file`: verify everything, publish the objects, then fast-forward
/// `current` to the archive's. `max_expansion` bounds decompression (docs/archives.md).
pub fn import(store: &Store, file: &Path, max_expansion: Option<u64>) -> Result<ImportReport> {
    let ratio = max_expansion.unwrap_or(DEFAULT_MAX_EXPANSION).max(1);
    let staging_root = store.root().join("staging");
    fsutil::ensure_private_dir(&staging_root)?;
    clean_stale_imports(&staging_root);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // Removed when dropped: on success, on every error, on a panic.
    let stage = fsutil::private_temp_dir_in(
        &staging_root,
        &format!("import-{}-{nanos}-", std::process::id()),
    )?;

    let received = receive(store, file, stage.path(), ratio)?;
    let (bundles, current) = check_manifest(file, &received)?;
    check_reachable(store, &received, &bundles)?;

    let mut report = ImportReport {
        file: file.to_path_buf(),
        bundles: bundles.clone(),
        history: received.manifest.history,
        archive_current: Some(current),
        objects: received.staged.len() as u64,
        log_lines: received.log_lines,
        ..ImportReport::default()
    };
    publish(store, received.staged, &mut report)?;
    drop(stage);

    let lock = store.lock()?;
    let ours = store.read_ref(&RefName::Current)?;
    report.current_before = ours;
    report.current_after = ours;
    let fast_forward = match ours {
        None => true,
        Some(o) if o == current => {
            report.outcome = "up-to-date".into();
            false
        }
        Some(o) if store.is_ancestor(&current, &o)? => {
            report.outcome = "local-ahead".into();
            false
        }
        Some(o) if store.is_ancestor(&o, &current)? => true,
        Some(o) => {
            return Err(Error::conflict(format!(
                "history diverged: local current is {o}, the archive's current is {current}"
            ))
            .with_hint(format!(
                "the archive's objects were imported but no ref names them; inspect it with 'baton log {current}'"
            )));
        }
    };
    if fast_forward {
        let reason = MoveReason {
            action: "import".into(),
            from: file.display().to_string(),
            to: String::new(),
        };
        store.update_ref_locked(
            &lock,
            &RefName::Current,
            Expect::Value(ours),
            Some(current),
            &reason,
        )?;
        report.current_after = Some(current);
        report.outcome = if ours.is_some() {
            "fast-forward".into()
        } else {
            "initial".into()
        };
    }
    Ok(report)
}

/// Read the whole archive as a stream, staging and verifying every object.
fn receive(store: &Store, file: &Path, stage: &Path, ratio: u64) -> Result<Received> {
    let handle = File::open(file).ctx("cannot open", file)?;
    let file_len = handle.metadata().ctx("cannot stat", file)?.len();
    let padding = Rc::new(Cell::new((0u64, 0u64)));
    let bad_padding = Rc::new(Cell::new(false));
    let mut archive = tar::Archive::new(Counting {
        inner: BufReader::with_capacity(256 << 10, handle),
        count: 0,
        padding: padding.clone(),
        bad_padding: bad_padding.clone(),
    });
    // Set after each entry's data has been read: the tar reader reads its padding only
    // when it moves to the next header.
    let check_padding = |last: &str| {
        if bad_padding.get() {
            return Err(malformed(
                file,
                format!("entry {last} holds more data than its header declares"),
            ));
        }
        Ok(())
    };
    let mut last_name = String::new();
    let mut manifest: Option<(ArchiveManifest, blake3::Hash)> = None;
    let mut log: Option<blake3::Hash> = None;
    let mut log_lines = 0;
    let mut staged: BTreeMap<ObjectId, Staged> = BTreeMap::new();
    // Where the data (with its padding) of the last entry ends.
    let mut data_end = 0u64;
    let mut first = true;
    // Raw: PAX and GNU extension headers are entries of their own, and refused below.
    let entries = archive
        .entries()
        .map_err(|e| malformed(file, tar_error(&e)))?
        .raw(true);
    for entry in entries {
        let mut entry = entry.map_err(|e| {
            let at = if last_name.is_empty() {
                "at the start".to_string()
            } else {
                format!("after entry {last_name}")
            };
            malformed(file, format!("bad tar header {at}: {}", tar_error(&e)))
        })?;
        check_padding(&last_name)?;
        let name_bytes = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&name_bytes).into_owned();
        let shown = name.escape_debug().to_string();
        let kind = entry.header().entry_type();
        if !kind.is_file() {
            return Err(malformed(
                file,
                format!("entry '{shown}' is a {}", describe_kind(kind)),
            ));
        }
        check_name(file, &name_bytes)?;
        let declared = entry.size();
        let data_start = entry.raw_file_position();
        data_end = data_start.saturating_add(declared.div_ceil(BLOCK).saturating_mul(BLOCK));
        padding.set((data_start.saturating_add(declared), data_end));
        last_name = name.clone();
        if first && name != MANIFEST_NAME {
            return Err(malformed(
                file,
                format!("the first entry is '{shown}', not {MANIFEST_NAME}"),
            ));
        }
        first = false;
        if name == MANIFEST_NAME || name == LOG_NAME {
            let limit = if name == LOG_NAME {
                MAX_LOG
            } else {
                MAX_MANIFEST
            };
            if declared > limit {
                return Err(malformed(
                    file,
                    format!("entry {name} is larger than {limit} bytes"),
                ));
            }
            let mut bytes = Vec::with_capacity(declared as usize);
            (&mut entry)
                .take(declared)
                .read_to_end(&mut bytes)
                .map_err(|e| malformed(file, tar_error(&e)))?;
            if bytes.len() as u64 != declared {
                return Err(short_entry(file, &name, bytes.len() as u64, declared));
            }
            let hash = blake3::hash(&bytes);
            let previous = if name == MANIFEST_NAME {
                manifest.as_ref().map(|m| m.1)
            } else {
                log
            };
            match previous {
                Some(h) if h == hash => continue,
                Some(_) => return Err(duplicate(&name)),
                None => {}
            }
            if name == MANIFEST_NAME {
                let parsed: ArchiveManifest = serde_json::from_slice(&bytes)
                    .map_err(|e| malformed(file, format!("{MANIFEST_NAME} does not parse: {e}")))?;
                manifest = Some((parsed, hash));
            } else {
                log_lines = check_log(&bytes)?;
                log = Some(hash);
            }
            continue;
        }
        // objects/<id>: check_name allowed nothing else.
        let id = ObjectId::parse(&name["objects/".len()..]).map_err(|e| malformed(file, e))?;
        let mut temp = fsutil::temp_file_in(stage)?;
        let mut hashing = HashingWriter {
            inner: io::BufWriter::new(temp.as_file_mut()),
            hasher: blake3::Hasher::new(),
        };
        let copied = io::copy(&mut (&mut entry).take(declared), &mut hashing)
            .map_err(|e| malformed(file, tar_error(&e)))?;
        let stored_hash = hashing.hasher.finalize();
        hashing
            .inner
            .flush()
            .map_err(|e| Error::io("cannot write", stage, e))?;
        drop(hashing);
        if copied != declared {
            return Err(short_entry(file, &name, copied, declared));
        }
        if let Some(previous) = staged.get(&id) {
            if previous.stored_hash == stored_hash && previous.stored_len == copied {
                continue;
            }
            return Err(duplicate(&name));
        }
        // Not fsynced yet: `publish` does, once every check has passed, so that a
        // refused archive of 100,000 objects costs no 100,000 fsyncs.
        staged.insert(
            id,
            Staged {
                path: temp.into_temp_path(),
                stored_hash,
                stored_len: copied,
                content_len: 0,
            },
        );
    }
    // The end: at least two zero blocks after the last entry and nothing but zeros after
    // them; otherwise the archive was cut short (perhaps exactly between two entries).
    let mut counting = archive.into_inner();
    let consumed = counting.count;
    let mut rest = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match counting.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("cannot read", file, e)),
        };
        if buf[..n].iter().any(|&b| b != 0) {
            return Err(malformed(file, "data follows the end of the archive"));
        }
        rest += n as u64;
    }
    if consumed + rest < data_end + 2 * BLOCK {
        return Err(malformed(
            file,
            "the archive is truncated (no end-of-archive marker)",
        ));
    }
    check_padding(&last_name)?;
    let Some((manifest, _)) = manifest else {
        return Err(malformed(file, format!("it has no {MANIFEST_NAME}")));
    };
    // The structure is sound; now the content of every object, with bounded expansion.
    let total_bound = MIN_TOTAL_BOUND.max(file_len.saturating_mul(ratio));
    let mut expanded = 0u64;
    // Entries are named by storage name; staged objects are keyed by object id.
    let mut by_id: BTreeMap<ObjectId, Staged> = BTreeMap::new();
    for (id, mut object) in std::mem::take(&mut staged) {
        let id = &id;
        let stored = object.stored_len;
        let object_bound = MIN_OBJECT_BOUND.max(stored.saturating_mul(ratio));
        let left = total_bound.saturating_sub(expanded);
        let mut sink = Bounded {
            limit: object_bound.min(left),
            written: 0,
            overflow: false,
        };
        let reader = File::open(&object.path).ctx("cannot read", &object.path)?;
        let result = store
            .objects
            .decode_named(id, BufReader::new(reader), &mut sink);
        if sink.overflow {
            let what = if object_bound <= left {
                format!(
                    "object {id} expands beyond {object_bound} bytes from {stored} stored bytes"
                )
            } else {
                format!("the archive's objects expand beyond {total_bound} bytes in all")
            };
            return Err(Error::integrity(format!(
                "{what}: refusing a possible decompression bomb"
            ))
            .with_hint(
                "nothing was imported; if the archive is trusted, raise the bound with --max-expansion RATIO",
            ));
        }
        let (actual, content_len) = result.map_err(|e| {
            if e.kind == crate::error::ErrorKind::Security {
                return e;
            }
            Error::integrity(format!("archive entry objects/{id}: {}", e.message))
                .with_hint("nothing was imported; the archive is damaged or forged")
        })?;
        object.content_len = content_len;
        expanded += object.content_len;
        by_id.insert(actual, object);
    }
    let staged = by_id;
    Ok(Received {
        manifest,
        staged,
        log_lines,
    })
}

/// The only names allowed: `baton-archive.json`, `log`, `objects/<64 lowercase hex>`.
fn check_name(file: &Path, name: &[u8]) -> Result<()> {
    let shown = String::from_utf8_lossy(name).escape_debug().to_string();
    if name.first() == Some(&b'/') {
        return Err(malformed(
            file,
            format!("entry '{shown}' has an absolute path"),
        ));
    }
    if name.split(|&b| b == b'/').any(|c| c == b"..") {
        return Err(malformed(
            file,
            format!("entry '{shown}' has a '..' component"),
        ));
    }
    let ok = match std::str::from_utf8(name) {
        Ok(MANIFEST_NAME) | Ok(LOG_NAME) => true,
        Ok(text) => text
            .strip_prefix("objects/")
            .is_some_and(|hex| hex.len() == 64 && crate::format::id::is_lower_hex(hex)),
        Err(_) => false,
    };
    if !ok {
        return Err(malformed(
            file,
            format!(
                "unexpected entry '{shown}' (only {MANIFEST_NAME}, {LOG_NAME} and objects/<id> are allowed)"
            ),
        ));
    }
    Ok(())
}

fn describe_kind(kind: tar::EntryType) -> &'static str {
    use tar::EntryType as T;
    match kind {
        T::Symlink => "symbolic link",
        T::Link => "hard link",
        T::Directory => "directory",
        T::Char => "character device",
        T::Block => "block device",
        T::Fifo => "FIFO",
        T::Continuous => "contiguous file",
        T::GNUSparse => "sparse file",
        T::XHeader | T::XGlobalHeader => "PAX extension header",
        T::GNULongName | T::GNULongLink => "GNU long-name header",
        _ => "entry of an unsupported type",
    }
}

/// A tar reader error as one printable phrase (the tar crate quotes raw header bytes).
fn tar_error(e: &io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" when getting").next().unwrap_or_default();
    let text: String = text.chars().take(200).collect();
    text.trim_end_matches([':', ' ']).escape_debug().to_string()
}

fn short_entry(file: &Path, name: &str, got: u64, declared: u64) -> Error {
    malformed(
        file,
        format!("entry {name} holds {got} bytes, its header declares {declared} (truncated)"),
    )
}

fn duplicate(name: &str) -> Error {
    Error::integrity(format!(
        "the archive holds two entries {name} with different bytes"
    ))
    .with_hint("nothing was imported; the archive is damaged or forged")
}

/// Every log line must decode; a final line without its newline is refused.
fn check_log(bytes: &[u8]) -> Result<u64> {
    let mut rest = bytes;
    let mut line_no = 0u64;
    while !rest.is_empty() {
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return Err(Error::integrity(format!(
                "the archive's log ends in a partial line (after line {line_no})"
            )));
        };
        line_no += 1;
        LogEntry::decode_line(&rest[..end], line_no as usize)
            .map_err(|e| Error::integrity(format!("the archive's log: {}", e.message)))?;
        rest = &rest[end + 1..];
    }
    Ok(line_no)
}

/// The manifest's bundles (deduplicated, in order) and its `current`, checked.
fn check_manifest(file: &Path, received: &Received) -> Result<(Vec<ObjectId>, ObjectId)> {
    let m = &received.manifest;
    if m.format != FORMAT {
        return Err(malformed(
            file,
            format!(
                "{MANIFEST_NAME} has format '{}', not {FORMAT}",
                m.format.escape_debug()
            ),
        ));
    }
    if m.version != VERSION {
        return Err(Error::new(
            crate::error::ErrorKind::Unsupported,
            format!(
                "{} is a baton archive version {}; this baton reads version {VERSION}",
                file.display(),
                m.version
            ),
        ));
    }
    let parse = |text: &str| {
        ObjectId::parse(text).map_err(|_| {
            malformed(
                file,
                format!(
                    "{MANIFEST_NAME} names '{}', not a bundle id",
                    text.escape_debug()
                ),
            )
        })
    };
    let mut bundles = Vec::new();
    for text in &m.bundles {
        let id = parse(text)?;
        if !bundles.contains(&id) {
            bundles.push(id);
        }
    }
    let current = parse(&m.current)?;
    if bundles.is_empty() {
        return Err(malformed(file, format!("{MANIFEST_NAME} lists no bundles")));
    }
    if !bundles.contains(&current) {
        return Err(malformed(
            file,
            format!("{MANIFEST_NAME} names current {current}, which it does not list"),
        ));
    }
    for id in &bundles {
        if !received.staged.contains_key(id) {
            return Err(Error::integrity(format!(
                "the archive lists bundle {id} but does not hold it"
            ))
            .with_hint("nothing was imported; the archive is damaged or forged"));
        }
    }
    Ok((bundles, current))
}

/// The archive's staging area in front of the store: what import's checks read.
struct Staging<'a> {
    store: &'a Store,
    staged: &'a BTreeMap<ObjectId, Staged>,
}

impl Staging<'_> {
    /// The verified content of a bundle or tree (at most `MAX_METADATA_OBJECT` bytes),
    /// from staging or the store.
    fn load(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        if let Some(s) = self.staged.get(id) {
            let mut sink = Bounded {
                limit: MAX_METADATA_OBJECT,
                written: 0,
                overflow: false,
            };
            let mut bytes = Vec::new();
            let reader = File::open(&s.path).ctx("cannot read", &s.path)?;
            let mut tee = TeeVec {
                bytes: &mut bytes,
                bound: &mut sink,
            };
            self.store
                .objects
                .decode_stored(id, BufReader::new(reader), None, &mut tee)
                .map_err(|e| {
                    if sink.overflow {
                        Error::integrity(format!(
                            "object {id} is larger than {MAX_METADATA_OBJECT} bytes"
                        ))
                    } else {
                        e
                    }
                })?;
            return Ok(Some(bytes));
        }
        self.store.tree_bytes(id)
    }
}

impl Incoming for Staging<'_> {
    fn tree_bytes(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        self.load(id)
    }
    fn blob_len(&self, id: &ObjectId) -> Result<Option<u64>> {
        match self.staged.get(id) {
            Some(s) => Ok(Some(s.content_len)),
            None => self.store.blob_len(id),
        }
    }
    fn missing(&self, id: &ObjectId, what: &str, bundle: &ObjectId) -> Error {
        missing(*id, what, *bundle)
    }
}

/// Decode every bundle and tree reachable from `bundles`, from staging or the store, and
/// check that every object they name is at hand with the size its entry declares, and no
/// tree is too deep (the store's receive check, as pull's); every staged object must be
/// reached.
fn check_reachable(store: &Store, received: &Received, bundles: &[ObjectId]) -> Result<()> {
    let staged = &received.staged;
    let staging = Staging { store, staged };
    // Separate sets per role: the same bytes may be a blob in one place and a tree in
    // another, and each role must be checked as such.
    let mut seen_bundles: HashSet<ObjectId> = HashSet::new();
    let mut trees = TreeCheck::default();
    let mut queue: Vec<(ObjectId, Option<ObjectId>)> = bundles.iter().map(|b| (*b, None)).collect();
    while let Some((id, child)) = queue.pop() {
        if !seen_bundles.insert(id) {
            continue;
        }
        let Some(bytes) = staging.load(&id)? else {
            let child = child.map(|c| c.to_hex()).unwrap_or_default();
            let hint = if received.manifest.history {
                "nothing was imported; the archive is incomplete"
            } else {
                "nothing was imported; this store lacks the bundle's history: export it with 'baton export --history'"
            };
            return Err(Error::integrity(format!(
                "bundle {id} (parent of {child}) is neither in the archive nor in this store"
            ))
            .with_hint(hint));
        };
        let bundle = Bundle::decode(&bytes)
            .map_err(|e| Error::integrity(format!("bundle {id}: {}", e.message)))?;
        queue.extend(bundle.parents.iter().map(|p| (*p, Some(id))));
        trees.check(&staging, &id, &bundle.tree).map_err(|e| {
            if e.hint
                .as_deref()
                .is_some_and(|h| h.starts_with("nothing was imported"))
            {
                e
            } else {
                e.with_hint("nothing was imported; the archive is damaged or forged")
            }
        })?;
    }
    let reached = |id: &ObjectId| {
        seen_bundles.contains(id) || trees.trees.contains(id) || trees.blobs.contains(id)
    };
    if let Some(extra) = staged.keys().find(|id| !reached(id)) {
        return Err(Error::integrity(format!(
            "the archive holds object {extra}, which none of its bundles reaches"
        ))
        .with_hint("nothing was imported; the archive is damaged or forged"));
    }
    Ok(())
}

fn missing(id: ObjectId, what: &str, bundle: ObjectId) -> Error {
    Error::integrity(format!(
        "{what} object {id} of bundle {bundle} is neither in the archive nor in this store"
    ))
    .with_hint("nothing was imported; the archive is incomplete")
}

/// Move verified objects from staging into `objects/` (no-clobber renames within the
/// store), then fsync every directory that received one.
fn publish(
    store: &Store,
    staged: BTreeMap<ObjectId, Staged>,
    report: &mut ImportReport,
) -> Result<()> {
    let mut dirs = BTreeSet::new();
    for (id, object) in staged {
        let dest = store.objects.path(&id);
        if store.objects.contains(&id) {
            // Freshen a loose copy so that gc's grace period starts again (SPEC 13.3).
            if let Ok(file) = File::open(&dest) {
                let _ = file.set_modified(SystemTime::now());
            }
            continue;
        }
        let fanout = dest.parent().unwrap_or(store.objects.dir()).to_path_buf();
        fsutil::ensure_private_dir(&fanout)?;
        // Durable before it is renamed into place (SPEC 12.1).
        File::open(&object.path)
            .and_then(|f| f.sync_all())
            .ctx("cannot fsync", &object.path)?;
        match object.path.persist_noclobber(&dest) {
            Ok(()) => {
                report.objects_published += 1;
                report.bytes_published += object.stored_len;
                dirs.insert(fanout);
            }
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io("cannot publish", &dest, e.error)),
        }
    }
    for dir in dirs {
        fsutil::fsync_dir(&dir)?;
    }
    Ok(())
}

/// Remove `staging/import-*` directories older than the stale age (interrupted imports).
fn clean_stale_imports(staging: &Path) {
    let Ok(entries) = fs::read_dir(staging) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > STALE_STAGING_SECS);
        if name.starts_with("import-") && stale {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// A reader that counts the bytes taken from it and checks that the bytes in `padding`
/// (offsets from, to: the padding after an entry's data) are zero.
struct Counting<R> {
    inner: R,
    count: u64,
    padding: Rc<Cell<(u64, u64)>>,
    bad_padding: Rc<Cell<bool>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let (from, to) = self.padding.get();
        let start = self.count;
        let end = start + n as u64;
        if from < end && start < to {
            let lo = (from.max(start) - start) as usize;
            let hi = (to.min(end) - start) as usize;
            if buf[lo..hi].iter().any(|&b| b != 0) {
                self.bad_padding.set(true);
            }
        }
        self.count = end;
        Ok(n)
    }
}

struct HashingWriter<W> {
    inner: W,
    hasher: blake3::Hasher,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A sink that discards bytes but fails once more than `limit` have passed.
struct Bounded {
    limit: u64,
    written: u64,
    overflow: bool,
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written + buf.len() as u64 > self.limit {
            self.overflow = true;
            return Err(io::Error::other("expansion bound exceeded"));
        }
        self.written += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Keeps the bytes, within a bound.
struct TeeVec<'a> {
    bytes: &'a mut Vec<u8>,
    bound: &'a mut Bounded,
}

impl Write for TeeVec<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.bound.write(buf)?;
        self.bytes.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
