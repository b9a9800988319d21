//! One module per command; `dispatch` routes a parsed command line to it.

mod cat;
mod checkout;
mod checkpoint;
mod clone;
mod completions;
mod ctx;
mod diff;
mod export;
mod export_handoff;
mod gc;
mod handoff;
mod hooks;
mod import;
mod import_handoff;
mod init;
mod log;
mod mcp;
mod merge;
pub mod prompts;
mod pull;
mod push;
mod reset;
mod resume;
mod save;
mod search;
mod show;
mod skill;
mod status;
mod sync;
mod target;
mod transcript;
mod verify;

pub use ctx::Ctx;

use crate::cli::Command;
use crate::output::Outcome;
use baton_error::Result;

pub fn dispatch(ctx: &Ctx, command: Command) -> Result<Outcome> {
    match command {
        Command::Init(args) => init::run(ctx, &args),
        Command::Save(args) => save::run(ctx, &args),
        Command::Log(args) => log::run(ctx, &args),
        Command::Show { rev } => show::run(ctx, &rev),
        Command::Cat { spec } => cat::run(ctx, &spec),
        Command::Checkout { rev, dir } => checkout::run(ctx, &rev, &dir),
        Command::Diff { old, new } => diff::run(ctx, &old, &new),
        Command::Verify { rev, history } => verify::run(ctx, rev.as_deref(), history),
        Command::Reset { rev, expect } => reset::run(ctx, &rev, expect.as_deref()),
        Command::Merge(args) => merge::run(ctx, &args),
        Command::Gc(args) => gc::run(ctx, &args),
        Command::Target(cmd) => target::run(ctx, cmd),
        Command::Handoff(args) => handoff::run(ctx, &args),
        Command::Resume(args) => resume::run(ctx, &args),
        Command::Checkpoint(args) => checkpoint::run(ctx, &args),
        Command::Sync(args) => sync::run(ctx, &args),
        Command::Status => status::run(ctx),
        Command::Search(args) => search::run(ctx, &args),
        Command::ExportHandoff(args) => export_handoff::run(ctx, &args),
        Command::ImportHandoff { path, secrets } => import_handoff::run(ctx, &path, secrets),
        Command::Push(args) => push::run(ctx, &args),
        Command::Pull(args) => pull::run(ctx, &args),
        Command::Clone(args) => clone::run(ctx, &args),
        Command::Export(args) => export::run(ctx, &args),
        Command::Import(args) => import::run(ctx, &args),
        Command::Transcript(cmd) => transcript::run(ctx, cmd),
        Command::Mcp { workspace } => mcp::run(ctx, workspace.as_deref()),
        Command::Skill(cmd) => skill::run(ctx, cmd),
        Command::Hooks(cmd) => hooks::run(ctx, cmd),
        Command::Completions { shell } => completions::completions(shell),
        Command::Man { command } => completions::man(command.as_deref()),
    }
}

/// After a command that added a pack (save, pull): merge packs when there are more than
/// `store::repack::AUTO_MAX_PACKS` (SPEC 7), so that lookups stay cheap however long the
/// history. Best effort: the command itself has succeeded, so a failure is only a note.
fn auto_repack(ctx: &Ctx, store: &baton_store::Store) {
    if let Err(e) = store.auto_repack()
        && !ctx.quiet
        && !ctx.json
    {
        eprintln!(
            "note: packs were not merged: {}",
            crate::output::terminal_safe(&e.message)
        );
    }
}

/// A bundle as JSON: its manifest fields plus its id.
fn bundle_json(id: &baton_format::ObjectId, bundle: &baton_format::Bundle) -> serde_json::Value {
    let mut value = serde_json::to_value(bundle).unwrap_or_default();
    if let serde_json::Value::Object(map) = &mut value {
        map.remove("type");
        map.insert("id".into(), serde_json::Value::String(id.to_hex()));
    }
    value
}

/// "from -> to", or whichever side is known.
fn handoff_line(from: &str, to: &str) -> String {
    match (from, to) {
        ("", "") => String::new(),
        (from, "") => from.to_string(),
        ("", to) => format!("-> {to}"),
        (from, to) => format!("{from} -> {to}"),
    }
}

fn connect_settings(args: &crate::cli::ConnectArgs) -> baton_sync::ConnectSettings {
    connect(args.accept_new_host_key, args.timeout)
}

/// How to reach a target: whether to accept an unknown host key, the timeout in seconds,
/// and the terminal's passphrase prompt for SSH keys.
fn connect(accept_new_host_key: bool, timeout: Option<u64>) -> baton_sync::ConnectSettings {
    baton_sync::ConnectSettings {
        accept_new_host_key,
        timeout: timeout.map(std::time::Duration::from_secs),
        key_passphrase: prompts::key_passphrase_prompt(),
        s3: Default::default(),
    }
}
