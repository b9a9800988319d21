//! Codex sub-agent threads: a thread a session spawned (`spawn_agent`) is a rollout of its
//! own whose `session_meta.source` is `{"subagent": {"thread_spawn": {"parent_thread_id",
//! "depth", "agent_nickname", "agent_role"}}}` (`SessionSource::SubAgent` in codex-rs).
//! Its drafts name the agent; the threads a session spawned, found beside it in
//! `$CODEX_HOME/sessions`, are merged into its handoff in time order (bounded).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::super::json::{Field, Raw, object};
use super::{Rollout, meta, read_each, rollout_paths};
use crate::events::Draft;
use baton_error::Result;

/// Sub-agent threads merged into one handoff at most (nested ones included).
pub const MAX_THREADS: usize = 32;
/// Nesting of threads spawned by threads followed at most.
pub const MAX_DEPTH: usize = 4;

/// A sub-agent source: who spawned the thread and what it is called.
pub(super) struct Spawn {
    /// `thread_spawn`'s parent thread id (a review or compact sub-agent has none).
    pub parent: Option<String>,
    nickname: Option<String>,
    role: Option<String>,
    /// `review`, `compact`, `thread_spawn` or another kind's name.
    kind: String,
}

impl Spawn {
    /// The sub-agent `session_meta.source` describes; `None` for a top-level session.
    pub fn of(source: Option<&RawValue>) -> Option<Spawn> {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Source<'a> {
            #[serde(borrow)]
            subagent: Raw<'a>,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Kinds<'a> {
            #[serde(borrow)]
            thread_spawn: Raw<'a>,
            #[serde(borrow)]
            other: Field<'a>,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct ThreadSpawn<'a> {
            #[serde(borrow)]
            parent_thread_id: Field<'a>,
            #[serde(borrow)]
            agent_nickname: Field<'a>,
            #[serde(borrow)]
            agent_role: Field<'a>,
            #[serde(borrow)]
            agent_type: Field<'a>,
        }
        let source: Source = object(source).ok()?;
        let sub = source.subagent.0?;
        if let Ok(kind) = serde_json::from_str::<String>(sub.get()) {
            return Some(Spawn {
                parent: None,
                nickname: None,
                role: None,
                kind,
            });
        }
        let kinds: Kinds = object(Some(sub)).ok()?;
        if let Some(raw) = kinds.thread_spawn.0 {
            let spawn: ThreadSpawn = object(Some(raw)).ok()?;
            let own = |f: &Field| f.as_str().filter(|s| !s.is_empty()).map(str::to_string);
            return Some(Spawn {
                parent: own(&spawn.parent_thread_id),
                nickname: own(&spawn.agent_nickname),
                role: own(&spawn.agent_role).or_else(|| own(&spawn.agent_type)),
                kind: "thread_spawn".into(),
            });
        }
        Some(Spawn {
            parent: None,
            nickname: None,
            role: None,
            kind: kinds.other.as_str().unwrap_or("subagent").to_string(),
        })
    }

    /// The name events of this thread carry in `source.agent`: its nickname and role
    /// ("Anscombe (explorer)"), the `session_meta` fields of the same name standing in.
    pub fn name(&self, nickname: Option<&str>, role: Option<&str>) -> String {
        let nickname = self.nickname.as_deref().or(nickname);
        let role = self.role.as_deref().or(role);
        match (nickname, role) {
            (Some(n), Some(r)) => format!("{n} ({r})"),
            (Some(n), None) => n.to_string(),
            (None, Some(r)) => r.to_string(),
            (None, None) => self.kind.clone(),
        }
    }
}

/// The sub-agent threads `session` spawned, and those they spawned (at most
/// [`MAX_DEPTH`] levels, [`MAX_THREADS`] threads, `max_bytes` in all), in the order they
/// started. Only rollouts named as started no earlier than the session's own file
/// (`rollout-<time>-<id>`, in the same clock) are read, and of those only the first line.
pub fn children(codex_home: &Path, session: &str, path: &Path, max_bytes: u64) -> Vec<PathBuf> {
    let since = name_time(path);
    let mut candidates: Vec<(String, String, String, PathBuf, u64)> = rollout_paths(codex_home)
        .into_iter()
        .filter(|p| p != path && since.is_none_or(|t| name_time(p).is_none_or(|c| c >= t)))
        .filter_map(|p| {
            let meta = meta(&p)?;
            let parent = meta.parent?;
            Some((meta.started, meta.id, parent, p, meta.bytes))
        })
        .collect();
    candidates.sort();
    let mut parents = vec![session.to_string()];
    let mut found = Vec::new();
    let mut bytes = 0u64;
    for _ in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for (_, id, parent, p, size) in &candidates {
            if !parents.contains(parent) || found.len() >= MAX_THREADS {
                continue;
            }
            if bytes + size > max_bytes {
                continue;
            }
            bytes += size;
            found.push(p.clone());
            next.push(id.clone());
        }
        if next.is_empty() {
            break;
        }
        parents = next;
    }
    found
}

