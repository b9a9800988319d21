//! `baton push [TARGET] [REV]`: send a bundle to a target and move its `current`.

use serde_json::json;

use super::connect_settings;
use crate::cli::PushArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_format::ObjectId;
use baton_sync::push::{PushRequest, push};
use baton_sync::{ConnectSettings, choose_target, open_remote, target_settings};

/// What to push where, as plain values (the CLI's flags, or an MCP call's).
pub struct PushOptions {
    /// Target name [default: the only or the default target]; a REV when it names none.
    pub target: Option<String>,
    /// Bundle to push [default: current].
    pub rev: Option<String>,
    /// Overwrite the remote `current` only if it still holds this id (`none`: empty).
    pub force: Option<String>,
    pub connect: ConnectSettings,
}

impl From<&PushArgs> for PushOptions {
    fn from(args: &PushArgs) -> PushOptions {
        PushOptions {
            target: args.target.clone(),
            rev: args.rev.clone(),
            force: args.force.clone(),
            connect: connect_settings(&args.connect),
        }
    }
}

pub fn run(ctx: &Ctx, args: &PushArgs) -> Result<Outcome> {
    run_to(ctx, PushOptions::from(args)).map(|(outcome, _)| outcome)
}

/// Push, and say where to: the outcome and the target's URL.
pub(super) fn run_to(ctx: &Ctx, args: PushOptions) -> Result<(Outcome, String)> {
    let store = ctx.open_store()?;
    // One positional that is not a target name is the REV (`baton push current~1`).
    let (target_arg, rev_arg) = match (&args.target, &args.rev) {
        (Some(t), None) if !store.config.targets.contains_key(t) => {
            baton_sync::resolve_rev(&store, t)?;
            (None, Some(t.as_str()))
        }
        (t, r) => (t.as_deref(), r.as_deref()),
    };
    let (name, url) = choose_target(&store.config, target_arg)?;
    let bundle = store.resolve(rev_arg.unwrap_or("current"))?;
    let force = match args.force.as_deref() {
        None => None,
        Some("none") => Some(None),
        Some(id) => Some(Some(ObjectId::parse(id)?)),
    };
    let settings = target_settings(&store.config, &name, args.connect);
    let mut remote = open_remote(&url, &settings)?;
    let bar = ctx.progress(0, true).with_message("pushing");
    let report = push(
        &store,
        remote.as_mut(),
        &PushRequest {
            target: &name,
            bundle,
            force,
        },
        &bar,
    )?;
    bar.finish_and_clear();
    let human = if ctx.quiet {
        String::new()
    } else if report.up_to_date {
        format!("{name} is up to date at {}", bundle.short())
    } else {
        format!(
            "Pushed {} to {name} ({} objects, {} bytes in {} ms){}",
            bundle.short(),
            report.objects_sent,
            report.bytes_sent,
            report.elapsed_ms,
            if report.created_remote {
                "; created the remote store"
            } else {
                ""
            }
        )
    };
    let outcome = Outcome::new(
        human,
        json!({ "target": name, "url": url, "report": report }),
    );
    Ok((outcome, url.to_string()))
}
