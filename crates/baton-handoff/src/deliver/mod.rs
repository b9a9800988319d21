//! Delivering a kickoff to the receiving agent (issue 31): starting its harness with the
//! kickoff as the first prompt (`launch.rs`), or pasting it into a tmux pane where the
//! harness waits for input (`tmux.rs`). `baton resume --launch` and `--deliver` call these
//! with plain options; this module owns the harnesses' names, programs and screen markers.

pub mod launch;
pub mod tmux;

use std::borrow::Cow;

use serde::Serialize;

use baton_error::{Error, Result};

/// A receiving harness baton can deliver a kickoff to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Harness {
    /// Claude Code (`claude`).
    Claude,
    /// Codex CLI (`codex`).
    Codex,
}

impl Harness {
    pub const ALL: [Harness; 2] = [Harness::Claude, Harness::Codex];

    /// The program's name on PATH, and how baton names the harness in its output.
    pub fn name(self) -> &'static str {
        match self {
            Harness::Claude => "claude",
            Harness::Codex => "codex",
        }
    }

    /// The variable naming the program to run instead of the one on PATH.
    pub fn bin_env(self) -> &'static str {
        match self {
            Harness::Claude => "BATON_CLAUDE_BIN",
            Harness::Codex => "BATON_CODEX_BIN",
        }
    }

    fn env_prefix(self) -> &'static str {
        match self {
            Harness::Claude => "BATON_CLAUDE",
            Harness::Codex => "BATON_CODEX",
        }
    }
}

/// How a tmux pane shows that it runs a harness and that the harness waits for input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recognise {
    pub harness: Harness,
    /// Names tmux gives the pane's program (`#{pane_current_command}`).
    pub commands: Vec<String>,
    /// Also a name of digits and dots only (Claude Code's native installer runs a file
    /// named after its version, `2.0.76`).
    pub version_named: bool,
    /// Any of these on the pane's screen: the harness shows its input prompt.
    pub ready: Vec<String>,
    /// Any of these (case-insensitive): the harness is busy with a turn, or a dialog (a
    /// permission or trust question) has the keyboard: not ready.
    pub busy: Vec<String>,
}

/// The footers both harnesses show while a turn runs or a dialog waits for an answer (the
/// menus' own cursors, `❯` and `›`, are why neither is a ready marker).
const BUSY: &[&str] = &["esc to interrupt", "esc to cancel", "enter to confirm"];

impl Recognise {
    /// The built-in markers (docs/handoff.md, "Delivering the kickoff").
    pub fn defaults(harness: Harness) -> Recognise {
        let list = |items: &[&str]| items.iter().map(|s| s.to_string()).collect();
        match harness {
            Harness::Claude => Recognise {
                harness,
                commands: list(&["claude", "node"]),
                version_named: true,
                ready: list(&["? for shortcuts", "\u{2502} >"]),
                busy: list(BUSY),
            },
            Harness::Codex => Recognise {
                harness,
                commands: list(&["codex", "node"]),
                version_named: false,
                ready: list(&["? for shortcuts", "\u{23ce} send"]),
                busy: list(BUSY),
            },
        }
    }

    /// The defaults with the environment's overrides: `BATON_CLAUDE_PANE_COMMANDS`
    /// (comma-separated program names) and `BATON_CLAUDE_READY_MARKER` (one text that
    /// replaces the ready markers); `BATON_CODEX_*` the same for Codex.
    pub fn from_env(harness: Harness) -> Recognise {
        let mut r = Recognise::defaults(harness);
        let var = |suffix: &str| {
            std::env::var(format!("{}_{suffix}", harness.env_prefix()))
                .ok()
                .filter(|v| !v.trim().is_empty())
        };
        if let Some(names) = var("PANE_COMMANDS") {
            r.commands = names
                .split(',')
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect();
            r.version_named = false;
        }
        if let Some(marker) = var("READY_MARKER") {
            r.ready = vec![marker];
        }
        r
    }

    /// Every harness's markers, with the environment's overrides.
    pub fn all_from_env() -> Vec<Recognise> {
        Harness::ALL.into_iter().map(Recognise::from_env).collect()
    }

