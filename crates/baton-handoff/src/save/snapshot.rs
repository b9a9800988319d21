//! The directory snapshot (`baton save DIR`) as a library function: the tree listed under
//! the stat cache, names, fields and contents scanned for secrets before a single object is
//! written, the blobs written in one batch, the bundle committed, and the stat cache
//! recorded for the next save.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::check_refs_readable;
use super::secrets::{self as save_secrets, Fields, Finding};
use crate::capture::SecretsMode;
use crate::secrets::files::{self, Found, REDACT_LIMIT, all_kinds};
use baton_error::{Error, ErrorKind, Result};
use baton_format::ObjectId;
use baton_format::text::terminal_safe;
use baton_store::snapshot::{self, SnapshotStats};
use baton_store::{Store, statcache};

/// What to snapshot, and how.
pub struct SnapshotOptions {
    /// The directory whose files become the bundle's tree.
    pub dir: PathBuf,
    /// What to do with secrets found in names, fields or contents.
    pub secrets: SecretsMode,
    /// Leave out what ignore files exclude (`false`: `--no-ignore`).
    pub respect_ignores: bool,
    /// Read every file again instead of trusting the stat cache (`--no-cache`).
    pub use_cache: bool,
    /// The manifest's fields, scanned like the contents.
    pub fields: Fields,
}

/// Where the save is, for a progress bar.
pub enum SnapshotProgress {
    /// The files are listed and scanned: this many bytes are about to be stored.
    Writing { total_bytes: u64 },
    /// This many more bytes are stored.
    Wrote(u64),
    /// Every object is written.
    Written,
}

/// What the snapshot saved, for the caller to report.
pub struct SnapshotReport {
    pub id: ObjectId,
    pub parents: Vec<ObjectId>,
    pub tree: ObjectId,
    pub stats: SnapshotStats,
    pub mode: SecretsMode,
    /// Files that held secrets (redacted, or stored as they are under `allow`).
    pub found: Vec<Found>,
    /// Names and fields that held secrets.
    pub places: Vec<Finding>,
}

impl SnapshotReport {
    /// Whether any secret was found (and redacted or stored as it is).
    pub fn found_secrets(&self) -> bool {
        !self.found.is_empty() || !self.places.is_empty()
    }
}

