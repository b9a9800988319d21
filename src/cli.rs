//! The command-line interface: clap definitions (also used for completions and the man page).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub mod checkpoint;
mod hooks;
mod resume;
pub mod values;

pub use hooks::{HookPlace, HooksCommand};
pub use resume::{ResumeArgs, ResumeFormat};

#[derive(Debug, Parser)]
#[command(
    name = "baton",
    version,
    about = "Content-addressed store and sync tool for agent handoff bundles",
    after_help = baton_error::exit_codes_help()
)]
pub struct Cli {
    /// The store to use [default: $BATON_STORE, else the nearest .baton/ upwards]
    #[arg(long, global = true, value_name = "PATH", env = "BATON_STORE")]
    pub store: Option<PathBuf>,
    /// Print one JSON document on stdout (errors included)
    #[arg(long, global = true)]
    pub json: bool,
    /// Print only what was asked for: no progress, no notes
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// On failure, also print the error's causes under it (`caused by: ...` lines)
    #[arg(long, global = true)]
    pub verbose: bool,
    /// age identity file (as written by age-keygen) that unlocks an encrypted store
    #[arg(long, global = true, value_name = "FILE", env = "BATON_IDENTITY")]
    pub identity: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a store (./.baton, or the --store path)
    Init(InitArgs),
    /// Snapshot DIR, or save a handoff (--brief/--no-brief), as a new bundle on top of
    /// `current`; prints the bundle id
    Save(SaveArgs),
    /// Save a handoff and push it in one step; prints the line the receiver runs
    Handoff(HandoffArgs),
    /// Resume a handoff: verify it, compare the workspace, print a kickoff
    Resume(ResumeArgs),
    /// Save a checkpoint for a harness hook (--hook claude-code|codex), or print its log (--log)
    Checkpoint(checkpoint::CheckpointArgs),
    /// Push what `checkpoint --push` queued; exits non-zero if a push failed
    Sync(checkpoint::SyncArgs),
    /// Show the store, current, the targets and the push queue
    Status,
    /// Search a handoff's transcript (at most 50 events / 8,000 tokens per answer)
    Search(SearchArgs),
    /// Agent sessions baton can attach as transcripts (`baton transcript sources`)
    #[command(subcommand)]
    Transcript(TranscriptCommand),
    /// Import handoffs written by other tools (.prowl/handoff, frontmatter files, bundles)
    ImportHandoff {
        path: PathBuf,
        /// What to do with secrets found in the imported material
        #[arg(long, value_parser = values::secrets_mode(), default_value = "redact")]
        secrets: baton_handoff::capture::SecretsMode,
    },
    /// Write a handoff (with --history, its whole history) as frontmatter or prowl files
    ExportHandoff(ExportHandoffArgs),
    /// Show history from REV (default: current), newest first
    Log(LogArgs),
    /// Show a bundle's manifest and files
    Show {
        /// Revision: id, unique prefix (8+ hex digits), current, current~N, targets/NAME
        rev: String,
    },
    /// Print one file of a bundle: REV:PATH
    Cat {
        /// REV:PATH, e.g. current:handoff.md
        spec: String,
    },
    /// Restore a bundle's files into DIR (absent or empty)
    Checkout {
        /// The bundle: id, unique prefix, current, current~N, targets/NAME
        rev: String,
        /// The directory to restore into: absent or empty
        dir: PathBuf,
    },
    /// List the paths that differ between two bundles
    Diff {
        /// The bundle to compare from: id, unique prefix, current~N, targets/NAME
        old: String,
        /// The bundle to compare to (same forms)
        new: String,
    },
    /// Check integrity: the whole store (every object rehashed), or one bundle REV
    Verify {
        /// One bundle to check (id, unique prefix, current~N, targets/NAME) [default: the
        /// whole store]
        rev: Option<String>,
        /// With REV: also every ancestor of REV and everything below their trees
        #[arg(long, requires = "rev")]
        history: bool,
    },
    /// Move `current` to REV (e.g. targets/origin after a lost push race); logged, undoable
    Reset {
        /// Revision: id, unique prefix, current~N, targets/NAME
        rev: String,
        /// Move only if `current` is still this id (or `none`): a compare-and-swap
        #[arg(long, value_name = "ID")]
        expect: Option<String>,
    },
    /// Join REV's line of history with `current` in a new bundle with both as parents
    Merge(MergeArgs),
    /// Remove objects no ref or log line reaches (after a grace period); merge packs into one
    Gc(GcArgs),
    /// Manage remote targets (like git remotes)
    #[command(subcommand)]
    Target(TargetCommand),
    /// Send a bundle and its history to a target, then move the target's `current`
    Push(PushArgs),
    /// Fetch a target's `current`, then fast-forward the local `current` to it
    Pull(PullArgs),
    /// Create a new store from a target URL (the target is recorded as `origin`)
    Clone(CloneArgs),
    /// Write bundles and their objects to a tar archive (docs/archives.md)
    Export(ExportArgs),
    /// Verify a tar archive made by export, then add its bundles and fast-forward `current`
    Import(ImportArgs),
    /// Serve the Model Context Protocol over stdio (tools: save_handoff, resume, search, log, show, push, pull)
    Mcp {
        /// The workspace the tools work in; path arguments must lie inside it [default: .]
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Install the baton skill into an agent harness (Claude Code, Codex), or check or remove it
    #[command(subcommand)]
    Skill(SkillCommand),
    /// Checkpoint automatically from a harness's own hooks (Claude Code settings.json,
    /// Codex notify): install, check or remove them
    #[command(subcommand)]
    Hooks(HooksCommand),
    /// Print a shell completion script
    Completions { shell: clap_complete::Shell },
    /// Print the man page (roff) of baton, or of one command (`baton man save`)
    Man { command: Option<String> },
}

impl Command {
    /// Whether the command's own flags ask for the JSON document (`resume --format json`).
    pub fn wants_json(&self) -> bool {
        matches!(self, Command::Resume(a) if a.format == ResumeFormat::Json)
    }
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Encrypt the store at rest with age (store-format/ENCRYPTION.md)
    #[arg(long)]
    pub encrypt: bool,
    /// age recipient (public key, age1...) that can read the store; repeatable
    #[arg(long, value_name = "AGE_PUBLIC_KEY", num_args = 1.., requires = "encrypt")]
    pub recipient: Vec<String>,
    /// File of age recipients, one per line (# comments allowed)
    #[arg(long, value_name = "FILE", requires = "encrypt")]
    pub recipients_file: Option<PathBuf>,
    /// Protect the store with a passphrase ($BATON_PASSPHRASE, else a prompt)
    #[arg(long, requires = "encrypt", conflicts_with_all = ["recipient", "recipients_file"])]
    pub passphrase: bool,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The other line: an id, unique prefix, or targets/NAME (after a diverged pull)
    pub rev: String,
    /// The merged briefing (handoff.md) from FILE, or - for stdin [default: both sides'
    /// Next Steps, labelled, under current's Objective and Current State]
    #[arg(long, value_name = "FILE")]
    pub brief: Option<String>,
    /// What to do with secrets found in the briefing and the text fields
    #[arg(long, value_parser = values::secrets_mode(), default_value = "redact")]
    pub secrets: baton_handoff::capture::SecretsMode,
    /// The agent or person merging
    #[arg(
        long,
        value_name = "AGENT",
        env = "BATON_FROM",
        default_value = "",
        hide_default_value = true
    )]
    pub from: String,
    /// The agent or person receiving
    #[arg(
        long,
        value_name = "AGENT",
        default_value = "",
        hide_default_value = true
    )]
    pub to: String,
    /// One line saying what this merge is [default: "Merge REV (ID) into ID"]
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "",
        hide_default_value = true
    )]
    pub summary: String,
}

