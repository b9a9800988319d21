//! `baton gc`: remove unreachable objects older than the grace period, merge packs; with
//! `--target`, merge the packs of a target's store (`baton_sync::compact`).

use serde_json::json;

use super::connect_settings;
use crate::cli::GcArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_store::repack::RepackMode;
use baton_sync::{choose_target, open_remote, target_settings};

pub fn run(ctx: &Ctx, args: &GcArgs) -> Result<Outcome> {
    if let Some(target) = &args.target {
        return compact_target(ctx, args, target);
    }
    let store = ctx.open_store()?;
    let report = store.gc(*args.grace, args.dry_run)?;
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let human = if ctx.quiet {
        String::new()
    } else {
        let merged = if report.repack.packs_merged > 0 {
            format!(
                "; merged {} packs into one ({} objects)",
                report.repack.packs_merged, report.repack.objects
            )
        } else {
            String::new()
        };
        format!(
            "{verb} {} unreachable objects ({} bytes) and {} stale temp files; kept {} within the grace period; {} reachable{merged}",
            report.removed_objects,
            report.removed_bytes,
            report.removed_temp_files,
            report.kept_in_grace,
            report.reachable
        )
    };
    Ok(Outcome::new(human, json!({ "report": report })))
}

/// `gc --target NAME`: merge the target's packs (nothing there is removed but the packs
/// the merged one replaces).
fn compact_target(ctx: &Ctx, args: &GcArgs, target: &str) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let (name, url) = choose_target(&store.config, Some(target))?;
    let settings = target_settings(&store.config, &name, connect_settings(&args.connect));
    let mut remote = open_remote(&url, &settings)?;
    let mode = if args.all {
        RepackMode::All
    } else {
        RepackMode::Geometric
    };
    let bar = ctx.progress(0, true).with_message("merging packs");
    let report = baton_sync::compact::compact(&store, remote.as_mut(), mode, args.dry_run, &bar)?;
    bar.finish_and_clear();
    let human = if ctx.quiet {
        String::new()
    } else if report.packs_merged == 0 {
        format!("{name}: {} packs, nothing to merge", report.packs_before)
    } else if report.dry_run {
        format!(
            "{name}: would merge {} of {} packs ({} bytes)",
            report.packs_merged, report.packs_before, report.bytes_read
        )
    } else {
        format!(
            "{name}: merged {} of {} packs into one ({} objects, {} bytes); {} packs now",
            report.packs_merged,
            report.packs_before,
            report.objects,
            report.bytes,
            report.packs_after
        )
    };
    Ok(Outcome::new(
        human,
        json!({ "target": name, "url": url, "report": report }),
    ))
}
