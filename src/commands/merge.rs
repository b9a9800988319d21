//! `baton merge REV`: join two diverged lines of handoffs in one bundle whose parents are
//! `current` and REV, instead of throwing one away with `reset`; `push` then
//! fast-forwards the target.

use std::io::Read;

use serde_json::json;

use crate::cli::MergeArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, ErrorKind, Result};
use baton_format::names::RefName;
use baton_format::{Bundle, EntryKind, ObjectId};
use baton_handoff::briefing::Briefing;
use baton_handoff::capture::{self, SecretsMode};
use baton_handoff::merge::{self, Side};
use baton_handoff::secrets::Scrubber;
use baton_store::Store;
use baton_store::memtree::MemFile;

/// Largest briefing read from a bundle.
const MAX_BRIEFING: u64 = 16 << 20;

pub fn run(ctx: &Ctx, args: &MergeArgs) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let theirs = store.resolve(&args.rev)?;
    let Some(ours) = store.read_ref(&RefName::Current)? else {
        return Err(
            Error::usage("current is empty: there is nothing to merge into")
                .with_hint(format!("take REV as it is with 'baton reset {}'", args.rev)),
        );
    };
    if store.is_ancestor(&theirs, &ours)? {
        let human = if ctx.quiet {
            String::new()
        } else {
            format!(
                "already merged: {} is current or one of its ancestors; nothing written",
                theirs.short()
            )
        };
        return Ok(Outcome::new(
            human,
            json!({ "merged": false, "reason": "already-merged", "current": ours, "rev": theirs }),
        ));
    }
    if store.is_ancestor(&ours, &theirs)? {
        return Err(Error::usage(format!(
            "nothing to merge: current {} is an ancestor of {}",
            ours.short(),
            theirs.short()
        ))
        .with_hint(format!(
            "fast-forward with 'baton reset {}' (the old value stays in 'baton log --audit')",
            args.rev
        )));
    }
    store.require_complete(&theirs)?;
    let new_brief = match &args.brief {
        Some(source) => Some(merge::parse_new(&read_source(source)?)?),
        None => None,
    };
    store.check_log()?;
    let ours_bundle = store.read_bundle(&ours)?;
    let theirs_bundle = store.read_bundle(&theirs)?;

    let mut scrubber = Scrubber::default();
    let briefing = match new_brief {
        Some(b) => Some(b),
        None => {
            let ours_brief = read_briefing(&store, &ours_bundle.tree)?;
            let theirs_brief = read_briefing(&store, &theirs_bundle.tree)?;
            let (ours_short, theirs_short) = (ours.short(), theirs.short());
            merge::merge_briefings(
                &side(&ours_short, &ours_bundle, ours_brief.as_ref()),
                &side(&theirs_short, &theirs_bundle, theirs_brief.as_ref()),
            )?
        }
    };
    let briefing = briefing
        .map(|b| merge::scrub(b, args.secrets, &mut scrubber))
        .transpose()?;
    let from = scrubber.text(&args.from);
    let to = scrubber.text(&args.to);
    let summary = if args.summary.is_empty() {
        default_summary(&args.rev, &theirs, &ours)
    } else {
        scrubber.text(&args.summary)
    };
    scrubber.refuse_if(args.secrets == SecretsMode::Block)?;
    let found = scrubber.found;

    let tree = match &briefing {
        Some(b) => store.replace_root_file(
            &ours_bundle.tree,
            &MemFile::new("handoff.md", b.text.clone()),
        )?,
        None => ours_bundle.tree,
    };
    let mut metadata = ours_bundle.metadata.clone();
    if !found.is_empty() {
        let new = capture::describe_counts(&found);
        let value = match metadata.get("secrets.redacted") {
            Some(old) => format!("{old}; merge: {new}"),
            None => new,
        };
        metadata.insert("secrets.redacted".into(), value);
    }
    let (id, bundle) = store.commit_merge_bundle(tree, ours, &[theirs], "merge", |b| {
        b.from = from;
        b.to = to;
        b.summary = summary;
        b.metadata = metadata;
    })?;
    if !ctx.quiet && !ctx.json && !found.is_empty() {
        eprintln!(
            "note: redacted secrets ({})",
            capture::describe_counts(&found)
        );
    }
    Ok(Outcome::new(
        id.to_hex(),
        json!({
            "merged": true,
            "bundle": id,
            "parents": bundle.parents,
            "tree": tree,
            "briefing": match (&args.brief, &briefing) {
                (Some(_), _) => "new",
                (None, Some(_)) => "both-next-steps",
                (None, None) => "none",
            },
            "secrets": found,
        }),
    ))
}

fn side<'a>(short: &'a str, bundle: &'a Bundle, briefing: Option<&'a Briefing>) -> Side<'a> {
    Side {
        short,
        from: &bundle.from,
        to: &bundle.to,
        briefing,
    }
}

/// "Merge targets/origin (0123456789ab) into 89abcdef0123", or without the name when REV
/// was given as an id.
fn default_summary(rev: &str, theirs: &ObjectId, ours: &ObjectId) -> String {
    let rev = crate::output::terminal_safe(rev);
    if theirs.to_hex().starts_with(&rev.to_ascii_lowercase()) {
        format!("Merge {} into {}", theirs.short(), ours.short())
    } else {
        format!("Merge {rev} ({}) into {}", theirs.short(), ours.short())
    }
}

/// A bundle's briefing, if it has a valid one.
fn read_briefing(store: &Store, tree: &ObjectId) -> Result<Option<Briefing>> {
    let entry = match store.lookup_path(tree, "handoff.md") {
        Ok(entry) if entry.kind != EntryKind::Dir && entry.size <= MAX_BRIEFING => entry,
        Ok(_) => return Ok(None),
        Err(e) if e.kind == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let bytes = store.objects.get_bytes(&entry.id, MAX_BRIEFING)?;
    Ok(std::str::from_utf8(&bytes)
        .ok()
        .and_then(|t| Briefing::parse(t).ok()))
}

/// The bytes of `--brief FILE`, or of stdin for `-`.
fn read_source(source: &str) -> Result<Vec<u8>> {
    if source == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| Error::other(format!("cannot read the briefing from stdin: {e}")))?;
        return Ok(bytes);
    }
    super::save::read_brief_file(source)
}
