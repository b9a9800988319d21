//! Passing over transcript lines that cannot match a search without parsing them, as
//! ripgrep does: a line that holds only ASCII and no `\u` escape decodes to its own
//! bytes (bar the escapes `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`), so a term that
//! is not in its bytes (ignoring ASCII case) is in none of its strings.

use aho_corasick::AhoCorasick;

/// The terms of a query as finders over bytes, ignoring ASCII case.
pub(super) struct Prefilter {
    terms: Vec<Term>,
    escape: memchr::memmem::Finder<'static>,
}

enum Term {
    /// An ASCII term. `spelled_as_is`: it holds no character a plain line may spell as an
    /// escape (`"`, `\`, `/`, a control character), so it is in a plain line's strings
    /// only where its bytes are in the line.
    Ascii {
        finder: AhoCorasick,
        spelled_as_is: bool,
    },
    /// Holds a character that is not ASCII: in no ASCII text (nor in its lower case).
    NotAscii,
}

impl Prefilter {
    /// For `terms` (already lower case); `None` for no terms, or a term no finder takes.
    pub(super) fn new(terms: &[String]) -> Option<Prefilter> {
        if terms.is_empty() {
            return None;
        }
        let terms = terms
            .iter()
            .map(|t| {
                if !t.is_ascii() {
                    return Some(Term::NotAscii);
                }
                let finder = AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .build([t.as_str()])
                    .ok()?;
                Some(Term::Ascii {
                    finder,
                    spelled_as_is: !t
                        .bytes()
                        .any(|b| matches!(b, b'"' | b'\\' | b'/') || b < 0x20),
                })
            })
            .collect::<Option<Vec<Term>>>()?;
        Some(Prefilter {
            terms,
            escape: memchr::memmem::Finder::new(b"\\u"),
        })
    }

    /// Whether `line` (a whole transcript line) certainly has some term in none of its
    /// strings, so that it cannot match.
    pub(super) fn rules_out(&self, line: &[u8]) -> bool {
        if !line.is_ascii() || self.escape.find(line).is_some() {
            return false;
        }
        self.terms.iter().any(|t| match t {
            Term::Ascii {
                finder,
                spelled_as_is: true,
            } => !finder.is_match(line),
            Term::Ascii { .. } => false,
            Term::NotAscii => true,
        })
    }

    /// Whether ASCII `text` (a decoded string, not a raw line) holds every term,
    /// ignoring case: what `to_lowercase` and `contains` say of it.
    pub(super) fn finds_all(&self, text: &[u8]) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Ascii { finder, .. } => finder.is_match(text),
            Term::NotAscii => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(terms: &[&str]) -> Option<Prefilter> {
        Prefilter::new(&terms.iter().map(|t| t.to_lowercase()).collect::<Vec<_>>())
    }

    #[test]
    fn rules_out_only_plain_lines_without_a_term() {
        let p = filter(&["needle", "cargo"]).expect("byte terms");
        assert!(p.rules_out(br#"{"text":"cargo test"}"#));
        assert!(!p.rules_out(br#"{"text":"CARGO and a Needle"}"#));
        // A term in a key still makes the line a candidate: the parse decides.
        assert!(!p.rules_out(br#"{"needle":"cargo"}"#));
        // Escapes that could spell a letter, and text that is not ASCII, are parsed.
        assert!(!p.rules_out(br#"{"text":"cargo \u006eeedle"}"#));
        assert!(!p.rules_out("{\"text\":\"cargo caf\u{e9}\"}".as_bytes()));
        // The Kelvin sign lower-cases to an ASCII k: such a line is always parsed.
        let k = filter(&["k"]).expect("byte term");
        assert!(!k.rules_out("{\"text\":\"\u{212a}\"}".as_bytes()));
        assert!(k.rules_out(br#"{"text":"x"}"#));
    }

    #[test]
    fn terms_escapes_could_spell_are_left_to_the_parse() {
        let slash = filter(&["a/b"]).expect("ascii");
        assert!(!slash.rules_out(br#"{"text":"a\/b"}"#));
        assert!(slash.finds_all(b"A/B"));
        assert!(!filter(&["say\"hi"]).expect("ascii").rules_out(b"{}"));
        assert!(filter(&[]).is_none());
        let p = filter(&["a/b", "zzz"]).expect("one byte term");
        assert!(p.rules_out(br#"{"text":"a\/b"}"#));
        assert!(!p.rules_out(br#"{"text":"a\/b zzz"}"#));
        // A term that is not ASCII is in no plain line.
        let e = filter(&["caf\u{e9}"]).expect("never plain");
        assert!(e.rules_out(br#"{"text":"cafe"}"#));
        assert!(!e.rules_out("{\"text\":\"caf\u{e9}\"}".as_bytes()));
    }
}