    /// Whether tmux's name for a pane's program is this harness's.
    pub fn runs_in(&self, command: &str) -> bool {
        self.commands.iter().any(|c| c == command)
            || (self.version_named
                && command.contains('.')
                && command.chars().all(|c| c.is_ascii_digit() || c == '.'))
    }

    /// Whether a pane's screen shows the harness waiting for input.
    pub fn ready_on(&self, screen: &str) -> bool {
        let lower = screen.to_lowercase();
        self.ready.iter().any(|m| screen.contains(m.as_str()))
            && !self.busy.iter().any(|m| lower.contains(&m.to_lowercase()))
    }
}

/// The text a harness receives: the prompt as `baton resume --format prompt` prints it,
/// every control character but the line break and tab shown as an escape. A kickoff
/// quotes briefings and transcripts, and an escape sequence in one must never reach the
/// receiving terminal as keys (an early end of a bracketed paste, then typed commands).
pub fn delivered_text(prompt: &str) -> Cow<'_, str> {
    baton_format::text::terminal_safe(prompt)
}

/// What a delivery did, for the notification line and the `delivered` JSON object.
#[derive(Clone, Debug, Serialize)]
pub struct Delivered {
    /// `tmux` (a paste into a pane) or `launch` (the harness started with the prompt).
    pub via: &'static str,
    pub harness: Harness,
    /// The pane as named (`--deliver tmux:PANE`), and tmux's id of it (`%3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pane_id: Option<String>,
    /// Bytes of text delivered (before tmux's line-break translation).
    pub bytes: usize,
    /// Whether Enter was sent after the paste, submitting the prompt.
    pub submitted: bool,
    /// How long the pane took to show it was ready, in milliseconds.
    pub waited_ms: u64,
}

/// Where `--deliver` sends the kickoff: `tmux:PANE` (a pane id `%3`, or
/// `session:window.pane`).
pub fn parse_target(spec: &str) -> Result<String> {
    match spec.split_once(':') {
        Some(("tmux", pane)) if !pane.trim().is_empty() => Ok(pane.to_string()),
        _ => Err(Error::usage(format!(
            "--deliver {spec:?} names no tmux pane: it takes tmux:PANE"
        ))
        .with_hint(
            "give a pane id or target, e.g. --deliver tmux:%3 or --deliver tmux:work:1.0 \
             ('tmux display -p \"#{pane_id}\"' in that pane prints its id)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_bad_ones_are_usage_errors() {
        assert_eq!(parse_target("tmux:%3").unwrap(), "%3");
        assert_eq!(parse_target("tmux:work:1.0").unwrap(), "work:1.0");
        for bad in ["tmux:", "%3", "screen:1", "tmux: "] {
            let e = parse_target(bad).unwrap_err();
            assert_eq!(e.kind, baton_error::ErrorKind::Usage, "{bad}");
        }
    }

    #[test]
    fn pane_commands_and_screens_are_recognised() {
        let claude = Recognise::defaults(Harness::Claude);
        assert!(claude.runs_in("claude") && claude.runs_in("node"));
        assert!(claude.runs_in("2.0.76"));
        for other in ["sh", "bash", "vim", "codex", "2", ""] {
            assert!(!claude.runs_in(other), "{other}");
        }
        let codex = Recognise::defaults(Harness::Codex);
        assert!(codex.runs_in("codex") && !codex.runs_in("2.0.76"));
        assert!(claude.ready_on("\u{2502} > \n  ? for shortcuts"));
        assert!(!claude.ready_on("$ "));
        assert!(!claude.ready_on("? for shortcuts\n* Thinking... (Esc to interrupt)"));
        // A permission dialog under an old prompt line: not ready.
        let dialog =
            "\u{2502} > \nDo you want to proceed?\n\u{276f} 1. Yes\n  2. No\nEsc to cancel";
        assert!(!claude.ready_on(dialog));
        assert!(
            !codex.ready_on("\u{203a} 1. Yes, proceed\nPress enter to confirm or esc to cancel")
        );
        assert!(codex.ready_on("\u{203a} \n\n  \u{23ce} send   \u{21e7}\u{23ce} newline"));
    }

    #[test]
    fn delivered_text_cannot_end_a_bracketed_paste() {
        let text = delivered_text("a\n\u{1b}[201~rm -rf ~\r\tb");
        assert_eq!(text, "a\n\\x1b[201~rm -rf ~\\x0d\tb");
    }
}
