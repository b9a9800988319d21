//! The checkpoint use case behind `baton checkpoint --hook`: a `--no-brief` handoff of
//! the hooked session in its workspace, the event named in the note, nothing recorded
//! when session and workspace are unchanged since `current` (its content fingerprint,
//! `save::FINGERPRINT_KEY`); and for Claude Code's `SessionStart`, the latest kickoff of
//! the workspace. Hook input parsing is in `hook`, the log in `log`; no clap, no output.

pub mod hook;
pub mod log;

use std::path::{Path, PathBuf};

use crate::resume;
use crate::save::{self, SaveOptions, TranscriptSource};
use crate::sessions;
use baton_error::Result;
use baton_format::ObjectId;
use baton_store::Store;

pub use hook::{HookEvent, HookHarness};

/// The kickoff budget of a `SessionStart` answer (tokens), as `resume`'s default.
pub const CONTEXT_BUDGET: usize = 2000;
/// How far back (bundles, newest first) a `SessionStart` looks for this workspace's.
const CONTEXT_LOOKBACK: usize = 64;

/// What a checkpoint did.
#[derive(Debug)]
pub struct Checkpointed {
    /// The new bundle, or `current` when unchanged.
    pub bundle: ObjectId,
    /// Nothing was committed: `current` holds the same session and workspace.
    pub unchanged: bool,
    /// The note the bundle carries (or would have).
    pub note: String,
    /// The transcript left out, and why (the session could not be found or read).
    pub no_transcript: Option<String>,
    /// How the session was taken: `cached` (unchanged since a checkpoint), `appended`
    /// (only its new lines normalised and scanned), `whole`; `None` without one.
    pub transcript: Option<&'static str>,
}

/// The workspace of `event`: its `cwd` when it is a directory, else `fallback`.
pub fn workspace_of(event: &HookEvent, fallback: &Path) -> PathBuf {
    match &event.cwd {
        Some(cwd) if cwd.is_absolute() && cwd.is_dir() => cwd.clone(),
        _ => fallback.to_path_buf(),
    }
}

/// The `--transcript` text for `event`'s session: Claude Code's session id when it names
/// the hook's `transcript_path` (a session named by id is the one whose appended lines
/// are normalised and scanned on their own at the next checkpoint, SPEC 5.1), else that
/// path (an absolute file), else the id; Codex's thread id. `None` when it names none.
fn transcript_text(event: &HookEvent, workspace: &Path) -> Option<String> {
    match event.harness {
        HookHarness::ClaudeCode => match (&event.transcript_path, &event.session) {
            (Some(path), Some(id)) if path.is_absolute() && path.is_file() => {
                let by_id = format!("claude-code:{id}");
                let named = sessions::resolve_source(
                    &sessions::Homes::from_env(),
                    &sessions::Source::parse(&by_id),
                    workspace,
                );
                let same = |found: &Path| match (found.canonicalize(), path.canonicalize()) {
                    (Ok(a), Ok(b)) => a == b,
                    _ => false,
                };
                Some(match named {
                    Ok(found) if same(found.path()) => by_id,
                    _ => path.to_string_lossy().into_owned(),
                })
            }
            (Some(path), None) if path.is_absolute() && path.is_file() => {
                Some(path.to_string_lossy().into_owned())
            }
            (_, Some(id)) => Some(format!("claude-code:{id}")),
            _ => None,
        },
        HookHarness::Codex => event.session.as_ref().map(|id| format!("codex:{id}")),
    }
}

/// Save a checkpoint of `event`'s session in `workspace` in `store`.
pub fn checkpoint(store: &Store, event: &HookEvent, workspace: &Path) -> Result<Checkpointed> {
    let mut note = event.note();
    let mut no_transcript = None;
    let transcript = match transcript_text(event, workspace) {
        None => {
            no_transcript = Some(format!(
                "the {} hook named no session",
                event.harness.name()
            ));
            None
        }
        Some(text) => {
            // Found first, so that a session that cannot be found still gives a
            // checkpoint of the workspace (said in the note), never none.
            let source = sessions::Source::parse(&text);
            match sessions::resolve_source(&sessions::Homes::from_env(), &source, workspace) {
                Ok(_) => Some(TranscriptSource::Named(text)),
                Err(e) => {
                    no_transcript = Some(e.message);
                    None
                }
            }
        }
    };
    if no_transcript.is_some() {
        note.push_str("; no transcript");
    }
    let mut opts = SaveOptions::new(workspace.to_path_buf());
    opts.transcript = transcript;
    opts.from = event.harness.name().to_string();
    opts.note = note.clone();
    opts.skip_unchanged = true;
    opts.metadata
        .insert("checkpoint.event".into(), event.event.clone());
    if let Some(session) = &event.session {
        opts.metadata
            .insert("checkpoint.session".into(), session.clone());
    }
    if let Some(why) = &no_transcript {
        opts.metadata
            .insert("checkpoint.no_transcript".into(), why.clone());
    }
    let had_transcript = opts.transcript.is_some();
    let report = save::save_handoff(store, opts)?;
    let transcript = had_transcript.then_some(if report.transcript_cached {
        "cached"
    } else if report.transcript_appended {
        "appended"
    } else {
        "whole"
    });
    Ok(Checkpointed {
        bundle: report.id,
        unchanged: report.unchanged,
        note,
        no_transcript,
        transcript,
    })
}

/// The latest kickoff of `workspace` in `store`: of the newest bundle (within
/// [`CONTEXT_LOOKBACK`] of `current`) whose recorded workspace is this one, verified
/// first; `None` when there is none.
pub fn latest_kickoff(store: &Store, workspace: &Path) -> Result<Option<(ObjectId, String)>> {
    let Some(current) = store.read_ref(&baton_format::names::RefName::Current)? else {
        return Ok(None);
    };
    let here = std::fs::canonicalize(workspace)
        .unwrap_or_else(|_| workspace.to_path_buf())
        .display()
        .to_string();
    let history = store.history_newest_first(&current, CONTEXT_LOOKBACK)?;
    let Some((id, _)) = history
        .into_iter()
        .find(|(_, b)| b.metadata.get("workspace") == Some(&here))
    else {
        return Ok(None);
    };
    let resumed = resume::resume(store, &id, workspace, CONTEXT_BUDGET, false)?;
    Ok(Some((id, resumed.kickoff.text())))
}
