//! The handoff save as a library function: briefing, git evidence, transcript and
//! attachments assembled and scanned, the manifest's fields scrubbed, everything written
//! in one pack batch and committed, and the caches the next handoff builds on written
//! beside the commit. The CLI (`save --brief`, `handoff`) and the MCP server call it with
//! plain options and render its report.

pub mod secrets;
pub mod snapshot;
pub mod transcript;

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::capture::{self, Attachment, HandoffRequest, SecretsMode};
use crate::evidence;
use crate::pii::{self, PiiMode};
use crate::secrets::Scrubber;
use crate::sessions::skipped::Skipped;
use baton_error::{Error, Result};
use baton_format::ObjectId;
use baton_format::names::RefName;
use baton_store::pack_batch::PackBatch;
use baton_store::{Store, history_cache, transcript_cache};

pub use transcript::Source as TranscriptSource;

/// What to save: everything a handoff is made of, as plain values.
pub struct SaveOptions {
    /// The workspace whose evidence the handoff carries (canonicalised by the save).
    pub workspace: PathBuf,
    /// The raw briefing, or `None` for an evidence-only handoff (`--no-brief`).
    pub brief: Option<Vec<u8>>,
    pub attachments: Vec<Attachment>,
    pub transcript: Option<TranscriptSource>,
    /// Redact or block (`allow` is refused: it is for directory snapshots).
    pub secrets: SecretsMode,
    pub pii: PiiMode,
    pub from: String,
    pub to: String,
    /// One line saying what this handoff is; empty: the briefing's Objective.
    pub summary: String,
    pub note: String,
    /// `--meta` keys and values, stored (scanned) in the manifest's metadata.
    pub metadata: BTreeMap<String, String>,
    /// The workspace's git evidence when the caller started it early ([`start_evidence`])
    /// so that it overlaps reading the briefing; used when it is of `workspace`.
    pub evidence: Option<evidence::BackgroundCapture>,
    /// A checkpoint (`baton checkpoint --hook`): record the bundle's content fingerprint
    /// ([`FINGERPRINT_KEY`]) and commit nothing when `current` already has the same one.
    pub skip_unchanged: bool,
}

/// The bundle metadata key of a checkpoint's content fingerprint: the BLAKE3 of every
/// file's path, mode and id but `context.md`'s (which holds the capture time). Two
/// checkpoints with the same fingerprint hold the same session and workspace evidence.
pub const FINGERPRINT_KEY: &str = "checkpoint.fingerprint";

impl SaveOptions {
    /// A handoff of `workspace` with no briefing, transcript or attachment, secrets and
    /// personal data redacted: the defaults the CLI's flags start from.
    pub fn new(workspace: PathBuf) -> SaveOptions {
        SaveOptions {
            workspace,
            brief: None,
            attachments: Vec::new(),
            transcript: None,
            secrets: SecretsMode::Redact,
            pii: PiiMode::Redact,
            from: String::new(),
            to: String::new(),
            summary: String::new(),
            note: String::new(),
            metadata: BTreeMap::new(),
            evidence: None,
            skip_unchanged: false,
        }
    }
}

/// What a save did: the new bundle and everything a caller reports about it.
pub struct SaveReport {
    pub id: ObjectId,
    pub parents: Vec<ObjectId>,
    pub tree: ObjectId,
    /// The bundle's paths, in bundle order.
    pub files: Vec<String>,
    /// Secrets redacted, by kind.
    pub secrets: BTreeMap<&'static str, u64>,
    /// Personal data found: the mode, and by place.
    pub pii: pii::Scrubber,
    /// Parts of the workspace evidence that could not be read, one line each.
    pub partial: Vec<String>,
    /// Whether the transcript came from the transcript cache.
    pub transcript_cached: bool,
    /// Whether only lines appended since a cached handoff were normalised and scanned.
    pub transcript_appended: bool,
    /// Transcript entries of unknown types, left out.
    pub transcript_skipped: Skipped,
    /// The handoff's notes on the transcript, one line each.
    pub transcript_notes: Vec<String>,
    /// With [`SaveOptions::skip_unchanged`]: nothing was committed, `current` (`id`)
    /// already holds this content.
    pub unchanged: bool,
}

/// Start reading the git evidence of `workspace` now, for [`SaveOptions::evidence`];
/// `None` if the workspace cannot be opened (the save reports that in turn).
pub fn start_evidence(workspace: &Path) -> Option<evidence::BackgroundCapture> {
    std::fs::canonicalize(workspace).ok().map(evidence::start)
}

/// The briefing `--brief` names: a file, `-` for stdin, or none (`--no-brief`).
pub fn read_brief(brief: Option<&str>) -> Result<Option<Vec<u8>>> {
    Ok(match brief {
        Some("-") => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| Error::other(format!("cannot read the briefing from stdin: {e}")))?;
            Some(bytes)
        }
        Some(path) => Some(read_brief_file(path)?),
        None => None,
    })
}

