//! Reading a handoff back for the next agent: its briefing (or the nearest ancestor's),
//! its evidence compared with the live workspace, recent turns, and the kickoff and
//! paste-ready prompt made of them. `baton resume` and the MCP `resume` tool print it.

use std::path::Path;

use crate::briefing::{self, Briefing};
use crate::compare::{self, CapturedChanges, Comparison, Presence};
use crate::evidence::Evidence;
use crate::import;
use crate::kickoff::{self, Kickoff, KickoffInput};
use crate::repos;
use crate::transcript;
use crate::turns;
use baton_error::{Error, Result};
use baton_format::{Bundle, EntryKind, ObjectId, TreeEntry};
use baton_store::Store;

/// A handoff made ready to resume.
pub struct Resumed {
    pub kickoff: Kickoff,
    /// The captured workspace against the live one (None: no evidence in the handoff).
    pub comparison: Option<Comparison>,
    /// What to paste into a fresh chat.
    pub prompt: String,
}

/// Largest briefing or evidence file resume reads into memory.
const MAX_TEXT: u64 = 16 << 20;

fn read_text(store: &Store, tree: &ObjectId, path: &str) -> Result<Option<String>> {
    let entry = match store.find_path(tree, path)? {
        Some(entry) if entry.kind != EntryKind::Dir => entry,
        _ => return Ok(None),
    };
    if entry.size > MAX_TEXT {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    store
        .objects
        .copy_to(&entry.id, Some(entry.size), &mut bytes)?;
    Ok(String::from_utf8(bytes).ok())
}

/// The resume use case: verify bundle `id` and everything below it (never act on a
/// handoff whose bytes or history do not check out) and [`prepare`] its kickoff. The
/// two run at once (the verify reads and hashes, the comparison mostly waits for git):
/// preparing only reads, every object it reads is checked against its id as it is
/// read, and nothing of it is given out unless the whole bundle verifies; a bundle that
/// does not is refused as before, whatever preparing found.
pub fn resume(
    store: &Store,
    id: &ObjectId,
    workspace: &Path,
    budget: usize,
    require_same: bool,
) -> Result<Resumed> {
    // The transcript is read whole for its recent turns, each byte checked as it is
    // read: the verify leaves it to that read, which runs beside the comparison's git
    // processes instead of after them.
    let transcript = store
        .read_bundle(id)
        .ok()
        .and_then(|b| transcript_entry(store, &b.tree).ok().flatten());
    let left: Vec<ObjectId> = transcript.iter().map(|e| e.id).collect();
    let (report, prepared, unread) = std::thread::scope(|scope| {
        let verify = std::thread::Builder::new()
            .name("verify".into())
            .spawn_scoped(scope, || {
                store.verify_rev_leaving(id, false, &left, &|_| {})
            });
        let turns = transcript.as_ref().map(|entry| {
            std::thread::Builder::new()
                .name("turns".into())
                .spawn_scoped(scope, || recent_turns_of(store, entry, id))
        });
        let turns = std::cell::RefCell::new(turns);
        // What reading the transcript found wrong: a problem of the bundle, as the
        // verify reports it.
        let unread = std::cell::RefCell::new(None);
        let join_turns = || -> Result<Option<String>> {
            let result = match turns.borrow_mut().take() {
                None => return Ok(None),
                Some(Ok(handle)) => handle
                    .join()
                    .unwrap_or_else(|_| Err(Error::internal("the turns thread panicked"))),
                // No thread to be had: read here.
                Some(Err(_)) => match transcript.as_ref() {
                    Some(entry) => recent_turns_of(store, entry, id),
                    None => Ok(None),
                },
            };
            result.or_else(|e| {
                *unread.borrow_mut() = Some(e.message);
                Ok(None)
            })
        };
        let prepared = prepare(store, id, workspace, budget, require_same, &join_turns);
        let _ = join_turns();
        let report = match verify {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(Error::internal("the verify thread panicked"))),
            // No thread to be had: verify here, after.
            Err(_) => store.verify_rev_leaving(id, false, &left, &|_| {}),
        };
        (report, prepared, unread.into_inner())
    });
    let mut report = report?;
    report.problems.extend(unread);
    if let Some(problem) = report.problems.first() {
        return Err(Error::integrity(format!(
            "handoff {} does not verify ({} problems): {problem}",
            id.short(),
            report.problems.len()
        ))
        .with_hint("pull it again from its target, or run 'baton verify'"));
    }
    prepared
}

