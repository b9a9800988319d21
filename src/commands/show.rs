//! `baton show REV`: a bundle's manifest and every entry of its tree.

use std::fmt::Write;

use serde_json::json;

use super::bundle_json;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;

pub fn run(ctx: &Ctx, rev: &str) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let id = store.resolve(rev)?;
    let bundle = store.read_bundle(&id)?;
    let entries = store.list_tree(&bundle.tree)?;
    let mut human = String::new();
    let _ = writeln!(human, "bundle  {id}");
    let _ = writeln!(human, "tree    {}", bundle.tree);
    for parent in &bundle.parents {
        let _ = writeln!(human, "parent  {parent}");
    }
    let _ = writeln!(human, "created {}", bundle.created);
    for (label, value) in [
        ("from", &bundle.from),
        ("to", &bundle.to),
        ("summary", &bundle.summary),
        ("note", &bundle.note),
    ] {
        if !value.is_empty() {
            let _ = writeln!(human, "{label:<7} {}", value.replace('\n', "\n        "));
        }
    }
    for (key, value) in &bundle.metadata {
        let _ = writeln!(human, "meta    {key}={value}");
    }
    human.push('\n');
    for (path, entry) in &entries {
        let _ = writeln!(
            human,
            "{:<7} {:>12} {} {path}",
            entry.kind.as_str(),
            entry.size,
            entry.id
        );
    }
    let files: Vec<_> = entries
        .iter()
        .map(|(path, e)| json!({ "path": path, "kind": e.kind, "size": e.size, "id": e.id }))
        .collect();
    let mut doc = bundle_json(&id, &bundle);
    doc["entries"] = json!(files);
    Ok(Outcome::new(human.trim_end().to_string(), doc))
}
