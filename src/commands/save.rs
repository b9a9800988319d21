//! `baton save`: snapshot a directory, or save a handoff of a workspace, as a new bundle
//! on top of `current`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::json;

use crate::cli::SaveArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, Result};
use baton_handoff::capture::{self, Attachment, SecretsMode};
use baton_handoff::evidence;
use baton_handoff::pii::PiiMode;
use baton_handoff::save::secrets::{self as save_secrets, Fields};
use baton_handoff::save::snapshot::{
    SnapshotOptions, SnapshotProgress, SnapshotReport, save_snapshot,
};
use baton_handoff::save::{self, SaveOptions, SaveReport, TranscriptSource};

pub fn run(ctx: &Ctx, args: &SaveArgs) -> Result<Outcome> {
    let metadata = parse_metadata(&args.meta)?;
    if args.brief.is_some() || args.no_brief {
        return save_handoff(ctx, args, metadata).map(|(outcome, _)| outcome);
    }
    if !args.attach.is_empty() || args.transcript.is_some() || args.pii.is_some() {
        return Err(
            Error::usage("--attach, --transcript and --pii belong to a handoff")
                .with_hint("add --brief FILE (or --no-brief) to save a handoff of the workspace"),
        );
    }
    let Some(dir) = &args.dir else {
        return Err(Error::usage("nothing to save").with_hint(
            "give DIR to snapshot a directory, or --brief FILE (or --no-brief) to save a handoff of this workspace",
        ));
    };
    let store = ctx.open_store()?;
    let opts = SnapshotOptions {
        dir: dir.clone(),
        secrets: args.secrets.unwrap_or(SecretsMode::Block),
        respect_ignores: !args.no_ignore,
        use_cache: !args.no_cache,
        fields: Fields {
            summary: args.summary.clone(),
            note: args.note.clone(),
            from: args.from.clone(),
            to: args.to.clone(),
            metadata,
        },
    };
    let bar = OnceLock::new();
    let report = save_snapshot(&store, opts, &|event| match event {
        SnapshotProgress::Writing { total_bytes } => {
            let _ = bar.set(ctx.progress(total_bytes, true).with_message("saving"));
        }
        SnapshotProgress::Wrote(n) => {
            if let Some(bar) = bar.get() {
                bar.inc(n);
            }
        }
        SnapshotProgress::Written => {
            if let Some(bar) = bar.get() {
                bar.finish_and_clear();
            }
        }
    })?;
    super::auto_repack(ctx, &store);
    Ok(snapshot_outcome(ctx, dir, report))
}

/// The snapshot as the CLI reports it: a note on stderr when secrets were found (not with
/// --quiet or --json) and the JSON document.
fn snapshot_outcome(ctx: &Ctx, dir: &Path, report: SnapshotReport) -> Outcome {
    let (found, places) = (&report.found, &report.places);
    if !ctx.quiet && !ctx.json && report.found_secrets() {
        let what = match report.mode {
            SecretsMode::Redact => "redacted secrets",
            _ => "stored secrets as they are",
        };
        eprintln!(
            "note: {what} ({}) in {}",
            save_secrets::describe(found, places),
            save_secrets::list(dir, found, places)
        );
    }
    let stats = &report.stats;
    Outcome::new(
        report.id.to_hex(),
        json!({
            "bundle": report.id,
            "parents": report.parents,
            "tree": report.tree,
            "files": stats.files,
            "bytes": stats.bytes,
            "objects_written": stats.objects_written,
            "bytes_written": stats.bytes_written,
            "files_cached": stats.files_cached,
            "secrets": save_secrets::json_entries(dir, found, places),
            "secrets_mode": match report.mode {
                SecretsMode::Block => "block",
                SecretsMode::Redact => "redact",
                SecretsMode::Allow => "allow",
            },
        }),
    )
}

/// `save --brief FILE|-` / `save --no-brief`: a handoff of the workspace.
pub(super) fn save_handoff(
    ctx: &Ctx,
    args: &SaveArgs,
    metadata: BTreeMap<String, String>,
) -> Result<(Outcome, baton_format::ObjectId)> {
    // The git evidence starts before anything else, so that it overlaps all of it.
    let evidence = start_evidence(args);
    let brief = save::read_brief(args.brief.as_deref())?;
    let mut opts = handoff_options(args, brief, metadata);
    opts.evidence = evidence;
    save_handoff_with(ctx, args, opts)
}

