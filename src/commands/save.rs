//! `baton save`: snapshot a directory, or save a handoff of a workspace, as a new bundle
//! on top of `current`.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::cli::SaveArgs;
use crate::error::{Error, Result};
use crate::format::names::RefName;
use crate::handoff::capture::{self, HandoffRequest};
use crate::handoff::sessions;
use crate::output::{Ctx, Outcome};
use crate::store::snapshot;

pub fn run(ctx: &Ctx, args: &SaveArgs) -> Result<Outcome> {
    let metadata = parse_metadata(&args.meta)?;
    if args.brief.is_some() || args.no_brief {
        return save_handoff(ctx, args, metadata).map(|(outcome, _)| outcome);
    }
    if !args.attach.is_empty()
        || args.transcript.is_some()
        || args.secrets != capture::SecretsMode::Redact
    {
        return Err(
            Error::usage("--attach, --transcript and --secrets belong to a handoff")
                .with_hint("add --brief FILE (or --no-brief) to save a handoff of the workspace"),
        );
    }
    let Some(dir) = &args.dir else {
        return Err(Error::usage("nothing to save").with_hint(
            "give DIR to snapshot a directory, or --brief FILE (or --no-brief) to save a handoff of this workspace",
        ));
    };
    let store = ctx.open_store()?;
    let skip = std::fs::metadata(store.root())
        .ok()
        .map(|m| (m.dev(), m.ino()));
    let node = snapshot::scan(dir, skip)?;
    check_refs_readable(&store)?;
    let bar = ctx.progress(node.total_bytes(), true);
    let (tree, stats) = snapshot::write(&store, &node, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let (id, bundle) = store.commit_bundle(tree, "save", |b| {
        b.from = args.from.clone();
        b.to = args.to.clone();
        b.summary = args.summary.clone();
        b.note = args.note.clone();
        b.metadata = metadata;
    })?;
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
        }),
    ))
}

/// A damaged ref or log stops a save before a single object is written, so a refused
/// save leaves the store exactly as it was.
fn check_refs_readable(store: &crate::store::Store) -> Result<()> {
    store.read_ref(&RefName::Current)?;
    store.check_log()?;
    Ok(())
}

/// `save --brief FILE|-` / `save --no-brief`: a handoff of the workspace.
pub(super) fn save_handoff(
    ctx: &Ctx,
    args: &SaveArgs,
    metadata: BTreeMap<String, String>,
) -> Result<(Outcome, crate::format::ObjectId)> {
    let brief = read_brief(args)?;
    save_handoff_with(ctx, args, brief, metadata)
}

/// The briefing `--brief` names: a file, `-` for stdin, or none (`--no-brief`).
fn read_brief(args: &SaveArgs) -> Result<Option<Vec<u8>>> {
    Ok(match args.brief.as_deref() {
        Some("-") => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| Error::other(format!("cannot read the briefing from stdin: {e}")))?;
            Some(bytes)
        }
        Some(path) => Some(
            std::fs::read(path)
                .map_err(|e| Error::io("cannot read briefing", Path::new(path), e))?,
        ),
        None => None,
    })
}

/// Save a handoff whose briefing is already in memory (`brief`; `args.brief` unused).
pub(super) fn save_handoff_with(
    ctx: &Ctx,
    args: &SaveArgs,
    brief: Option<Vec<u8>>,
    mut metadata: BTreeMap<String, String>,
) -> Result<(Outcome, crate::format::ObjectId)> {
    let store = ctx.open_store()?;
    let workspace = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let workspace = std::fs::canonicalize(&workspace)
        .map_err(|e| Error::io("cannot open workspace", &workspace, e))?;
    let transcript = match &args.transcript {
        Some(source) => Some(sessions::load(
            &sessions::Homes::from_env(),
            &sessions::Source::parse(source),
            &workspace,
        )?),
        None => None,
    };
    if let Some(label) = transcript.as_ref().and_then(|t| t.label.clone()) {
        metadata.insert("transcript.source".into(), label);
        metadata.insert(
            "transcript.schema".into(),
            format!("baton.events/{}", crate::handoff::events::SCHEMA_VERSION),
        );
    }
    let (transcript, raw_transcript) = match transcript {
        Some(t) => (Some(t.jsonl), t.raw),
        None => (None, None),
    };
    let request = HandoffRequest {
        workspace: &workspace,
        brief,
        transcript,
        raw_transcript,
        attachments: args.attach.clone(),
        secrets: args.secrets,
    };
    // Everything is assembled, validated and scanned before the store is touched; the
    // manifest's own text fields are scanned like the files.
    let mut assembled = capture::assemble(&request)?;
    let mut scrub = |text: &str| -> String {
        let redaction = crate::handoff::secrets::redact(text.as_bytes());
        for (kind, n) in redaction.counts {
            *assembled.secrets.entry(kind).or_default() += n;
        }
        String::from_utf8(redaction.bytes).unwrap_or_default()
    };
    let summary_arg = scrub(&args.summary);
    let note = scrub(&args.note);
    let from = scrub(&args.from);
    let to = scrub(&args.to);
    for value in metadata.values_mut() {
        *value = scrub(value);
    }
    if args.secrets == capture::SecretsMode::Block && !assembled.secrets.is_empty() {
        return Err(capture::secrets_refusal(&assembled.secrets));
    }
    check_refs_readable(&store)?;
    metadata.insert("kind".into(), "handoff".into());
    metadata.insert("workspace".into(), workspace.display().to_string());
    if !assembled.evidence.partial.is_empty() {
        metadata.insert(
            "evidence.partial".into(),
            assembled.evidence.partial.join("; "),
        );
    }
    if !assembled.secrets.is_empty() {
        metadata.insert(
            "secrets.redacted".into(),
            capture::describe_counts(&assembled.secrets),
        );
    }
    let summary = if summary_arg.is_empty() {
        assembled
            .briefing
            .as_ref()
            .map(|b| b.summary_line())
            .unwrap_or_default()
    } else {
        summary_arg
    };
    let tree = store.write_mem_tree(&assembled.files)?;
    let (id, bundle) = store.commit_bundle(tree, "save", |b| {
        b.from = from;
        b.to = to;
        b.summary = summary;
        b.note = note;
        b.metadata = metadata;
    })?;
    if !ctx.quiet && !ctx.json && !assembled.secrets.is_empty() {
        eprintln!(
            "note: redacted secrets ({})",
            capture::describe_counts(&assembled.secrets)
        );
    }
    if !ctx.quiet && !ctx.json && !assembled.evidence.partial.is_empty() {
        eprintln!(
            "note: partial workspace evidence: {}",
            crate::output::terminal_safe(&assembled.evidence.partial.join("; "))
        );
    }
    let outcome = Outcome::new(
        id.to_hex(),
        json!({
            "bundle": id,
            "parents": bundle.parents,
            "tree": tree,
            "kind": "handoff",
            "files": assembled.files.iter().map(|f| &f.path).collect::<Vec<_>>(),
            "secrets": assembled.secrets,
            "partial": assembled.evidence.partial,
        }),
    );
    Ok((outcome, id))
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
