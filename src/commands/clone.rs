//! `baton clone URL [PATH]`: a new store holding a target's history, `origin` recorded.

use std::path::PathBuf;

use serde_json::json;

use super::connect_settings;
use crate::cli::CloneArgs;
use crate::error::{Error, Result};
use crate::format::StoreConfig;
use crate::format::config::TargetConfig;
use crate::output::{Ctx, Outcome};
use crate::store::{DEFAULT_STORE_DIR, Store};
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
    let mut store = Store::init_with(&path, &config)?;
    if let Some(envelope) = envelope {
        store.objects.set_envelope(envelope);
    }
    let result = (|| {
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
        Ok(report)
    })();
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            // All or nothing: a failed clone leaves no half-filled store behind.
            let _ = std::fs::remove_dir_all(&path);
            return Err(e);
        }
    };
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