/// The `<time>` of a `rollout-<time>-<uuid>.jsonl` name (`YYYY-MM-DDThh-mm-ss`).
fn name_time(path: &Path) -> Option<&str> {
    let name = path.file_name()?.to_str()?.strip_prefix("rollout-")?;
    let time = name.get(..19)?;
    (time.as_bytes().get(10) == Some(&b'T')).then_some(time)
}

/// Normalise a rollout with the sub-agent threads it spawned (their files and bytes),
/// handing `each` the drafts of all in time order: a thread's drafts go between the
/// session's where their times fall (a draft without a time stays after the one before
/// it in its own file).
pub fn read_merged(
    path: &Path,
    bytes: &[u8],
    threads: &[(PathBuf, Vec<u8>)],
    each: &mut dyn FnMut(Draft) -> Result<()>,
) -> Result<Rollout> {
    if threads.is_empty() {
        return read_each(path, bytes, each);
    }
    let collect = |path: &Path, bytes: &[u8]| -> Result<(Vec<Draft>, Rollout)> {
        let mut drafts = Vec::new();
        let rollout = read_each(path, bytes, &mut |d| {
            drafts.push(d);
            Ok(())
        })?;
        Ok((drafts, rollout))
    };
    let (mut merged, mut out) = collect(path, bytes)?;
    for (thread, thread_bytes) in threads {
        let (drafts, rollout) = collect(thread, thread_bytes)?;
        out.skipped.extend(&rollout.skipped);
        merged = merge(merged, drafts);
    }
    for d in merged {
        each(d)?;
    }
    Ok(out)
}

/// `a` and `b` merged by time, stably: `a` first on equal times, and a draft without a
/// time never moved ahead of the one before it.
pub(in crate::sessions) fn merge(a: Vec<Draft>, b: Vec<Draft>) -> Vec<Draft> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    let (mut last_a, mut last_b) = (String::new(), String::new());
    loop {
        let take_b = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(x), Some(y)) => {
                let tx = if x.time.is_empty() { &last_a } else { &x.time };
                let ty = if y.time.is_empty() { &last_b } else { &y.time };
                ty < tx
            }
        };
        let d = if take_b { b.next() } else { a.next() };
        let Some(d) = d else { break };
        if !d.time.is_empty() {
            if take_b {
                last_b.clone_from(&d.time);
            } else {
                last_a.clone_from(&d.time);
            }
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Kind, Role};

    fn d(time: &str, text: &str) -> Draft {
        Draft {
            time: time.into(),
            agent: None,
            role: Role::Assistant,
            kind: Kind::Message,
            text: text.into(),
            tool: None,
            call_id: None,
            harness_type: None,
        }
    }

    #[test]
    fn threads_merge_in_time_order_and_untimed_drafts_stay_in_place() {
        let parent = vec![d("t1", "p1"), d("t3", "p3"), d("", "p3b"), d("t5", "p5")];
        let child = vec![d("t2", "c2"), d("t3", "c3"), d("", "c3b"), d("t6", "c6")];
        let texts: Vec<String> = merge(parent, child).into_iter().map(|d| d.text).collect();
        assert_eq!(texts, ["p1", "c2", "p3", "p3b", "c3", "c3b", "p5", "c6"]);
    }

    #[test]
    fn only_threads_the_session_spawned_are_found_nested_and_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let day = tmp.path().join("sessions/2026/05/06");
        std::fs::create_dir_all(&day).unwrap();
        let write = |time: &str, id: &str, source: &str| {
            let path = day.join(format!("rollout-2026-05-06T{time}-{id}.jsonl"));
            let line = format!(
                r#"{{"type":"session_meta","payload":{{"id":"{id}","cwd":"/w","timestamp":"2026-05-06T{time}","source":{source}}}}}"#
            );
            std::fs::write(&path, format!("{line}\n")).unwrap();
            path
        };
        let spawn = |parent: &str| {
            format!(
                r#"{{"subagent":{{"thread_spawn":{{"parent_thread_id":"{parent}","depth":1}}}}}}"#
            )
        };
        let parent = write("10-00-00", "p", "\"cli\"");
        let a = write("10-01-00", "a", &spawn("p"));
        let b = write("10-02-00", "b", &spawn("a"));
        write("10-03-00", "x", &spawn("someone-else"));
        // Named as started before the session: never read.
        write("09-00-00", "early", &spawn("p"));
        assert_eq!(
            children(tmp.path(), "p", &parent, u64::MAX),
            vec![a.clone(), b]
        );
        assert_eq!(
            children(tmp.path(), "p", &parent, 200),
            vec![a],
            "bounded by bytes"
        );
    }
}
