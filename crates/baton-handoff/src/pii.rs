//! Personal data in briefings and transcripts (`--pii redact|allow`): email addresses,
//! phone numbers, US social security numbers and payment card numbers, each replaced by a
//! typed `[REDACTED:<kind>]` as secrets are, or kept and reported.
//!
//! Only what a person or an agent wrote is scanned: the briefing (`handoff.md`),
//! `context.md`, `--summary` and `--note`, `transcript.jsonl` and the session file
//! attached with it. Evidence (`evidence/`), patches and other attachments are not: git
//! author emails there are what identifies a commit, and a patch must still apply. The
//! emails of the commits in the evidence are kept wherever they occur (they are stored
//! in the evidence anyway), and so are addresses that are not anyone's (see
//! [`not_personal`]).
//!
//! | kind | what is replaced |
//! |---|---|
//! | `email` | `local@domain.tld`; not `user@host:path` (an SSH remote), not `scheme://user@host` (a URL's user), not a name whose "domain" ends in a file extension (`icon@2x.png`) or a mixed-case attribute (`z@Tests.testCase`), not a message id (after `Message-ID:`, `In-Reply-To:`, `References:`) |
//! | `phone` | `+` and an assigned E.164 country code, 8 to 15 digits (11 for `+1` and `+7`), spaces, dots, dashes, brackets and `(0)` between (unseparated: 10 or more; a single dot is a decimal); a North American number `(415) 555-2671`, `415-555-2671`, `415.555.2671` (one separator throughout); any other grouping of 8 to 13 digits only after a word such as `phone`, `tel`, `mobile`, `fax`, `call` on the same line |
//! | `ssn` | `123-45-6789` outside the ranges the SSA never issues (area 000, 666, 900-999; group 00; serial 0000); `123 45 6789` and `123456789` only after `SSN` or `social security` |
//! | `card` | 13 to 19 digits in groups of four (or 4-6-5, 4-6-4) with one kind of separator, or unseparated after a word such as `card`, `visa`, `credit`, `payment` on the same line; an issuer's prefix and length (Visa, Mastercard, Mir, Amex, Discover, JCB, Diners, UnionPay), no run of six zeros, and a valid Luhn check digit |
//!
//! A match never starts or ends inside a longer number, word, version, date or address
//! (`1.2.3.4`, `2026-12-04`, `12:34`, a hash): the characters on either side are checked.
//! Transcripts are JSON lines: a match never takes the letter of a backslash escape
//! (`\n+1 415 ...`, `\u003cbob@...`), so a redaction never breaks JSON.

use std::collections::{BTreeMap, BTreeSet};

mod rules;
#[cfg(test)]
mod tests;

/// The kinds, in the order overlapping matches are preferred.
pub const KINDS: [&str; 4] = ["email", "ssn", "card", "phone"];

/// Changes whenever what is found changes: part of the transcript cache's policy, so a
/// session found free of personal data by an older detector is scanned again.
const VERSION: &str = "pii/1";

/// The scan policy the stat and transcript caches record: the secret rules' fingerprint
/// and this detector's version (a cached transcript was found free of both).
pub fn cache_policy() -> String {
    format!("{}+{VERSION}", super::secrets::policy())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PiiMode {
    /// Replace each item by a typed placeholder and report kinds and counts.
    Redact,
    /// Store personal data as it is, and report kinds and counts.
    Allow,
}

impl PiiMode {
    pub const ALL: [PiiMode; 2] = [PiiMode::Redact, PiiMode::Allow];

    pub fn name(self) -> &'static str {
        match self {
            PiiMode::Redact => "redact",
            PiiMode::Allow => "allow",
        }
    }

    /// The mode `name` names, ignoring case.
    pub fn from_name(name: &str) -> Option<PiiMode> {
        PiiMode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }
}

/// What one scan found and, under redact, the text it gave.
pub struct Redaction {
    pub bytes: Vec<u8>,
    /// Only kinds that occurred.
    pub counts: BTreeMap<&'static str, u64>,
}

/// The emails a bundle keeps wherever they occur (lower case): those of the commits in
/// its evidence.
#[derive(Clone, Debug, Default)]
pub struct Keep {
    emails: BTreeSet<String>,
}

impl Keep {
    /// The emails in `identities` (git's `Name <email>`).
    pub fn from_identities<'a>(identities: impl IntoIterator<Item = &'a str>) -> Keep {
        let emails = identities
            .into_iter()
            .filter_map(|who| {
                let (_, rest) = who.rsplit_once('<')?;
                let email = rest.strip_suffix('>')?;
                email.contains('@').then(|| email.to_ascii_lowercase())
            })
            .collect();
        Keep { emails }
    }

    fn keeps(&self, email: &str) -> bool {
        self.emails.contains(&email.to_ascii_lowercase()) || not_personal(email)
    }
}

/// Addresses that name no person: RFC 2606/6761 reserved domains (`example.com`, `.org`,
/// `.net` and below them, `.example`, `.test`, `.invalid`, `.localhost`), GitHub's
/// `users.noreply.github.com` commit addresses, SSH's algorithm and extension names
/// (`aes256-gcm@openssh.com`, `...@libssh.org`), and the `noreply`, `no-reply` and `git`
/// mailboxes of any domain (`noreply@anthropic.com`, `git@github.com`).
pub fn not_personal(email: &str) -> bool {
    let email = email.to_ascii_lowercase();
    let Some((local, domain)) = email.rsplit_once('@') else {
        return true;
    };
    let under = |parent: &str| domain == parent || domain.ends_with(&format!(".{parent}"));
    matches!(local, "noreply" | "no-reply" | "git")
        || ["example.com", "example.org", "example.net"]
            .iter()
            .any(|d| under(d))
        || ["example", "test", "invalid", "localhost"]
            .iter()
            .any(|tld| under(tld))
        || under("noreply.github.com")
        || under("openssh.com")
        || under("libssh.org")
}

