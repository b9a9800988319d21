//! `baton import FILE.tar`: verify an archive completely, then publish it and
//! fast-forward `current`.

use serde_json::json;

use crate::cli::ImportArgs;
use crate::error::Result;
use crate::output::{Ctx, Outcome};
use crate::sync::archive::import;

pub fn run(ctx: &Ctx, args: &ImportArgs) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let report = import(&store, &args.file, args.max_expansion)?;
    let short = |v: Option<crate::format::ObjectId>| {
        v.map(|i| i.short()).unwrap_or_else(|| "(none)".into())
    };
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
            short(report.current_after)
        )
    };
    Ok(Outcome::new(human, json!({ "report": report })))
}
