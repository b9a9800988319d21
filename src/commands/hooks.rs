//! `baton hooks install|status|remove`: the hooks in a harness's own configuration that
//! run `baton checkpoint --hook HARNESS` (the library side is `baton_handoff::hooks`).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::cli::HooksCommand;
use crate::commands::Ctx;
use crate::output::{Outcome, terminal_safe};
use baton_error::{Error, Result};
use baton_handoff::hooks::{
    self, Action, EntryState, Harness, Options, Places, Report, State, Status,
};

pub fn run(ctx: &Ctx, command: HooksCommand) -> Result<Outcome> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::other(format!("cannot read the current directory: {e}")))?;
    let places = Places::from_env(&cwd)?;
    match command {
        HooksCommand::Install {
            place,
            on_stop,
            resume,
            push,
            force,
        } => {
            let options = Options {
                on_stop,
                resume,
                push,
                // A hook runs in whatever directory the harness is in: the store it was
                // installed with is written down absolute.
                store: ctx.store.as_ref().map(|s| absolute(&cwd, s)),
            };
            let report = hooks::install(&places, place.harness, place.scope, &options, force)?;
            Ok(changed(ctx, "install", &report))
        }
        HooksCommand::Remove { place, force } => {
            let report = hooks::remove(&places, place.harness, place.scope, force)?;
            Ok(changed(ctx, "remove", &report))
        }
        HooksCommand::Status { harness, scope } => {
            let harnesses = harness.map_or(Harness::ALL.to_vec(), |h| vec![h]);
            let mut entries = Vec::new();
            for h in harnesses {
                // Asked for by name, a pair that cannot be hooked says why; listed, it is
                // left out.
                let listed = match (harness, scope) {
                    (Some(_), Some(s)) => vec![s],
                    _ => hooks::scopes(&places, h),
                };
                for s in listed {
                    if scope.is_none_or(|want| want == s) {
                        entries.push(hooks::status(&places, h, s)?);
                    }
                }
            }
            Ok(Outcome::new(
                if ctx.quiet {
                    String::new()
                } else {
                    status_text(&entries)
                },
                json!({ "ok": true, "hooks": entries }),
            ))
        }
    }
}

fn absolute(cwd: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

fn state_word(state: State) -> &'static str {
    match state {
        State::NotInstalled => "not installed",
        State::Installed => "installed",
        State::Edited => "edited",
        State::Unreadable => "unreadable",
    }
}

fn status_text(entries: &[Status]) -> String {
    let mut human = String::new();
    for e in entries {
        let events: Vec<String> = e
            .events
            .iter()
            .map(|ev| match ev.state {
                EntryState::Recorded => ev.event.clone(),
                EntryState::Edited => format!("{} (edited)", ev.event),
                EntryState::Missing => format!("{} (removed by hand)", ev.event),
            })
            .collect();
        let _ = writeln!(
            human,
            "{:<12} {:<8} {:<14} {}{}",
            e.harness.name(),
            e.scope.name(),
            state_word(e.state),
            terminal_safe(&e.file.display().to_string()).into_owned(),
            if events.is_empty() {
                String::new()
            } else {
                format!("  {}", events.join(", "))
            }
        );
        if let Some(problem) = &e.problem {
            let _ = writeln!(human, "{:<36}{}", "", terminal_safe(problem));
        }
    }
    if entries.iter().any(|e| e.state == State::Edited) {
        human.push_str(
            "edited: baton keeps them; 'baton hooks install --harness H --force' writes its own again\n",
        );
    }
    human
}

fn changed(ctx: &Ctx, verb: &str, report: &Report) -> Outcome {
    let on_path = baton_on_path();
    let mut human = String::new();
    if !ctx.quiet {
        let file = report.file.display().to_string();
        let file = terminal_safe(&file);
        for c in &report.changes {
            let what = match c.action {
                Action::Installed => "installed",
                Action::Updated => "updated",
                Action::Unchanged => "already installed",
                Action::Removed => "removed",
                Action::NotInstalled => "not installed",
            };
            let _ = writeln!(human, "{:<20} {what}", c.event);
        }
        if let Some(old) = &report.replaced {
            let _ = writeln!(
                human,
                "replaced notify = {} (Codex runs one notify program)",
                terminal_safe(old)
            );
        }
        match (verb, report.written) {
            ("install", true) => {
                let _ = writeln!(
                    human,
                    "wrote {file}: each hook runs `{}`\n{} runs them from its next session \
                     ('baton hooks status' shows them)",
                    terminal_safe(report.command.as_deref().unwrap_or_default()),
                    match report.harness {
                        Harness::ClaudeCode => "Claude Code",
                        Harness::Codex => "Codex",
                    }
                );
            }
            ("install", false) => {
                let _ = writeln!(human, "{file} already has them: nothing written");
            }
            (_, true) => {
                let _ = writeln!(human, "took baton's hooks out of {file}");
            }
            (_, false) => {
                let _ = writeln!(human, "no baton hooks in {file}: nothing written");
            }
        }
        if verb == "install" && !on_path && !ctx.json {
            eprintln!(
                "note: no `baton` on PATH here; the harness runs the hook by that name, so \
                 put baton on the PATH it starts with"
            );
        }
    }
    Outcome::new(
        human,
        json!({
            "ok": true,
            "harness": report.harness,
            "scope": report.scope,
            "file": report.file,
            "command": report.command,
            "changes": report.changes,
            "written": report.written,
            "replaced": report.replaced,
            "baton_on_path": on_path,
        }),
    )
}

/// Whether an executable `baton` is on PATH: the name every hook line runs.
fn baton_on_path() -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join("baton"))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}