#[derive(Debug, Args)]
pub struct SaveArgs {
    /// The directory to snapshot (required without --brief/--no-brief); with --brief or
    /// --no-brief, the workspace [default: .]
    pub dir: Option<PathBuf>,
    /// Save a handoff: the briefing (handoff.md) from FILE, or - for stdin
    #[arg(long, value_name = "FILE", conflicts_with = "no_brief")]
    pub brief: Option<String>,
    /// Save a handoff with workspace evidence only, no briefing
    #[arg(long)]
    pub no_brief: bool,
    /// Attach a file or directory to the handoff (repeatable; handoffs only)
    #[arg(long, value_name = "PATH")]
    pub attach: Vec<PathBuf>,
    /// The session transcript (handoffs only): claude-code[:SESSION|latest],
    /// codex[:SESSION|latest], gemini[:SESSION|latest] (Gemini CLI), or a FILE (./codex
    /// for a file of that name); stored as transcript.jsonl
    #[arg(long, value_name = "SRC")]
    pub transcript: Option<String>,
    /// What to do with secrets found: block refuses the save, redact stores placeholders,
    /// allow (snapshots only) stores them as they are [default: block for a directory
    /// snapshot, redact for a handoff]
    #[arg(long, value_parser = values::secrets_mode())]
    pub secrets: Option<baton_handoff::capture::SecretsMode>,
    /// What to do with personal data (emails, phone numbers, US SSNs, card numbers) in the
    /// briefing, --summary, --note and the transcript (handoffs only): redact stores
    /// placeholders, allow stores it as it is; both report kinds and counts [default:
    /// redact]
    #[arg(long, value_parser = values::pii_mode(), value_name = "MODE")]
    pub pii: Option<baton_handoff::pii::PiiMode>,
    /// Snapshot everything, also .git and what .gitignore and .batonignore exclude
    #[arg(long)]
    pub no_ignore: bool,
    /// Read every file of DIR instead of trusting the stat cache (save DIR only; for tools
    /// that write through a shared mmap or restore mtimes: docs/reliability.md)
    #[arg(long, env = "BATON_NO_CACHE", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_cache: bool,
    /// The agent or person handing off
    #[arg(
        long,
        value_name = "AGENT",
        env = "BATON_FROM",
        default_value = "",
        hide_default_value = true
    )]
    pub from: String,
    /// The agent or person receiving
    #[arg(
        long,
        value_name = "AGENT",
        default_value = "",
        hide_default_value = true
    )]
    pub to: String,
    /// One line saying what this handoff is [default for handoffs: from the Objective]
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "",
        hide_default_value = true
    )]
    pub summary: String,
    /// Free text
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "",
        hide_default_value = true
    )]
    pub note: String,
    /// Metadata, repeatable
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub meta: Vec<String>,
}

