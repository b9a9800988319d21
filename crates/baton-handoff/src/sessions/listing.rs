//! Finding a harness's sessions on disk: listing a workspace's sessions in `latest`'s order,
//! finding one by id or id prefix, and the refusals when none (or too large a one) is found.

use std::fs;
use std::path::{Path, PathBuf};

use super::{
    Harness, Homes, MAX_SESSION_BYTES, MIN_PREFIX, SessionInfo, claude_code, codex, gemini,
};
use baton_error::{Error, Result};

/// Whether a listing counts each session's lines (a whole read of every file), or only
/// finds which session is which (the start of each file, for `latest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    Lines,
    /// [`SessionInfo::lines`] is left 0.
    NotLines,
}

/// Every session of `harness` whose working directory is `workspace`, newest first.
pub fn list(homes: &Homes, harness: Harness, workspace: &Path) -> Result<Vec<SessionInfo>> {
    list_counting(homes, harness, workspace, Count::Lines)
}

fn list_counting(
    homes: &Homes,
    harness: Harness,
    workspace: &Path,
    count: Count,
) -> Result<Vec<SessionInfo>> {
    let workspace = canonical(workspace);
    let mut found: Vec<SessionInfo> = match harness {
        Harness::ClaudeCode => claude_code::sessions(&homes.claude, Some(&workspace), count)?,
        Harness::Codex => codex::sessions(&homes.codex, Some(&workspace), count)?,
        Harness::Gemini => gemini::sessions(&homes.gemini, Some(&workspace), count)?,
    };
    sort_latest_first(&mut found);
    if harness == Harness::Codex {
        codex::session_first(&mut found);
    }
    Ok(found)
}

impl SessionInfo {
    /// What `latest` orders sessions by, greatest first: the file's last change, then the
    /// session's start, then its id.
    fn latest_key(&self) -> (u64, &str, &str) {
        (self.modified, &self.started, &self.session)
    }
}

/// `sessions` in `latest`'s order (ties keep their listing order).
pub(super) fn sort_latest_first(sessions: &mut [SessionInfo]) {
    sessions.sort_by(|a, b| b.latest_key().cmp(&a.latest_key()));
}

/// The greatest session by `latest`'s order (the file's last change, then its start and
/// id), describing (reading the start of) as few of `files` (each with its file's time)
/// as that takes: newest file first, none older than the first that `describe` takes
/// for the workspace's. Listing every session read the start of each: a project with a
/// hundred older sessions made every handoff 6.7 ms slower than one with a single one.
pub(super) fn newest_described<T>(
    mut files: Vec<(u64, T)>,
    describe: impl Fn(T) -> Option<SessionInfo>,
) -> Option<SessionInfo> {
    files.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    let mut newest: Option<SessionInfo> = None;
    for (modified, file) in files {
        if newest.as_ref().is_some_and(|n| modified < n.modified) {
            break;
        }
        let Some(info) = describe(file) else {
            continue;
        };
        if newest
            .as_ref()
            .is_none_or(|n| info.latest_key() > n.latest_key())
        {
            newest = Some(info);
        }
    }
    newest
}

pub(super) fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Whether a session's recorded working directory is `workspace`.
pub(super) fn same_dir(recorded: &Path, workspace: &Path) -> bool {
    recorded == workspace || canonical(recorded) == workspace
}

/// The refusal of `latest` when the newest session is over the size limit.
pub(super) fn latest_too_large(harness: Harness, info: &SessionInfo) -> Error {
    Error::usage(format!(
        "the newest {} session of this workspace, {}, is {} MiB, over the limit of {} MiB for a session file; baton does not fall back on an older one",
        harness.name(),
        info.path.display(),
        info.bytes.div_ceil(1 << 20),
        MAX_SESSION_BYTES >> 20
    ))
    .with_hint(format!(
        "name the session to take as {}:SESSION ('baton transcript sources' lists them), or pass a trimmed copy of the file as --transcript FILE",
        harness.name()
    ))
}

pub(super) fn find_session(homes: &Homes, harness: Harness, wanted: &str) -> Result<SessionInfo> {
    let all = match harness {
        Harness::ClaudeCode => claude_code::sessions(&homes.claude, None, Count::NotLines)?,
        Harness::Codex => codex::sessions(&homes.codex, None, Count::NotLines)?,
        Harness::Gemini => gemini::sessions(&homes.gemini, None, Count::NotLines)?,
    };
    let mut matches: Vec<SessionInfo> = all
        .into_iter()
        .filter(|s| {
            s.session == wanted || (wanted.len() >= MIN_PREFIX && s.session.starts_with(wanted))
        })
        .collect();
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(Error::not_found(format!(
            "no {} session '{wanted}' was found",
            harness.name()
        ))
        .with_hint(format!(
            "'baton transcript sources' lists this workspace's sessions; use {}:latest for the newest",
            harness.name()
        ))),
        n => Err(Error::new(
            baton_error::ErrorKind::Ambiguous,
            format!("{n} {} sessions start with '{wanted}'", harness.name()),
        )
        .with_hint("give more of the session id")),
    }
}

pub(super) fn no_session(homes: &Homes, harness: Harness, workspace: &Path) -> Error {
    let root = match harness {
        Harness::ClaudeCode => homes.claude.join("projects"),
        Harness::Codex => homes.codex.join("sessions"),
        Harness::Gemini => homes.gemini.join("tmp"),
    };
    Error::not_found(format!(
        "no {} session has {} as its working directory (looked in {})",
        harness.name(),
        workspace.display(),
        root.display()
    ))
    .with_hint(match harness {
        Harness::ClaudeCode => {
            "run baton in the directory Claude Code was started in, or set CLAUDE_CONFIG_DIR"
        }
        Harness::Codex => "run baton in the directory Codex was started in, or set CODEX_HOME",
        Harness::Gemini => {
            "run baton in the directory Gemini CLI was started in, or set GEMINI_CLI_HOME"
        }
    })
}