/// The options of the handoff `args` ask for, the briefing already read.
fn handoff_options(
    args: &SaveArgs,
    brief: Option<Vec<u8>>,
    metadata: BTreeMap<String, String>,
) -> SaveOptions {
    let workspace = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    SaveOptions {
        brief,
        attachments: args.attach.iter().cloned().map(Attachment::Named).collect(),
        transcript: args.transcript.clone().map(TranscriptSource::Named),
        secrets: args.secrets.unwrap_or(SecretsMode::Redact),
        pii: args.pii.unwrap_or(PiiMode::Redact),
        from: args.from.clone(),
        to: args.to.clone(),
        summary: args.summary.clone(),
        note: args.note.clone(),
        metadata,
        ..SaveOptions::new(workspace)
    }
}

/// The git evidence of the workspace a handoff will be made of, started at once; `None`
/// when the handoff will be refused before it is needed (its error comes in turn).
fn start_evidence(args: &SaveArgs) -> Option<evidence::BackgroundCapture> {
    let mode = args.secrets.unwrap_or(SecretsMode::Redact).for_handoff();
    if args.no_ignore || mode.is_err() {
        return None;
    }
    save::start_evidence(args.dir.as_deref().unwrap_or(Path::new(".")))
}

/// Save the handoff `opts` describes (`args` only for the flags a handoff refuses), then
/// report it as the CLI does.
fn save_handoff_with(
    ctx: &Ctx,
    args: &SaveArgs,
    opts: SaveOptions,
) -> Result<(Outcome, baton_format::ObjectId)> {
    if args.no_ignore {
        return Err(Error::usage("--no-ignore belongs to a directory snapshot")
            .with_hint("a handoff stores evidence and attachments, not the directory"));
    }
    run_handoff(ctx, opts)
}

/// Save the handoff `opts` describes in the store of `ctx` and report it (the CLI's
/// `save --brief` and `handoff`, the MCP server's `save_handoff`).
pub(super) fn run_handoff(
    ctx: &Ctx,
    opts: SaveOptions,
) -> Result<(Outcome, baton_format::ObjectId)> {
    opts.secrets.for_handoff()?;
    let store = ctx.open_store()?;
    let report = save::save_handoff(&store, opts)?;
    super::auto_repack(ctx, &store);
    let id = report.id;
    Ok((handoff_outcome(ctx, report), id))
}

/// The save of a handoff as the CLI and the MCP server report it: notes on stderr (not
/// with --quiet or --json) and the JSON document.
fn handoff_outcome(ctx: &Ctx, report: SaveReport) -> Outcome {
    let pii = &report.pii;
    if !ctx.quiet && !ctx.json && !report.secrets.is_empty() {
        eprintln!(
            "note: redacted secrets ({})",
            capture::describe_counts(&report.secrets)
        );
    }
    if !ctx.quiet && !ctx.json {
        for line in &report.transcript_notes {
            eprintln!("note: {}", crate::output::terminal_safe(line));
        }
    }
    if !ctx.quiet && !ctx.json && !pii.places.is_empty() {
        let what = match pii.mode {
            PiiMode::Redact => "redacted personal data",
            PiiMode::Allow => "stored personal data as it is",
        };
        eprintln!(
            "note: {what} ({}); --pii {} to {}",
            pii.describe(),
            match pii.mode {
                PiiMode::Redact => "allow",
                PiiMode::Allow => "redact",
            },
            match pii.mode {
                PiiMode::Redact => "keep it",
                PiiMode::Allow => "replace it by placeholders",
            }
        );
    }
    if !ctx.quiet && !ctx.json && !report.partial.is_empty() {
        eprintln!(
            "note: partial workspace evidence: {}",
            crate::output::terminal_safe(&report.partial.join("; "))
        );
    }
    Outcome::new(
        report.id.to_hex(),
        json!({
            "bundle": report.id,
            "parents": report.parents,
            "tree": report.tree,
            "kind": "handoff",
            "files": report.files,
            "secrets": report.secrets,
            "pii": {
                "mode": pii.mode.name(),
                "found": pii.totals(),
                "places": pii.places,
            },
            "partial": report.partial,
            "transcript_cached": report.transcript_cached,
            "transcript_appended": report.transcript_appended,
            "transcript_skipped": report.transcript_skipped,
            "transcript_notes": report.transcript_notes,
        }),
    )
}

fn parse_metadata(pairs: &[String]) -> Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(Error::usage(format!("--meta '{pair}' is not KEY=VALUE"))
                .with_hint("write --meta key=value"));
        };
        if key.is_empty() {
            return Err(Error::usage(format!("--meta '{pair}' has an empty key")));
        }
        map.insert(key.to_string(), value.to_string());
    }
    Ok(map)
}