/// The personal data in `input`: each match's range and kind, in order, never
/// overlapping.
pub fn find(input: &[u8], keep: &Keep) -> Vec<(std::ops::Range<usize>, &'static str)> {
    rules::find(input, keep)
}

/// `input` with each item of personal data replaced by `[REDACTED:<kind>]`.
pub fn redact(input: &[u8], keep: &Keep) -> Redaction {
    replace(input, find(input, keep))
}

/// `input` with the items `found` in it replaced.
fn replace(input: &[u8], found: Vec<(std::ops::Range<usize>, &'static str)>) -> Redaction {
    let mut counts = BTreeMap::new();
    let mut out = Vec::with_capacity(input.len());
    let mut at = 0;
    for (range, kind) in found {
        out.extend_from_slice(&input[at..range.start]);
        out.extend_from_slice(super::secrets::placeholder(kind).as_bytes());
        at = range.end;
        *counts.entry(kind).or_default() += 1;
    }
    out.extend_from_slice(&input[at..]);
    Redaction { bytes: out, counts }
}

/// Where personal data was found and how much: a file of the bundle or a flag.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Place {
    pub place: String,
    pub counts: BTreeMap<&'static str, u64>,
}

/// The scan of one bundle under one mode: each text through [`Scrubber::bytes`] or
/// [`Scrubber::text`], what was found kept by place (never a value).
#[derive(Debug)]
pub struct Scrubber {
    pub mode: PiiMode,
    pub keep: Keep,
    pub places: Vec<Place>,
}

impl Scrubber {
    pub fn new(mode: PiiMode, keep: Keep) -> Scrubber {
        Scrubber {
            mode,
            keep,
            places: Vec::new(),
        }
    }

    /// `input` as it is stored (redacted under `redact`), its findings noted under
    /// `place`; `None` when it held none (the caller keeps what it has).
    pub fn bytes(&mut self, place: &str, input: &[u8]) -> Option<Vec<u8>> {
        let found = find(input, &self.keep);
        if found.is_empty() {
            return None;
        }
        let r = replace(input, found);
        self.note(place, r.counts);
        (self.mode == PiiMode::Redact).then_some(r.bytes)
    }

    /// Scan files of the bundle whose bytes are in memory, in parallel, each from its
    /// offset on (a cached one, `stored`, was found free of personal data under the
    /// cache's policy, [`cache_policy`], and so were the bytes before an appended
    /// transcript's offset: no match crosses the line end of a JSON line, which ends in
    /// `}`); for each, whether it held any.
    pub fn files(
        &mut self,
        files: &mut [(&mut baton_store::memtree::MemFile, usize)],
    ) -> Vec<bool> {
        use rayon::prelude::*;
        let keep = &self.keep;
        let found: Vec<_> = files
            .par_iter()
            .map(|(file, from)| match file.stored {
                Some(_) => Vec::new(),
                None => {
                    let from = (*from).min(file.bytes.len());
                    let mut found = find(&file.bytes[from..], keep);
                    for (range, _) in &mut found {
                        *range = range.start + from..range.end + from;
                    }
                    found
                }
            })
            .collect();
        files
            .iter_mut()
            .zip(found)
            .map(|((file, _), found)| {
                if found.is_empty() {
                    return false;
                }
                let r = replace(&file.bytes, found);
                self.note(&file.path, r.counts);
                if self.mode == PiiMode::Redact {
                    file.replace_bytes(r.bytes);
                }
                true
            })
            .collect()
    }

    /// A text as it is stored; placeholders are ASCII and matches are ASCII, so UTF-8
    /// stays UTF-8.
    pub fn text(&mut self, place: &str, input: &str) -> String {
        match self.bytes(place, input.as_bytes()) {
            Some(bytes) => String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            None => input.to_string(),
        }
    }

    fn note(&mut self, place: &str, counts: BTreeMap<&'static str, u64>) {
        match self.places.iter_mut().find(|p| p.place == place) {
            Some(p) => super::secrets::add_counts(&mut p.counts, counts),
            None => self.places.push(Place {
                place: place.to_string(),
                counts,
            }),
        }
    }

    /// Kinds and counts over every place.
    pub fn totals(&self) -> BTreeMap<&'static str, u64> {
        let mut all = BTreeMap::new();
        for p in &self.places {
            for (kind, n) in &p.counts {
                *all.entry(*kind).or_default() += n;
            }
        }
        all
    }

    /// "email: 1, phone: 2 in handoff.md, transcript.jsonl"; empty when nothing was found.
    pub fn describe(&self) -> String {
        if self.places.is_empty() {
            return String::new();
        }
        let places: Vec<&str> = self.places.iter().map(|p| p.place.as_str()).collect();
        format!(
            "{} in {}",
            super::secrets::describe_counts(&self.totals()),
            places.join(", ")
        )
    }
}
