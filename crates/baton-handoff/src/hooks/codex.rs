//! Codex's `notify` in `config.toml`: the one program Codex runs after each turn
//! (`agent-turn-complete`, its JSON appended as the last argument), set to
//! `["baton", "checkpoint", "--hook", "codex", ...]` with `toml_edit`, so the file's
//! comments, tables and layout stay as they were.

use std::path::Path;

use toml_edit::{Array, DocumentMut, Item, Value};

use baton_error::{Error, Result};

use super::{
    Action, Change, EntryState, EventStatus, Harness, Loaded, Options, Report, Scope, State,
    Status, hash, hook_argv, load, new_record, read_record, refuse_edited, refuse_unparsable,
    remove_record, shell_line, store_file, write_record,
};

/// The event Codex's notify program is run for (the only one it has).
const EVENT: &str = "agent-turn-complete";
const KEY: &str = "notify";
const HARNESS: Harness = Harness::Codex;

pub(super) fn project_scope_refused() -> Error {
    Error::usage(
        "Codex takes notify only from the user's config.toml: a project's .codex/config.toml \
         cannot set it, so Codex hooks have no project scope",
    )
    .with_hint(
        "leave out --scope (user is the default): the hook then runs for every Codex session, \
         each checkpoint in the session's own workspace",
    )
}

/// What the file's `notify` holds.
enum Notify {
    Absent,
    /// Baton's command line (this one or another's options).
    Baton {
        canonical: String,
        line: String,
    },
    /// Another program: Codex runs only one, so it is never replaced without `--force`.
    Other(String),
}

fn canonical(argv: &[String]) -> String {
    serde_json::Value::from(argv.to_vec()).to_string()
}

fn read_notify(doc: &DocumentMut) -> Notify {
    let Some(item) = doc.get(KEY) else {
        return Notify::Absent;
    };
    let argv: Option<Vec<String>> = item
        .as_array()
        .and_then(|a| a.iter().map(|v| v.as_str().map(String::from)).collect());
    match argv {
        Some(argv) if argv.len() >= 3 && argv[..3] == ["baton", "checkpoint", "--hook"] => {
            Notify::Baton {
                canonical: canonical(&argv),
                line: shell_line(&argv),
            }
        }
        _ => {
            let text = match item.as_value() {
                Some(value) => {
                    // The value alone, without the comments around it.
                    let mut value = value.clone();
                    value.decor_mut().clear();
                    value.to_string()
                }
                None => item.to_string(),
            };
            // On one line, for messages: an array may span several.
            let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
            Notify::Other(
                line.replace("[ ", "[")
                    .replace(", ]", "]")
                    .replace(",]", "]"),
            )
        }
    }
}

struct Doc {
    loaded: Loaded,
    doc: DocumentMut,
}

fn parse(path: &Path) -> Result<Doc> {
    let loaded = load(path)?;
    let text = match &loaded.bytes {
        None => String::new(),
        Some(b) => String::from_utf8(b.clone())
            .map_err(|_| refuse_unparsable(path, "TOML", "it is not UTF-8 text"))?,
    };
    let doc = text.parse::<DocumentMut>().map_err(|e| {
        let at = e.span().map(|span| {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|b| **b == b'\n').count() + 1;
            let column = before.iter().rev().take_while(|b| **b != b'\n').count() + 1;
            format!("line {line}, column {column}: ")
        });
        let message = e.message().lines().collect::<Vec<_>>().join("; ");
        refuse_unparsable(
            path,
            "TOML",
            &format!("{}{message}", at.unwrap_or_default()),
        )
    })?;
    Ok(Doc { loaded, doc })
}

fn baton_edited(canonical: &str, want: Option<&str>, record: Option<&super::Record>) -> bool {
    want != Some(canonical)
        && record.and_then(|r| r.hash_of(EVENT)) != Some(hash(canonical.as_bytes()).as_str())
}

