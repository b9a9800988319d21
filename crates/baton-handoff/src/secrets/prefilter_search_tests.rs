//! The prefilter's search over its substring-free anchor set selects exactly the rules an
//! overlapping search over every anchor selects, and a rule's regex is compiled only
//! when the prefilter selects it.

use aho_corasick::{AhoCorasick, MatchKind};

use super::prefilter::Prefilter;
use super::rules::{RULES, rule_anchors, table};

/// The old prefilter: an overlapping search over every anchor of every rule.
struct Overlapping {
    automaton: AhoCorasick,
    owners: Vec<usize>,
}

impl Overlapping {
    fn new() -> Overlapping {
        let (owners, anchors): (Vec<usize>, Vec<&str>) = RULES
            .iter()
            .enumerate()
            .flat_map(|(i, rule)| rule.anchors.iter().map(move |a| (i, *a)))
            .unzip();
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(anchors)
            .expect("anchors build");
        Overlapping { automaton, owners }
    }

    fn candidates(&self, text: &[u8]) -> Vec<usize> {
        let mut hit = vec![false; RULES.len()];
        for m in self.automaton.find_overlapping_iter(text) {
            hit[self.owners[m.pattern().as_usize()]] = true;
        }
        (0..hit.len()).filter(|&i| hit[i]).collect()
    }
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

fn all_anchors() -> Vec<&'static str> {
    let mut anchors: Vec<&str> = RULES
        .iter()
        .flat_map(|r| r.anchors.iter().copied())
        .collect();
    anchors.sort_unstable();
    anchors.dedup();
    anchors
}

/// A case flip of some ASCII letters.
fn flip_case(rng: &mut Rng, text: &mut [u8]) {
    for b in text.iter_mut() {
        if rng.below(3) == 0 {
            *b = if b.is_ascii_lowercase() {
                b.to_ascii_uppercase()
            } else {
                b.to_ascii_lowercase()
            };
        }
    }
}

fn check(new: &Prefilter, old: &Overlapping, text: &[u8]) {
    assert_eq!(
        new.candidates(text),
        old.candidates(text),
        "prefilters differ on {:?}",
        String::from_utf8_lossy(text)
    );
    assert_eq!(new.any(text), old.automaton.is_match(text));
}

#[test]
fn the_substring_free_search_selects_what_the_overlapping_one_does() {
    let new = Prefilter::new(&rule_anchors());
    let old = Overlapping::new();
    let anchors = all_anchors();
    let mut rng = Rng(0x0bad_5eed);
    // Adversarial: anchors overlapping and nested in each other, glued with their own
    // pieces (`sk-ant-` in `ssk-ant-`, `sk` in both, `ac` in `access` and `account`),
    // case flipped, cut short at either end.
    let mut exercised = 0;
    for _ in 0..20_000 {
        let mut text = Vec::new();
        for _ in 0..1 + rng.below(6) {
            let a = anchors[rng.below(anchors.len())].as_bytes();
            let from = if rng.below(3) == 0 {
                rng.below(a.len())
            } else {
                0
            };
            let to = if rng.below(3) == 0 {
                from + rng.below(a.len() - from + 1)
            } else {
                a.len()
            };
            text.extend_from_slice(&a[from..to]);
            match rng.below(4) {
                0 => {}
                1 => text.push(b" -_.:/"[rng.below(6)]),
                _ => text.push(b"skacpi"[rng.below(6)]),
            }
        }
        if rng.below(2) == 0 {
            flip_case(&mut rng, &mut text);
        }
        exercised += usize::from(!old.candidates(&text).is_empty());
        check(&new, &old, &text);
    }
    assert!(
        exercised > 15_000,
        "too few texts held an anchor: {exercised}"
    );
    // Random bytes, and random text over the letters the anchors are made of.
    for len in [0, 1, 2, 3, 7, 64, 4096] {
        for _ in 0..200 {
            let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            check(&new, &old, &bytes);
            let letters = b"skacpitoenSKAC-_.:/ ";
            let text: Vec<u8> = (0..len)
                .map(|_| letters[rng.below(letters.len())])
                .collect();
            check(&new, &old, &text);
        }
    }
    // Every anchor alone, at the very start and the very end, and every pair of anchors
    // overlapping by every amount.
    for a in &anchors {
        for b in &anchors {
            let (a, b) = (a.as_bytes(), b.as_bytes());
            for overlap in 0..a.len().min(b.len()) {
                if a[a.len() - overlap..].eq_ignore_ascii_case(&b[..overlap]) {
                    let mut text = a.to_vec();
                    text.extend_from_slice(&b[overlap..]);
                    check(&new, &old, &text);
                }
            }
        }
    }
}

#[test]
fn a_rule_is_compiled_only_when_the_prefilter_selects_it() {
    let fresh = table();
    assert!(
        fresh.iter().all(|r| !r.is_compiled()),
        "nothing compiled up front"
    );
    let text = format!("export GH=ghp_{}\n", "a1B2c3D4e5".repeat(4));
    let found =
        super::claims::pattern_candidates_in(&fresh, text.as_bytes(), 0, super::Content::Text);
    assert_eq!(found.len(), 1, "the token is found");
    let selected = super::rules::candidate_rules(text.as_bytes());
    let compiled: Vec<usize> = (0..fresh.len())
        .filter(|&i| fresh[i].is_compiled())
        .collect();
    assert_eq!(compiled, selected);
    assert!(
        compiled.iter().any(|&i| fresh[i].kind == "github_token"),
        "{compiled:?}"
    );
    assert!(compiled.len() < 4, "only the selected rules: {compiled:?}");
    // A text without any anchor compiles nothing.
    let fresh = table();
    assert!(
        super::claims::pattern_candidates_in(
            &fresh,
            b"hello world 12345\n",
            0,
            super::Content::Text
        )
        .is_empty()
    );
    assert!(fresh.iter().all(|r| !r.is_compiled()));
}
