//! `baton clone URL [PATH]`: a new store holding a target's history, `origin` recorded.

use std::path::PathBuf;

use serde_json::json;

use super::connect_settings;
use crate::cli::CloneArgs;
use crate::commands::Ctx;
use crate::error::{Error, IoContext, Result};
use crate::format::StoreConfig;
use crate::format::config::TargetConfig;
use crate::output::Outcome;
use crate::store::leftovers;
use crate::store::{DEFAULT_STORE_DIR, Store, fsutil};
use crate::sync::open_remote;
use crate::sync::pull::pull_from;
use crate::transport::url::TargetUrl;

pub fn run(ctx: &Ctx, args: &CloneArgs) -> Result<Outcome> {
    let url = TargetUrl::parse(&args.url)?.to_string();
    let path = args
        .path
        .clone()
        .or_else(|| ctx.store.clone())
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STORE_DIR));
    if path.exists() {
        return Err(Error::usage(format!("{} already exists", path.display()))
            .with_hint("clone into a new path, or use 'baton target add' and 'baton pull' in an existing store"));
    }
    // Connect before creating anything, so a bad URL or host key leaves no empty store.
    let mut remote = open_remote(&url, &connect_settings(&args.connect))?;
    // An encrypted remote makes an encrypted clone with the same keys: its settings are
    // copied, and the identity must unlock them before anything is created.
    let state = crate::sync::remote_store::read_state(remote.as_mut())?;
    let remote_config = state.config.clone();
    let mut config = StoreConfig::default();
    let mut envelope = None;
    if let Some(enc) = remote_config.and_then(|c| c.encryption) {
        envelope = Some(crate::store::envelope::unlock(&enc, &ctx.key_source())?);
        config
            .features
            .push(crate::store::envelope::FEATURE.to_string());
        config.encryption = Some(enc);
    }
    // The store is built inside a private work directory beside PATH and renamed to PATH
    // only when complete, so a clone killed at any instant leaves nothing at PATH (the
    // same command can simply run again) and only a work directory that names its
    // process, which the next clone into the same directory removes.
    let parent = match path.parent() {
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
        if let Some(envelope) = envelope {
            store.objects.set_envelope(envelope);
        }
        let lock = store.lock()?;
        let mut config = store.config.clone();
        config
            .targets
            .insert("origin".into(), TargetConfig { url: url.clone() });
        config.default_target = Some("origin".into());
        store.write_config(&lock, config)?;
        drop(lock);
        let bar = ctx.progress(0, true);
        let report = pull_from(&store, remote.as_mut(), "origin", state, &bar)?;
        bar.finish_and_clear();
        drop(store);
        // What is renamed into place must be the store built here, in the work
        // directory that is still ours alone.
        fsutil::check_private_dir(work.path())?;
        let id = fsutil::check_private_dir(&staged)?;
        fsutil::rename_noclobber(&staged, &path).ctx("cannot create store", &path)?;
        fsutil::check_same_dir(&path, id)?;
        fsutil::fsync_dir(&parent)?;
        Ok(report)
    })();
    // All or nothing: a failed clone leaves no half-filled store behind (dropping `work`
    // removes it and whatever it still holds).
    let report = result?;
    drop(work);
    let human = if ctx.quiet {
        String::new()
    } else {
        format!(
            "Cloned {url} into {} ({} objects, {} bytes)",
            path.display(),
            report.objects_received,
            report.bytes_received
        )
    };
    Ok(Outcome::new(
        human,
        json!({ "store": path, "url": url, "report": report }),
    ))
}

/// Work directories are named `.baton-clone-<pid>-<random>`.
const WORK_PREFIX: &str = ".baton-clone-";

/// Remove the work directories of clones into `parent` whose process is gone (killed).
fn remove_orphaned_work_dirs(parent: &std::path::Path) {
    leftovers::sweep(
        parent,
        &[leftovers::Rule {
            prefix: WORK_PREFIX,
            pid_after_prefix: true,
            by_age: false,
        }],
    );
}
