//! The push queue (SPEC 5.4): `push-queue/<target>` in the store holds the newest bundle
//! waiting to be pushed to that target (pushing it pushes its ancestors), with the
//! attempts made and the last error. `checkpoint --push` records an entry and starts a
//! background drain; `baton sync` drains in the foreground. An entry is removed only
//! after its push succeeded (or the target already had the bundle), so a kill at any
//! instant leaves the entry or the pushed bundle; a re-run then finds the target up to
//! date. Entry changes hold `push-queue/.lock` for a moment; a drain holds
//! `push-queue/.sync` throughout, so two drains never push the same entry at once.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind as IoKind;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use baton_error::{Error, IoContext, Result};
use baton_format::ObjectId;
use baton_format::names::validate_target_name;
use baton_store::{Store, fsutil};

use crate::push::{PushRequest, push};
use crate::{ConnectSettings, open_remote, target_settings};

/// The largest entry file read.
const MAX_ENTRY: u64 = 64 << 10;
/// The longest error text kept in an entry (characters).
const MAX_ERROR: usize = 600;

/// One target's queued push.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    pub target: String,
    /// The bundle to push (hex id).
    pub bundle: String,
    /// Pushes of this bundle tried and failed.
    pub attempts: u32,
    #[serde(default)]
    pub last_error: Option<String>,
    /// When the oldest unpushed bundle for this target was queued (RFC 3339).
    pub since: String,
    /// When the entry last changed.
    pub updated: String,
}

/// The queue's directory in the store at `root`.
pub fn dir(root: &Path) -> PathBuf {
    root.join(baton_format::layout::PUSH_QUEUE)
}

fn now() -> String {
    baton_format::bundle::format_time(SystemTime::now())
}

/// An exclusive `flock` of `push-queue/<name>`, made when missing; `None` when `wait`
/// is false and another process holds it.
fn lock(root: &Path, name: &str, wait: bool) -> Result<Option<File>> {
    let dir = dir(root);
    fsutil::ensure_private_dir(&dir)?;
    let path = dir.join(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .ctx("cannot open lock file", &path)?;
    if wait {
        file.lock().ctx("cannot lock", &path)?;
        return Ok(Some(file));
    }
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io("cannot lock", &path, e)),
    }
}

fn read_entry(root: &Path, target: &str) -> Result<Option<Entry>> {
    let path = dir(root).join(target);
    let bytes = match fsutil::read_limited(&path, MAX_ENTRY) {
        Ok(bytes) => bytes,
        Err(_) if !path.exists() => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        Error::integrity(format!(
            "the push queue entry {} is damaged: {e}",
            path.display()
        ))
        .with_hint(format!("remove it and push by hand: 'baton push {target}'"))
    })
}

fn write_entry(root: &Path, entry: &Entry) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(entry)
        .map_err(|e| Error::internal(format!("cannot encode a push queue entry: {e}")))?;
    fsutil::write_atomic(&dir(root).join(&entry.target), &bytes)
}

fn remove_entry(root: &Path, target: &str) -> Result<()> {
    let path = dir(root).join(target);
    match std::fs::remove_file(&path) {
        Ok(()) => fsutil::fsync_dir(&dir(root)),
        Err(e) if e.kind() == IoKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("cannot remove", &path, e)),
    }
}

/// Queue a push of `bundle` to `target`, replacing an older bundle queued for it
/// (attempts start again; `since` stays the older entry's).
pub fn enqueue(root: &Path, target: &str, bundle: &ObjectId) -> Result<Entry> {
    validate_target_name(target)?;
    let _lock = lock(root, ".lock", true)?;
    let old = read_entry(root, target).ok().flatten();
    let hex = bundle.to_hex();
    if let Some(old) = &old
        && old.bundle == hex
    {
        return Ok(old.clone());
    }
    let entry = Entry {
        target: target.to_string(),
        bundle: hex,
        attempts: 0,
        last_error: None,
        since: old.map(|o| o.since).unwrap_or_else(now),
        updated: now(),
    };
    write_entry(root, &entry)?;
    Ok(entry)
}

/// Every queued entry, by target (a damaged entry file is an error naming it).
pub fn entries(root: &Path) -> Result<Vec<Entry>> {
    let dir = dir(root);
    let listing = match std::fs::read_dir(&dir) {
        Ok(listing) => listing,
        Err(e) if e.kind() == IoKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("cannot list", &dir, e)),
    };
    let mut names = BTreeSet::new();
    for item in listing {
        let item = item.ctx("cannot list", &dir)?;
        let name = item.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && validate_target_name(&name).is_ok() {
            names.insert(name);
        }
    }
    let mut out = Vec::new();
    for name in names {
        if let Some(entry) = read_entry(root, &name)? {
            out.push(entry);
        }
    }
    Ok(out)
}

/// One push a drain made.
#[derive(Debug)]
pub struct Pushed {
    pub target: String,
    pub bundle: ObjectId,
    pub up_to_date: bool,
}

/// One push a drain could not make (the entry stays, with this error).
#[derive(Debug)]
pub struct Failed {
    pub target: String,
    pub bundle: String,
    pub attempts: u32,
    pub error: Error,
}

/// What a drain did.
#[derive(Debug, Default)]
pub struct Drained {
    pub pushed: Vec<Pushed>,
    pub failed: Vec<Failed>,
    /// Another drain held the queue and `wait` was false: it will push what is queued.
    pub busy: bool,
}

