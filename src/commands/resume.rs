//! `baton resume [REV]`: verify a handoff (pulling a target first), then print the
//! kickoff `handoff::resume` makes of it, or deliver it to the receiving harness
//! (`--launch`, `--deliver tmux:PANE`: `handoff::deliver`).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::pull::PullOptions;
use crate::cli::{ResumeArgs, ResumeFormat};
use crate::commands::Ctx;
use crate::output::{Outcome, terminal_safe};
use baton_error::{Error, ErrorKind, Result};
use baton_handoff::deliver::{self, Harness, Recognise, launch, tmux};
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
    /// Hand the kickoff to the receiving harness instead of printing it.
    pub delivery: Option<Delivery>,
}

/// Where the kickoff goes besides the output (`--launch`, `--deliver`).
pub enum Delivery {
    /// Become the harness, started in the workspace with the kickoff as its first prompt.
    Launch(Harness),
    /// Paste it into a tmux pane once the harness there waits for input.
    Tmux {
        pane: String,
        harness: Option<Harness>,
        timeout: Duration,
        submit: bool,
    },
}

impl TryFrom<&ResumeArgs> for ResumeOptions {
    type Error = Error;

    fn try_from(args: &ResumeArgs) -> Result<ResumeOptions> {
        let delivery = match (&args.launch, &args.deliver) {
            (Some(harness), _) => Some(Delivery::Launch(*harness)),
            (None, Some(spec)) => Some(Delivery::Tmux {
                pane: deliver::parse_target(spec)?,
                harness: args.harness,
                timeout: Duration::try_from_secs_f64(args.deliver_timeout).map_err(|_| {
                    Error::usage(format!(
                        "--deliver-timeout {} is not a number of seconds",
                        args.deliver_timeout
                    ))
                    .with_hint("give --deliver-timeout SECONDS, e.g. 30 or 2.5")
                })?,
                submit: !args.no_submit,
            }),
            (None, None) => None,
        };
        Ok(ResumeOptions {
            rev: args.rev.clone(),
            budget: args.budget,
            workspace: args.workspace.clone(),
            prompt: args.format == ResumeFormat::Prompt,
            require_same_repo: args.require_same_repo,
            connect: super::connect_settings(&args.connect),
            delivery,
        })
    }
}

pub fn run(ctx: &Ctx, args: &ResumeArgs) -> Result<Outcome> {
    run_with(ctx, ResumeOptions::try_from(args)?)
}

pub fn run_with(ctx: &Ctx, args: ResumeOptions) -> Result<Outcome> {
    // `--format json` is --json; `--format prompt` with --json would be dropped unsaid.
    if ctx.json && args.prompt {
        return Err(Error::usage(
            "--json and --format prompt ask for two outputs: --json prints the JSON document",
        )
        .with_hint("drop --json to print the prompt as text, or drop --format prompt and read the document's 'prompt' field"));
    }
    // The launched harness owns stdout: there is no room for a JSON document after it.
    if let (true, Some(Delivery::Launch(harness))) = (ctx.json, &args.delivery) {
        return Err(Error::usage(format!(
            "--launch {} hands the terminal to {}: there is no JSON document to print",
            harness.name(),
            harness.name()
        ))
        .with_hint("drop --json (the launch is said on stderr), or deliver into a waiting pane with --deliver tmux:PANE, which prints one"));
    }
    if args.budget < kickoff::MIN_BUDGET {
        return Err(Error::usage(format!(
            "--budget {} is below the floor of {} tokens (the header and a Next Steps line)",
            args.budget,
            kickoff::MIN_BUDGET
        ))
        .with_hint(format!("give --budget {} or more", kickoff::MIN_BUDGET)));
    }
    let workspace = args.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    // The harness found before anything is pulled: a missing one is said at once.
    let launch = match &args.delivery {
        Some(Delivery::Launch(harness)) => Some(launch::prepare(
            &launch::LaunchOptions::from_env(*harness, &workspace),
        )?),
        _ => None,
    };
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
    let resume::Resumed {
        kickoff,
        comparison,
        prompt,
    } = resume::resume(&store, &id, &workspace, args.budget, args.require_same_repo)?;
    let notes = !ctx.quiet && !ctx.json;
    if let Some(launch) = launch {
        if notes {
            let mut err = std::io::stderr().lock();
            if let Some(line) = &pulled {
                let _ = writeln!(err, "{}", terminal_safe(line));
            }
            if let Some(warning) = comparison.as_ref().and_then(|c| c.warning.as_ref()) {
                let _ = writeln!(err, "{}", terminal_safe(warning));
            }
            let _ = writeln!(
                err,
                "launching {} in {} with the kickoff of {}",
                launch.harness.name(),
                terminal_safe(&launch.workspace.display().to_string()),
                id.short()
            );
            let _ = err.flush();
        }
        // Nothing of the store stays open in the harness.
        drop(store);
        return Err(launch.exec(&deliver::delivered_text(&prompt)));
    }
    let delivered = match &args.delivery {
        None | Some(Delivery::Launch(_)) => None,
        Some(Delivery::Tmux {
            pane,
            harness,
            timeout,
            submit,
        }) => {
            let text = deliver::delivered_text(&prompt);
            let delivered = tmux::deliver(&tmux::TmuxOptions {
                pane,
                harness: *harness,
                known: Recognise::all_from_env(),
                timeout: *timeout,
                submit: *submit,
                text: &text,
            })?;
            if notes {
                eprintln!(
                    "delivered the kickoff of {} to tmux pane {} ({}){}",
                    id.short(),
                    terminal_safe(delivered.pane_id.as_deref().unwrap_or(pane)),
                    delivered.harness.name(),
                    if delivered.submitted {
                        ""
                    } else {
                        ", not submitted"
                    }
                );
            }
            Some(delivered)
        }
    };
    let human = match &pulled {
        // Delivered: the kickoff is in the pane; only the pull is said here.
        Some(line) if delivered.is_some() && !ctx.quiet => line.clone(),
        _ if delivered.is_some() => String::new(),
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
            "delivered": delivered,
        }),
    ))
}
