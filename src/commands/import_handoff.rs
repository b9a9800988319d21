//! `baton import-handoff PATH`: turn handoffs written by other tools into bundles.

use std::collections::HashMap;
use std::path::Path;
use std::time::SystemTime;

use serde_json::json;

use crate::commands::Ctx;
use crate::error::{Error, Result};
use crate::format::id::show_short;
use crate::format::names::RefName;
use crate::format::{Bundle, ObjectId};
use crate::handoff::capture::{self, SecretsMode};
use crate::handoff::import;
use crate::handoff::secrets::Scrubber;
use crate::output::Outcome;
use crate::store::memtree::MemFile;
use crate::store::refs::{Expect, MoveReason};

pub fn run(ctx: &Ctx, path: &Path, secrets_mode: SecretsMode) -> Result<Outcome> {
    let secrets_mode = secrets_mode.for_handoff()?;
    let store = ctx.open_store()?;
    // The whole input is parsed and checked first: malformed input imports nothing.
    let mut plan = import::plan(path)?;
    // Imported text is scanned like a saved handoff: secrets never reach the store.
    let scrubber = scrub_plan(&mut plan);
    scrubber.refuse_if(secrets_mode == SecretsMode::Block)?;
    let found = scrubber.found;
    let start = store.read_ref(&RefName::Current)?;
    store.check_log()?;
    let mut ids: HashMap<String, ObjectId> = HashMap::new();
    let mut current = start;
    let mut imported = Vec::new();
    // A bundle imported before (same source fingerprint in current's history) is reused,
    // not written again: importing the same input twice adds nothing.
    let known = imported_fingerprints(&store, start)?;
    let mut skipped = Vec::new();
    for planned in &plan.bundles {
        if let Some(id) = planned
            .metadata
            .get(import::FINGERPRINT)
            .and_then(|fp| known.get(fp))
        {
            ids.insert(planned.key.clone(), *id);
            skipped.push(json!({ "key": planned.key, "bundle": id }));
            continue;
        }
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
    } else if imported.is_empty() {
        format!(
            "0 handoffs imported (already imported: {} {} handoff{}); current is {}",
            skipped.len(),
            plan.format.name(),
            if skipped.len() == 1 { "" } else { "s" },
            show_short(current)
        )
    } else {
        let again = if skipped.is_empty() {
            String::new()
        } else {
            format!("; {} already imported", skipped.len())
        };
        format!(
            "Imported {} handoff{} ({}{again}); current is {}",
            imported.len(),
            if imported.len() == 1 { "" } else { "s" },
            plan.format.name(),
            show_short(current)
        )
    };
    let human = if !human.is_empty() && !found.is_empty() {
        format!(
            "{human}; redacted secrets ({})",
            capture::describe_counts(&found)
        )
    } else {
        human
    };
    Ok(Outcome::new(
        human,
        json!({
            "format": plan.format.name(),
            "bundles": imported,
            "already_imported": skipped,
            "secrets": found,
        }),
    ))
}

/// The `import.fingerprint` of every bundle in `start`'s history, to its bundle id.
fn imported_fingerprints(
    store: &crate::store::Store,
    start: Option<ObjectId>,
) -> Result<HashMap<String, ObjectId>> {
    let mut out = HashMap::new();
    let Some(start) = start else {
        return Ok(out);
    };
    for id in store.history(&start)? {
        let bundle = store.read_bundle(&id)?;
        if let Some(fp) = bundle.metadata.get(import::FINGERPRINT) {
            out.entry(fp.clone()).or_insert(id);
        }
    }
    Ok(out)
}

/// Redact every text of the plan in place; returns the kinds and counts found.
fn scrub_plan(plan: &mut import::Plan) -> Scrubber {
    let mut scrubber = Scrubber::default();
    for bundle in &mut plan.bundles {
        for (path, bytes) in &mut bundle.files {
            *bytes = scrubber.bytes(bytes);
            *path = scrubber.text(path);
        }
        for text in [
            &mut bundle.from,
            &mut bundle.to,
            &mut bundle.summary,
            &mut bundle.note,
        ] {
            *text = scrubber.text(text);
        }
        for value in bundle.metadata.values_mut() {
            *value = scrubber.text(value);
        }
    }
    scrubber
}
