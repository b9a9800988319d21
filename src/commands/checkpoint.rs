//! `baton checkpoint --hook claude-code|codex [--push TARGET] [--timeout SECS]`: the
//! command harness hooks run. It never gets in the agent's way: the work runs in a
//! thread given `--timeout` seconds, the exit code is 0 whatever happens, nothing is
//! asked, stdout carries only what the harness reads (nothing, or for Claude Code's
//! `SessionStart` the `additionalContext` object), and the outcome goes to the
//! checkpoint log. `baton checkpoint --log` prints that log.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::json;

use crate::cli::checkpoint::CheckpointArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, Result};
use baton_handoff::checkpoint::log::{self, LogLine};
use baton_handoff::checkpoint::{self, HookHarness, hook};
use baton_store::Store;

pub fn run(ctx: &Ctx, args: &CheckpointArgs) -> Result<Outcome> {
    match (&args.hook, args.log) {
        (Some(harness), false) => Ok(run_hook(ctx, harness, args)),
        // clap requires --hook unless --log, and --log conflicts with every hook option.
        _ => show_log(ctx),
    }
}

/// What the hook's thread has learnt so far: where to log and what of, should it not
/// finish in time.
#[derive(Default)]
struct Known {
    log: Option<PathBuf>,
    harness: String,
    event: String,
    session: Option<String>,
}

/// What the hook's thread did: the log line and what to print.
struct Done {
    log: Option<PathBuf>,
    line: LogLine,
    stdout: String,
}

struct Job {
    harness: String,
    payload: Option<String>,
    push: Option<String>,
    store: Option<PathBuf>,
    identity: Option<PathBuf>,
    known: Arc<Mutex<Known>>,
}

fn run_hook(ctx: &Ctx, harness: &str, args: &CheckpointArgs) -> Outcome {
    let known = Arc::new(Mutex::new(Known {
        harness: harness.to_string(),
        event: "unknown".into(),
        ..Known::default()
    }));
    let job = Job {
        harness: harness.to_string(),
        payload: args.payload.clone(),
        push: args.push.clone(),
        store: ctx.store.clone(),
        identity: ctx.identity.clone(),
        known: known.clone(),
    };
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("checkpoint".into())
        .spawn(move || {
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run()));
            let _ = tx.send(done);
        });
    let timeout = Duration::from_secs(args.timeout.max(1));
    let done = match spawned {
        Err(e) => Err(format!("cannot start the checkpoint thread: {e}")),
        Ok(_) => match rx.recv_timeout(timeout) {
            Ok(Ok(done)) => Ok(done),
            Ok(Err(_)) => Err("internal error: the checkpoint panicked".to_string()),
            // The thread is left behind; it ends with the process. Every store write is
            // atomic, so whatever it was doing leaves the store consistent.
            Err(_) => Err(format!("gave up after {}s", timeout.as_secs())),
        },
    };
    let (log_path, line, stdout) = match done {
        Ok(done) => (done.log, done.line, done.stdout),
        Err(why) => {
            let known = known.lock().map(|k| {
                (
                    k.log.clone(),
                    k.harness.clone(),
                    k.event.clone(),
                    k.session.clone(),
                )
            });
            let (log_path, harness, event, session) =
                known.unwrap_or((None, String::new(), String::new(), None));
            let outcome = if why.starts_with("gave up") {
                "gave-up"
            } else {
                "failed"
            };
            let mut line = LogLine::now(&harness, &event, outcome);
            line.session = session;
            line.error = Some(why);
            (log_path, line, String::new())
        }
    };
    write_log(log_path.as_deref(), line.clone());
    let document = serde_json::to_value(&line)
        .unwrap_or_else(|e| json!({ "outcome": line.outcome, "error": e.to_string() }));
    Outcome::new(stdout, json!({ "checkpoint": document }))
}

/// Append to the log at `path`, else the fallback log; a log that cannot be written is
/// said on stderr (which a harness shows only in its debug output), never an error.
fn write_log(path: Option<&Path>, line: LogLine) {
    let Some(path) = path.map(Path::to_path_buf).or_else(log::fallback_path) else {
        eprintln!("baton checkpoint: {} (no log to write to)", describe(&line));
        return;
    };
    if let Err(e) = log::append(&path, line.clone()) {
        eprintln!(
            "baton checkpoint: {}; and the log {} cannot be written: {e}",
            describe(&line),
            path.display()
        );
    }
}

