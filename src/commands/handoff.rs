//! `baton handoff --to AGENT --brief FILE [--transcript SRC] [--push TARGET]`: save a
//! handoff and push it in one step, then print the one line the receiver runs.

use std::collections::BTreeMap;

use serde_json::json;

use crate::cli::{HandoffArgs, PushArgs, SaveArgs};
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, ErrorKind, Result};

pub fn run(ctx: &Ctx, args: &HandoffArgs) -> Result<Outcome> {
    // Checked here, not by clap, so that the answer carries the briefing skeleton.
    if args.brief.is_none() && !args.no_brief {
        return Err(baton_handoff::briefing::missing());
    }
    // A mistyped --push target is refused before anything is saved.
    if let Some(target) = &args.push {
        baton_sync::choose_target(&ctx.open_store_locked()?.config, Some(target))?;
    }
    let save = SaveArgs {
        dir: args.workspace.clone(),
        brief: args.brief.clone(),
        no_brief: args.no_brief,
        attach: args.attach.clone(),
        transcript: args.transcript.clone(),
        secrets: Some(args.secrets),
        pii: Some(args.pii),
        no_ignore: false,
        no_cache: false,
        from: args.from.clone(),
        to: args.to.clone(),
        summary: args.summary.clone(),
        note: args.note.clone(),
        meta: Vec::new(),
    };
    let (saved, id) = super::save::save_handoff(ctx, &save, BTreeMap::new())?;
    let short = id.short();
    let store_path = ctx.store_path()?;
    let Some(target) = &args.push else {
        let receiver = format!("baton --store {} resume {short}", store_path.display());
        let human = format!(
            "Saved handoff {short} for {}.\nReceiver runs: {receiver}",
            args.to
        );
        return Ok(Outcome::new(
            quiet_or(ctx, human),
            json!({ "bundle": id, "saved": saved.json, "pushed": null, "receiver": receiver }),
        ));
    };
    let push = PushArgs {
        target: Some(target.clone()),
        rev: Some(id.to_hex()),
        force: None,
        connect: args.connect.clone(),
    };
    let (pushed, url) =
        super::push::run_to(ctx, &push).map_err(|e| refused_push(e, &short, target))?;
    let receiver = format!("baton resume {target}");
    let human = format!(
        "Saved handoff {short} for {} and pushed it to {target} ({url}).\n\
         Receiver runs: {receiver}   (in a store with target {target}; else first: baton clone {url})",
        args.to
    );
    Ok(Outcome::new(
        quiet_or(ctx, human),
        json!({
            "bundle": id,
            "saved": saved.json,
            "pushed": pushed.json,
            "receiver": receiver,
            "clone": format!("baton clone {url}"),
        }),
    ))
}

fn quiet_or(ctx: &Ctx, human: String) -> String {
    if ctx.quiet { String::new() } else { human }
}

/// A push that fails after the save: the handoff stays saved, and the error says so and
/// how to send it again, keeping the push's own code and advice.
fn refused_push(e: Error, short: &str, target: &str) -> Error {
    let retry = if e.kind == ErrorKind::StoreConflict {
        format!(
            "someone pushed to {target} first: 'baton pull {target}' (exit 5: diverged), then \
             'baton merge targets/{target}' and 'baton push {target}' to keep both lines, or \
             'baton reset targets/{target}' and hand off again, or push with --force EXPECTED_ID"
        )
    } else {
        format!("send it again with 'baton push {target} {short}'")
    };
    let hint = match &e.hint {
        Some(h) => format!("{h}; the handoff is saved locally: {retry}"),
        None => format!("the handoff is saved locally: {retry}"),
    };
    // The push's cause chain stays (--verbose, the JSON `causes`).
    Error {
        source: e.source,
        ..Error::new(
            e.kind,
            format!(
                "saved handoff {short}, but the push to {target} failed: {}",
                e.message
            ),
        )
        .with_hint(hint)
    }
}
