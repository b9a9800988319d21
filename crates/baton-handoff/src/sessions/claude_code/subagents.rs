//! Claude Code's sub-agent logs, `<dir>/<session>/subagents/agent-*.jsonl` beside the
//! session's `<dir>/<session>.jsonl`: found and read within bounds, and their drafts put
//! among the session's in time order (store-format/TRANSCRIPT.md, "Sub-agents").

use std::collections::VecDeque;
use std::fs;
use std::path::{Path, PathBuf};

use crate::events::Draft;
use baton_error::Result;

/// Sub-agent files read at most for one session, the first by name.
pub const MAX_FILES: usize = 64;
/// Bytes of sub-agent files read at most for one session, all together.
pub const MAX_BYTES: u64 = 64 << 20;

/// One sub-agent log, read (cut at its last complete line).
pub struct Subagent {
    /// The file's name without `.jsonl` (`agent-a2898e3`).
    pub name: String,
    pub path: PathBuf,
    pub bytes: Vec<u8>,
}

impl Subagent {
    /// The agent to name when its entries record no `agentId`: the name after `agent-`.
    pub fn agent(&self) -> &str {
        self.name.strip_prefix("agent-").unwrap_or(&self.name)
    }
}

/// The sub-agent logs of a session, and how many were left out (over [`MAX_FILES`] or
/// [`MAX_BYTES`], or unreadable).
#[derive(Default)]
pub struct Found {
    pub files: Vec<Subagent>,
    pub left_out: usize,
}

impl Found {
    /// The handoff's note on the files left out, if any.
    pub fn note(&self) -> Option<String> {
        (self.left_out > 0).then(|| {
            format!(
                "left out {} Claude Code sub-agent log{} (over the limit of {MAX_FILES} files or {} MiB for one session, or unreadable)",
                self.left_out,
                if self.left_out == 1 { "" } else { "s" },
                MAX_BYTES >> 20
            )
        })
    }
}

/// `<dir>/<session>/subagents` of the session file `<dir>/<session>.jsonl`.
pub fn dir_of(session: &Path) -> Option<PathBuf> {
    let stem = session.file_stem()?;
    Some(session.with_file_name(stem).join("subagents"))
}

/// Whether the session has a sub-agent directory (whatever it holds).
pub fn exists(session: &Path) -> bool {
    dir_of(session).is_some_and(|d| fs::symlink_metadata(d).is_ok())
}

/// The session's sub-agent logs: regular files named `agent-*.jsonl`, in name order, as
/// many as the bounds allow.
pub fn find(session: &Path) -> Found {
    let mut found = Found::default();
    let Some(entries) = dir_of(session).and_then(|d| fs::read_dir(d).ok()) else {
        return found;
    };
    let mut listed: Vec<(String, PathBuf, u64)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            // Not followed through a symlink: only what `read_complete` opens.
            let meta = e.metadata().ok()?;
            let stem = name.strip_suffix(".jsonl")?;
            (stem.starts_with("agent-") && meta.file_type().is_file())
                .then(|| (stem.to_string(), e.path(), meta.len()))
        })
        .collect();
    listed.sort();
    let mut total = 0u64;
    for (name, path, size) in listed {
        if found.files.len() == MAX_FILES || total + size > MAX_BYTES {
            found.left_out += 1;
            continue;
        }
        match super::super::read_complete(&path) {
            Ok(bytes) => {
                total += bytes.len() as u64;
                found.files.push(Subagent { name, path, bytes });
            }
            Err(_) => found.left_out += 1,
        }
    }
    found
}

/// The sub-agents' drafts, each log's in its own order, waiting to be put among the
/// session's.
#[derive(Default)]
pub struct Merge {
    queues: Vec<VecDeque<Draft>>,
}

impl Merge {
    pub fn push(&mut self, drafts: VecDeque<Draft>) {
        self.queues.push(drafts);
    }