/// The kickoff of bundle `id` (already verified by the caller) for `workspace`, within
/// `budget` tokens. `require_same` refuses (store_conflict) a workspace that is not the
/// handoff's repository or cannot be placed. `recent_turns` gives the Recent turns
/// section (see [`recent_turns_of`]).
fn prepare(
    store: &Store,
    id: &ObjectId,
    workspace: &Path,
    budget: usize,
    require_same: bool,
    recent_turns: &dyn Fn() -> Result<Option<String>>,
) -> Result<Resumed> {
    let bundle = store.read_bundle(id)?;
    let own_text = read_text(store, &bundle.tree, "handoff.md")?;
    let mut briefing = own_text.as_deref().and_then(|t| Briefing::parse(t).ok());
    // A handoff saved with --no-brief: the briefing in force is the nearest ancestor's.
    let mut briefing_from = None;
    // An imported handoff's own file is its briefing, in its own format: never inherited.
    let imported = bundle.metadata.contains_key("import.format");
    if briefing.is_none()
        && !imported
        && let Some((ancestor, found)) = ancestor_briefing(store, &bundle)?
    {
        briefing = Some(found);
        briefing_from = Some(ancestor.to_hex());
    }
    let mut evidence: Option<Evidence> = read_text(store, &bundle.tree, "evidence/evidence.json")?
        .and_then(|t| serde_json::from_str(&t).ok());
    // An imported agent-handoff bundle recorded its git state in `state.json`.
    if evidence.is_none()
        && bundle.metadata.get("import.format").map(String::as_str) == Some("agent-bundle")
        && let Some(state) = read_text(store, &bundle.tree, "state.json")?
    {
        let manifest = read_text(store, &bundle.tree, "manifest.json")?;
        evidence = import::state::evidence_from_state(&state, manifest.as_deref());
    }
    let comparison = evidence.as_ref().map(|e| compare::compare(e, workspace));
    if require_same {
        require_same_repo(comparison.as_ref())?;
    }
    let files: Vec<(String, u64)> = store
        .list_tree(&bundle.tree)?
        .into_iter()
        .filter(|(_, e)| e.kind != EntryKind::Dir)
        .map(|(p, e)| (p, e.size))
        .collect();
    // An imported briefing need not have baton's required sections: read what it has.
    let loose = own_text
        .as_deref()
        .filter(|_| imported && briefing.is_none());
    let all_sections = match (&briefing, loose) {
        (Some(b), _) => b.sections.clone(),
        (None, Some(text)) => briefing::sections_of(text),
        (None, None) => Vec::new(),
    };
    // A section is found by its title as the briefing's own are (`## Current State:` is
    // Current State), in an imported file also below level 2 (`### Next Steps`).
    let section = |name: &str| {
        briefing::section_in(&all_sections, name)
            .filter(|body| !body.trim().is_empty())
            .map(str::to_string)
            .or_else(|| loose.and_then(|t| import::markdown_section(t, &[name])))
            .map(|s| format!("{}\n", s.trim_end()))
    };
    // What an imported handoff says about itself (see `import::STATUS`).
    let meta = |key: &str| {
        bundle
            .metadata
            .get(key)
            .filter(|v| !v.trim().is_empty())
            .map(|v| format!("{}\n", v.trim_end()))
    };
    let mut note = bundle.note.clone();
    let mut next_steps = section("Next Steps");
    if next_steps.is_none()
        && let Some(task) = meta(import::NEXT_TASK)
    {
        // The task is the Next Steps now; the header need not repeat it as a note.
        if note.trim() == task.trim() {
            note.clear();
        }
        next_steps = Some(task);
    }
    // A capture the source calls incomplete says so beside its status.
    let mut status = bundle
        .metadata
        .get(import::STATUS)
        .cloned()
        .unwrap_or_default();
    if bundle.metadata.get(import::PARTIAL).map(String::as_str) == Some("true")
        && !status.contains("partial")
    {
        status = match status.as_str() {
            "" => "partial capture".to_string(),
            s => format!("{s} (partial capture)"),
        };
    }
    // Every other section of the briefing reaches the page too, after the ones placed by
    // name: an imported `## Context`, `## Acceptance Criteria`, a `## Notes`.
    let more = briefing::others(&all_sections, &kickoff::PLACED_SECTIONS)
        .into_iter()
        .filter(|s| !s.body.trim().is_empty())
        .map(|s| (s.title.clone(), format!("{}\n", s.body.trim_end())))
        .collect();
    let input = KickoffInput {
        bundle: id.to_hex(),
        created: bundle.created.clone(),
        merge_parents: bundle.parents.iter().map(|p| p.short()).collect(),
        from: bundle.from.clone(),
        to: bundle.to.clone(),
        summary: bundle.summary.clone(),
        note,
        status,
        blockers: section("Blockers").or_else(|| meta(import::BLOCKER)),
        warnings: comparison
            .iter()
            .filter_map(|c| c.warning.clone())
            .collect(),
        in_progress: evidence
            .as_ref()
            .and_then(|e| e.git.as_ref())
            .and_then(|g| g.in_progress.as_ref())
            .map(|op| op.describe()),
        next_steps,
        briefing_from,
        current_state: section("Current State"),
        done: section("What Has Been Done"),
        objective: section("Objective"),
        more,
        risks: section("Risks / Watch Out"),
        open_questions: section("Open Questions").or_else(|| meta(import::QUESTION)),
        suggested_prompt: section("Suggested Prompt For Next Agent"),
        recent_turns: recent_turns()?,
        // A workspace folder of repositories: each one on a line of its own instead.
        workspace: match evidence.as_ref().map(|e| repos::describe(e, workspace)) {
            Some(lines) if !lines.is_empty() => lines,
            _ => comparison
                .as_ref()
                .map(describe)
                .unwrap_or_else(|| vec!["no workspace evidence in this handoff".into()]),
        },
        redacted_patches: redacted_patches(evidence.as_ref(), &files),
        files,
    };
    let kickoff = kickoff::render(&input, budget);
    let prompt = receiving_prompt(workspace, evidence.as_ref(), &kickoff);
    Ok(Resumed {
        kickoff,
        comparison,
        prompt,
    })
}

