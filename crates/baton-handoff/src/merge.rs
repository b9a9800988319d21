//! The briefing of a merge bundle: a new one the agent wrote, or both lines' Next Steps
//! carried side by side, each labelled with the bundle and the handoff it came from.
//!
//! Pure functions of their input; [`merge`] (in `bundles.rs`) reads the two bundles and
//! writes the result into the tree of `current`.

mod bundles;
pub use bundles::{MergeOptions, MergeOutcome, Merged, merge};

use super::briefing::{self, Briefing};
use super::capture::SecretsMode;
use super::secrets::Scrubber;
use baton_error::Result;

/// One line of history being merged: its bundle and handoff as `log` shows them.
pub struct Side<'a> {
    /// The bundle id as printed (12 hex digits), resolvable by every command.
    pub short: &'a str,
    pub from: &'a str,
    pub to: &'a str,
    pub briefing: Option<&'a Briefing>,
}

impl Side<'_> {
    /// "### From 0123456789ab (claude -> codex)".
    fn label(&self) -> String {
        let who = match (self.from, self.to) {
            ("", "") => String::new(),
            (f, "") => format!(" ({f})"),
            ("", t) => format!(" (-> {t})"),
            (f, t) => format!(" ({f} -> {t})"),
        };
        format!("### From {}{who}", self.short)
    }

    fn next_steps(&self) -> String {
        match self.briefing.and_then(|b| b.section("Next Steps")) {
            Some(steps) => steps.trim().to_string(),
            None => format!(
                "(no briefing in this bundle; see `baton show {}`)",
                self.short
            ),
        }
    }
}

/// The merged briefing when neither side's is replaced: Objective and Current State (and
/// every other section) from `ours`, or from `theirs` when `ours` has no briefing; Next
/// Steps holding both sides' Next Steps under a label each. `None` when neither side has
/// a briefing (two plain snapshots: the tree of `ours` is kept as it is).
pub fn merge_briefings(ours: &Side, theirs: &Side) -> Result<Option<Briefing>> {
    let Some(base) = ours.briefing.or(theirs.briefing) else {
        return Ok(None);
    };
    let mut text = format!("# Handoff: merge of {} and {}\n", ours.short, theirs.short);
    let mut wrote_steps = false;
    for section in &base.sections {
        text.push_str(&format!("\n## {}\n\n", section.title));
        if section_is(&section.title, "Next Steps") {
            if wrote_steps {
                // A second Next Steps heading: its steps are already in the labelled
                // subsections (`section` finds the first one only), keep it verbatim.
                text.push_str(&format!("{}\n", section.body.trim()));
                continue;
            }
            wrote_steps = true;
            text.push_str(&labelled_steps(ours, theirs));
        } else if section.body.trim().is_empty() {
            continue;
        } else {
            text.push_str(&format!("{}\n", section.body.trim()));
        }
    }
    if !wrote_steps {
        text.push_str("\n## Next Steps\n\n");
        text.push_str(&labelled_steps(ours, theirs));
    }
    Briefing::parse(&text).map(Some)
}

fn labelled_steps(ours: &Side, theirs: &Side) -> String {
    format!(
        "Both lines of work continue from here.\n\n{}\n\n{}\n\n{}\n\n{}\n",
        ours.label(),
        ours.next_steps(),
        theirs.label(),
        theirs.next_steps()
    )
}

