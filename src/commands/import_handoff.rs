//! `baton import-handoff PATH`: turn handoffs written by other tools into bundles.

use std::collections::HashMap;
use std::path::Path;
use std::time::SystemTime;

use serde_json::json;

use crate::error::{Error, Result};
use crate::format::names::RefName;
use crate::format::{Bundle, ObjectId};
use crate::handoff::import;
use crate::output::{Ctx, Outcome};
use crate::store::memtree::MemFile;
use crate::store::refs::{Expect, MoveReason};

pub fn run(ctx: &Ctx, path: &Path) -> Result<Outcome> {
    let store = ctx.open_store()?;
    // The whole input is parsed and checked first: malformed input imports nothing.
    let plan = import::plan(path)?;
    let start = store.read_ref(&RefName::Current)?;
    store.read_log()?;
    let mut ids: HashMap<String, ObjectId> = HashMap::new();
    let mut current = start;
    let mut imported = Vec::new();
    for planned in &plan.bundles {
        let files: Vec<MemFile> = planned
            .files
            .iter()
            .map(|(p, b)| MemFile::new(p.clone(), b.clone()))
            .collect();
        let tree = store.write_mem_tree(&files)?;
        let mut parents = Vec::new();
        for key in &planned.parents {
            let id = ids.get(key).ok_or_else(|| {
                Error::other(format!(
                    "internal error: parent {key} of {} was not imported first",
                    planned.key
                ))
            })?;
            parents.push(*id);
        }
        // Roots of the imported history hang under the store's current bundle, so that
        // `current` keeps every earlier handoff in its history.
        if parents.is_empty() {
            parents.extend(start);
        }
        let mut bundle = Bundle::new(
            tree,
            parents,
            planned.created.unwrap_or_else(SystemTime::now),
        );
        bundle.from = planned.from.clone();
        bundle.to = planned.to.clone();
        bundle.summary = planned.summary.clone();
        bundle.note = planned.note.clone();
        bundle.metadata = planned.metadata.clone();
        let id = store.write_bundle(&bundle)?;
        // Each import moves `current` (and so lands in the log), which keeps every
        // imported head reachable even when the history has several.
        let reason = MoveReason {
            action: "import-handoff".into(),
            from: bundle.from.clone(),
            to: bundle.to.clone(),
        };
        store.update_ref(&RefName::Current, Expect::Value(current), Some(id), &reason)?;
        current = Some(id);
        ids.insert(planned.key.clone(), id);
        imported.push(json!({ "key": planned.key, "bundle": id, "parents": bundle.parents }));
    }
    let human = if ctx.quiet {
        String::new()
    } else {
        format!(
            "Imported {} handoffs ({}); current is {}",
            imported.len(),
            plan.format.name(),
            current
                .map(|c| c.short())
                .unwrap_or_else(|| "(none)".into())
        )
    };
    Ok(Outcome::new(
        human,
        json!({ "format": plan.format.name(), "bundles": imported }),
    ))
}
