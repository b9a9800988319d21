//! Clone: a new store holding a target's history, built in a private work directory
//! beside its path and renamed into place only when complete.

use std::path::{Path, PathBuf};

use indicatif::ProgressBar;

use super::pull::{PullReport, pull_from};
use super::remote_store;
use baton_error::{IoContext, Result};
use baton_format::StoreConfig;
use baton_format::config::TargetConfig;
use baton_store::envelope::{self, KeySource};
use baton_store::{Store, fsutil, leftovers};
use baton_transport::backend::BackendExt;

/// Work directories are named `.baton-clone-<pid>-<random>`.
pub const WORK_PREFIX: &str = ".baton-clone-";

/// Clone the store behind `remote` (reached as `origin` says, recorded as target `origin`) into
/// a new store at `dest`, which must not exist yet. An encrypted remote makes an
/// encrypted clone with the same keys, unlocked by `keys` before anything is created.
/// All or nothing: a failed clone leaves nothing at `dest`.
pub fn clone(
    remote: &mut dyn BackendExt,
    origin: &TargetConfig,
    dest: &Path,
    keys: &KeySource,
    progress: &ProgressBar,
) -> Result<PullReport> {
    // An encrypted remote makes an encrypted clone with the same keys: its settings are
    // copied, and the identity must unlock them before anything is created.
    let state = remote_store::read_state(remote)?;
    let remote_config = state.config.clone();
    let mut config = StoreConfig::default();
    let mut unlocked = None;
    if let Some(enc) = remote_config.and_then(|c| c.encryption) {
        unlocked = Some(envelope::unlock(&enc, keys)?);
        config.features.push(envelope::FEATURE.to_string());
        config.encryption = Some(enc);
    }
    // The store is built inside a private work directory beside `dest` and renamed to
    // `dest` only when complete, so a clone killed at any instant leaves nothing at `dest`
    // (the same command can simply run again) and only a work directory that names its
    // process, which the next clone into the same directory removes.
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fsutil::create_dir_all_private(&parent)?;
    remove_orphaned_work_dirs(&parent);
    // 0700 from its mkdir: under a permissive umask another user could otherwise swap
    // the store being built in it.
    let work =
        fsutil::private_temp_dir_in(&parent, &format!("{WORK_PREFIX}{}-", std::process::id()))?;
    let staged = work.path().join("store");
    let result = (|| {
        let mut store = Store::init_with(&staged, &config)?;
        if let Some(unlocked) = unlocked {
            store.objects.set_envelope(unlocked);
        }
        let lock = store.lock()?;
        let mut config = store.config.clone();
        config.targets.insert("origin".into(), origin.clone());
        config.default_target = Some("origin".into());
        store.write_config(&lock, config)?;
        drop(lock);
        let report = pull_from(&store, remote, "origin", state, progress)?;
        drop(store);
        // What is renamed into place must be the store built here, in the work
        // directory that is still ours alone.
        fsutil::check_private_dir(work.path())?;
        let id = fsutil::check_private_dir(&staged)?;
        fsutil::rename_noclobber(&staged, dest).ctx("cannot create store", dest)?;
        fsutil::check_same_dir(dest, id)?;
        fsutil::fsync_dir(&parent)?;
        Ok(report)
    })();
    // All or nothing: a failed clone leaves no half-filled store behind (dropping `work`
    // removes it and whatever it still holds).
    let report = result?;
    drop(work);
    Ok(report)
}

/// Remove the work directories of clones into `parent` whose process is gone (killed).
fn remove_orphaned_work_dirs(parent: &Path) {
    leftovers::sweep(
        parent,
        &[leftovers::Rule {
            prefix: WORK_PREFIX,
            pid_after_prefix: true,
            by_age: false,
        }],
    );
}