/// How many first parents resume walks back looking for a briefing.
const MAX_BRIEFING_WALK: usize = 1000;

/// The bundle's paths of the patches its evidence says were redacted (kept as evidence or,
/// when large, as an attachment).
fn redacted_patches(evidence: Option<&Evidence>, files: &[(String, u64)]) -> Vec<String> {
    let Some(evidence) = evidence else {
        return Vec::new();
    };
    // The workspace's own patches, then those of each repository below a workspace
    // folder (`repos/<path>/`).
    let own = evidence.git.iter().map(|g| (String::new(), g));
    let nested = evidence
        .repositories
        .iter()
        .filter_map(|(rel, r)| r.git.as_ref().map(|g| (format!("repos/{rel}/"), g)));
    let mut paths = Vec::new();
    for (dir, git) in own.chain(nested) {
        for name in git.redacted.names() {
            paths.push(format!("evidence/{dir}{name}"));
            paths.push(format!("attachments/patches/{dir}{name}"));
        }
    }
    files
        .iter()
        .map(|(path, _)| path)
        .filter(|path| paths.contains(path))
        .cloned()
        .collect()
}

/// The nearest first-parent ancestor with a briefing (handoff.md), and that briefing.
/// A parent missing from this store is damage (a store holds every ancestor it names):
/// an integrity error, as `baton log` and `verify` report it.
fn ancestor_briefing(store: &Store, bundle: &Bundle) -> Result<Option<(ObjectId, Briefing)>> {
    let mut next = bundle.parents.first().copied();
    for _ in 0..MAX_BRIEFING_WALK {
        let Some(id) = next else { break };
        let parent = store.read_bundle(&id)?;
        if let Some(b) =
            read_text(store, &parent.tree, "handoff.md")?.and_then(|t| Briefing::parse(&t).ok())
        {
            return Ok(Some((id, b)));
        }
        next = parent.parents.first().copied();
    }
    Ok(None)
}

/// What to paste into a fresh chat: where to work, then the kickoff without the file
/// listing (baton's own bookkeeping), in a fence longer than any backtick run inside.
fn receiving_prompt(workspace: &Path, evidence: Option<&Evidence>, kickoff: &Kickoff) -> String {
    let path = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let mut first = format!("Open workspace {}", path.display());
    if let Some(git) = evidence.and_then(|e| e.git.as_ref()) {
        let branch = git.branch.as_deref().unwrap_or("(detached)");
        match git.head.as_deref() {
            Some(head) => {
                let short: String = head.chars().take(12).collect();
                first.push_str(&format!(" (branch {branch} at HEAD {short})"));
            }
            None => first.push_str(&format!(" (branch {branch})")),
        }
    }
    let mut body = kickoff.header.text.clone();
    for s in kickoff.sections.iter().filter(|s| s.title != "Files") {
        body.push_str(&format!("\n## {}\n{}", s.title, s.text));
    }
    let longest_run = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run.max(2) + 1);
    format!("{fence}text\n{first}\n\n{}\n{fence}", body.trim_end())
}