/// Snapshot `opts.dir` as a new bundle on top of `current`.
pub fn save_snapshot(
    store: &Store,
    opts: SnapshotOptions,
    progress: &(dyn Fn(SnapshotProgress) + Sync),
) -> Result<SnapshotReport> {
    let SnapshotOptions {
        dir,
        secrets: mode,
        respect_ignores,
        use_cache,
        fields,
    } = opts;
    let dir = dir.as_path();
    let skip = std::fs::metadata(store.root())
        .ok()
        .map(|m| (m.dev(), m.ino()));
    let ignores = if respect_ignores {
        snapshot::Ignores::Respect
    } else {
        snapshot::Ignores::Off
    };
    // Taken before the listing: the stat cache's racy-clean rule compares against it.
    let started_ns = statcache::now_ns();
    // A file the stat cache vouches for is unchanged since a save that scanned it under
    // this same secret policy: it is neither read nor scanned again. One that held
    // secrets then was stored as it is (`--secrets allow`); its findings are those of
    // the same bytes, so they are reported (or refused) again, and it is read again only
    // to be redacted.
    let policy = crate::pii::cache_policy();
    let root = std::fs::canonicalize(dir).ok();
    // Without the cache every file is read (a write through a shared mmap can leave its
    // metadata as the cache recorded it); what was read is recorded all the same.
    // The cache is read and parsed while the directory is listed (system calls).
    let (listed, cache) = rayon::join(
        || snapshot::list_dir(dir, skip, ignores),
        || match &root {
            Some(root) if use_cache => statcache::for_root(store, root, &policy),
            _ => statcache::Lookup::default(),
        },
    );
    let with_secrets = |f: &statcache::Findings| mode != SecretsMode::Redact && known_kinds(f);
    let lookup = snapshot::cache_lookup(store, dir, &cache, &with_secrets);
    let mut snap = snapshot::scan_listed(listed?, &lookup)?;
    check_refs_readable(store)?;
    // What is stored besides the contents is scanned under the same mode: entry names
    // and symlink targets, then the manifest's fields.
    let redacting = mode == SecretsMode::Redact;
    let names = save_secrets::scan_names(&mut snap.tree, dir, redacting)?;
    let (fields, field_findings) = save_secrets::scan_fields(fields, redacting)?;
    let node = &snap.tree;
    // Every file is opened beneath DIR's fd, never again by its path.
    let open = |path: &Path| snap.open_file(path);
    // Every other file is scanned before a single object is written.
    let mut found = files::scan_files(&node.uncached_files(), &open)?;
    for path in node.cached_files() {
        let findings = snapshot::cache_name(dir, path).and_then(|rel| cache.findings(&rel));
        if let Some(findings) = findings {
            found.push(cached_found(path, findings));
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    let mut places = names.findings;
    places.extend(field_findings);
    if !found.is_empty() || !places.is_empty() {
        refuse_unless_allowed(mode, dir, &found, &places)?;
    }
    let redact: HashSet<&Path> = match mode {
        SecretsMode::Redact => found.iter().map(|f| f.path.as_path()).collect(),
        _ => HashSet::new(),
    };
    let replace = |path: &Path| -> Result<Option<Vec<u8>>> {
        if !redact.contains(path) {
            return Ok(None);
        }
        files::read_redacted(path, &open).map(Some)
    };
    progress(SnapshotProgress::Writing {
        total_bytes: node.total_bytes(),
    });
    let written = snapshot::write(
        store,
        &snap,
        &|n| progress(SnapshotProgress::Wrote(n)),
        &replace,
    );
    progress(SnapshotProgress::Written);
    let (tree, stats, blobs) = written?;
    let mut metadata = fields.metadata;
    let secrets_key = match mode {
        SecretsMode::Redact => "secrets.redacted",
        _ => "secrets.allowed",
    };
    if !found.is_empty() || !places.is_empty() {
        metadata.insert(secrets_key.into(), save_secrets::describe(&found, &places));
    }
    let (id, bundle) = store.commit_bundle(tree, "save", |b| {
        b.from = fields.from;
        b.to = fields.to;
        b.summary = fields.summary;
        b.note = fields.note;
        b.metadata = metadata;
    })?;
    // After the ref move: every id recorded is reachable from `current` now. Files that
    // held secrets are left out (so they are scanned again) unless they were stored as
    // they are: then with what was found, reported again by the next save. The save is
    // complete either way, so a cache that cannot be written is simply not. The cache
    // names files by path: a path whose names held secrets is not written there unless
    // the secrets were stored as they are, nor a root whose own path holds one.
    let root_clean = root.as_ref().is_some_and(|root| {
        mode == SecretsMode::Allow
            || crate::secrets::scan(std::os::unix::ffi::OsStrExt::as_bytes(root.as_os_str()))
                .is_empty()
    });
    if let Some(root) = root.as_ref().filter(|_| root_clean) {
        let flagged: HashMap<&Path, &Found> = found.iter().map(|f| (f.path.as_path(), f)).collect();
        let findings = |p: &Path| match flagged.get(p) {
            _ if redacting && names.flagged.iter().any(|f| p.starts_with(f)) => None,
            None => Some(None),
            Some(f) if mode == SecretsMode::Allow => f
                .counts
                .as_ref()
                .map(|counts| Some(counts.iter().map(|(k, n)| (k.to_string(), *n)).collect())),
            Some(_) => None,
        };
        let entries = node.cache_entries(dir, &blobs, &findings);
        // A re-save of an unchanged tree would write the same entries again.
        if !cache.unchanged(&entries) {
            let _ = statcache::record(store, root, &policy, started_ns, entries);
        }
    }
    Ok(SnapshotReport {
        id,
        parents: bundle.parents,
        tree,
        stats,
        mode,
        found,
        places,
    })
}

/// The refusal `mode` makes of what was found, if any: `block` refuses every secret,
/// `redact` a file too large to redact, `allow` nothing.
fn refuse_unless_allowed(
    mode: SecretsMode,
    dir: &Path,
    found: &[Found],
    places: &[Finding],
) -> Result<()> {
    match mode {
        SecretsMode::Block if places.is_empty() => Err(snapshot_refusal(dir, found)),
        SecretsMode::Block => Err(save_secrets::refusal(dir, found, places)),
        SecretsMode::Redact => match found.iter().find(|f| f.counts.is_none()) {
            Some(big) => Err(Error::new(
                ErrorKind::Security,
                format!(
                    "refusing to save: {} holds secrets ({}) and is too large to redact (over {} MiB)",
                    terminal_safe(&save_secrets::display_path(dir, &big.path)),
                    big.kinds().join(", "),
                    REDACT_LIMIT >> 20
                ),
            )
            .with_hint(format!(
                "remove it or list it in {}, or save with --secrets allow to store it as it is",
                snapshot::IGNORE_FILE
            ))),
            None => Ok(()),
        },
        SecretsMode::Allow => Ok(()),
    }
}

/// Whether every kind in `findings` is one this build knows (always, under the same
/// policy fingerprint; anything else is read and scanned again).
fn known_kinds(findings: &statcache::Findings) -> bool {
    findings
        .iter()
        .all(|(kind, _)| crate::secrets::KINDS.contains(&kind.as_str()))
}

/// The finding of a cached file from what its entry recorded (kinds checked by
/// [`known_kinds`] before the entry was used).
fn cached_found(path: &Path, findings: &statcache::Findings) -> Found {
    let counts = findings
        .iter()
        .filter_map(|(kind, n)| {
            let kind = crate::secrets::KINDS
                .iter()
                .find(|k| **k == kind.as_str())?;
            Some((*kind, *n))
        })
        .collect();
    Found {
        path: path.to_path_buf(),
        counts: Some(counts),
        big_kinds: Default::default(),
    }
}

/// The refusal of a snapshot that holds secrets: kinds and paths, never values.
fn snapshot_refusal(dir: &Path, found: &[Found]) -> Error {
    let files = if found.len() == 1 {
        "file holds"
    } else {
        "files hold"
    };
    Error::new(
        ErrorKind::Security,
        format!(
            "refusing to save: {} {files} secrets ({}): {}",
            found.len(),
            all_kinds(found).join(", "),
            save_secrets::list(dir, found, &[])
        ),
    )
    .with_hint(format!(
        "remove them or list them in {}, or save with --secrets redact (placeholders) or --secrets allow (as they are)",
        snapshot::IGNORE_FILE
    ))
}
