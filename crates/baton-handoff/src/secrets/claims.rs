//! One pass of matching: which candidate matches (key blocks, placeholders already in
//! the text, every pattern rule whose anchors occur) claim which spans, longest first with
//! ties to the more specific kind, so that nothing is redacted twice.

use std::collections::BTreeMap;

use super::rules::{PLACEHOLDER, RULES};
use super::{
    Content, GENERIC_KINDS, KINDS, key_blocks, may_hold_placeholder, neutralize_escapes, rules,
};

/// One secret a pass found: its kind and the spans it claimed (one, or the parts of its
/// match no earlier secret had claimed).
pub(super) struct Finding {
    pub(super) kind: &'static str,
    pub(super) start: usize,
    pub(super) end: usize,
}

/// The matches of one pass over `input`: what is claimed (placeholders already in the
/// input included), and each secret found, in the order they claimed.
pub(super) fn find_once(input: &[u8], content: Content) -> (Claims, Vec<Finding>) {
    let mut claimed = Claims::default();
    let mut gaps = Vec::new();
    let mut pos = 0;
    let placeholders = may_hold_placeholder(input).then(|| PLACEHOLDER.find_iter(input));
    for m in placeholders.into_iter().flatten() {
        claimed.insert(m.start(), m.end(), None);
        gaps.push(pos..m.start());
        pos = m.end();
    }
    gaps.push(pos..input.len());

    let mut candidates = key_blocks::private_key_blocks(input);
    candidates.extend(key_blocks::encoded_key_blocks(input));
    // Patterns look at the text between placeholders already in the input, one gap at a
    // time: what follows a placeholder was never part of a secret on an earlier pass, so
    // a match running across one would make a second pass redact more than the first.
    // Key blocks are exempt: BEGIN and END lines delimit them, and an unterminated one
    // must keep running to the end.
    // Patterns run over a view in which escape sequences (`\n`, `\t`, `\r`, as in JSON
    // strings and shell output) read as spaces: a token right after one must still start
    // a word. The view has the input's length, so match offsets apply to the input as is.
    let view = neutralize_escapes(input);
    for gap in gaps {
        candidates.extend(pattern_candidates(&view[gap.clone()], gap.start, content));
    }
    // Key blocks first: a block is unambiguous, and a JSON value holding one ("\n" after
    // the END line included) should still be labelled a key. Then longest first, so that a
    // generic match covering a specific one (a password value holding a token and more)
    // removes everything in one placeholder; equal spans go to the more specific kind.
    candidates.sort_by(|a, b| {
        (a.rank != 0)
            .cmp(&(b.rank != 0))
            .then((b.end - b.start).cmp(&(a.end - a.start)))
            .then(a.rank.cmp(&b.rank))
            .then(a.start.cmp(&b.start))
    });

    let mut findings = Vec::new();
    for c in candidates {
        // What is left of a match that another one partly claimed is redacted too,
        // unless it is only punctuation, spaces and escapes (a quote, a "\n"): no secret
        // is made of those, and keeping them keeps a second pass from finding more.
        let mut pieces = claimed.free_parts(c.start, c.end);
        pieces.retain(|&(s, e)| significant(&input[s..e]));
        let (Some(&(start, _)), Some(&(_, end))) = (pieces.first(), pieces.last()) else {
            continue;
        };
        let kind = KINDS[c.rank];
        for (s, e) in pieces {
            claimed.insert(s, e, Some(kind));
        }
        findings.push(Finding { kind, start, end });
    }
    (claimed, findings)
}

/// Whether bytes hold a letter or digit that is not just the letter of an escape (`\n`).
pub(super) fn significant(bytes: &[u8]) -> bool {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b.is_ascii_alphanumeric() || b >= 0x80 => return true,
            _ => i += 1,
        }
    }
    false
}

/// An assignment that is the query of an `.svg` image's URL (`badge.svg?token=...`): a
/// coverage badge's graphing token, which Codecov publishes in README files by design.
pub(super) fn public_badge_token(kind: &str, before: &[u8]) -> bool {
    kind == "password_assignment" && before.ends_with(b".svg?")
}

/// Disjoint claimed spans by start; `None` marks a placeholder found in the input.
#[derive(Default)]
pub(super) struct Claims {
    pub(super) spans: BTreeMap<usize, (usize, Option<&'static str>)>,
}

impl Claims {
    fn insert(&mut self, start: usize, end: usize, kind: Option<&'static str>) {
        self.spans.insert(start, (end, kind));
    }

    /// The parts of `start..end` that no claim covers, in order.
    fn free_parts(&self, start: usize, end: usize) -> Vec<(usize, usize)> {
        let mut parts = Vec::new();
        let mut pos = start;
        // Claims are disjoint, so the one starting before `start` is the only earlier one
        // that can reach into the range.
        let first = self
            .spans
            .range(..start)
            .next_back()
            .map(|(&s, _)| s)
            .unwrap_or(start);
        for (&s, &(e, _)) in self.spans.range(first..end) {
            if e <= pos {
                continue;
            }
            if s > pos {
                parts.push((pos, s));
            }
            pos = pos.max(e);
            if pos >= end {
                break;
            }
        }
        if pos < end {
            parts.push((pos, end));
        }
        parts
    }
}

pub(super) struct Candidate {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) rank: usize,
}

pub(super) fn rank(kind: &str) -> usize {
    KINDS
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(KINDS.len() - 1)
}

/// Matches of every pattern rule in `text`, which starts at `offset` in the input.
pub(super) fn pattern_candidates(text: &[u8], offset: usize, content: Content) -> Vec<Candidate> {
    pattern_candidates_in(&RULES, text, offset, content)
}

/// [`pattern_candidates`] with the rules of `table` (the tests give a fresh one).
pub(super) fn pattern_candidates_in(
    table: &[rules::Rule],
    text: &[u8],
    offset: usize,
    content: Content,
) -> Vec<Candidate> {
    let mut out = Vec::new();
    if text.is_empty() {
        return out;
    }
    // One pass of the prefilter finds the few rules that may match; only those run (and
    // only those are ever compiled).
    for index in rules::candidate_rules(text) {
        let Some(rule) = table.get(index) else {
            continue;
        };
        if content == Content::Binary && GENERIC_KINDS.contains(&rule.kind) {
            continue;
        }
        let rank = rank(rule.kind);
        let mut at = 0;
        while let Some(caps) = rule.re().captures_at(text, at) {
            let Some(whole) = caps.get(0) else { break };
            // Rules with groups redact only the first group that took part (the value of
            // an assignment); rules without redact the whole match.
            let value = if caps.len() > 1 {
                (1..caps.len()).find_map(|i| caps.get(i))
            } else {
                Some(whole)
            };
            let Some(value) = value else { break };
            if value.is_empty()
                || !(rule.keep)(whole.as_bytes(), value.as_bytes())
                || public_badge_token(rule.kind, &text[..whole.start()])
            {
                // A value that is no secret (`make();PASSWORD=hunter2`) may hold the next
                // assignment: look again from inside it.
                at = value.start().max(whole.start() + 1);
                continue;
            }
            out.push(Candidate {
                start: offset + value.start(),
                end: offset + value.end(),
                rank,
            });
            at = whole.end().max(whole.start() + 1);
        }
    }
    out
}