#[derive(Debug, Args)]
pub struct HandoffArgs {
    /// The agent (or person) taking over
    #[arg(long, value_name = "AGENT")]
    pub to: String,
    /// The briefing (handoff.md) from FILE, or - for stdin (this or --no-brief is
    /// required; without either, the briefing skeleton is printed)
    #[arg(long, value_name = "FILE", conflicts_with = "no_brief")]
    pub brief: Option<String>,
    /// Hand off workspace evidence (and the transcript) only, without a briefing
    #[arg(long)]
    pub no_brief: bool,
    /// The session transcript: claude-code[:SESSION|latest], codex[:SESSION|latest],
    /// gemini[:SESSION|latest] (Gemini CLI) or FILE
    #[arg(long, value_name = "SRC")]
    pub transcript: Option<String>,
    /// Push the handoff to this target once it is saved
    #[arg(long, value_name = "TARGET")]
    pub push: Option<String>,
    /// The agent handing off
    #[arg(
        long,
        value_name = "AGENT",
        env = "BATON_FROM",
        default_value = "",
        hide_default_value = true
    )]
    pub from: String,
    /// Attach a file or directory (repeatable)
    #[arg(long, value_name = "PATH")]
    pub attach: Vec<PathBuf>,
    /// What to do with secrets found in the handoff
    #[arg(long, value_parser = values::secrets_mode(), default_value = "redact")]
    pub secrets: baton_handoff::capture::SecretsMode,
    /// What to do with personal data (emails, phone numbers, US SSNs, card numbers) in the
    /// briefing, --summary, --note and the transcript: redact stores placeholders, allow
    /// stores it as it is; both report kinds and counts
    #[arg(long, value_parser = values::pii_mode(), value_name = "MODE", default_value = "redact")]
    pub pii: baton_handoff::pii::PiiMode,
    /// One line saying what this handoff is [default: from the Objective]
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "",
        hide_default_value = true
    )]
    pub summary: String,
    /// Free text
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "",
        hide_default_value = true
    )]
    pub note: String,
    /// The workspace [default: .]
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// The handoff whose transcript to search: id, unique prefix, current~N, targets/NAME
    pub rev: String,
    /// Words that must all appear in an event's text (ignoring case); "" for every event
    pub query: String,
    /// Continue from a previous answer's next_cursor
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
    /// Only events of this role (repeatable)
    #[arg(long, value_parser = values::role(), value_name = "ROLE")]
    pub role: Vec<baton_handoff::events::Role>,
    /// Only events of this kind (repeatable)
    #[arg(long, value_parser = values::kind(), value_name = "KIND")]
    pub kind: Vec<baton_handoff::events::Kind>,
    /// Only calls of, and results from, this tool (repeatable; ignoring case)
    #[arg(long, value_name = "NAME")]
    pub tool: Vec<String>,
    /// Do not count every match (total_matches is null): stop looking once the page and
    /// its cursor are known, much faster for a common word
    #[arg(long)]
    pub no_total: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Where to start (default: current; ignored with --audit)
    pub rev: Option<String>,
    /// Show at most N bundles
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    pub max: Option<usize>,
    /// Show the audit log of ref moves instead of bundle history
    #[arg(long)]
    pub audit: bool,
    /// With --audit: read the audit trail of this target over its transport
    #[arg(long, value_name = "NAME", requires = "audit")]
    pub target: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Keep unreachable objects younger than this (e.g. 14days, 1h, 0s)
    #[arg(long, value_name = "DURATION", default_value = "14days")]
    pub grace: humantime::Duration,
    /// Report what would be removed, remove nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Merge the packs of this target's store instead (a hub that receives one pack per
    /// push): the smallest ones geometrically, at most 8 left; nothing is removed there
    #[arg(long, value_name = "NAME")]
    pub target: Option<String>,
    /// With --target: merge every pack of the target into one
    #[arg(long, requires = "target")]
    pub all: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Subcommand)]