fn describe(line: &LogLine) -> String {
    let what = line
        .bundle
        .as_deref()
        .or(line.error.as_deref())
        .unwrap_or("");
    format!("{} {} {}: {what}", line.harness, line.event, line.outcome)
}

impl Job {
    fn set(&self, f: impl FnOnce(&mut Known)) {
        if let Ok(mut known) = self.known.lock() {
            f(&mut known);
        }
    }

    fn run(self) -> Done {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let mut line = LogLine::now(&self.harness, "unknown", "failed");
        // Until the input names a workspace, the log is the store's found from here.
        let mut log_path = Store::discover(self.store.as_deref(), &cwd)
            .ok()
            .map(|p| log::path_in(&p));
        self.set(|k| k.log = log_path.clone());
        let mut stdout = String::new();
        match self.work(&cwd, &mut line, &mut log_path, &mut stdout) {
            Ok(()) => {}
            Err(e) => {
                line.outcome = "failed".into();
                line.error = Some(e.to_string());
            }
        }
        line.time = baton_format::bundle::format_time(std::time::SystemTime::now());
        Done {
            log: log_path,
            line,
            stdout,
        }
    }

    fn work(
        &self,
        cwd: &Path,
        line: &mut LogLine,
        log_path: &mut Option<PathBuf>,
        stdout: &mut String,
    ) -> Result<()> {
        let harness = HookHarness::parse(&self.harness)?;
        let raw = self.input(harness)?;
        let event = hook::parse(harness, &raw)?;
        line.event = event.event.clone();
        line.session = event.session.clone();
        self.set(|k| {
            k.event = event.event.clone();
            k.session = event.session.clone();
        });
        let workspace = checkpoint::workspace_of(&event, cwd);
        let store_path = Store::discover(self.store.as_deref(), &workspace)?;
        *log_path = Some(log::path_in(&store_path));
        self.set(|k| k.log = log_path.clone());
        let mut store = Store::open(&store_path)?;
        store.unlock(&self.key_source())?;
        if event.is_session_start() {
            return session_start(&store, &workspace, line, stdout);
        }
        let saved = checkpoint::checkpoint(&store, &event, &workspace);
        match &saved {
            Ok(done) => {
                line.outcome = if done.unchanged { "unchanged" } else { "saved" }.into();
                line.bundle = Some(done.bundle.to_hex());
                line.transcript = done.transcript.map(str::to_string);
                line.note = done
                    .no_transcript
                    .as_ref()
                    .map(|why| format!("no transcript: {why}"));
                if !done.unchanged {
                    let _ = store.auto_repack();
                }
            }
            Err(e) => {
                line.outcome = "failed".into();
                line.error = Some(e.to_string());
            }
        }
        // A push is only queued here; the background drain makes it (and retries what
        // earlier checkpoints queued).
        if let Some(target) = &self.push {
            let note = match self.push_after(&store, &store_path, target, &saved) {
                Ok(note) => note,
                Err(e) => format!("not queued for a push to {target}: {e}"),
            };
            line.note = Some(match line.note.take() {
                Some(first) => format!("{first}; {note}"),
                None => note,
            });
        }
        Ok(())
    }

    /// `--push TARGET` after the checkpoint `saved`: queue its bundle (unless the
    /// target is known to have it already) and start the background drain when anything
    /// is queued; what was done, for the log's note.
    fn push_after(
        &self,
        store: &Store,
        store_path: &Path,
        target: &str,
        saved: &Result<checkpoint::Checkpointed>,
    ) -> Result<String> {
        baton_sync::choose_target(&store.config, Some(target))?;
        let mut note = match saved {
            Ok(done) => {
                let known = store
                    .read_ref(&baton_format::names::RefName::Target(target.to_string()))
                    .ok()
                    .flatten();
                if known == Some(done.bundle) {
                    format!("{target} already has it")
                } else {
                    baton_sync::queue::enqueue(store.root(), target, &done.bundle)?;
                    format!("queued for a push to {target}")
                }
            }
            Err(_) => "nothing new to push".to_string(),
        };
        let waiting = baton_sync::queue::entries(store.root())?.len();
        if waiting > 0 {
            self.start_drain(store_path)?;
            if !note.starts_with("queued") {
                note.push_str(&format!("; retrying {waiting} queued"));
            }
        }
        Ok(note)
    }