pub(super) fn install(path: &Path, scope: Scope, options: &Options, force: bool) -> Result<Report> {
    let mut doc = parse(path)?;
    let record = read_record(path, HARNESS);
    let argv = hook_argv(HARNESS, options);
    let want = canonical(&argv);
    let mut replaced = None;
    let action = match read_notify(&doc.doc) {
        Notify::Absent => Action::Installed,
        Notify::Baton { canonical, .. } if canonical == want => Action::Unchanged,
        Notify::Baton { canonical, .. } => {
            if !force && baton_edited(&canonical, Some(&want), record.as_ref()) {
                return Err(refuse_edited(path, "baton's notify", false));
            }
            Action::Updated
        }
        Notify::Other(value) => {
            if !force {
                return Err(Error::conflict(format!(
                    "{} already sets notify = {value}, and Codex runs only one notify \
                     program, so baton will not replace it",
                    path.display()
                ))
                .with_hint(
                    "keep it (your program can run `baton checkpoint --hook codex \"$1\"` \
                     itself), or run the command again with --force to replace it",
                ));
            }
            replaced = Some(value);
            Action::Updated
        }
    };
    let written = action != Action::Unchanged;
    if written {
        let mut array = Array::new();
        for arg in &argv {
            array.push(arg.as_str());
        }
        let mut value = Value::Array(array);
        let table = doc.doc.as_table_mut();
        match table.get_mut(KEY) {
            Some(item) => {
                // Keep what surrounded the old value (a trailing comment, say).
                if let Some(old) = item.as_value() {
                    *value.decor_mut() = old.decor().clone();
                }
                *item = Item::Value(value);
            }
            None => {
                table.insert(KEY, Item::Value(value));
            }
        }
        store_file(path, &doc.loaded, doc.doc.to_string().as_bytes())?;
    }
    let created = match &record {
        Some(r) => r.created_file,
        None => doc.loaded.bytes.is_none(),
    };
    let mut new = new_record(HARNESS, path, shell_line(&argv), created);
    new.entries.push(super::RecordedEntry {
        event: EVENT.to_string(),
        hash: hash(want.as_bytes()),
    });
    write_record(path, &new)?;
    Ok(Report {
        harness: HARNESS,
        scope,
        file: path.to_path_buf(),
        command: Some(shell_line(&argv)),
        changes: vec![Change {
            event: EVENT.to_string(),
            action,
        }],
        written,
        replaced,
    })
}

pub(super) fn remove(path: &Path, scope: Scope, force: bool) -> Result<Report> {
    let mut doc = parse(path)?;
    let record = read_record(path, HARNESS);
    let action = match read_notify(&doc.doc) {
        // Another program's notify is not baton's to remove.
        Notify::Absent | Notify::Other(_) => Action::NotInstalled,
        Notify::Baton { canonical, .. } => {
            if !force && baton_edited(&canonical, None, record.as_ref()) {
                return Err(refuse_edited(path, "baton's notify", true));
            }
            Action::Removed
        }
    };
    let written = action == Action::Removed;
    if written {
        doc.doc.as_table_mut().remove(KEY);
        let text = doc.doc.to_string();
        let created = record.as_ref().is_some_and(|r| r.created_file);
        if created && text.trim().is_empty() {
            super::delete_file(&doc.loaded)?;
        } else {
            store_file(path, &doc.loaded, text.as_bytes())?;
        }
    }
    remove_record(path)?;
    Ok(Report {
        harness: HARNESS,
        scope,
        file: path.to_path_buf(),
        command: None,
        changes: vec![Change {
            event: EVENT.to_string(),
            action,
        }],
        written,
        replaced: None,
    })
}

pub(super) fn status(path: &Path, scope: Scope) -> Status {
    let mut status = Status::not_installed(HARNESS, scope, path);
    let doc = match parse(path) {
        Ok(doc) => doc,
        Err(e) => return status.unreadable(e.message),
    };
    match read_notify(&doc.doc) {
        Notify::Absent => {}
        Notify::Other(value) => {
            status.problem = Some(format!("notify runs another program: {value}"));
        }
        Notify::Baton { canonical, line } => {
            let record = read_record(path, HARNESS);
            let edited = baton_edited(&canonical, None, record.as_ref());
            status.state = if edited {
                State::Edited
            } else {
                State::Installed
            };
            status.events.push(EventStatus {
                event: EVENT.to_string(),
                state: if edited {
                    EntryState::Edited
                } else {
                    EntryState::Recorded
                },
            });
            status.command = Some(line);
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_is_recognised_as_batons_only_with_the_checkpoint_prefix() {
        let doc = |t: &str| t.parse::<DocumentMut>().unwrap();
        assert!(matches!(
            read_notify(&doc("model = \"o3\"\n")),
            Notify::Absent
        ));
        assert!(matches!(
            read_notify(&doc(
                "notify = [\"baton\", \"checkpoint\", \"--hook\", \"codex\"]\n"
            )),
            Notify::Baton { .. }
        ));
        let multi = "notify = [\n  \"python3\",  # the interpreter\n  \"n.py\",\n]\n";
        match read_notify(&doc(multi)) {
            Notify::Other(line) => assert_eq!(line, "[\"python3\", # the interpreter \"n.py\"]"),
            _ => panic!("not another program"),
        }
        for other in [
            "notify = [\"python3\", \"/home/me/notify.py\"]\n",
            "notify = [\"baton\", \"save\"]\n",
            "notify = \"baton checkpoint --hook codex\"\n",
        ] {
            assert!(
                matches!(read_notify(&doc(other)), Notify::Other(_)),
                "{other}"
            );
        }
    }
}