pub enum TargetCommand {
    /// Add a target: ssh://[user@]host[:port]/path, [user@]host:path, /abs/path, file:///abs/path,
    /// s3://BUCKET[/PREFIX], or a relative path (stored absolute)
    Add {
        name: String,
        url: String,
        /// Make it the default for push and pull
        #[arg(long)]
        default: bool,
        /// S3 targets: the endpoint URL (default: AWS_ENDPOINT_URL, the AWS_PROFILE profile, AWS)
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        /// S3 targets: the region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile, us-east-1)
        #[arg(long, value_name = "REGION")]
        region: Option<String>,
    },
    /// List targets
    List,
    /// Remove a target (its last-seen ref stays in the audit log)
    Remove { name: String },
    /// Make a target the default for push and pull
    Default { name: String },
}

#[derive(Debug, Subcommand)]
pub enum TranscriptCommand {
    /// List the Claude Code, Codex and Gemini CLI sessions recorded in this workspace,
    /// newest first
    Sources {
        /// The workspace [default: .]
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Write the skill (SKILL.md) where the harness loads it; idempotent
    Install {
        #[command(flatten)]
        place: SkillPlace,
        /// Codex: also add a baton section to AGENTS.md
        #[arg(long)]
        agents_md: bool,
        /// Replace files that were edited since baton installed them
        #[arg(long)]
        force: bool,
    },
    /// Show where the skill is installed and whether it is current, outdated or modified
    Status {
        /// Only this harness [default: every harness]
        #[arg(long, value_parser = values::harness())]
        harness: Option<baton_handoff::skill::Harness>,
        /// Only this scope [default: both]
        #[arg(long, value_parser = values::scope())]
        scope: Option<baton_handoff::skill::Scope>,
    },
    /// Remove the skill (and its AGENTS.md section); edited files only with --force
    Remove {
        #[command(flatten)]
        place: SkillPlace,
        /// Remove files even if they were edited since baton installed them
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Args)]
pub struct SkillPlace {
    /// The agent harness: claude-code (~/.claude/skills) or codex (~/.codex/skills)
    #[arg(long, value_parser = values::harness())]
    pub harness: baton_handoff::skill::Harness,
    /// user: the harness's own directory; project: this git work tree
    #[arg(long, value_parser = values::scope(), default_value = "user")]
    pub scope: baton_handoff::skill::Scope,
}

#[derive(Clone, Debug, Args)]
pub struct ConnectArgs {
    /// Accept and record an unknown SSH host key (never a changed one)
    #[arg(long)]
    pub accept_new_host_key: bool,
    /// Seconds before a silent connection counts as dead [default: ConnectTimeout, else 30]
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// Target name [default: the only or the default target]
    pub target: Option<String>,
    /// Bundle to push [default: current]
    pub rev: Option<String>,
    /// Overwrite the remote `current`, but only if it still holds EXPECTED_ID ("none" for empty)
    #[arg(long, value_name = "EXPECTED_ID")]
    pub force: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// Target name [default: the only or the default target]
    pub target: Option<String>,
    /// Refetch every object missing or damaged here from the target (see `baton verify`),
    /// instead of fetching its `current`
    #[arg(long)]
    pub repair: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct CloneArgs {
    /// Where the store to clone is
    pub url: String,
    /// Where to create the new store [default: --store, else ./.baton]
    pub path: Option<PathBuf>,
    /// S3 URLs: the endpoint, recorded with origin (default: AWS_ENDPOINT_URL, the profile, AWS)
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// S3 URLs: the region, recorded with origin (default: AWS_REGION, the profile, us-east-1)
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Bundles to export; the first is the archive's current [default: current]
    pub revs: Vec<String>,
    /// The archive file to write (replaced atomically)
    #[arg(short, long, value_name = "FILE.tar")]
    pub output: PathBuf,
    /// Include every ancestor bundle and the store's log
    #[arg(long)]
    pub history: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The archive file to import
    pub file: PathBuf,
    /// Let an object expand to RATIO times its stored size [default: 1024]
    #[arg(long, value_name = "RATIO")]
    pub max_expansion: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ExportHandoffArgs {
    /// The handoff to export: id, unique prefix, current, current~N, targets/NAME
    pub rev: String,
    /// The layout to write (the ones `import-handoff` reads)
    #[arg(long, value_parser = values::export_format())]
    pub format: baton_handoff::export::ExportFormat,
    /// The directory to write into: absent or empty
    pub dir: PathBuf,
    /// Also every ancestor (through every parent of a merge), parents first
    #[arg(long)]
    pub history: bool,
}