fn section_is(title: &str, name: &str) -> bool {
    let key = |t: &str| -> String {
        t.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    key(title) == key(name)
}

/// A briefing given to `merge --brief`: UTF-8, validated like `save --brief`.
pub fn parse_new(raw: &[u8]) -> Result<Briefing> {
    let text = std::str::from_utf8(raw).map_err(|_| {
        briefing::invalid("the briefing is not UTF-8 text (save it as UTF-8 markdown)".into())
    })?;
    Briefing::parse(text)
}

/// The briefing with its secrets replaced by placeholders (re-validated: the stored text
/// is the redacted one), or the refusal of `--secrets block`. Counts go to `scrubber`.
pub fn scrub(briefing: Briefing, mode: SecretsMode, scrubber: &mut Scrubber) -> Result<Briefing> {
    let before = scrubber.found.values().sum::<u64>();
    let text = scrubber.text(&briefing.text);
    if scrubber.found.values().sum::<u64>() == before {
        return Ok(briefing);
    }
    scrubber.refuse_if(mode == SecretsMode::Block)?;
    Briefing::parse(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brief(objective: &str, state: &str, steps: &str) -> Briefing {
        Briefing::parse(&format!(
            "# Handoff\n\n## Objective\n\n{objective}\n\n## Current State\n\n{state}\n\n## Risks / Watch Out\n\nMind the cache.\n\n## Next Steps\n\n{steps}\n"
        ))
        .unwrap()
    }

    #[test]
    fn both_next_steps_are_carried_under_their_labels() {
        let a = brief("Ship the parser.", "Lexer done.", "1. Write the grammar.");
        let b = brief("Ship it too.", "Docs done.", "1. Publish the docs.");
        let ours = Side {
            short: "aaaaaaaaaaaa",
            from: "claude",
            to: "codex",
            briefing: Some(&a),
        };
        let theirs = Side {
            short: "bbbbbbbbbbbb",
            from: "codex",
            to: "",
            briefing: Some(&b),
        };
        let merged = merge_briefings(&ours, &theirs).unwrap().unwrap();
        assert_eq!(merged.section("Objective"), Some("Ship the parser."));
        assert_eq!(merged.section("Current State"), Some("Lexer done."));
        assert_eq!(merged.section("Risks / Watch Out"), Some("Mind the cache."));
        let steps = merged.section("Next Steps").unwrap();
        let first = steps
            .find("### From aaaaaaaaaaaa (claude -> codex)")
            .unwrap();
        let grammar = steps.find("1. Write the grammar.").unwrap();
        let second = steps.find("### From bbbbbbbbbbbb (codex)").unwrap();
        let docs = steps.find("1. Publish the docs.").unwrap();
        assert!(
            first < grammar && grammar < second && second < docs,
            "{steps}"
        );
        assert_eq!(merged.summary_line(), "Ship the parser.");
        // Same input, same bytes.
        let again = merge_briefings(&ours, &theirs).unwrap().unwrap();
        assert_eq!(again.text, merged.text);
    }

    #[test]
    fn a_side_without_a_briefing_is_said_and_the_other_gives_the_objective() {
        let b = brief("Theirs.", "Their state.", "1. Their step.");
        let ours = Side {
            short: "aaaaaaaaaaaa",
            from: "",
            to: "",
            briefing: None,
        };
        let theirs = Side {
            short: "bbbbbbbbbbbb",
            from: "",
            to: "x",
            briefing: Some(&b),
        };
        let merged = merge_briefings(&ours, &theirs).unwrap().unwrap();
        assert_eq!(merged.section("Objective"), Some("Theirs."));
        let steps = merged.section("Next Steps").unwrap();
        assert!(steps.contains("### From aaaaaaaaaaaa\n"), "{steps}");
        assert!(steps.contains("no briefing in this bundle"), "{steps}");
        assert!(steps.contains("### From bbbbbbbbbbbb (-> x)"), "{steps}");
        assert!(steps.contains("1. Their step."), "{steps}");
    }

    #[test]
    fn two_snapshots_have_no_merged_briefing() {
        let side = |short| Side {
            short,
            from: "",
            to: "",
            briefing: None,
        };
        assert!(
            merge_briefings(&side("aaaaaaaaaaaa"), &side("bbbbbbbbbbbb"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn new_briefings_are_validated_and_scrubbed() {
        assert_eq!(
            parse_new(b"## Objective\n\nx\n").unwrap_err().kind,
            baton_error::ErrorKind::Usage
        );
        assert!(parse_new(&[0xff, 0xfe]).is_err());
        let key = "AKIA".to_string() + "Q7RZ3K5M2N8P4T6W";
        let raw =
            format!("## Objective\n\nx {key}\n\n## Current State\n\ny\n\n## Next Steps\n\nz\n");
        let mut found = Scrubber::default();
        let clean = scrub(
            parse_new(raw.as_bytes()).unwrap(),
            SecretsMode::Redact,
            &mut found,
        )
        .unwrap();
        assert!(!clean.text.contains(&key), "{}", clean.text);
        assert!(found.found_any());
        let mut found = Scrubber::default();
        let refused = scrub(
            parse_new(raw.as_bytes()).unwrap(),
            SecretsMode::Block,
            &mut found,
        )
        .unwrap_err();
        assert_eq!(refused.kind, baton_error::ErrorKind::Security);
    }
}
