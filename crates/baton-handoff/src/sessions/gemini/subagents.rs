//! Gemini CLI sub-agents: a sub-agent Gemini CLI runs records its own chat log beside its
//! session's, `chats/<session id>/<agent id>.jsonl` (metadata `kind: "subagent"`). Merged
//! into the session's handoff in time order (bounded as Codex threads are), each event
//! naming the agent id in `source.agent`.

use std::fs;
use std::path::{Path, PathBuf};

use super::{Chat, read_each};
use crate::events::Draft;
use crate::sessions::codex::subagents::{MAX_THREADS, merge};
use baton_error::Result;

/// The sub-agent logs of `session` (whose file is `path`), in name order: at most
/// [`MAX_THREADS`], and `max_bytes` in all.
pub fn logs(path: &Path, session: &str, max_bytes: u64) -> Vec<PathBuf> {
    // Gemini CLI names the directory by the session id as it is; one that would leave the
    // chats directory is none of its.
    if session.is_empty() || session.contains(['/', '\\']) || session.starts_with('.') {
        return Vec::new();
    }
    let Some(dir) = path.parent().map(|d| d.join(session)) else {
        return Vec::new();
    };
    let mut files: Vec<(PathBuf, u64)> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let log = name.ends_with(".jsonl") || name.ends_with(".json");
            let size = e.metadata().ok()?.len();
            log.then(|| (e.path(), size))
        })
        .collect();
    files.sort();
    let mut bytes = 0u64;
    let mut found = Vec::new();
    for (file, size) in files {
        if found.len() >= MAX_THREADS || bytes + size > max_bytes {
            continue;
        }
        bytes += size;
        found.push(file);
    }
    found
}

/// Normalise a session with its sub-agents' logs (files and bytes), handing `each` the
/// drafts of all in time order.
pub fn read_merged(
    path: &Path,
    bytes: &[u8],
    logs: &[(PathBuf, Vec<u8>)],
    each: &mut dyn FnMut(Draft) -> Result<()>,
) -> Result<Chat> {
    if logs.is_empty() {
        return read_each(path, bytes, each);
    }
    let collect = |path: &Path, bytes: &[u8]| -> Result<(Vec<Draft>, Chat)> {
        let mut drafts = Vec::new();
        let chat = read_each(path, bytes, &mut |d| {
            drafts.push(d);
            Ok(())
        })?;
        Ok((drafts, chat))
    };
    let (mut merged, mut out) = collect(path, bytes)?;
    for (log, log_bytes) in logs {
        let (mut drafts, chat) = collect(log, log_bytes)?;
        let agent = chat
            .session
            .clone()
            .or_else(|| log.file_stem().map(|s| s.to_string_lossy().into_owned()));
        for d in &mut drafts {
            d.agent.clone_from(&agent);
        }
        out.skipped.extend(&chat.skipped);
        merged = merge(merged, drafts);
    }
    for d in merged {
        each(d)?;
    }
    Ok(out)
}
