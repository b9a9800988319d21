//! `baton sync [TARGET]`: push what `checkpoint --push` queued (`baton_sync::queue`),
//! removing each entry once pushed; exit non-zero, the failures listed, if any failed.

use serde_json::json;

use crate::cli::checkpoint::SyncArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, ErrorKind, Result};
use baton_sync::queue;

pub fn run(ctx: &Ctx, args: &SyncArgs) -> Result<Outcome> {
    let store = ctx.open_store()?;
    if let Some(target) = &args.target {
        baton_sync::choose_target(&store.config, Some(target))?;
    }
    let connect = super::connect_settings(&args.connect);
    let drained = queue::drain(&store, args.target.as_deref(), &connect, !args.background)?;
    let mut human = Vec::new();
    if drained.busy {
        human.push("another sync is pushing the queue".to_string());
    }
    for p in &drained.pushed {
        human.push(if p.up_to_date {
            format!("{} is up to date at {}", p.target, p.bundle.short())
        } else {
            format!("pushed {} to {}", p.bundle.short(), p.target)
        });
    }
    for f in &drained.failed {
        human.push(format!(
            "push of {} to {} failed (attempt {}): {}",
            f.bundle.get(..12).unwrap_or(&f.bundle),
            f.target,
            f.attempts,
            f.error
        ));
    }
    if human.is_empty() {
        human.push("nothing queued".into());
    }
    let pushed: Vec<_> = drained
        .pushed
        .iter()
        .map(|p| json!({ "target": p.target, "bundle": p.bundle, "up_to_date": p.up_to_date }))
        .collect();
    let failed: Vec<_> = drained
        .failed
        .iter()
        .map(|f| {
            json!({
                "target": f.target,
                "bundle": f.bundle,
                "attempts": f.attempts,
                "error": f.error.to_string(),
                "kind": f.error.kind.code(),
            })
        })
        .collect();
    let remaining = queue::entries(store.root())?;
    let mut outcome = Outcome::new(
        if ctx.quiet {
            String::new()
        } else {
            human.join("\n")
        },
        json!({ "pushed": pushed, "failed": failed, "busy": drained.busy, "queue": remaining }),
    );
    // The background drain of a hook has no one to tell: its failures are in the queue.
    if !args.background && !drained.failed.is_empty() {
        let first = &drained.failed[0];
        // One failure keeps its own kind (exit code); several are a transport failure
        // unless all share one kind.
        let kind = if drained
            .failed
            .iter()
            .all(|f| f.error.kind == first.error.kind)
        {
            first.error.kind
        } else {
            ErrorKind::Transport
        };
        let targets: Vec<&str> = drained.failed.iter().map(|f| f.target.as_str()).collect();
        outcome.failure = Some(
            Error::new(
                kind,
                format!(
                    "{} of {} queued pushes failed ({}): {}",
                    drained.failed.len(),
                    drained.failed.len() + drained.pushed.len(),
                    targets.join(", "),
                    first.error.message
                ),
            )
            .with_hint(first.error.hint.clone().unwrap_or_else(|| {
                "they stay queued: run 'baton sync' again once the target is reachable".into()
            })),
        );
    }
    Ok(outcome)
}
