//! `baton import FILE.tar`: verify an archive completely, then publish it and
//! fast-forward `current`.

use serde_json::json;

use crate::cli::ImportArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_format::id::show_short;
use baton_sync::archive::import;

pub fn run(ctx: &Ctx, args: &ImportArgs) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let report = import(&store, &args.file, args.max_expansion)?;
    let human = if ctx.quiet {
        String::new()
    } else {
        format!(
            "{}: {} ({} of {} objects new, {} bytes); current is {}",
            args.file.display(),
            report.outcome,
            report.objects_published,
            report.objects,
            report.bytes_published,
            show_short(report.current_after)
        )
    };
    Ok(Outcome::new(human, json!({ "report": report })))
}
