//! Claude Code's hooks in `settings.json`: one matcher group of baton's per hooked event
//! (`{"hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": "baton
//! checkpoint --hook claude-code", "timeout": 30}]}]}}`), merged among the user's own
//! hooks and keys without moving them; every other byte of meaning is left as it was.

use std::path::Path;

use baton_error::{Error, Result};

use super::json::Json;
use super::{
    Action, Change, EntryState, EventStatus, HOOK_PREFIX, HOOK_TIMEOUT_SECS, Harness, Loaded,
    Options, Report, Scope, State, Status, hash, hook_argv, load, new_record, read_record,
    refuse_edited, refuse_unparsable, remove_record, shell_line, store_file, write_record,
};

/// The events baton may hook, in the order it reports them.
const EVENTS: [&str; 4] = ["PreCompact", "SessionEnd", "Stop", "SessionStart"];
/// `SessionStart` sources that begin a conversation without its earlier context: a new
/// session, `/clear`, and the restart after a compaction. `resume` is left out: a resumed
/// conversation still holds its own context.
const RESUME_MATCHER: &str = "startup|clear|compact";

fn wanted_events(options: &Options) -> Vec<&'static str> {
    EVENTS
        .into_iter()
        .filter(|e| match *e {
            "Stop" => options.on_stop,
            "SessionStart" => options.resume,
            _ => true,
        })
        .collect()
}

/// Baton's matcher group for `event`. `PreCompact`, `SessionEnd` and `Stop` carry no
/// matcher, which Claude Code reads as "every occurrence" (manual and automatic
/// compaction, every reason a session ends).
fn group(event: &str, command: &str) -> Json {
    let hook = Json::object(vec![
        ("type", Json::str("command")),
        ("command", Json::str(command)),
        ("timeout", Json::Number(HOOK_TIMEOUT_SECS.into())),
    ]);
    let mut entries = Vec::new();
    if event == "SessionStart" {
        entries.push(("matcher", Json::str(RESUME_MATCHER)));
    }
    entries.push(("hooks", Json::Array(vec![hook])));
    Json::object(entries)
}

fn is_baton_hook(hook: &Json) -> bool {
    hook.get("command")
        .and_then(Json::as_str)
        .is_some_and(|c| c.trim_start().starts_with(HOOK_PREFIX))
}

fn is_baton_group(group: &Json) -> bool {
    group
        .get("hooks")
        .and_then(Json::as_array)
        .is_some_and(|hooks| hooks.iter().any(is_baton_hook))
}

/// The group with baton's hooks taken out; `None` when nothing else was in it.
fn strip(mut group: Json) -> Option<Json> {
    let hooks = group.get_mut("hooks").and_then(Json::as_array_mut)?;
    hooks.retain(|h| !is_baton_hook(h));
    (!hooks.is_empty()).then_some(group)
}

/// Sorted keys, compact: the form hashes and comparisons use.
fn canonical(group: &Json) -> String {
    group.to_value().to_string()
}

struct Doc {
    loaded: Loaded,
    root: Json,
}

fn parse(path: &Path) -> Result<Doc> {
    let loaded = load(path)?;
    let root = match &loaded.bytes {
        None => Json::Object(Vec::new()),
        Some(b) if b.iter().all(u8::is_ascii_whitespace) => Json::Object(Vec::new()),
        Some(b) => Json::parse(b).map_err(|e| refuse_unparsable(path, "JSON", &e.to_string()))?,
    };
    if !matches!(root, Json::Object(_)) {
        return Err(Error::usage(format!(
            "{} holds {}, not the JSON object of Claude Code settings, so baton leaves it as it is",
            path.display(),
            root.kind()
        ))
        .with_hint("fix the file (or move it away), then run the command again"));
    }
    if let Some(hooks) = root.get("hooks") {
        if !matches!(hooks, Json::Object(_)) {
            return Err(malformed(path, "\"hooks\"", hooks, "an object"));
        }
        for event in EVENTS {
            if let Some(groups) = hooks.get(event)
                && groups.as_array().is_none()
            {
                return Err(malformed(
                    path,
                    &format!("\"hooks\".\"{event}\""),
                    groups,
                    "an array",
                ));
            }
        }
    }
    Ok(Doc { loaded, root })
}

fn malformed(path: &Path, what: &str, found: &Json, wanted: &str) -> Error {
    Error::usage(format!(
        "{}: {what} is {}, not {wanted} as Claude Code expects, so baton leaves the file as it is",
        path.display(),
        found.kind()
    ))
    .with_hint("fix the file (or move it away), then run the command again")
}

