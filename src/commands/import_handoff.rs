//! `baton import-handoff PATH`: turn handoffs written by other tools into bundles.

use std::path::Path;

use serde_json::json;

use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_format::id::show_short;
use baton_handoff::capture::{self, SecretsMode};
use baton_handoff::import;

pub fn run(ctx: &Ctx, path: &Path, secrets_mode: SecretsMode) -> Result<Outcome> {
    let secrets_mode = secrets_mode.for_handoff()?;
    let store = ctx.open_store()?;
    // The whole input is parsed and checked first: malformed input imports nothing.
    let mut plan = import::plan(path)?;
    // Imported text is scanned like a saved handoff: secrets never reach the store.
    let scrubber = import::scrub(&mut plan);
    scrubber.refuse_if(secrets_mode == SecretsMode::Block)?;
    let found = scrubber.found;
    let import::Applied {
        imported,
        skipped,
        current,
    } = import::apply(&store, &plan)?;
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
    let mut human = if !human.is_empty() && !found.is_empty() {
        format!(
            "{human}; redacted secrets ({})",
            capture::describe_counts(&found)
        )
    } else {
        human
    };
    // Shown even with -q: each is input that was read past, not imported.
    for warning in &plan.warnings {
        if !human.is_empty() {
            human.push('\n');
        }
        human.push_str(&format!("warning: {warning}"));
    }
    Ok(Outcome::new(
        human,
        json!({
            "format": plan.format.name(),
            "bundles": imported,
            "already_imported": skipped,
            "secrets": found,
            "warnings": plan.warnings,
        }),
    ))
}
