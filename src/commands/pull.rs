//! `baton pull [TARGET]`: fetch a target's `current` and fast-forward to it.

use serde_json::json;

use super::connect_settings;
use crate::cli::PullArgs;
use crate::commands::Ctx;
use crate::output::{Outcome, count};
use baton_error::Result;
use baton_format::id::show_short;
use baton_sync::pull::pull;
use baton_sync::{ConnectSettings, choose_target, open_remote, target_settings};

/// What to pull from where, as plain values (the CLI's flags, or an MCP call's).
pub struct PullOptions {
    /// Target name [default: the only or the default target].
    pub target: Option<String>,
    /// Refetch what `verify` finds missing or damaged instead.
    pub repair: bool,
    pub connect: ConnectSettings,
}

impl From<&PullArgs> for PullOptions {
    fn from(args: &PullArgs) -> PullOptions {
        PullOptions {
            target: args.target.clone(),
            repair: args.repair,
            connect: connect_settings(&args.connect),
        }
    }
}

pub fn run(ctx: &Ctx, args: &PullArgs) -> Result<Outcome> {
    run_with(ctx, PullOptions::from(args))
}

pub fn run_with(ctx: &Ctx, args: PullOptions) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let (name, url) = choose_target(&store.config, args.target.as_deref())?;
    let settings = target_settings(&store.config, &name, args.connect);
    let mut remote = open_remote(&url, &settings)?;
    if args.repair {
        return repair(ctx, &store, remote.as_mut(), &name, &url);
    }
    let bar = ctx.progress(0, true).with_message("pulling");
    let report = pull(&store, remote.as_mut(), &name, &bar)?;
    bar.finish_and_clear();
    super::auto_repack(ctx, &store);
    let human = if ctx.quiet {
        String::new()
    } else {
        format!(
            "{}: {} ({} objects, {} bytes in {} ms); current is {}",
            name,
            report.outcome,
            report.objects_received,
            report.bytes_received,
            report.elapsed_ms,
            show_short(report.current_after)
        )
    };
    Ok(Outcome::new(
        human,
        json!({ "target": name, "url": url, "report": report }),
    ))
}

/// `pull --repair`: refetch what `verify` finds missing or damaged, under the store lock.
fn repair(
    ctx: &Ctx,
    store: &baton_store::Store,
    remote: &mut dyn baton_transport::backend::BackendExt,
    name: &str,
    url: &str,
) -> Result<Outcome> {
    let _lock = store.lock()?;
    let bar = ctx.progress(0, false).with_message("repairing");
    let report = baton_sync::repair::repair(store, remote, &bar)?;
    bar.finish_and_clear();
    let human = if ctx.quiet {
        String::new()
    } else if report.objects_received + report.packs_retired + report.shadowed_removed == 0 {
        format!("{name}: nothing to repair (no object is missing or damaged here)")
    } else {
        format!(
            "{name}: refetched {} ({} damaged here, {} bytes received){}; run 'baton verify' to check",
            count(report.objects_received, "object"),
            report.damaged,
            report.bytes_received,
            if report.packs_retired > 0 {
                format!(", {} retired", count(report.packs_retired, "damaged pack"))
            } else {
                String::new()
            }
        )
    };
    Ok(Outcome::new(
        human,
        json!({ "target": name, "url": url, "repair": report }),
    ))
}
