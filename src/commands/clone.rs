//! `baton clone URL [PATH]`: a new store holding a target's history, `origin` recorded.

use std::path::PathBuf;

use serde_json::json;

use super::connect_settings;
use crate::cli::CloneArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, Result};
use baton_format::config::TargetConfig;
use baton_store::DEFAULT_STORE_DIR;
use baton_sync::open_remote;
use baton_transport::url::TargetUrl;

pub fn run(ctx: &Ctx, args: &CloneArgs) -> Result<Outcome> {
    let parsed = TargetUrl::parse(&args.url)?;
    let url = parsed.to_string();
    let (endpoint, region) =
        super::target::s3_settings(&parsed, args.endpoint.clone(), args.region.clone())?;
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
    let origin = TargetConfig {
        url: url.clone(),
        endpoint,
        region,
    };
    let mut settings = connect_settings(&args.connect);
    settings.s3.endpoint = origin.endpoint.clone();
    settings.s3.region = origin.region.clone();
    let mut remote = open_remote(&url, &settings)?;
    let bar = ctx.progress(0, true).with_message("cloning");
    let report =
        baton_sync::clone::clone(remote.as_mut(), &origin, &path, &ctx.key_source(), &bar)?;
    bar.finish_and_clear();
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
