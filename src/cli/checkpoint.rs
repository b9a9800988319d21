//! The clap arguments of `baton checkpoint` (the harness hooks' command), `baton sync`
//! (the push queue) and `baton status`.

use clap::Args;

use super::ConnectArgs;

#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// Called by a harness hook: claude-code (the hook's JSON on stdin) or codex (its
    /// notify JSON as the last argument). Never fails the hook: exit 0, outcome in the log
    #[arg(long, value_name = "HARNESS", required_unless_present = "log")]
    pub hook: Option<String>,
    /// After the checkpoint, queue a push of it to TARGET and push in the background
    /// (`baton status` shows the queue, `baton sync` retries it)
    #[arg(long, value_name = "TARGET", conflicts_with = "log")]
    pub push: Option<String>,
    /// Give up (and say so in the log) after SECS seconds, at least 1 (the default is
    /// well under Claude Code's 60-second hook timeout)
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 10,
        conflicts_with = "log"
    )]
    pub timeout: u64,
    /// Print the checkpoint log (the store's, else the fallback under ~/.local/state/baton)
    #[arg(long)]
    pub log: bool,
    /// The hook's JSON when it is an argument (Codex's notify passes it last)
    #[arg(value_name = "JSON", conflicts_with = "log")]
    pub payload: Option<String>,
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    /// Push only this target's queued bundle [default: every queued target]
    pub target: Option<String>,
    /// The drain `checkpoint --push` starts: if another drain holds the queue, leave it
    /// to that one (it pushes what is queued) and exit 0
    #[arg(long, hide = true)]
    pub background: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
}