    /// The hook's JSON: the argument when given (Codex), else stdin (Claude Code).
    fn input(&self, harness: HookHarness) -> Result<Vec<u8>> {
        if let Some(payload) = &self.payload {
            return Ok(payload.clone().into_bytes());
        }
        if harness == HookHarness::Codex {
            return Err(Error::usage("the codex hook was given no JSON argument")
                .with_hint("Codex's notify appends its JSON as the last argument: notify = [\"baton\", \"checkpoint\", \"--hook\", \"codex\"]"));
        }
        let mut raw = Vec::new();
        std::io::stdin()
            .take(hook::MAX_INPUT + 1)
            .read_to_end(&mut raw)
            .map_err(|e| Error::other(format!("cannot read the hook input from stdin: {e}")))?;
        Ok(raw)
    }

    /// The store's keys without a prompt: `--identity`, or `$BATON_PASSPHRASE`.
    fn key_source(&self) -> baton_store::envelope::KeySource {
        baton_store::envelope::KeySource {
            identity: self.identity.clone(),
            passphrase: Some(Arc::new(|| {
                std::env::var("BATON_PASSPHRASE")
                    .map(age::secrecy::SecretString::from)
                    .map_err(|_| {
                        baton_store::envelope::security(
                            "this store is protected by a passphrase and a hook cannot ask for it",
                        )
                        .with_hint(
                            "set BATON_PASSPHRASE in the harness's environment, or use --identity",
                        )
                    })
            })),
        }
    }

    /// Start `baton --store S sync --quiet --background`, detached: its own process
    /// group (a harness killing its hook's group leaves it), no terminal, not waited for.
    fn start_drain(&self, store_path: &Path) -> Result<()> {
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe()
            .map_err(|e| Error::other(format!("cannot find the baton executable: {e}")))?;
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("--store").arg(store_path);
        if let Some(identity) = &self.identity {
            cmd.arg("--identity").arg(identity);
        }
        cmd.args(["sync", "--quiet", "--background"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0);
        cmd.spawn()
            .map(drop)
            .map_err(|e| Error::other(format!("cannot start the background push: {e}")))
    }
}

/// Claude Code's `SessionStart`: the workspace's latest kickoff as `additionalContext`.
fn session_start(
    store: &Store,
    workspace: &Path,
    line: &mut LogLine,
    stdout: &mut String,
) -> Result<()> {
    match checkpoint::latest_kickoff(store, workspace)? {
        Some((id, kickoff)) => {
            *stdout = ascii_json(&json!({
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": kickoff,
                }
            }));
            line.outcome = "context".into();
            line.bundle = Some(id.to_hex());
        }
        None => {
            line.outcome = "no-context".into();
            line.note = Some("no handoff of this workspace in the store".into());
        }
    }
    Ok(())
}

/// `value` as JSON in printable ASCII only: every other character (which only a string
/// can hold) as its `\uXXXX` escape, so the printing's terminal-safe pass, which shows
/// control, C1 and bidirectional characters as visible escapes, leaves it intact.
fn ascii_json(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if (' '..='~').contains(&c) {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// `baton checkpoint --log`: the store's checkpoint log, else the fallback's.
fn show_log(ctx: &Ctx) -> Result<Outcome> {
    let path = match ctx.store_path() {
        Ok(store) if store.is_dir() => log::path_in(&store),
        _ => log::fallback_path().ok_or_else(|| {
            Error::not_found("no store here and no HOME for the fallback checkpoint log")
                .with_hint("pass --store PATH")
        })?,
    };
    let lines = log::read(&path)?;
    let human: String = if lines.is_empty() {
        format!("no checkpoints logged in {}", path.display())
    } else {
        lines
            .iter()
            .map(|l| {
                let what = l
                    .bundle
                    .as_deref()
                    .map(|b| b.get(..12).unwrap_or(b).to_string())
                    .or_else(|| l.error.clone())
                    .unwrap_or_default();
                let note = l
                    .note
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default();
                format!(
                    "{} {} {} {} {what}{note}\n",
                    l.time, l.harness, l.event, l.outcome
                )
            })
            .collect()
    };
    Ok(Outcome::new(human, json!({ "log": path, "lines": lines })))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ascii_json_survives_the_terminal_safe_pass_and_parses_back() {
        let text = "é \u{9b}2J \u{202e}txt \u{7f} \u{1b}[0m 😀 \"q\"\n";
        let value = serde_json::json!({ "additionalContext": text });
        let out = super::ascii_json(&value);
        assert!(out.chars().all(|c| (' '..='~').contains(&c)), "{out}");
        assert_eq!(baton_format::text::terminal_safe(&out), out);
        let back: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(back, value);
    }
}