/// The briefing file `path` (`--brief` of save, handoff and merge); a directory is a
/// usage error that says which file was meant.
pub fn read_brief_file(path: &str) -> Result<Vec<u8>> {
    if Path::new(path).is_dir() {
        return Err(Error::usage(format!(
            "--brief {} is a directory, not a briefing file",
            path.escape_debug()
        ))
        .with_hint(format!(
            "give the briefing file itself (e.g. --brief {}/handoff.md), or - for stdin",
            path.trim_end_matches('/').escape_debug()
        )));
    }
    std::fs::read(path).map_err(|e| Error::io("cannot read briefing", Path::new(path), e))
}

/// Log lines a save decodes before writing anything: the end of the log, which its own
/// line will follow (a young store's whole log). Older lines are full `verify`'s (and
/// `gc`'s) to check: decoding all of them made a save's cost grow with the history
/// (30 ms of 40 ms of CPU at 10,000 bundles).
const SAVE_LOG_CHECK: usize = 64;

/// A damaged ref or a damaged line at the end of the log stops a save before a single
/// object is written, so a refused save leaves the store exactly as it was.
pub fn check_refs_readable(store: &Store) -> Result<()> {
    store.read_ref(&RefName::Current)?;
    store.read_log_tail(SAVE_LOG_CHECK)?;
    Ok(())
}