/// A baton entry found in the file.
struct Found {
    event: &'static str,
    canonical: String,
    command: Option<String>,
}

fn baton_entries(root: &Json) -> Vec<Found> {
    let mut found = Vec::new();
    let Some(hooks) = root.get("hooks") else {
        return found;
    };
    for event in EVENTS {
        let groups = hooks.get(event).and_then(Json::as_array);
        for group in groups.into_iter().flatten().filter(|g| is_baton_group(g)) {
            let command = group
                .get("hooks")
                .and_then(Json::as_array)
                .and_then(|hs| hs.iter().find(|h| is_baton_hook(h)))
                .and_then(|h| h.get("command"))
                .and_then(Json::as_str)
                .map(String::from);
            found.push(Found {
                event,
                canonical: canonical(group),
                command,
            });
        }
    }
    found
}

/// Put `want` (or nothing) in place of baton's groups for `event`: at the first one's
/// position, or at the end. What happened, or `None` when there was nothing to do.
fn apply(root: &mut Json, event: &str, want: Option<&Json>) -> Option<Action> {
    let groups = root
        .get("hooks")
        .and_then(|h| h.get(event))
        .and_then(Json::as_array);
    let ours: Vec<&Json> = groups
        .into_iter()
        .flatten()
        .filter(|g| is_baton_group(g))
        .collect();
    match (want, ours.as_slice()) {
        (None, []) => return None,
        (Some(w), [only]) if canonical(only) == canonical(w) => return Some(Action::Unchanged),
        _ => {}
    }
    let had_ours = !ours.is_empty();
    let hooks = root.entry("hooks", Json::Object(Vec::new()))?;
    let groups = hooks
        .entry(event, Json::Array(Vec::new()))?
        .as_array_mut()?;
    let mut placed = false;
    for group in std::mem::take(groups) {
        if !is_baton_group(&group) {
            groups.push(group);
            continue;
        }
        // A user's own hooks sharing the group (an edit kept only with --force) stay.
        groups.extend(strip(group));
        if !placed {
            groups.extend(want.cloned());
            placed = true;
        }
    }
    if !placed {
        groups.extend(want.cloned());
    }
    // Tidy: an event list or a hooks object baton emptied goes with it.
    if groups.is_empty() {
        hooks.remove(event);
    }
    if hooks.is_empty_container() {
        root.remove("hooks");
    }
    Some(match (want.is_some(), had_ours) {
        (true, false) => Action::Installed,
        (true, true) => Action::Updated,
        (false, _) => Action::Removed,
    })
}

fn edited(found: &Found, want: Option<&str>, record: Option<&super::Record>) -> bool {
    want != Some(found.canonical.as_str())
        && record.and_then(|r| r.hash_of(found.event))
            != Some(hash(found.canonical.as_bytes()).as_str())
}

pub(super) fn install(
    path: &Path,
    harness: Harness,
    scope: Scope,
    options: &Options,
    force: bool,
) -> Result<Report> {
    let mut doc = parse(path)?;
    let record = read_record(path, harness);
    let command = shell_line(&hook_argv(harness, options));
    let wanted: Vec<(&str, Json)> = wanted_events(options)
        .into_iter()
        .map(|e| (e, group(e, &command)))
        .collect();
    let want_of = |event: &str| wanted.iter().find(|(e, _)| *e == event).map(|(_, g)| g);
    // Check everything before changing anything: a refusal leaves the file as it was.
    if !force {
        for found in baton_entries(&doc.root) {
            let want = want_of(found.event).map(canonical);
            if edited(&found, want.as_deref(), record.as_ref()) {
                return Err(refuse_edited(
                    path,
                    &format!("baton's {} hook", found.event),
                    false,
                ));
            }
        }
    }
    let mut changes = Vec::new();
    for event in EVENTS {
        if let Some(action) = apply(&mut doc.root, event, want_of(event)) {
            changes.push(Change {
                event: event.to_string(),
                action,
            });
        }
    }
    let written = changes.iter().any(|c| c.action != Action::Unchanged);
    if written {
        store_file(path, &doc.loaded, &doc.root.to_pretty()?)?;
    }
    let created = match &record {
        Some(r) => r.created_file,
        None => doc.loaded.bytes.is_none(),
    };
    let mut new = new_record(harness, path, command.clone(), created);
    new.entries = wanted
        .iter()
        .map(|(event, group)| super::RecordedEntry {
            event: event.to_string(),
            hash: hash(canonical(group).as_bytes()),
        })
        .collect();
    write_record(path, &new)?;
    Ok(Report {
        harness,
        scope,
        file: path.to_path_buf(),
        command: Some(command),
        changes,
        written,
        replaced: None,
    })
}

