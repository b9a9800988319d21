//! `baton log`: bundle history newest first, or the audit log of ref moves.

use std::fmt::Write;

use serde_json::json;

use super::{bundle_json, handoff_line};
use crate::cli::LogArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_format::id::show_short;
use baton_format::names::RefName;
use baton_handoff::import;
use baton_sync::audit::read_remote_audit;
use baton_sync::{ConnectSettings, choose_target, open_remote, target_settings};

/// What history to show, as plain values (the CLI's flags, or an MCP call's).
pub struct LogOptions {
    /// Where to start [default: current; ignored with `audit`].
    pub rev: Option<String>,
    /// At most this many entries.
    pub max: Option<usize>,
    /// The audit log of ref moves instead of the bundle history.
    pub audit: bool,
    /// With `audit`: this target's audit log instead of the store's.
    pub target: Option<String>,
    pub connect: ConnectSettings,
}

impl From<&LogArgs> for LogOptions {
    fn from(args: &LogArgs) -> LogOptions {
        LogOptions {
            rev: args.rev.clone(),
            max: args.max,
            audit: args.audit,
            target: args.target.clone(),
            connect: super::connect_settings(&args.connect),
        }
    }
}

pub fn run(ctx: &Ctx, args: &LogArgs) -> Result<Outcome> {
    run_with(ctx, LogOptions::from(args))
}

pub fn run_with(ctx: &Ctx, args: LogOptions) -> Result<Outcome> {
    if args.audit {
        // The audit log is the store's, not a bundle's: a REV given with it is ignored.
        if let Some(rev) = &args.rev
            && !ctx.json
            && !ctx.quiet
        {
            eprintln!(
                "note: --audit shows every ref move; '{}' is ignored",
                rev.escape_debug()
            );
        }
        let store = ctx.open_store_locked()?;
        let Some(target) = &args.target else {
            return audit(&store, store.audit_trail(args.max)?, None);
        };
        let (name, url) = choose_target(&store.config, Some(target))?;
        let settings = target_settings(&store.config, &name, args.connect);
        let mut remote = open_remote(&url, &settings)?;
        let entries = read_remote_audit(remote.as_mut(), args.max)?;
        return audit(&store, entries, Some((&name, &url)));
    }
    let store = ctx.open_store()?;
    let start = match &args.rev {
        Some(rev) => store.resolve(rev)?,
        None => match store.read_ref(&RefName::Current)? {
            Some(id) => id,
            None => return Ok(Outcome::new("", json!({ "bundles": [] }))),
        },
    };
    let mut human = String::new();
    let mut bundles = Vec::new();
    for (id, bundle) in store.history_newest_first(&start, args.max.unwrap_or(usize::MAX))? {
        let _ = writeln!(human, "bundle {id}");
        let who = handoff_line(&bundle.from, &bundle.to);
        if !who.is_empty() {
            let _ = writeln!(human, "Handoff: {who}");
        }
        let _ = writeln!(human, "Date:    {}", bundle.created);
        if let Some(status) = bundle.metadata.get(import::STATUS) {
            let _ = writeln!(human, "Status:  {status}");
        }
        if bundle.parents.len() > 1 {
            let parents: Vec<String> = bundle.parents.iter().map(|p| p.short()).collect();
            let _ = writeln!(human, "Merge:   {}", parents.join(" "));
        }
        if !bundle.summary.is_empty() {
            let _ = writeln!(
                human,
                "\n    {}",
                bundle.summary.lines().next().unwrap_or("")
            );
        }
        if !bundle.note.is_empty() {
            // The note is free text: every line indented under the summary.
            if bundle.summary.is_empty() {
                human.push('\n');
            }
            for line in bundle.note.lines() {
                let _ = writeln!(human, "    Note: {line}");
            }
        }
        human.push('\n');
        let mut doc = bundle_json(&id, &bundle);
        if let Some(status) = bundle.metadata.get(import::STATUS) {
            doc["status"] = json!(status);
        }
        bundles.push(doc);
    }
    Ok(Outcome::new(
        human.trim_end().to_string(),
        json!({ "bundles": bundles }),
    ))
}

/// Show audit entries (oldest first); a target's are labelled with its name and URL.
fn audit(
    store: &baton_store::Store,
    entries: Vec<baton_format::LogEntry>,
    target: Option<(&str, &str)>,
) -> Result<Outcome> {
    // Sealed free text (encrypted stores) is opened when the store is unlocked.
    let env = store.objects.envelope();
    let open = |t: &str| env.open_text(t).unwrap_or_else(|| "(encrypted)".into());
    let entries: Vec<baton_format::LogEntry> = entries
        .iter()
        .map(|e| baton_format::LogEntry {
            from: open(&e.from),
            to: open(&e.to),
            host: open(&e.host),
            user: open(&e.user),
            ..e.clone()
        })
        .collect();
    let entries = &entries[..];
    let mut human = String::new();
    for e in entries {
        let _ = write!(
            human,
            "{} {} {}..{} {}",
            e.time,
            e.ref_name,
            show_short(e.old),
            show_short(e.new),
            e.action
        );
        let who = handoff_line(&e.from, &e.to);
        if !who.is_empty() {
            let _ = write!(human, " {who}");
        }
        let _ = writeln!(human, " by {}@{}", e.user, e.host);
    }
    let mut doc = json!({ "entries": entries });
    if let Some((name, url)) = target {
        doc["target"] = json!(name);
        doc["url"] = json!(url);
    }
    Ok(Outcome::new(human.trim_end().to_string(), doc))
}
