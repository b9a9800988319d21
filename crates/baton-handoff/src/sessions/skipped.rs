//! What a session reader left out because this baton does not know it: unknown entry types
//! that carry no message, counted by type name, for one note of the handoff and its `--json`
//! (store-format/TRANSCRIPT.md, "Unknown entries").

use std::collections::BTreeMap;

use serde::Serialize;

/// Entry types skipped, by the harness's name for them, with how many of each.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Skipped(BTreeMap<String, u64>);

/// Type names kept at most: a hostile file cannot grow the note without bound.
const MAX_NAMES: usize = 64;
/// Bytes of one type name kept at most.
const MAX_NAME_BYTES: usize = 64;
const OTHERS: &str = "(other types)";

impl Skipped {
    /// Count one skipped entry of type `name`.
    pub fn add(&mut self, name: &str) {
        self.add_n(name, 1);
    }

    fn add_n(&mut self, name: &str, n: u64) {
        let mut end = name.len().min(MAX_NAME_BYTES);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        let mut name = &name[..end];
        if !self.0.contains_key(name) && self.0.len() >= MAX_NAMES {
            name = OTHERS;
        }
        *self.0.entry(name.to_string()).or_default() += n;
    }

    /// Count everything `other` skipped.
    pub fn extend(&mut self, other: &Skipped) {
        for (name, n) in &other.0 {
            self.add_n(name, *n);
        }
    }

    /// The counts by type name (as a transcript cache entry keeps them).
    pub fn counts(&self) -> &BTreeMap<String, u64> {
        &self.0
    }

    /// The counts a transcript cache entry kept, bounded again as they are taken.
    pub fn from_counts(counts: &BTreeMap<String, u64>) -> Skipped {
        let mut s = Skipped::default();
        for (name, n) in counts {
            s.add_n(name, *n);
        }
        s
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Entries skipped in all.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// One line for the handoff's notes: "skipped 3 Claude Code entries of types this baton
    /// does not know: ai-title (1), last-prompt (2)", or `None` when nothing was skipped.
    pub fn note(&self, harness: &str) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let names: Vec<String> = self.0.iter().map(|(k, n)| format!("{k} ({n})")).collect();
        let total = self.total();
        let entries = if total == 1 { "entry" } else { "entries" };
        Some(format!(
            "skipped {total} {harness} {entries} of types this baton does not know: {}",
            names.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_name_and_says_so_in_one_line() {
        let mut s = Skipped::default();
        assert_eq!(s.note("Claude Code"), None);
        s.add("last-prompt");
        s.add("ai-title");
        s.add("last-prompt");
        assert_eq!(s.total(), 3);
        assert_eq!(
            s.note("Claude Code").unwrap(),
            "skipped 3 Claude Code entries of types this baton does not know: \
             ai-title (1), last-prompt (2)"
        );
        let mut t = Skipped::default();
        t.extend(&s);
        t.extend(&s);
        assert_eq!(t.total(), 6);
    }

    #[test]
    fn names_are_bounded() {
        let mut s = Skipped::default();
        for i in 0..1000 {
            s.add(&format!("type-{i}-{}", "x".repeat(500)));
        }
        assert_eq!(s.total(), 1000);
        assert!(s.0.len() <= MAX_NAMES + 1);
        assert!(s.0.keys().all(|k| k.len() <= MAX_NAME_BYTES));
    }
}
