//! `baton merge REV`: join two diverged lines of handoffs in one bundle whose parents are
//! `current` and REV, instead of throwing one away with `reset`; `push` then
//! fast-forwards the target. The merge itself is `baton_handoff::merge::merge`.

use serde_json::json;

use crate::cli::MergeArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_handoff::capture;
use baton_handoff::merge::{self, MergeOptions, MergeOutcome};

pub fn run(ctx: &Ctx, args: &MergeArgs) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let opts = MergeOptions {
        rev: args.rev.clone(),
        brief: args.brief.clone(),
        secrets: args.secrets,
        from: args.from.clone(),
        to: args.to.clone(),
        summary: args.summary.clone(),
    };
    let merged = match merge::merge(&store, &opts)? {
        MergeOutcome::AlreadyMerged { current, rev } => {
            let human = if ctx.quiet {
                String::new()
            } else {
                format!(
                    "already merged: {} is current or one of its ancestors; nothing written",
                    rev.short()
                )
            };
            return Ok(Outcome::new(
                human,
                json!({ "merged": false, "reason": "already-merged", "current": current, "rev": rev }),
            ));
        }
        MergeOutcome::Merged(merged) => merged,
    };
    if !ctx.quiet && !ctx.json && !merged.secrets.is_empty() {
        eprintln!(
            "note: redacted secrets ({})",
            capture::describe_counts(&merged.secrets)
        );
    }
    Ok(Outcome::new(
        merged.id.to_hex(),
        json!({
            "merged": true,
            "bundle": merged.id,
            "parents": merged.parents,
            "tree": merged.tree,
            "briefing": merged.briefing,
            "secrets": merged.secrets,
        }),
    ))
}
