//! The clap definitions of `baton hooks install|status|remove` (kept beside cli.rs, which
//! holds the rest of the command line).

use clap::{Args, Subcommand};

use super::values;

const INSTALL_HELP: &str = "\
What fires when:
  Claude Code  PreCompact    before a manual or automatic compaction
               SessionEnd    when a session ends (exit, /clear, logout)
               Stop          after every answer (--on-stop)
               SessionStart  startup, /clear, after a compaction: the latest kickoff goes
                             into the new session's context (--resume)
  Codex        notify        after every turn (agent-turn-complete)

The hook line is `baton checkpoint --hook HARNESS`, plus --push TARGET and the global
--store PATH (made absolute) when given; `baton` must be on the PATH the harness starts
with. Claude Code gets a 30 s timeout per hook (checkpoint gives up well before). Other
hooks, keys and comments are kept; an entry of baton's that was edited by hand, or a
Codex notify that runs another program, is kept unless --force (exit 5); a file that does
not parse is left alone (exit 2). docs/hooks.md has the details.";

#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Write hooks that run `baton checkpoint --hook HARNESS` into the harness's own
    /// configuration: Claude Code at PreCompact and SessionEnd (settings.json), Codex after
    /// every turn (notify in config.toml). Merged among other hooks; idempotent
    #[command(after_help = INSTALL_HELP)]
    Install {
        #[command(flatten)]
        place: HookPlace,
        /// Claude Code: also checkpoint at Stop, after every answer
        #[arg(long)]
        on_stop: bool,
        /// Claude Code: a SessionStart hook (startup, /clear, after a compaction) that gives
        /// the new session the latest kickoff of its workspace
        #[arg(long)]
        resume: bool,
        /// Push each checkpoint to TARGET (in the background; a failed push is queued)
        #[arg(long, value_name = "TARGET")]
        push: Option<String>,
        /// Replace baton entries edited since baton wrote them (Codex: replace another
        /// notify program)
        #[arg(long)]
        force: bool,
    },
    /// Show which harnesses and scopes are hooked: installed, not installed or edited, the
    /// file and the events
    Status {
        /// Only this harness [default: every harness]
        #[arg(long, value_parser = values::harness())]
        harness: Option<baton_handoff::skill::Harness>,
        /// Only this scope [default: every scope the harness has]
        #[arg(long, value_parser = values::scope())]
        scope: Option<baton_handoff::skill::Scope>,
    },
    /// Take baton's hooks out again, nothing else; edited entries only with --force
    Remove {
        #[command(flatten)]
        place: HookPlace,
        /// Remove baton entries even if they were edited since baton wrote them
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Args)]
pub struct HookPlace {
    /// The agent harness: claude-code (~/.claude/settings.json) or codex
    /// (~/.codex/config.toml)
    #[arg(long, value_parser = values::harness())]
    pub harness: baton_handoff::skill::Harness,
    /// user: the harness's own settings; project: .claude/settings.json at the top of this
    /// git work tree (Claude Code only)
    #[arg(long, value_parser = values::scope(), default_value = "user")]
    pub scope: baton_handoff::skill::Scope,
}
