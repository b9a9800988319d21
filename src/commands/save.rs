//! `baton save`: snapshot a directory, or save a handoff of a workspace, as a new bundle
//! on top of `current`.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::cli::SaveArgs;
use crate::commands::Ctx;
use crate::output::{Outcome, terminal_safe};
use baton_error::{Error, ErrorKind, Result};
use baton_handoff::capture::{self, Attachment, SecretsMode};
use baton_handoff::evidence;
use baton_handoff::pii::PiiMode;
use baton_handoff::save::secrets::{self as save_secrets, Fields};
use baton_handoff::save::{self, SaveOptions, SaveReport, TranscriptSource, check_refs_readable};
use baton_handoff::secrets::files::{self, Found, REDACT_LIMIT, all_kinds};
use baton_store::{snapshot, statcache};

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
    let mode = args.secrets.unwrap_or(SecretsMode::Block);
    let store = ctx.open_store()?;
    let skip = std::fs::metadata(store.root())
        .ok()
        .map(|m| (m.dev(), m.ino()));
    let ignores = if args.no_ignore {
        snapshot::Ignores::Off
    } else {
        snapshot::Ignores::Respect
    };
    // Taken before the listing: the stat cache's racy-clean rule compares against it.
    let started_ns = statcache::now_ns();
    // A file the stat cache vouches for is unchanged since a save that scanned it under
    // this same secret policy: it is neither read nor scanned again. One that held
    // secrets then was stored as it is (`--secrets allow`); its findings are those of
    // the same bytes, so they are reported (or refused) again, and it is read again only
    // to be redacted.
    let policy = baton_handoff::pii::cache_policy();
    let root = std::fs::canonicalize(dir).ok();
    // `--no-cache`: every file is read (a write through a shared mmap can leave its
    // metadata as the cache recorded it); what was read is recorded all the same.
    let cache = match &root {
        Some(root) if !args.no_cache => statcache::for_root(&store, root, &policy),
        _ => statcache::Lookup::default(),
    };
    let with_secrets = |f: &statcache::Findings| mode != SecretsMode::Redact && known_kinds(f);
    let lookup = snapshot::cache_lookup(&store, dir, &cache, &with_secrets);
    let mut snap = snapshot::scan_cached(dir, skip, ignores, &lookup)?;
    check_refs_readable(&store)?;
    // What is stored besides the contents is scanned under the same mode: entry names
    // and symlink targets, then the manifest's fields.
    let redacting = mode == SecretsMode::Redact;
    let names = save_secrets::scan_names(&mut snap.tree, dir, redacting)?;
    let given = Fields {
        summary: args.summary.clone(),
        note: args.note.clone(),
        from: args.from.clone(),
        to: args.to.clone(),
        metadata,
    };
    let (fields, field_findings) = save_secrets::scan_fields(given, redacting)?;
    let node = &snap.tree;
    // Every file is opened beneath DIR's fd, never again by its path.
    let open = |path: &Path| snap.open_file(path);
    // Every other file is scanned before a single object is written.
    let mut found = files::scan_files(&node.uncached_files(), &open)?;
    for path in node.cached_files() {
        let findings = snapshot::cache_name(dir, path).and_then(|rel| cache.findings(&rel));
        if let Some(findings) = findings {
            found.push(cached_found(path, findings));
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    let mut places = names.findings;
    places.extend(field_findings);
    if !found.is_empty() || !places.is_empty() {
        match mode {
            SecretsMode::Block if places.is_empty() => {
                return Err(snapshot_refusal(dir, &found));
            }
            SecretsMode::Block => return Err(save_secrets::refusal(dir, &found, &places)),
            SecretsMode::Redact => {
                if let Some(big) = found.iter().find(|f| f.counts.is_none()) {
                    return Err(Error::new(
                        ErrorKind::Security,
                        format!(
                            "refusing to save: {} holds secrets ({}) and is too large to redact (over {} MiB)",
                            terminal_safe(&save_secrets::display_path(dir, &big.path)),
                            big.kinds().join(", "),
                            REDACT_LIMIT >> 20
                        ),
                    )
                    .with_hint(format!(
                        "remove it or list it in {}, or save with --secrets allow to store it as it is",
                        snapshot::IGNORE_FILE
                    )));
                }
            }
            SecretsMode::Allow => {}
        }
    }
    let redact: std::collections::HashSet<&Path> = match mode {
        SecretsMode::Redact => found.iter().map(|f| f.path.as_path()).collect(),
        _ => Default::default(),
    };
    let replace = |path: &Path| -> Result<Option<Vec<u8>>> {
        if !redact.contains(path) {
            return Ok(None);
        }
        files::read_redacted(path, &open).map(Some)
    };
    let bar = ctx
        .progress(node.total_bytes(), true)
        .with_message("saving");
    let (tree, stats, blobs) = snapshot::write(&store, &snap, &|n| bar.inc(n), &replace)?;
    bar.finish_and_clear();
    let mut metadata = fields.metadata;
    let secrets_key = match mode {
        SecretsMode::Redact => "secrets.redacted",
        _ => "secrets.allowed",
    };
    if !found.is_empty() || !places.is_empty() {
        metadata.insert(secrets_key.into(), save_secrets::describe(&found, &places));
    }
    let (id, bundle) = store.commit_bundle(tree, "save", |b| {
        b.from = fields.from;
        b.to = fields.to;
        b.summary = fields.summary;
        b.note = fields.note;
        b.metadata = metadata;
    })?;
    // After the ref move: every id recorded is reachable from `current` now. Files that
    // held secrets are left out (so they are scanned again) unless they were stored as
    // they are: then with what was found, reported again by the next save. The save is
    // complete either way, so a cache that cannot be written is simply not. The cache
    // names files by path: a path whose names held secrets is not written there unless
    // the secrets were stored as they are, nor a root whose own path holds one.
    let root_clean = root.as_ref().is_some_and(|root| {
        mode == SecretsMode::Allow
            || baton_handoff::secrets::scan(std::os::unix::ffi::OsStrExt::as_bytes(
                root.as_os_str(),
            ))
            .is_empty()
    });
    if let Some(root) = root.as_ref().filter(|_| root_clean) {
        let flagged: std::collections::HashMap<&Path, &Found> =
            found.iter().map(|f| (f.path.as_path(), f)).collect();
        let findings = |p: &Path| match flagged.get(p) {
            _ if redacting && names.flagged.iter().any(|f| p.starts_with(f)) => None,
            None => Some(None),
            Some(f) if mode == SecretsMode::Allow => f
                .counts
                .as_ref()
                .map(|counts| Some(counts.iter().map(|(k, n)| (k.to_string(), *n)).collect())),
            Some(_) => None,
        };
        let entries = node.cache_entries(dir, &blobs, &findings);
        // A re-save of an unchanged tree would write the same entries again.
        if !cache.unchanged(&entries) {
            let _ = statcache::record(&store, root, &policy, started_ns, entries);
        }
    }
    super::auto_repack(ctx, &store);
    if !ctx.quiet && !ctx.json && (!found.is_empty() || !places.is_empty()) {
        let what = match mode {
            SecretsMode::Redact => "redacted secrets",
            _ => "stored secrets as they are",
        };
        eprintln!(
            "note: {what} ({}) in {}",
            save_secrets::describe(&found, &places),
            save_secrets::list(dir, &found, &places)
        );
    }
    let secrets = save_secrets::json_entries(dir, &found, &places);
    Ok(Outcome::new(
        id.to_hex(),
        json!({
            "bundle": id,
            "parents": bundle.parents,
            "tree": tree,
            "files": stats.files,
            "bytes": stats.bytes,
            "objects_written": stats.objects_written,
            "bytes_written": stats.bytes_written,
            "files_cached": stats.files_cached,
            "secrets": secrets,
            "secrets_mode": match mode {
                SecretsMode::Block => "block",
                SecretsMode::Redact => "redact",
                SecretsMode::Allow => "allow",
            },
        }),
    ))
}

/// Whether every kind in `findings` is one this build knows (always, under the same
/// policy fingerprint; anything else is read and scanned again).
fn known_kinds(findings: &statcache::Findings) -> bool {
    findings
        .iter()
        .all(|(kind, _)| baton_handoff::secrets::KINDS.contains(&kind.as_str()))
}

/// The finding of a cached file from what its entry recorded (kinds checked by
/// [`known_kinds`] before the entry was used).
fn cached_found(path: &Path, findings: &statcache::Findings) -> Found {
    let counts = findings
        .iter()
        .filter_map(|(kind, n)| {
            let kind = baton_handoff::secrets::KINDS
                .iter()
                .find(|k| **k == kind.as_str())?;
            Some((*kind, *n))
        })
        .collect();
    Found {
        path: path.to_path_buf(),
        counts: Some(counts),
        big_kinds: Default::default(),
    }
}

/// The refusal of a snapshot that holds secrets: kinds and paths, never values.
fn snapshot_refusal(dir: &Path, found: &[Found]) -> Error {
    let files = if found.len() == 1 {
        "file holds"
    } else {
        "files hold"
    };
    Error::new(
        ErrorKind::Security,
        format!(
            "refusing to save: {} {files} secrets ({}): {}",
            found.len(),
            all_kinds(found).join(", "),
            save_secrets::list(dir, found, &[])
        ),
    )
    .with_hint(format!(
        "remove them or list them in {}, or save with --secrets redact (placeholders) or --secrets allow (as they are)",
        snapshot::IGNORE_FILE
    ))
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
