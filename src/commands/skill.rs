//! `baton skill install|status|remove`: the baton skill in an agent harness's configuration.

use std::fmt::Write;

use serde_json::json;

use crate::cli::SkillCommand;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, Result};
use baton_handoff::skill::{self, Action, Change, FileState, Harness, Places, Scope};

pub fn run(ctx: &Ctx, command: SkillCommand) -> Result<Outcome> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::other(format!("cannot read the current directory: {e}")))?;
    let places = Places::from_env(&cwd)?;
    match command {
        SkillCommand::Install {
            place,
            agents_md,
            force,
        } => {
            let changes = skill::install(&places, place.harness, place.scope, agents_md, force)?;
            Ok(changed(
                ctx,
                "install",
                place.harness,
                place.scope,
                &changes,
            ))
        }
        SkillCommand::Remove { place, force } => {
            let changes = skill::remove(&places, place.harness, place.scope, force)?;
            Ok(changed(ctx, "remove", place.harness, place.scope, &changes))
        }
        SkillCommand::Status { harness, scope } => {
            let harnesses = harness.map_or(Harness::ALL.to_vec(), |h| vec![h]);
            let scopes = scope.map_or(Scope::ALL.to_vec(), |s| vec![s]);
            let mut entries = Vec::new();
            for h in &harnesses {
                for s in &scopes {
                    entries.push(skill::status(&places, *h, *s)?);
                }
            }
            let mut human = String::new();
            for e in &entries {
                let _ = writeln!(
                    human,
                    "{:<12} {:<8} {:<13} {}",
                    e.harness.name(),
                    e.scope.name(),
                    state_word(e.state),
                    e.path.display()
                );
                if let Some(section) = &e.agents_md {
                    let _ = writeln!(
                        human,
                        "{:<12} {:<8} {:<13} {} (baton section)",
                        "",
                        "",
                        state_word(section.state),
                        section.path.display()
                    );
                }
            }
            if entries.iter().any(|e| e.state == FileState::Outdated) {
                human.push_str("outdated: run 'baton skill install --harness H' to update\n");
            }
            Ok(Outcome::new(
                if ctx.quiet { String::new() } else { human },
                json!({ "ok": true, "skills": entries }),
            ))
        }
    }
}

fn state_word(state: FileState) -> &'static str {
    match state {
        FileState::Absent => "not installed",
        FileState::Current => "current",
        FileState::Outdated => "outdated",
        FileState::Modified => "modified",
    }
}

fn changed(ctx: &Ctx, verb: &str, harness: Harness, scope: Scope, changes: &[Change]) -> Outcome {
    let mut human = String::new();
    if !ctx.quiet {
        for c in changes {
            let what = match c.action {
                Action::Installed => "installed",
                Action::Updated => "updated",
                Action::Unchanged => "already current",
                Action::Removed => "removed",
                Action::NotInstalled => "not installed",
            };
            let _ = writeln!(human, "{what}: {}", c.path.display());
        }
        if verb == "install" && changes.iter().any(|c| c.action != Action::Unchanged) {
            let _ = writeln!(
                human,
                "{} loads it in its next session ('baton skill status' shows what is installed)",
                match harness {
                    Harness::ClaudeCode => "Claude Code",
                    Harness::Codex => "Codex",
                }
            );
        }
    }
    Outcome::new(
        human,
        json!({
            "ok": true,
            "harness": harness,
            "scope": scope,
            "changes": changes,
        }),
    )
}
