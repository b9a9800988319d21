//! `baton reset REV`: move `current` to another complete bundle (after a lost race, onto
//! the fetched `targets/NAME`), by compare-and-swap; the old value stays in the log.

use serde_json::json;

use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_format::names::RefName;
use baton_store::refs::{Expect, MoveReason};

pub fn run(ctx: &Ctx, rev: &str, expect: Option<&str>) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let target = store.resolve(rev)?;
    store.require_complete(&target)?;
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
            baton_format::id::show_short(old),
            target.short()
        )
    };
    Ok(Outcome::new(
        human,
        json!({ "old": old, "new": target, "moved": old != Some(target) }),
    ))
}
