//! `baton resume --deliver tmux:PANE`: the kickoff typed into a tmux pane where the
//! harness waits, as one bracketed paste (`load-buffer` from stdin, `paste-buffer -p`),
//! then Enter to submit it. Only once the pane shows it is ready: the pane's program must
//! be the harness (a shell, an editor, anything else is refused at once) and its screen
//! must show the harness's input prompt and no busy marker, within a timeout; otherwise
//! nothing is typed. The server is the one `tmux` itself picks: `$TMUX` inside tmux, else
//! the default socket.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Delivered, Harness, Recognise};
use baton_error::{Error, ErrorKind, Result};

/// How often the pane is looked at while baton waits for it to be ready.
const POLL: Duration = Duration::from_millis(100);
/// How long, after the paste, baton waits for the screen to show it before Enter (a
/// harness reading the paste as Enter arrives can take the Enter as part of it).
const SETTLE: Duration = Duration::from_secs(2);

/// What to deliver where, as plain values.
pub struct TmuxOptions<'a> {
    /// The pane: an id (`%3`) or a target (`session:window.pane`).
    pub pane: &'a str,
    /// The harness the pane must run; `None`: whichever of `known` it runs.
    pub harness: Option<Harness>,
    /// How each harness shows itself ([`Recognise::all_from_env`]).
    pub known: Vec<Recognise>,
    /// How long to wait for the pane to show the harness's input prompt.
    pub timeout: Duration,
    /// Send Enter after the paste.
    pub submit: bool,
    /// The text to paste ([`super::delivered_text`]).
    pub text: &'a str,
}

struct Pane {
    id: String,
    command: String,
    dead: bool,
}