/// The bundle's normalised transcript (older bundles have none).
fn transcript_entry(store: &Store, tree: &ObjectId) -> Result<Option<TreeEntry>> {
    Ok(store
        .find_path(tree, "transcript.jsonl")?
        .filter(|entry| entry.kind != EntryKind::Dir))
}

/// The Recent turns section from a normalised transcript, read
/// line by line as it is decompressed and kept to the last turns (`turns::Recent`, which
/// parses only the lines that may start a turn and those of the turns shown): a
/// transcript of any length within the limits costs a few turns' memory. Lines that are no
/// normalised event are passed over; a transcript over the size or line limits is
/// refused (integrity), as `baton search` refuses it.
fn recent_turns_of(store: &Store, entry: &TreeEntry, id: &ObjectId) -> Result<Option<String>> {
    let mut recent = turns::Recent::default();
    transcript::read_stored(store, entry, &mut |_, line| {
        recent.push_line(line);
        Ok(())
    })?;
    Ok(recent.render(turns::MAX_BYTES, &id.short()))
}

/// `--require-same-repo`: an unrelated or diverged workspace, or one that cannot be
/// placed, is a `store_conflict` (exit 5), like a diverged push.
fn require_same_repo(c: Option<&Comparison>) -> Result<()> {
    let problem = match c {
        None => "the handoff has no workspace evidence to compare this workspace with".into(),
        Some(c) => match (&c.warning, c.same_repository) {
            (Some(warning), _) => warning
                .strip_prefix("Warning: ")
                .unwrap_or(warning)
                .to_string(),
            (None, Some(true)) => return Ok(()),
            (None, _) => {
                "cannot tell whether this is the handoff's repository (no git state on one side)"
                    .to_string()
            }
        },
    };
    Err(Error::conflict(format!("--require-same-repo: {problem}")).with_hint(
        "resume in a checkout of the handoff's repository (--workspace DIR), fetch and merge or rebase onto its HEAD, or drop --require-same-repo",
    ))
}

/// The comparison as short sentences for the kickoff.
fn describe(c: &Comparison) -> Vec<String> {
    let mut lines = Vec::new();
    let repository = match c.same_repository {
        Some(true) => format!("same repository (matched by {})", c.matched_by.join(", ")),
        Some(false) => "a different repository than the one captured".to_string(),
        None => "repository unknown (no git on one side)".to_string(),
    };
    let head = serde_json::to_value(c.head)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut head_line = format!("HEAD: {head}");
    if let (Some(a), Some(b)) = (c.commits_ahead, c.commits_behind) {
        head_line.push_str(&format!(
            " (live is {a} ahead, {b} behind the captured HEAD)"
        ));
    }
    // The HEAD relation first: when the section is cut to its floor, it is what stays.
    lines.push(head_line);
    lines.push(repository);
    if c.live_branch != c.captured_branch {
        lines.push(format!(
            "branch: captured {}, live {}",
            c.captured_branch.as_deref().unwrap_or("(none)"),
            c.live_branch.as_deref().unwrap_or("(none)")
        ));
    }
    if let Some(changes) = &c.captured_changes {
        lines.push(describe_changes(changes, c.live_uncommitted));
    } else {
        lines.push(format!(
            "uncommitted changes: captured {}, live {}",
            if c.captured_uncommitted { "yes" } else { "no" },
            match c.live_uncommitted {
                Some(true) => "yes",
                Some(false) => "no",
                None => "unknown",
            }
        ));
    }
    lines.extend(c.notes.iter().cloned());
    lines
}

/// `uncommitted changes: the captured ones are partly present here (1 of 2 files; not
/// here or different: b.txt)`.
fn describe_changes(changes: &CapturedChanges, live: Option<bool>) -> String {
    let (k, n) = (changes.files_present, changes.files);
    let state = match changes.presence {
        Presence::Present => "present",
        Presence::Absent => "absent",
        Presence::Partly => "partly present",
    };
    let mut line =
        format!("uncommitted changes: the captured ones are {state} here ({k} of {n} files");
    if !changes.differing.is_empty() {
        line.push_str("; not here or different: ");
        line.push_str(&changes.differing.join(", "));
        if (n - k) as usize > changes.differing.len() {
            line.push_str(", …");
        }
    }
    line.push(')');
    if live == Some(true) && changes.presence != Presence::Present {
        line.push_str("; this workspace has other uncommitted changes");
    }
    line
}
