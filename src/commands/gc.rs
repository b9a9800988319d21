//! `baton gc`: remove unreachable objects older than the grace period, merge packs.

use serde_json::json;

use crate::cli::GcArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;

pub fn run(ctx: &Ctx, args: &GcArgs) -> Result<Outcome> {
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
