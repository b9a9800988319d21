//! The merge use case: join the line of history of REV with `current` in one bundle
//! whose parents are both, its briefing new or both lines' Next Steps, its text fields
//! scrubbed; `baton merge` calls it with plain options and renders the outcome.

use baton_error::{Error, Result};
use baton_format::names::RefName;
use baton_format::{Bundle, EntryKind, ObjectId};
use baton_store::Store;
use baton_store::memtree::MemFile;

use super::{Side, merge_briefings, parse_new, scrub};
use crate::briefing::Briefing;
use crate::capture::{self, SecretsMode};
use crate::secrets::Scrubber;

/// Largest briefing read from a bundle.
const MAX_BRIEFING: u64 = 16 << 20;

/// What to merge, as plain values (the CLI's flags).
pub struct MergeOptions {
    /// The other line: an id, unique prefix, or targets/NAME, as the user wrote it (also
    /// for messages and the default summary).
    pub rev: String,
    /// Where the merged briefing comes from: a FILE, `-` for stdin; `None`: both
    /// sides' Next Steps. Read only once the merge is known to be needed.
    pub brief: Option<String>,
    pub secrets: SecretsMode,
    pub from: String,
    pub to: String,
    /// Empty: "Merge REV (ID) into ID".
    pub summary: String,
}

/// What a merge did.
pub enum MergeOutcome {
    /// REV is `current` or one of its ancestors: nothing written.
    AlreadyMerged {
        current: ObjectId,
        rev: ObjectId,
    },
    Merged(Merged),
}

/// The merge bundle written.
pub struct Merged {
    pub id: ObjectId,
    pub parents: Vec<ObjectId>,
    pub tree: ObjectId,
    /// `new`, `both-next-steps` or `none`.
    pub briefing: &'static str,
    /// Secrets redacted, by kind.
    pub secrets: std::collections::BTreeMap<&'static str, u64>,
}

/// Merge `opts.rev` into `current` (store left as it was on any refusal).
pub fn merge(store: &Store, opts: &MergeOptions) -> Result<MergeOutcome> {
    let theirs = store.resolve(&opts.rev)?;
    let Some(ours) = store.read_ref(&RefName::Current)? else {
        return Err(
            Error::usage("current is empty: there is nothing to merge into")
                .with_hint(format!("take REV as it is with 'baton reset {}'", opts.rev)),
        );
    };
    if store.is_ancestor(&theirs, &ours)? {
        return Ok(MergeOutcome::AlreadyMerged {
            current: ours,
            rev: theirs,
        });
    }
    if store.is_ancestor(&ours, &theirs)? {
        return Err(Error::usage(format!(
            "nothing to merge: current {} is an ancestor of {}",
            ours.short(),
            theirs.short()
        ))
        .with_hint(format!(
            "fast-forward with 'baton reset {}' (the old value stays in 'baton log --audit')",
            opts.rev
        )));
    }
    store.require_complete(&theirs)?;
    let new_brief = match &opts.brief {
        Some(source) => match crate::save::read_brief(Some(source))? {
            Some(raw) => Some(parse_new(&raw)?),
            None => None,
        },
        None => None,
    };
    store.check_log()?;
    let ours_bundle = store.read_bundle(&ours)?;
    let theirs_bundle = store.read_bundle(&theirs)?;

    let mut scrubber = Scrubber::default();
    let briefing = match new_brief {
        Some(b) => Some(b),
        None => {
            let ours_brief = read_briefing(store, &ours_bundle.tree)?;
            let theirs_brief = read_briefing(store, &theirs_bundle.tree)?;
            let (ours_short, theirs_short) = (ours.short(), theirs.short());
            merge_briefings(
                &side(&ours_short, &ours_bundle, ours_brief.as_ref()),
                &side(&theirs_short, &theirs_bundle, theirs_brief.as_ref()),
            )?
        }
    };
    let briefing = briefing
        .map(|b| scrub(b, opts.secrets, &mut scrubber))
        .transpose()?;
    let from = scrubber.text(&opts.from);
    let to = scrubber.text(&opts.to);
    let summary = if opts.summary.is_empty() {
        default_summary(&opts.rev, &theirs, &ours)
    } else {
        scrubber.text(&opts.summary)
    };
    scrubber.refuse_if(opts.secrets == SecretsMode::Block)?;
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
    Ok(MergeOutcome::Merged(Merged {
        id,
        parents: bundle.parents,
        tree,
        briefing: match (&opts.brief, &briefing) {
            (Some(_), _) => "new",
            (None, Some(_)) => "both-next-steps",
            (None, None) => "none",
        },
        secrets: found,
    }))
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
    let rev = baton_format::text::terminal_safe(rev);
    if theirs.to_hex().starts_with(&rev.to_ascii_lowercase()) {
        format!("Merge {} into {}", theirs.short(), ours.short())
    } else {
        format!("Merge {rev} ({}) into {}", theirs.short(), ours.short())
    }
}

/// A bundle's briefing, if it has a valid one.
fn read_briefing(store: &Store, tree: &ObjectId) -> Result<Option<Briefing>> {
    let entry = match store.find_path(tree, "handoff.md")? {
        Some(entry) if entry.kind != EntryKind::Dir && entry.size <= MAX_BRIEFING => entry,
        _ => return Ok(None),
    };
    let bytes = store.objects.get_bytes(&entry.id, MAX_BRIEFING)?;
    Ok(std::str::from_utf8(&bytes)
        .ok()
        .and_then(|t| Briefing::parse(t).ok()))
}
