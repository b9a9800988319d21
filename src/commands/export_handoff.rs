//! `baton export-handoff REV --format frontmatter|prowl DIR [--history]`: the CLI over
//! `baton_handoff::export_handoff`.

use serde_json::json;

use crate::cli::ExportHandoffArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_handoff::export_handoff::{ExportOptions, check_dir, export_handoff};

pub fn run(ctx: &Ctx, args: &ExportHandoffArgs) -> Result<Outcome> {
    check_dir(&args.dir)?;
    let store = ctx.open_store()?;
    let opts = ExportOptions {
        rev: args.rev.clone(),
        format: args.format,
        dir: args.dir.clone(),
        history: args.history,
    };
    let report = export_handoff(&store, &opts)?;
    let human = if ctx.quiet {
        String::new()
    } else {
        format!(
            "Exported {} as {} into {} ({})",
            crate::output::count(report.bundles.len() as u64, "handoff"),
            args.format.name(),
            args.dir.display(),
            crate::output::count(report.files.len() as u64, "file")
        )
    };
    Ok(Outcome::new(
        human,
        json!({
            "format": args.format.name(),
            "dir": args.dir,
            "bundles": report.bundles,
            "files": report.files,
        }),
    ))
}
