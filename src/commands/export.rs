//! `baton export [REV...] -o FILE.tar [--history]`: bundles and their objects as a tar.

use serde_json::json;

use crate::cli::ExportArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_sync::archive::export;

pub fn run(ctx: &Ctx, args: &ExportArgs) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let revs = if args.revs.is_empty() {
        vec!["current".to_string()]
    } else {
        args.revs.clone()
    };
    let bundles = revs
        .iter()
        .map(|rev| store.resolve(rev))
        .collect::<Result<Vec<_>>>()?;
    let report = export(&store, &bundles, args.history, &args.output)?;
    let human = if ctx.quiet {
        String::new()
    } else {
        format!(
            "{}: {} bundle(s){}, {} objects, {} bytes",
            report.file.display(),
            report.bundles.len(),
            if report.history { " with history" } else { "" },
            report.objects,
            report.bytes
        )
    };
    Ok(Outcome::new(
        human,
        json!({
            "file": report.file,
            "bundles": report.bundles,
            "current": report.current,
            "history": report.history,
            "objects": report.objects,
            "object_bytes": report.object_bytes,
            "log_bytes": report.log_bytes,
            "bytes": report.bytes,
        }),
    ))
}
