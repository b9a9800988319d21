//! Rendering results: human text or one JSON document, progress bars, and the single
//! place where an error becomes an exit code.
//!
//! Human text is made terminal-safe here, once for every command: names, summaries and
//! agent names come from remote stores, and a control sequence in one (an OSC title
//! change, a screen clear) must reach the terminal as visible text, never as a command.
//! `--json` output is exact: JSON escapes every control character itself.

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value, json};

use baton_error::Error;

/// What a command produced: text for people, a JSON value for scripts, and optionally a
/// failure to report after them (verify prints its report and still fails).
pub struct Outcome {
    pub human: String,
    pub json: Value,
    pub failure: Option<Error>,
}

impl Outcome {
    pub fn new(human: impl Into<String>, json: Value) -> Self {
        Outcome {
            human: human.into(),
            json,
            failure: None,
        }
    }
}

/// A progress bar on stderr, drawn only on a terminal and never with --json or -q.
pub fn progress_bar(json: bool, quiet: bool, total: u64, bytes: bool) -> ProgressBar {
    if json || quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    styled_progress(total, bytes, ProgressDrawTarget::stderr())
}

/// "1 object", "2 objects": a count with its noun (plural `<noun>s`), for human text.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// No ETA before this much time has passed: the first second's rate (a pack's index
/// read before its body, a large file's hashing pass) says nothing of the rest.
const ETA_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

/// The bar itself, labelled with what the command is doing (`bar.set_message("saving")`:
/// the `{msg}`). The total is shown only once it is known (a command may set it later):
/// until then a spinner and the count, never `214/0`; an ETA only with a total, some
/// progress and [`ETA_AFTER`] elapsed.
fn styled_progress(total: u64, bytes: bool, target: ProgressDrawTarget) -> ProgressBar {
    use indicatif::{HumanBytes, ProgressState};
    let bar = ProgressBar::with_draw_target((total > 0).then_some(total), target);
    let known = |state: &ProgressState| state.len().filter(|&len| len > 0);
    let template = if bytes {
        "{spinner} {msg} {bytes}{of_total} {bytes_per_sec} {wide_bar} {eta_known}"
    } else {
        "{spinner} {msg} {pos}{of_total} objects {wide_bar} {eta_known}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        let style = style
            .with_key(
                "of_total",
                move |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    if let Some(len) = known(state) {
                        let _ = if bytes {
                            write!(w, "/{}", HumanBytes(len))
                        } else {
                            write!(w, "/{len}")
                        };
                    }
                },
            )
            .with_key(
                "eta_known",
                move |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    if known(state).is_some() && state.pos() > 0 && state.elapsed() >= ETA_AFTER {
                        let _ = write!(w, "eta {}", indicatif::HumanDuration(state.eta()));
                    }
                },
            );
        bar.set_style(style);
    }
    bar
}

/// Print the outcome or the error and return the process exit code; `verbose`: the
/// error's causes follow its line, one `caused by:` line each.
pub fn finish(json_mode: bool, verbose: bool, result: baton_error::Result<Outcome>) -> i32 {
    let (outcome, error) = match result {
        Ok(mut outcome) => {
            let failure = outcome.failure.take();
            (Some(outcome), failure)
        }
        Err(e) => (None, Some(e)),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if json_mode {
        let mut doc = match &outcome {
            Some(o) => o.json.clone(),
            None => json!({}),
        };
        if !doc.is_object() {
            doc = json!({ "result": doc });
        }
        if let Value::Object(map) = &mut doc {
            map.insert("ok".into(), Value::Bool(error.is_none()));
            if let Some(e) = &error {
                map.insert("error".into(), error_json(e));
            }
        }
        let _ = writeln!(out, "{doc}");
    } else {
        if let Some(o) = &outcome
            && !o.human.is_empty()
        {
            let _ = out.write_all(terminal_safe(&o.human).as_bytes());
            if !o.human.ends_with('\n') {
                let _ = out.write_all(b"\n");
            }
        }
        if let Some(e) = &error {
            let _ = out.flush();
            // The error is always one line: a file name or argument quoted in the message
            // may hold a line break, and scripts read exactly one line. A hint that is a
            // block of text (the briefing skeleton) follows on lines of its own.
            let one_line = |t: &str| terminal_safe(&t.replace('\n', "\\n")).into_owned();
            match e.hint.as_deref() {
                Some(hint) if hint.contains('\n') => {
                    let (first, rest) = hint.split_once('\n').unwrap_or((hint, ""));
                    eprintln!("error: {}; {}", one_line(&e.message), one_line(first));
                    eprintln!("{}", terminal_safe(rest.trim_end()));
                }
                _ => eprintln!("error: {}", one_line(&e.to_string())),
            }
            if verbose {
                for cause in e.causes() {
                    eprintln!("caused by: {}", one_line(&cause));
                }
            }
        }
    }
    let _ = out.flush();
    error.map(|e| e.kind.exit_code()).unwrap_or(0)
}

pub use baton_format::text::terminal_safe;

pub fn error_json(e: &Error) -> Value {
    json!({
        "code": e.kind.code(),
        "exit_code": e.kind.exit_code(),
        "message": e.message,
        "hint": e.hint,
        "causes": e.causes(),
    })
}

#[cfg(test)]
mod progress_tests {
    use super::*;

    #[test]
    fn an_unknown_total_is_a_spinner_not_a_fraction_of_zero() {
        for bytes in [false, true] {
            let bar = styled_progress(0, bytes, ProgressDrawTarget::hidden());
            bar.inc(214);
            assert_eq!(bar.length(), None, "no total to count towards");
            let shown = bar.style().get_tick_str(0).to_string();
            assert!(!shown.is_empty(), "a spinner");
            let bar = styled_progress(10, bytes, ProgressDrawTarget::hidden());
            assert_eq!(bar.length(), Some(10));
        }
    }

    /// A terminal that keeps what is drawn on it (the last frame, and everything).
    #[derive(Debug, Clone, Default)]
    struct Screen(std::sync::Arc<std::sync::Mutex<String>>);

    impl Screen {
        fn text(&self) -> String {
            self.0.lock().map(|s| s.clone()).unwrap_or_default()
        }
        fn push(&self, s: &str) -> std::io::Result<()> {
            if let Ok(mut all) = self.0.lock() {
                all.push_str(s);
                all.push('\n');
            }
            Ok(())
        }
    }

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            120
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.push(s)
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.push(s)
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_bar_says_what_it_does_and_shows_no_eta_before_two_seconds() {
        let screen = Screen::default();
        let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
        let bar = styled_progress(17 << 30, true, target).with_message("saving");
        // A slow start: a sliver of 17 GiB done at once, which a rate of the first
        // moment would make an ETA of weeks.
        bar.inc(1);
        bar.force_draw();
        let first = screen.text();
        assert!(first.contains("saving"), "{first:?}");
        for unit in ["eta", "second", "minute", "hour", "day", "week", "year"] {
            assert!(!first.contains(unit), "an ETA before 2 s: {first:?}");
        }
        bar.set_elapsed(std::time::Duration::from_secs(3));
        bar.inc(1 << 30);
        bar.force_draw();
        let later = screen.text();
        assert!(later[first.len()..].contains("eta "), "{later:?}");
    }
}
