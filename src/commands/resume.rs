//! `baton resume [REV]`: verify a handoff (pulling a target first), then print the
//! kickoff `handoff::resume` makes of it.

use std::path::PathBuf;

use serde_json::json;

use super::pull::PullOptions;
use crate::cli::{ResumeArgs, ResumeFormat};
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, ErrorKind, Result};
use baton_handoff::kickoff;
use baton_handoff::resume;
use baton_sync::ConnectSettings;

/// What to resume, as plain values (the CLI's flags, or an MCP call's).
pub struct ResumeOptions {
    /// A bundle, or a target name to pull first [default: current].
    pub rev: Option<String>,
    /// The kickoff's token budget.
    pub budget: usize,
    /// The workspace to compare with the captured one [default: .].
    pub workspace: Option<PathBuf>,
    /// Print the prompt rather than the kickoff (`--format prompt`).
    pub prompt: bool,
    /// Refuse unless the workspace is the handoff's repository, not diverged.
    pub require_same_repo: bool,
    /// How to reach the target a `rev` naming one is pulled from.
    pub connect: ConnectSettings,
}

impl From<&ResumeArgs> for ResumeOptions {
    fn from(args: &ResumeArgs) -> ResumeOptions {
        ResumeOptions {
            rev: args.rev.clone(),
            budget: args.budget,
            workspace: args.workspace.clone(),
            prompt: args.format == ResumeFormat::Prompt,
            require_same_repo: args.require_same_repo,
            connect: super::connect_settings(&args.connect),
        }
    }
}

pub fn run(ctx: &Ctx, args: &ResumeArgs) -> Result<Outcome> {
    run_with(ctx, ResumeOptions::from(args))
}

pub fn run_with(ctx: &Ctx, args: ResumeOptions) -> Result<Outcome> {
    // `--format json` is --json; `--format prompt` with --json would be dropped unsaid.
    if ctx.json && args.prompt {
        return Err(Error::usage(
            "--json and --format prompt ask for two outputs: --json prints the JSON document",
        )
        .with_hint("drop --json to print the prompt as text, or drop --format prompt and read the document's 'prompt' field"));
    }
    if args.budget < kickoff::MIN_BUDGET {
        return Err(Error::usage(format!(
            "--budget {} is below the floor of {} tokens (the header and a Next Steps line)",
            args.budget,
            kickoff::MIN_BUDGET
        ))
        .with_hint(format!("give --budget {} or more", kickoff::MIN_BUDGET)));
    }
    // A target name: pull it first, then resume what it holds. A lost race (diverged)
    // still resumes the target's handoff, with the conflict said in the output.
    let mut pulled = None;
    let mut rev = args.rev.clone().unwrap_or_else(|| "current".into());
    if ctx.open_store_locked()?.config.targets.contains_key(&rev) {
        let pull = PullOptions {
            target: Some(rev.clone()),
            repair: false,
            connect: args.connect.clone(),
        };
        pulled = Some(match super::pull::run_with(ctx, pull) {
            Ok(outcome) => outcome.human,
            Err(e) if e.kind == ErrorKind::StoreConflict => format!("warning: {e}"),
            Err(e) => return Err(e),
        });
        rev = format!("targets/{rev}");
    }
    let store = ctx.open_store()?;
    let id = baton_sync::resolve_rev(&store, &rev)?;
    let workspace = args.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    let resume::Resumed {
        kickoff,
        comparison,
        prompt,
    } = resume::resume(&store, &id, &workspace, args.budget, args.require_same_repo)?;
    let human = match &pulled {
        _ if args.prompt => prompt.clone(),
        Some(line) if !ctx.quiet => format!("{line}\n\n{}", kickoff.text()),
        _ => kickoff.text(),
    };
    Ok(Outcome::new(
        human,
        json!({
            "bundle": id,
            "verified": true,
            "kickoff": kickoff,
            "workspace": comparison,
            "prompt": prompt,
            "pulled": pulled,
        }),
    ))
}