/// Wait for the pane to be ready, then paste the text once and (with `submit`) press
/// Enter. Errors: no tmux or no such pane `not_found`; a pane running something else
/// `usage`, with nothing typed; not ready within the timeout `other`, nothing typed.
pub fn deliver(opts: &TmuxOptions<'_>) -> Result<Delivered> {
    let started = Instant::now();
    let (pane, recognise) = loop {
        let pane = probe(opts.pane)?;
        let recognise = which_harness(opts, &pane)?;
        let screen = tmux(&["capture-pane", "-p", "-J", "-t", &pane.id], None)
            .map_err(|e| e.context(format!("cannot read tmux pane {}", pane.id)))?;
        if recognise.ready_on(&screen) {
            break (pane, recognise);
        }
        if started.elapsed() >= opts.timeout {
            return Err(Error::other(format!(
                "tmux pane {} runs {} but did not show its input prompt within {}: nothing \
                 was typed",
                pane.id,
                recognise.harness.name(),
                seconds(opts.timeout)
            ))
            .with_hint(format!(
                "wait until {} is idle at its prompt and run again, or give a longer \
                 --deliver-timeout (the prompt is recognised by {}; {}_READY_MARKER \
                 overrides it)",
                recognise.harness.name(),
                recognise
                    .ready
                    .iter()
                    .map(|m| format!("{m:?}"))
                    .collect::<Vec<_>>()
                    .join(" or "),
                recognise.harness.env_prefix(),
            )));
        }
        std::thread::sleep(POLL);
    };
    let waited = started.elapsed();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let buffer = format!("baton-kickoff-{}-{nanos}", std::process::id());
    tmux(
        &["load-buffer", "-b", &buffer, "-"],
        Some(opts.text.as_bytes()),
    )
    .map_err(|e| e.context("cannot load the kickoff into a tmux buffer"))?;
    let before = tmux(&["capture-pane", "-p", "-t", &pane.id], None).unwrap_or_default();
    if let Err(e) = tmux(
        &["paste-buffer", "-p", "-d", "-b", &buffer, "-t", &pane.id],
        None,
    ) {
        let _ = tmux(&["delete-buffer", "-b", &buffer], None);
        return Err(e.context(format!("cannot paste into tmux pane {}", pane.id)));
    }
    if opts.submit {
        let settle = Instant::now();
        while settle.elapsed() < SETTLE {
            std::thread::sleep(Duration::from_millis(50));
            match tmux(&["capture-pane", "-p", "-t", &pane.id], None) {
                Ok(now) if now != before => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        tmux(&["send-keys", "-t", &pane.id, "Enter"], None).map_err(|e| {
            e.context(format!(
                "the kickoff was pasted into tmux pane {} but Enter could not be sent",
                pane.id
            ))
        })?;
    }
    Ok(Delivered {
        via: "tmux",
        harness: recognise.harness,
        pane: Some(opts.pane.to_string()),
        pane_id: Some(pane.id),
        bytes: opts.text.len(),
        submitted: opts.submit,
        waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
    })
}

/// The harness the pane runs, or the refusal: a dead pane, a pane running anything but
/// the harness asked for (or, without one, any known harness).
fn which_harness<'a>(opts: &'a TmuxOptions<'_>, pane: &Pane) -> Result<&'a Recognise> {
    if pane.dead {
        return Err(Error::usage(format!(
            "tmux pane {} has exited (its program ended): nothing was typed",
            pane.id
        ))
        .with_hint("start the harness in a live pane and name that one"));
    }
    let wanted: Vec<&Recognise> = opts
        .known
        .iter()
        .filter(|r| opts.harness.is_none_or(|h| r.harness == h))
        .collect();
    let matching: Vec<&Recognise> = wanted
        .iter()
        .copied()
        .filter(|r| r.runs_in(&pane.command))
        .collect();
    match matching.as_slice() {
        [one] => Ok(one),
        [] => {
            let names: Vec<&str> = wanted.iter().map(|r| r.harness.name()).collect();
            Err(Error::usage(format!(
                "tmux pane {} runs {:?}, not {}: nothing was typed",
                pane.id,
                pane.command,
                names.join(" or ")
            ))
            .with_hint(format!(
                "start {} in that pane first, or name the pane that runs it",
                names.join(" or ")
            )))
        }
        _ => Err(Error::usage(format!(
            "tmux pane {} runs {:?}, which may be claude or codex: nothing was typed",
            pane.id, pane.command
        ))
        .with_hint("name the harness with --harness claude or --harness codex")),
    }
}

/// tmux's id, program name and state of the pane `target`.
fn probe(target: &str) -> Result<Pane> {
    let line = tmux(
        &[
            "display-message",
            "-p",
            "-t",
            target,
            "#{pane_id}\t#{pane_current_command}\t#{pane_dead}",
        ],
        None,
    )
    .map_err(|e| match e.kind {
        ErrorKind::NotFound => e,
        _ => Error::not_found(format!("no tmux pane {target:?}: {}", e.message)).with_hint(
            "list the panes with 'tmux list-panes -a -F \"#{pane_id} #{pane_current_command}\"'",
        ),
    })?;
    let mut fields = line.trim_end_matches('\n').splitn(3, '\t');
    match (fields.next(), fields.next(), fields.next()) {
        (Some(id), Some(command), Some(dead)) if id.starts_with('%') => Ok(Pane {
            id: id.to_string(),
            command: command.to_string(),
            dead: dead == "1",
        }),
        _ => Err(Error::not_found(format!(
            "no tmux pane {target:?} on this tmux server{}",
            match line.trim() {
                "" => String::new(),
                said => format!(" (tmux answered {said:?})"),
            }
        ))
        .with_hint(
            "give a pane id (%3) or session:window.pane of a pane that exists ('tmux \
             list-panes -a -F \"#{pane_id} #{pane_current_command}\"' lists them)",
        )),
    }
}

/// Run `tmux ARGS` (with `input` on its stdin) and return its stdout.
fn tmux(args: &[&str], input: Option<&[u8]>) -> Result<String> {
    let mut child = Command::new("tmux")
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::not_found("tmux is not on PATH: --deliver tmux:PANE runs it")
                    .with_hint("install tmux, or start the harness with --launch instead")
            } else {
                Error::other(format!("cannot run tmux: {e}")).with_source(e)
            }
        })?;
    // Written whole before tmux is waited for (it reads all of its stdin first); a failed
    // write is reported after tmux's own answer, which says more.
    let written = match (input, child.stdin.take()) {
        (Some(bytes), Some(mut stdin)) => stdin.write_all(bytes),
        _ => Ok(()),
    };
    let out = child
        .wait_with_output()
        .map_err(|e| Error::other(format!("cannot run tmux: {e}")).with_source(e))?;
    if out.status.success()
        && let Err(e) = written
    {
        return Err(Error::other(format!("cannot write to tmux: {e}")).with_source(e));
    }
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = stderr.trim();
        return Err(Error::other(if said.is_empty() {
            format!("tmux {} failed ({})", args[0], out.status)
        } else {
            said.lines().next().unwrap_or(said).to_string()
        }));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}