/// Push every queued entry (only `only`'s when given), removing each once pushed, until
/// none is left that this drain has not tried with its bundle (a checkpoint queueing a
/// newer bundle meanwhile is pushed too). `wait`: wait for another drain to finish;
/// else leave the queue to it.
pub fn drain(
    store: &Store,
    only: Option<&str>,
    connect: &ConnectSettings,
    wait: bool,
) -> Result<Drained> {
    let root = store.root();
    let mut drained = Drained::default();
    let Some(_sync) = lock(root, ".sync", wait)? else {
        drained.busy = true;
        return Ok(drained);
    };
    let mut tried: BTreeSet<(String, String)> = BTreeSet::new();
    loop {
        let pending: Vec<Entry> = entries(root)?
            .into_iter()
            .filter(|e| only.is_none_or(|t| t == e.target))
            .filter(|e| !tried.contains(&(e.target.clone(), e.bundle.clone())))
            .collect();
        if pending.is_empty() {
            return Ok(drained);
        }
        // A bundle queued since this drain began is in a pack published since.
        store.objects.refresh_packs();
        for entry in pending {
            tried.insert((entry.target.clone(), entry.bundle.clone()));
            match push_entry(store, &entry, connect) {
                Ok(pushed) => {
                    let _lock = lock(root, ".lock", true)?;
                    // A newer bundle queued during the push stays for the next round.
                    if read_entry(root, &entry.target)?
                        .is_some_and(|now| now.bundle == entry.bundle)
                    {
                        remove_entry(root, &entry.target)?;
                    }
                    drained.pushed.push(pushed);
                }
                Err(error) => {
                    let attempts = record_failure(root, &entry, &error)?;
                    drained.failed.push(Failed {
                        target: entry.target.clone(),
                        bundle: entry.bundle.clone(),
                        attempts,
                        error,
                    });
                }
            }
        }
    }
}

/// Count a failed push of `entry` (when it is still the one queued); the attempts now.
fn record_failure(root: &Path, entry: &Entry, error: &Error) -> Result<u32> {
    let _lock = lock(root, ".lock", true)?;
    let Some(mut now_queued) = read_entry(root, &entry.target)? else {
        return Ok(entry.attempts + 1);
    };
    if now_queued.bundle != entry.bundle {
        return Ok(entry.attempts + 1);
    }
    let text = error.to_string().replace(['\n', '\r'], " ");
    now_queued.attempts = now_queued.attempts.saturating_add(1);
    now_queued.last_error = Some(text.chars().take(MAX_ERROR).collect());
    now_queued.updated = now();
    write_entry(root, &now_queued)?;
    Ok(now_queued.attempts)
}

fn push_entry(store: &Store, entry: &Entry, connect: &ConnectSettings) -> Result<Pushed> {
    let bundle = ObjectId::parse(&entry.bundle)?;
    let Some(target) = store.config.targets.get(&entry.target) else {
        return Err(Error::not_found(format!(
            "the queued target '{}' is no longer in this store's config",
            entry.target
        ))
        .with_hint(format!(
            "add it again with 'baton target add {} URL', or remove {}",
            entry.target,
            dir(store.root()).join(&entry.target).display()
        )));
    };
    let settings = target_settings(&store.config, &entry.target, connect.clone());
    let mut remote = open_remote(&target.url, &settings)?;
    let report = push(
        store,
        remote.as_mut(),
        &PushRequest {
            target: &entry.target,
            bundle,
            force: None,
        },
        &indicatif::ProgressBar::hidden(),
    )?;
    Ok(Pushed {
        target: entry.target.clone(),
        bundle,
        up_to_date: report.up_to_date,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ObjectId {
        ObjectId::parse(&format!("{n:02x}").repeat(32)).unwrap()
    }

    #[test]
    fn the_newest_bundle_replaces_an_older_one_and_keeps_since() {
        let dir = tempfile::tempdir().unwrap();
        let first = enqueue(dir.path(), "devbox", &id(1)).unwrap();
        let again = enqueue(dir.path(), "devbox", &id(1)).unwrap();
        assert_eq!(first, again);
        let newer = enqueue(dir.path(), "devbox", &id(2)).unwrap();
        assert_eq!(newer.bundle, id(2).to_hex());
        assert_eq!(newer.since, first.since);
        enqueue(dir.path(), "other", &id(3)).unwrap();
        let all = entries(dir.path()).unwrap();
        assert_eq!(
            all.iter().map(|e| e.target.as_str()).collect::<Vec<_>>(),
            ["devbox", "other"]
        );
        assert!(enqueue(dir.path(), ".lock", &id(1)).is_err());
    }

    #[test]
    fn a_failure_is_counted_only_for_the_bundle_still_queued() {
        let dir = tempfile::tempdir().unwrap();
        let entry = enqueue(dir.path(), "devbox", &id(1)).unwrap();
        let err = Error::other("offline");
        assert_eq!(record_failure(dir.path(), &entry, &err).unwrap(), 1);
        let now = entries(dir.path()).unwrap().remove(0);
        assert_eq!(
            (now.attempts, now.last_error.as_deref()),
            (1, Some("offline"))
        );
        enqueue(dir.path(), "devbox", &id(2)).unwrap();
        record_failure(dir.path(), &entry, &err).unwrap();
        assert_eq!(entries(dir.path()).unwrap()[0].attempts, 0);
    }
}
