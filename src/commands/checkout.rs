//! `baton checkout REV DIR`: restore a bundle's files into a new or empty directory.

use std::path::Path;

use serde_json::json;

use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;

pub fn run(ctx: &Ctx, rev: &str, dir: &Path) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let id = store.resolve(rev)?;
    let bundle = store.read_bundle(&id)?;
    let bar = ctx.progress(0, true).with_message("checking out");
    let stats = store.checkout(&bundle.tree, dir, &bar)?;
    bar.finish_and_clear();
    let human = if ctx.quiet {
        String::new()
    } else {
        format!(
            "Checked out {} ({}, {} bytes) into {}",
            id.short(),
            crate::output::count(stats.files, "file"),
            stats.bytes,
            dir.display()
        )
    };
    Ok(Outcome::new(
        human,
        json!({ "bundle": id, "dir": dir, "files": stats.files, "bytes": stats.bytes }),
    ))
}