    /// Hand to `each` every waiting draft recorded before `time` (or with no time),
    /// earliest first.
    pub fn before(&mut self, time: &str, each: &mut dyn FnMut(Draft) -> Result<()>) -> Result<()> {
        self.drain(Some(time), each)
    }

    /// Hand to `each` every draft still waiting, earliest first.
    pub fn rest(&mut self, each: &mut dyn FnMut(Draft) -> Result<()>) -> Result<()> {
        self.drain(None, each)
    }

    fn drain(
        &mut self,
        until: Option<&str>,
        each: &mut dyn FnMut(Draft) -> Result<()>,
    ) -> Result<()> {
        // RFC 3339 times as Claude Code writes them (UTC, the same precision) order as
        // strings; a draft without a time goes with what came before it in its log.
        loop {
            let next = self
                .queues
                .iter()
                .enumerate()
                .filter_map(|(i, q)| q.front().map(|d| (d.time.as_str(), i)))
                .filter(|(t, _)| until.is_none_or(|u| *t < u))
                .min();
            let Some((_, i)) = next else {
                return Ok(());
            };
            if let Some(draft) = self.queues[i].pop_front() {
                each(draft)?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Kind, Role};

    #[test]
    fn logs_are_found_beside_the_session_within_their_bounds() {
        let tmp = tempfile::tempdir().unwrap();
        let session = tmp.path().join("s1.jsonl");
        assert!(!exists(&session));
        assert_eq!(find(&session).files.len(), 0);
        let dir = tmp.path().join("s1/subagents");
        fs::create_dir_all(&dir).unwrap();
        assert!(exists(&session));
        for i in 0..MAX_FILES + 2 {
            fs::write(dir.join(format!("agent-{i:03}.jsonl")), "{}\n").unwrap();
        }
        // Not a log: another name, a directory, a symlink.
        fs::write(dir.join("notes.jsonl"), "{}\n").unwrap();
        fs::create_dir(dir.join("agent-dir.jsonl")).unwrap();
        std::os::unix::fs::symlink(&session, dir.join("agent-link.jsonl")).unwrap();
        let found = find(&session);
        assert_eq!(found.files.len(), MAX_FILES);
        assert_eq!(found.files[0].name, "agent-000");
        assert_eq!(found.files[0].agent(), "000");
        assert_eq!(found.left_out, 2);
        assert!(
            found
                .note()
                .unwrap()
                .starts_with("left out 2 Claude Code sub-agent logs")
        );
        // Past the bytes of all of them together (a sparse file: not read).
        for i in 0..MAX_FILES + 2 {
            fs::remove_file(dir.join(format!("agent-{i:03}.jsonl"))).unwrap();
        }
        fs::write(dir.join("agent-a.jsonl"), "{}\n").unwrap();
        let big = fs::File::create(dir.join("agent-b.jsonl")).unwrap();
        big.set_len(MAX_BYTES).unwrap();
        let found = find(&session);
        assert_eq!(found.files.len(), 1);
        assert_eq!(found.left_out, 1);
    }

    #[test]
    fn drafts_are_put_among_the_sessions_by_time() {
        let draft = |time: &str, text: &str| Draft {
            time: time.into(),
            agent: None,
            role: Role::Assistant,
            kind: Kind::Message,
            text: text.into(),
            tool: None,
            call_id: None,
            harness_type: None,
        };
        let mut merge = Merge::default();
        merge.push([draft("T02", "a1"), draft("", "a1b"), draft("T05", "a2")].into());
        merge.push([draft("T03", "b1"), draft("T09", "b2")].into());
        let mut out = Vec::new();
        let mut each = |d: Draft| {
            out.push(d.text);
            Ok(())
        };
        for (time, text) in [("T01", "s1"), ("T04", "s2"), ("T06", "s3")] {
            merge.before(time, &mut each).unwrap();
            each(draft(time, text)).unwrap();
        }
        merge.rest(&mut each).unwrap();
        assert_eq!(out, ["s1", "a1", "a1b", "b1", "s2", "a2", "s3", "b2"]);
    }
}
