//! `baton reset REV`: move `current` to another complete bundle (after a lost race, onto
//! the fetched `targets/NAME`), by compare-and-swap; the old value stays in the log.

use serde_json::json;

use crate::commands::Ctx;
use crate::error::{Error, Result};
use crate::format::ObjectId;
use crate::format::id::show_full;
use crate::format::names::RefName;
use crate::output::Outcome;
use crate::store::Store;
use crate::store::refs::{Expect, MoveReason};

pub fn run(ctx: &Ctx, rev: &str, expect: Option<&str>) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let target = store.resolve(rev)?;
    require_complete(&store, &target)?;
    let expect = match expect {
        None => Expect::Any,
        Some("none") => Expect::Value(None),
        Some(id) => Expect::Value(Some(store.resolve(id)?)),
    };
    let reason = MoveReason {
        action: "reset".into(),
        ..MoveReason::default()
    };
    let old = store.update_ref(&RefName::Current, expect, Some(target), &reason)?;
    let human = if ctx.quiet {
        String::new()
    } else if old == Some(target) {
        format!("current is already {}", target.short())
    } else {
        format!(
            "current: {} -> {} (the old value stays in 'baton log --audit')",
            crate::format::id::show_short(old),
            target.short()
        )
    };
    Ok(Outcome::new(
        human,
        json!({ "old": old, "new": target, "moved": old != Some(target) }),
    ))
}

/// A ref may only name a bundle whose tree is all here and whose parents are here (each
/// of which was complete when it was stored: save, pull and import publish objects before
/// manifests). Costs the size of one bundle, not of the history.
pub(super) fn require_complete(store: &Store, bundle: &ObjectId) -> Result<()> {
    let manifest = store.read_bundle(bundle)?;
    let missing = |what: &str, id: &ObjectId| {
        Error::integrity(format!(
            "bundle {} is incomplete here: {what} {} is missing",
            bundle.short(),
            show_full(Some(*id))
        ))
        .with_hint("pull or import it again, then retry")
    };
    for parent in &manifest.parents {
        if !store.objects.contains(parent) {
            return Err(missing("parent bundle", parent));
        }
    }
    // Each distinct tree once: a tree naming one subtree many times is checked cheaply.
    let mut below: Vec<ObjectId> = store.trees_below(&[*bundle])?.into_iter().collect();
    below.sort();
    for id in below {
        if !store.objects.contains(&id) {
            return Err(missing("object", &id));
        }
    }
    Ok(())
}
