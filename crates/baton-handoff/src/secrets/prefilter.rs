//! The prefilter of the secret scan: one pass of an Aho-Corasick automaton over the text
//! finds the rules whose anchors occur; only those run (and compile) their regex.

use aho_corasick::{AhoCorasick, Input, MatchKind};

/// The anchors of every rule in one automaton. The automaton's set is made
/// substring-free (ASCII case ignored): an anchor that contains another is left out of
/// it and checked in place wherever the one inside it occurs (wherever `sk-ant-` occurs,
/// `sk` occurs). Over a substring-free set, the first match a standard (earliest-end)
/// search reports from any position is also the one that starts first (two matches
/// ending at the same place, or one inside another, would make one anchor a substring of
/// another), so restarting at that start + 1 reports every occurrence, overlapping ones
/// included, without the overlapping search's bookkeeping on every byte. The rules
/// selected are exactly those one of whose anchors occurs, as with an overlapping search
/// over every anchor (the tests compare the two).
pub(super) struct Prefilter {
    automaton: AhoCorasick,
    /// For each anchor of the automaton: the rules it selects itself (bits by index into
    /// the table), and the longer anchors that contain it, each with the offset of this
    /// anchor inside it and the rules it selects when it occurs around this one.
    owners: Vec<(u64, Vec<Around>)>,
    rules: usize,
}

/// A longer anchor checked where a shorter one inside it occurs.
struct Around {
    /// Where the shorter anchor starts inside this one.
    offset: usize,
    /// Lower case.
    anchor: Vec<u8>,
    rules: u64,
}

impl Prefilter {
    /// The prefilter of rules given by their anchors, in the rules' order (a rule is its
    /// index; the rule table passes its anchors in, so this module needs no rule type).
    pub(super) fn new(rule_anchors: &[&[&str]]) -> Prefilter {
        let rules = rule_anchors;
        assert!(rules.len() <= 64, "a rule mask has 64 bits");
        // Every distinct anchor (lower case) with the rules that name it.
        let mut anchors: Vec<(String, u64)> = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            for anchor in rule.iter() {
                let lower = anchor.to_ascii_lowercase();
                match anchors.iter_mut().find(|(a, _)| *a == lower) {
                    Some((_, mask)) => *mask |= 1 << i,
                    None => anchors.push((lower, 1 << i)),
                }
            }
        }
        let inside = |outer: &str, inner: &str| outer != inner && outer.contains(inner);
        let mut kept = Vec::new();
        let mut owners = Vec::new();
        for (anchor, mask) in &anchors {
            if anchors.iter().any(|(b, _)| inside(anchor, b)) {
                continue;
            }
            let mut around = Vec::new();
            for (outer, outer_mask) in &anchors {
                if !inside(outer, anchor) {
                    continue;
                }
                for (offset, _) in outer.match_indices(anchor.as_str()) {
                    around.push(Around {
                        offset,
                        anchor: outer.as_bytes().to_vec(),
                        rules: *outer_mask,
                    });
                }
            }
            kept.push(anchor.clone());
            owners.push((*mask, around));
        }
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&kept)
            .expect("secret anchors must build an automaton");
        Prefilter {
            automaton,
            owners,
            rules: rules.len(),
        }
    }

    /// The rules that may match in `text`, by index into the table: a rule none of whose
    /// anchors occurs cannot match, so this is a superset of the rules that do.
    pub(super) fn candidates(&self, text: &[u8]) -> Vec<usize> {
        let all = if self.rules == 64 {
            u64::MAX
        } else {
            (1u64 << self.rules) - 1
        };
        let mut hit = 0u64;
        let mut at = 0;
        while at < text.len() {
            let input = Input::new(text).span(at..text.len());
            let Some(m) = self.automaton.find(input) else {
                break;
            };
            match self.owners.get(m.pattern().as_usize()) {
                Some((own, around)) => {
                    hit |= own;
                    for a in around {
                        if hit & a.rules == a.rules {
                            continue;
                        }
                        let found = m
                            .start()
                            .checked_sub(a.offset)
                            .and_then(|from| text.get(from..from + a.anchor.len()))
                            .is_some_and(|there| there.eq_ignore_ascii_case(&a.anchor));
                        if found {
                            hit |= a.rules;
                        }
                    }
                }
                // Not reachable (one entry per pattern); fail closed.
                None => hit = all,
            }
            if hit == all {
                break;
            }
            at = m.start() + 1;
        }
        (0..self.rules).filter(|i| hit & (1 << i) != 0).collect()
    }

    /// Whether any anchor occurs in `text`.
    pub(super) fn any(&self, text: &[u8]) -> bool {
        self.automaton.is_match(text)
    }
}
