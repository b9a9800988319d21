//! No secret rule can match across a line end: the append-aware transcript cache (SPEC 5.1
//! "Appended lines") scans only the lines after a clean prefix, which is as strong as a
//! whole scan only if no match can run from one line into the next: every match then lies
//! in the cached part or in the appended lines with the newline before them, which is
//! where that scan starts. Private key blocks are the exception, handled apart (their
//! BEGIN line alone is a finding). Checked on each rule's parsed pattern, so a rule added
//! later is covered too. Word boundaries in the rules follow token characters only, so a
//! scan of the cached part alone, which ended at its newline, saw the same boundaries.

use regex_syntax::hir::{Class, Hir, HirKind};

use super::rules::RULES;

/// Whether some string matched by `hir` can contain a `\n` anywhere.
fn can_match_newline(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => false,
        HirKind::Literal(lit) => lit.0.contains(&b'\n'),
        HirKind::Class(Class::Unicode(class)) => class
            .ranges()
            .iter()
            .any(|r| r.start() <= '\n' && '\n' <= r.end()),
        HirKind::Class(Class::Bytes(class)) => class
            .ranges()
            .iter()
            .any(|r| r.start() <= b'\n' && b'\n' <= r.end()),
        HirKind::Repetition(rep) => rep.max != Some(0) && can_match_newline(&rep.sub),
        HirKind::Capture(cap) => can_match_newline(&cap.sub),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(can_match_newline),
    }
}

/// Whether some match of `hir` can hold a `\n` with bytes of the match on both sides of
/// it, i.e. run from one line into the next. A newline as the first byte (a separator
/// before a token) or the last (the end of a value) keeps the match within one line and
/// its line end. Conservative: it may say yes where no such match exists, never no.
fn can_span_lines(hir: &Hir) -> bool {
    let nonempty = |h: &Hir| h.properties().maximum_len() != Some(0);
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) | HirKind::Class(_) => false,
        HirKind::Literal(lit) => {
            let bytes = &lit.0;
            bytes.len() > 2 && bytes[1..bytes.len() - 1].contains(&b'\n')
        }
        HirKind::Repetition(rep) => {
            can_span_lines(&rep.sub)
                || (can_match_newline(&rep.sub) && rep.max.is_none_or(|m| m > 1))
        }
        HirKind::Capture(cap) => can_span_lines(&cap.sub),
        HirKind::Alternation(subs) => subs.iter().any(can_span_lines),
        HirKind::Concat(subs) => subs.iter().enumerate().any(|(i, sub)| {
            if can_span_lines(sub) {
                return true;
            }
            if !can_match_newline(sub) {
                return false;
            }
            let before = subs[..i].iter().any(nonempty);
            let after = subs[i + 1..].iter().any(nonempty);
            (before && after) || ((before || after) && !one_char_at_most(sub))
        }),
    }
}

/// Whether every match of `hir` is at most one character (so a newline in it is all of it).
fn one_char_at_most(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) | HirKind::Class(_) => true,
        HirKind::Literal(lit) => lit.0.len() <= 1,
        HirKind::Repetition(rep) => rep.max.is_some_and(|m| m <= 1) && one_char_at_most(&rep.sub),
        HirKind::Capture(cap) => one_char_at_most(&cap.sub),
        HirKind::Alternation(subs) => subs.iter().all(one_char_at_most),
        HirKind::Concat(subs) => {
            subs.iter().all(one_char_at_most)
                && subs
                    .iter()
                    .filter(|h| h.properties().maximum_len() != Some(0))
                    .count()
                    <= 1
        }
    }
}

fn parse(pattern: &str) -> Hir {
    regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
        .unwrap_or_else(|e| panic!("{pattern}: {e}"))
}

#[test]
fn no_rule_matches_across_a_line_end() {
    assert!(!RULES.is_empty());
    for rule in RULES.iter() {
        assert!(
            !can_span_lines(&parse(rule.pattern())),
            "rule {} can match across a line end, so a scan of appended lines alone could miss it: {}",
            rule.kind,
            rule.pattern()
        );
    }
}

#[test]
fn the_check_sees_a_match_that_spans_lines() {
    for pattern in [
        r"a\sb",
        r"(?s)a.*b",
        r"a[^x]b",
        "a\nb",
        r"(?-u)a[\x00-\xff]+",
        r"\s\s\s",
    ] {
        assert!(can_span_lines(&parse(pattern)), "{pattern}");
    }
    for pattern in [
        r"a[ \t]b",
        r"a.*b",
        r"(?-u)a[^\r\n]b",
        r"(?:^|[^a-z])key",
        r"key=[a-z]{4}(?:[^a-z]|$)",
        // A newline first and one last: within [N-1, end) of a scan that starts at the
        // newline ending the cached part.
        r"\s\s",
    ] {
        assert!(!can_span_lines(&parse(pattern)), "{pattern}");
    }
}
