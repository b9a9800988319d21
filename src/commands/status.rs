//! `baton status`: the store, `current`, the targets (and what each last held here) and
//! the push queue (target, bundle, attempts, last error, since).

use serde_json::json;

use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_format::names::RefName;

pub fn run(ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.open_store_locked()?;
    let current = store.read_ref(&RefName::Current)?;
    let mut human = vec![format!("store   {}", store.root().display())];
    let current_json = match current {
        Some(id) => {
            let summary = store
                .read_bundle(&id)
                .map(|b| b.summary)
                .unwrap_or_default();
            human.push(format!("current {} {summary}", id.short()));
            json!({ "id": id, "summary": summary })
        }
        None => {
            human.push("current (none)".into());
            serde_json::Value::Null
        }
    };
    let mut targets = Vec::new();
    for (name, target) in &store.config.targets {
        let known = store
            .read_ref(&RefName::Target(name.clone()))
            .ok()
            .flatten();
        let default = store.config.default_target.as_deref() == Some(name.as_str());
        human.push(format!(
            "target  {name}{} {} (last seen at {})",
            if default { " (default)" } else { "" },
            target.url,
            known
                .map(|id| id.short())
                .unwrap_or_else(|| "nothing".into())
        ));
        targets
            .push(json!({ "name": name, "url": target.url, "default": default, "known": known }));
    }
    let queue = baton_sync::queue::entries(store.root())?;
    if queue.is_empty() {
        human.push("queue   empty".into());
    }
    for entry in &queue {
        human.push(format!(
            "queued  {} -> {} since {}, {} attempts{}",
            entry.bundle.get(..12).unwrap_or(&entry.bundle),
            entry.target,
            entry.since,
            entry.attempts,
            entry
                .last_error
                .as_deref()
                .map(|e| format!(", last error: {e}"))
                .unwrap_or_default()
        ));
    }
    Ok(Outcome::new(
        human.join("\n"),
        json!({
            "store": store.root(),
            "current": current_json,
            "targets": targets,
            "queue": queue,
        }),
    ))
}
