//! The clap arguments of `baton resume`: what to resume, the kickoff's form, and its
//! delivery to the receiving harness (`--launch`, `--deliver`).

use std::path::PathBuf;

use clap::Args;

use super::{ConnectArgs, values};

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The handoff to resume [default: current], or a target name: pull it first
    pub rev: Option<String>,
    /// Token budget of the kickoff (estimated: 4 characters per token; at least 100)
    #[arg(long, value_name = "TOKENS", default_value_t = 2000)]
    pub budget: usize,
    /// The live workspace to compare with the captured one [default: .]
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// text: the kickoff; prompt: a fenced prompt to paste into a fresh chat; json: as --json
    #[arg(long, value_enum, default_value = "text")]
    pub format: ResumeFormat,
    /// Refuse (exit 5, store_conflict) unless the workspace is the handoff's repository
    /// and has not diverged from its HEAD
    #[arg(long)]
    pub require_same_repo: bool,
    /// Then start HARNESS in the workspace with the kickoff as its first prompt (baton
    /// becomes it: its exit status is baton's; $BATON_CLAUDE_BIN, $BATON_CODEX_BIN)
    #[arg(long, value_name = "HARNESS", value_parser = values::receiving_harness(), conflicts_with = "deliver")]
    pub launch: Option<baton_handoff::deliver::Harness>,
    /// Then paste the kickoff into the tmux pane where the harness waits (tmux:%3,
    /// tmux:SESSION:WINDOW.PANE) once it shows its input prompt, and press Enter
    #[arg(long, value_name = "tmux:PANE")]
    pub deliver: Option<String>,
    /// With --deliver: the harness the pane must run [default: the one it runs]
    #[arg(long, value_name = "HARNESS", value_parser = values::receiving_harness(), requires = "deliver")]
    pub harness: Option<baton_handoff::deliver::Harness>,
    /// With --deliver: seconds to wait for the pane to show the harness's input prompt
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30.0,
        requires = "deliver"
    )]
    pub deliver_timeout: f64,
    /// With --deliver: paste without pressing Enter (the kickoff waits in the input box)
    #[arg(long, requires = "deliver")]
    pub no_submit: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ResumeFormat {
    Text,
    Prompt,
    Json,
}