pub(super) fn remove(path: &Path, harness: Harness, scope: Scope, force: bool) -> Result<Report> {
    let mut doc = parse(path)?;
    let record = read_record(path, harness);
    if !force {
        for found in baton_entries(&doc.root) {
            if edited(&found, None, record.as_ref()) {
                return Err(refuse_edited(
                    path,
                    &format!("baton's {} hook", found.event),
                    true,
                ));
            }
        }
    }
    let mut changes = Vec::new();
    for event in EVENTS {
        if let Some(action) = apply(&mut doc.root, event, None) {
            changes.push(Change {
                event: event.to_string(),
                action,
            });
        }
    }
    let written = !changes.is_empty();
    if written {
        let created = record.as_ref().is_some_and(|r| r.created_file);
        if created && doc.root.is_empty_container() {
            super::delete_file(&doc.loaded)?;
        } else {
            store_file(path, &doc.loaded, &doc.root.to_pretty()?)?;
        }
    }
    remove_record(path)?;
    Ok(Report {
        harness,
        scope,
        file: path.to_path_buf(),
        command: None,
        changes,
        written,
        replaced: None,
    })
}

pub(super) fn status(path: &Path, harness: Harness, scope: Scope) -> Status {
    let mut status = Status::not_installed(harness, scope, path);
    let doc = match parse(path) {
        Ok(doc) => doc,
        Err(e) => return status.unreadable(e.message),
    };
    let record = read_record(path, harness);
    let found = baton_entries(&doc.root);
    for f in &found {
        let state = if edited(f, None, record.as_ref()) {
            EntryState::Edited
        } else {
            EntryState::Recorded
        };
        status.events.push(EventStatus {
            event: f.event.to_string(),
            state,
        });
    }
    if found.is_empty() {
        return status;
    }
    for entry in record.iter().flat_map(|r| &r.entries) {
        if !found.iter().any(|f| f.event == entry.event) {
            status.events.push(EventStatus {
                event: entry.event.clone(),
                state: EntryState::Missing,
            });
        }
    }
    status.command = found.iter().find_map(|f| f.command.clone());
    status.state = if status
        .events
        .iter()
        .all(|e| e.state == EntryState::Recorded)
    {
        State::Installed
    } else {
        State::Edited
    };
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Json {
        Json::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn apply_replaces_baton_groups_in_place_and_keeps_a_users_hook_that_shared_one() {
        let cmd = "baton checkpoint --hook claude-code";
        let mut root = doc(&format!(
            r#"{{"hooks": {{"PreCompact": [
                {{"hooks": [{{"type": "command", "command": "mine"}}]}},
                {{"hooks": [{{"type": "command", "command": "{cmd} --push old"}},
                            {{"type": "command", "command": "also mine"}}]}},
                {{"matcher": "auto", "hooks": [{{"type": "command", "command": "last"}}]}}
            ]}}}}"#
        ));
        let want = group("PreCompact", cmd);
        assert_eq!(
            apply(&mut root, "PreCompact", Some(&want)),
            Some(Action::Updated)
        );
        let commands: Vec<Vec<String>> = root
            .get("hooks")
            .and_then(|h| h.get("PreCompact"))
            .and_then(Json::as_array)
            .unwrap()
            .iter()
            .map(|g| {
                g.get("hooks")
                    .and_then(Json::as_array)
                    .unwrap()
                    .iter()
                    .map(|h| h.get("command").and_then(Json::as_str).unwrap().to_string())
                    .collect()
            })
            .collect();
        assert_eq!(
            commands,
            [
                vec!["mine".to_string()],
                vec!["also mine".to_string()],
                vec![cmd.to_string()],
                vec!["last".to_string()]
            ]
        );
        assert_eq!(
            apply(&mut root, "PreCompact", Some(&want)),
            Some(Action::Unchanged)
        );
        assert_eq!(apply(&mut root, "PreCompact", None), Some(Action::Removed));
        assert_eq!(apply(&mut root, "PreCompact", None), None);
    }

    #[test]
    fn removing_the_last_entry_tidies_the_containers_baton_emptied() {
        let mut root = doc(r#"{"model": "opus"}"#);
        let want = group("SessionStart", "baton checkpoint --hook claude-code");
        apply(&mut root, "SessionStart", Some(&want));
        assert_eq!(
            root.get("hooks")
                .unwrap()
                .get("SessionStart")
                .unwrap()
                .to_value()[0]["matcher"],
            RESUME_MATCHER
        );
        apply(&mut root, "SessionStart", None);
        assert_eq!(root.to_value(), serde_json::json!({"model": "opus"}));
    }
}
