//! `baton handoff --to AGENT --brief FILE [--transcript SRC] [--push TARGET]`: save a
//! handoff and push it in one step, then print the one line the receiver runs.

use std::path::PathBuf;

use serde_json::json;

use super::push::PushOptions;
use crate::cli::HandoffArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, ErrorKind, Result};
use baton_handoff::capture::Attachment;
use baton_handoff::save::{self, SaveOptions, TranscriptSource};

pub fn run(ctx: &Ctx, args: &HandoffArgs) -> Result<Outcome> {
    // Checked here, not by clap, so that the answer carries the briefing skeleton.
    if args.brief.is_none() && !args.no_brief {
        return Err(baton_handoff::briefing::missing());
    }
    // A mistyped --push target is refused before anything is saved.
    if let Some(target) = &args.push {
        baton_sync::choose_target(&ctx.open_store_locked()?.config, Some(target))?;
    }
    let workspace = args.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    // The git evidence starts before the briefing is read, so that it overlaps it.
    let evidence = match args.secrets.for_handoff() {
        Ok(_) => save::start_evidence(&workspace),
        Err(_) => None,
    };
    let brief = save::read_brief(args.brief.as_deref())?;
    let opts = SaveOptions {
        brief,
        attachments: args.attach.iter().cloned().map(Attachment::Named).collect(),
        transcript: args.transcript.clone().map(TranscriptSource::Named),
        secrets: args.secrets,
        pii: args.pii,
        from: args.from.clone(),
        to: args.to.clone(),
        summary: args.summary.clone(),
        note: args.note.clone(),
        evidence,
        ..SaveOptions::new(workspace)
    };
    let (saved, id) = super::save::run_handoff(ctx, opts)?;
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
    let push = PushOptions {
        target: Some(target.clone()),
        rev: Some(id.to_hex()),
        force: None,
        connect: super::connect_settings(&args.connect),
    };
    let (pushed, url) =
        super::push::run_to(ctx, push).map_err(|e| refused_push(e, &short, target))?;
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