/// Save a handoff of `opts.workspace` as a new bundle on top of `current`. Everything is
/// assembled, validated and scanned before the store is touched; a refusal leaves it
/// exactly as it was.
pub fn save_handoff(store: &Store, opts: SaveOptions) -> Result<SaveReport> {
    let mode = opts.secrets.for_handoff()?;
    let workspace = std::fs::canonicalize(&opts.workspace)
        .map_err(|e| Error::io("cannot open workspace", &opts.workspace, e))?;
    // The git evidence is read while the store is opened, the secret rules are built and
    // the transcript is read, normalised and scanned.
    let mut pending = match opts.evidence {
        Some(pending) if pending.dir() == workspace => pending,
        _ => evidence::start(workspace.clone()),
    };
    pending.give_histories(history_cache::histories(store));
    let policy = pii::cache_policy();
    let mut prepared = transcript::prepare(store, &policy, opts.transcript, &workspace)?;
    let workspace_evidence = pending.finish();
    let history = workspace_evidence.known_history();
    let transcript_skipped = std::mem::take(&mut prepared.skipped);
    let transcript_notes = std::mem::take(&mut prepared.notes);
    let mut metadata = opts.metadata;
    if !transcript_notes.is_empty() {
        metadata.insert("transcript.notes".into(), transcript_notes.join("; "));
    }
    if let Some(label) = prepared.label.clone() {
        metadata.insert("transcript.source".into(), label);
        metadata.insert(
            "transcript.schema".into(),
            format!("baton.events/{}", crate::events::SCHEMA_VERSION),
        );
    }
    let request = HandoffRequest {
        brief: opts.brief,
        transcript: prepared.files,
        attachments: opts.attachments,
        skip: std::fs::metadata(store.root())
            .ok()
            .map(|m| (m.dev(), m.ino())),
        secrets: mode,
        pii: opts.pii,
    };
    // Everything is assembled, validated and scanned before the store is touched; the
    // manifest's own text fields are scanned like the files.
    let mut assembled = capture::assemble(request, workspace_evidence)?;
    // The manifest's fields (`--meta` keys included) and the workspace's path are
    // scanned as the files are: redacted, or the handoff refused.
    let given = secrets::Fields {
        summary: opts.summary,
        note: opts.note,
        from: opts.from,
        to: opts.to,
        metadata,
    };
    let (fields, field_findings) = secrets::scan_fields(given, true)?;
    let mut scrubber = Scrubber {
        found: std::mem::take(&mut assembled.secrets),
    };
    for finding in field_findings {
        for (kind, n) in finding.counts {
            *scrubber.found.entry(kind).or_default() += n;
        }
    }
    let workspace_text = scrubber.text(&workspace.display().to_string());
    scrubber.refuse_if(mode == SecretsMode::Block)?;
    assembled.secrets = scrubber.found;
    check_refs_readable(store)?;
    let secrets::Fields {
        summary: summary_arg,
        note,
        from,
        to,
        mut metadata,
    } = fields;
    // Without --from (or BATON_FROM) the sender is the harness whose session is the
    // transcript: the label is `HARNESS:SESSION`, HARNESS as `Harness::name` gives it.
    let from = if from.is_empty() {
        harness_of(metadata.get("transcript.source")).unwrap_or(from)
    } else {
        from
    };
    let summary_arg = assembled.pii.text("--summary", &summary_arg);
    let note = assembled.pii.text("--note", &note);
    metadata.insert("kind".into(), "handoff".into());
    metadata.insert("workspace".into(), workspace_text);
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
    if !assembled.pii.places.is_empty() {
        let key = match assembled.pii.mode {
            PiiMode::Redact => "pii.redacted",
            PiiMode::Allow => "pii.allowed",
        };
        metadata.insert(key.into(), assembled.pii.describe());
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
    // The files, their trees and the manifest go into one pack, published under the
    // lock just before the ref move.
    let batch = PackBatch::new(&store.objects);
    let (tree, ids) = store.mem_tree_into(&assembled.files, &batch)?;
    // A checkpoint records its content fingerprint, and nothing when `current` has it.
    let print = opts
        .skip_unchanged
        .then(|| fingerprint(&assembled.files, &ids));
    if let Some(print) = &print {
        metadata.insert(FINGERPRINT_KEY.into(), print.clone());
    }
    // A session that held personal data is scanned again on every handoff, as one that
    // held a secret is: the cache only vouches for files found free of both.
    let remember = prepared.remember.filter(|_| !assembled.pii_in_transcript);
    let transcript = transcript::entry(prepared.label, remember, &assembled.files, &ids);
    // What the next handoff builds on is written while the pack and the ref are made
    // durable, and put in place after the ref move (best effort: the save is complete
    // without it; the next handoff only does more work).
    let mut unchanged: Option<(ObjectId, baton_format::Bundle)> = None;
    let (committed, cache) = std::thread::scope(|s| {
        let cache =
            s.spawn(|| transcript_cache::prepare_handoff(store, &policy, transcript, history));
        let fill = |b: &mut baton_format::Bundle| {
            b.from = from;
            b.to = to;
            b.summary = summary;
            b.note = note;
            b.metadata = metadata;
        };
        let committed = match &print {
            None => store.commit_bundle_in(batch, tree, "save", fill).map(Some),
            Some(print) => {
                let mut same = |parent: Option<ObjectId>| {
                    let found = same_content(store, parent, print)?;
                    if let Some(found) = &found {
                        unchanged = Some(found.clone());
                    }
                    Ok(found.is_some())
                };
                store.commit_bundle_in_unless(batch, tree, "save", &mut same, fill)
            }
        };
        let cache = cache
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (committed, cache)
    });
    let Some((id, bundle)) = committed? else {
        // `current` holds this content already: nothing was written.
        let (id, bundle) = unchanged
            .ok_or_else(|| Error::internal("an unchanged checkpoint without its bundle"))?;
        return Ok(SaveReport {
            id,
            parents: bundle.parents,
            tree: bundle.tree,
            files: assembled.files.iter().map(|f| f.path.clone()).collect(),
            secrets: assembled.secrets,
            pii: assembled.pii,
            partial: assembled.evidence.partial,
            transcript_cached: prepared.cached,
            transcript_appended: prepared.appended,
            transcript_skipped,
            transcript_notes,
            unchanged: true,
        });
    };
    if let Ok(Some(cache)) = cache {
        let _ = cache.publish();
    }
    Ok(SaveReport {
        id,
        parents: bundle.parents,
        tree,
        files: assembled.files.iter().map(|f| f.path.clone()).collect(),
        secrets: assembled.secrets,
        pii: assembled.pii,
        partial: assembled.evidence.partial,
        transcript_cached: prepared.cached,
        transcript_appended: prepared.appended,
        transcript_skipped,
        transcript_notes,
        unchanged: false,
    })
}

/// The content fingerprint of a checkpoint's files ([`FINGERPRINT_KEY`]).
fn fingerprint(files: &[baton_store::memtree::MemFile], ids: &[(ObjectId, u64)]) -> String {
    let mut hasher = blake3::Hasher::new();
    for (file, (id, size)) in files.iter().zip(ids) {
        if file.path == "context.md" {
            continue;
        }
        hasher.update(file.path.as_bytes());
        hasher.update(&[0, u8::from(file.exec)]);
        hasher.update(id.to_hex().as_bytes());
        hasher.update(&size.to_le_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

/// `parent` (what `current` holds) and its bundle when its fingerprint is `print`.
fn same_content(
    store: &Store,
    parent: Option<ObjectId>,
    print: &str,
) -> Result<Option<(ObjectId, baton_format::Bundle)>> {
    let Some(id) = parent else {
        return Ok(None);
    };
    let bundle = store.read_bundle(&id)?;
    let same = bundle.metadata.get(FINGERPRINT_KEY).map(String::as_str) == Some(print);
    Ok(same.then_some((id, bundle)))
}

/// The harness a `transcript.source` label names (`claude-code:SESSION` gives
/// `claude-code`); `None` for a plain FILE transcript, which has no label.
fn harness_of(label: Option<&String>) -> Option<String> {
    let (harness, _) = label?.split_once(':')?;
    (!harness.is_empty()).then(|| harness.to_string())
}
