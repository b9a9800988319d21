//! `baton transcript sources`: the agent sessions recorded in a workspace, without reading
//! more of them than their first lines and line counts (counted as read, never held); a
//! session over the size limit is listed as too large.

use std::fmt::Write;
use std::path::PathBuf;

use serde_json::json;

use crate::cli::TranscriptCommand;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, Result};
use baton_handoff::sessions::{self, Harness, Homes};

pub fn run(ctx: &Ctx, command: TranscriptCommand) -> Result<Outcome> {
    let TranscriptCommand::Sources { workspace } = command;
    let workspace = workspace.unwrap_or_else(|| PathBuf::from("."));
    let workspace = std::fs::canonicalize(&workspace)
        .map_err(|e| Error::io("cannot open workspace", &workspace, e))?;
    let homes = Homes::from_env();
    let mut found = Vec::new();
    for harness in [Harness::ClaudeCode, Harness::Codex, Harness::Gemini] {
        found.extend(sessions::list(&homes, harness, &workspace)?);
    }
    let mut human = String::new();
    if found.is_empty() {
        let _ = writeln!(
            human,
            "no Claude Code, Codex or Gemini CLI session was recorded in {} (looked in {}, {} and {})",
            workspace.display(),
            homes.claude.join("projects").display(),
            homes.codex.join("sessions").display(),
            homes.gemini.join("tmp").display()
        );
    } else {
        let _ = writeln!(
            human,
            "{:<12} {:<38} {:<26} {:>7}  source",
            "harness", "session", "started", "lines"
        );
    }
    let mut newest_seen = Vec::new();
    for s in &found {
        // The first session listed of each harness is what `HARNESS:latest` picks.
        let latest = !newest_seen.contains(&s.harness);
        newest_seen.push(s.harness);
        let source = if s.bytes > sessions::MAX_SESSION_BYTES {
            // Listed, so that it is not taken for missing, but no source to pass.
            format!(
                "too large ({} MiB, the limit is {} MiB)",
                s.bytes.div_ceil(1 << 20),
                sessions::MAX_SESSION_BYTES >> 20
            )
        } else if latest {
            format!("{}:latest", s.harness.name())
        } else {
            format!("{}:{}", s.harness.name(), s.session)
        };
        let _ = writeln!(
            human,
            "{:<12} {:<38} {:<26} {:>7}  {source}",
            s.harness.name(),
            s.session,
            s.started,
            s.lines
        );
    }
    Ok(Outcome::new(
        if ctx.quiet { String::new() } else { human },
        json!({ "workspace": workspace, "sources": found }),
    ))
}
