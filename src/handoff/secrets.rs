//! Secret redaction: every byte that enters a bundle passes through here first, so that
//! credentials never reach the store; each secret becomes a typed `[REDACTED:<kind>]`.
//!
//! The functions are pure and work on bytes (not `str`) so that binary attachments are
//! scanned as well as text. Detection is by pattern, so it errs on the side of redacting:
//! a false positive costs a little readability, a false negative leaks a credential into
//! every copy of the store.
//!
//! Kinds, most specific first (the order in [`KINDS`], which also breaks ties):
//!
//! | kind | what is replaced |
//! |---|---|
//! | `private_key_block` | `-----BEGIN [<LABEL> ]PRIVATE KEY[ BLOCK]-----` through the matching `-----END ...-----` (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP ... BLOCK); an unterminated block runs to the end of the input |
//! | `aws_secret_key` | the 40-char `[A-Za-z0-9/+]` value of `aws_secret_access_key` (any case) after `=`, `:` or `"key": "` |
//! | `anthropic_api_key` | `sk-ant-` + 20 or more `[A-Za-z0-9_-]` |
//! | `openai_api_key` | `sk-` or `sk-proj-` + 20 or more `[A-Za-z0-9_-]`, never `sk-ant-` |
//! | `github_token` | `gh[pousr]_` + 36 or more alphanumerics, `github_pat_` + 22 or more `[A-Za-z0-9_]` |
//! | `stripe_key` | `sk_live_`, `rk_live_`, `sk_test_`, `rk_test_` + 20 or more alphanumerics |
//! | `slack_token` | `xox[abposr]-` + 10 or more `[A-Za-z0-9-]` |
//! | `google_api_key` | `AIza` + 35 `[A-Za-z0-9_-]` |
//! | `aws_access_key` | `AKIA` or `ASIA` + 16 `[A-Z0-9]` |
//! | `gitlab_token` | `glpat-` + 20 or more `[A-Za-z0-9_-]` |
//! | `npm_token` | `npm_` + 36 alphanumerics |
//! | `huggingface_token` | `hf_` + 34 or more letters |
//! | `bearer_jwt` | a JWT: `eyJ` + base64url, `.`, base64url, `.`, base64url (a preceding `Bearer ` is kept) |
//! | `bearer_token` | an opaque token of 20 or more token68 chars after `Bearer ` |
//! | `url_credentials` | the password in `scheme://user:password@host` |
//! | `password_assignment` | the value assigned to a key ending in `password`, `passwd`, `pwd`, `secret`, `token`, `api_key`, `apikey`, `access_key`, `client_secret`, `private_key`, `account_key` (optionally + `_key`), any case, any prefix (`DB_PASSWORD`), with `=`, `:`, `:=` or `=>`; the key stays |
//!
//! Overlaps: key blocks are claimed first, then the other matches longest first (ties go
//! to the more specific kind); a match only redacts what no earlier one claimed, so nothing
//! is redacted twice. Text shaped like a placeholder is never touched, patterns never look
//! across one, and passes repeat until one finds nothing, so `redact(redact(x)) ==
//! redact(x)` with zero counts the second time.
//!
//! Values that merely stand for a secret (`password=`, `password=***`, `<redacted>`,
//! `${VAR}`, `$VAR`, `{{ var }}`) and values without a single letter or digit are left
//! alone. So are type annotations (`password: &str`, `token: Option<Token>`), which are
//! everywhere in code. A code expression assigned to a secret-named key
//! (`let token = next_token();`) is redacted: telling it from a literal would take a
//! parser per language, and a mangled line of code is cheaper than a leaked credential.
//! The word "password" in prose is never touched; `Password: hunter2` is.
//!
//! Transcripts are JSON lines, so a redaction must never break JSON: no span ends in the
//! middle of a backslash escape or crosses an unescaped `"`, and a raw JSON key (`"token":`)
//! only has a string value redacted, never `null`, a number or an object.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::bytes::Regex;

/// Every kind of secret this module finds, most specific first.
///
/// See the module documentation for the pattern behind each kind.
pub const KINDS: &[&str] = &[
    "private_key_block",
    "aws_secret_key",
    "anthropic_api_key",
    "openai_api_key",
    "github_token",
    "stripe_key",
    "slack_token",
    "google_api_key",
    "aws_access_key",
    "gitlab_token",
    "npm_token",
    "huggingface_token",
    "bearer_jwt",
    "bearer_token",
    "url_credentials",
    "password_assignment",
];

/// The result of [`redact`]: the cleaned bytes and how many secrets of each kind went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redaction {
    pub bytes: Vec<u8>,
    /// Only kinds that occurred; a kind with no secrets is absent, never zero.
    pub counts: BTreeMap<&'static str, u64>,
}

/// Replace every secret in `input` by `[REDACTED:<kind>]`.
pub fn redact(input: &[u8]) -> Redaction {
    // A placeholder changes what its neighbours look like to a pattern: the text after it
    // now starts a word. Passes repeat until one finds nothing, so that the result is
    // stable by construction. The second pass almost always finds nothing; each pass that
    // does removes text, and the cap only bounds a crafted input's cost.
    const MAX_PASSES: usize = 16;
    let mut result = Redaction {
        bytes: input.to_vec(),
        counts: BTreeMap::new(),
    };
    for _ in 0..MAX_PASSES {
        let pass = redact_once(&result.bytes);
        if pass.counts.is_empty() {
            break;
        }
        for (kind, n) in pass.counts {
            *result.counts.entry(kind).or_insert(0) += n;
        }
        result.bytes = pass.bytes;
    }
    result
}

/// `input` with each backslash escape `\n`, `\t`, `\r` replaced by two spaces.
fn neutralize_escapes(input: &[u8]) -> Vec<u8> {
    let mut view = input.to_vec();
    let mut i = 0;
    while i + 1 < view.len() {
        if view[i] == b'\\' && matches!(view[i + 1], b'n' | b't' | b'r') {
            view[i] = b' ';
            view[i + 1] = b' ';
            i += 2;
        } else {
            i += 1;
        }
    }
    view
}

/// One pass over `input`: every match found in it, without looking at the result.
fn redact_once(input: &[u8]) -> Redaction {
    let mut claimed = Claims::default();
    let mut gaps = Vec::new();
    let mut pos = 0;
    for m in PLACEHOLDER.find_iter(input) {
        claimed.insert(m.start(), m.end(), None);
        gaps.push(pos..m.start());
        pos = m.end();
    }
    gaps.push(pos..input.len());

    let mut candidates = private_key_blocks(input);
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
        candidates.extend(pattern_candidates(&view[gap.clone()], gap.start));
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

    let mut counts = BTreeMap::new();
    for c in candidates {
        // What is left of a match that another one partly claimed is redacted too,
        // unless it is only punctuation, spaces and escapes (a quote, a "\n"): no secret
        // is made of those, and keeping them keeps a second pass from finding more.
        let mut pieces = claimed.free_parts(c.start, c.end);
        pieces.retain(|&(s, e)| significant(&input[s..e]));
        if pieces.is_empty() {
            continue;
        }
        let kind = KINDS[c.rank];
        for (s, e) in pieces {
            claimed.insert(s, e, Some(kind));
        }
        *counts.entry(kind).or_insert(0) += 1;
    }

    let mut bytes = Vec::with_capacity(input.len());
    let mut pos = 0;
    for (&start, &(end, kind)) in &claimed.spans {
        let Some(kind) = kind else { continue };
        bytes.extend_from_slice(&input[pos..start]);
        bytes.extend_from_slice(placeholder(kind).as_bytes());
        pos = end;
    }
    bytes.extend_from_slice(&input[pos..]);
    Redaction { bytes, counts }
}

/// Count the secrets in `input` by kind, without keeping the redacted copy.
pub fn scan(input: &[u8]) -> BTreeMap<&'static str, u64> {
    redact(input).counts
}

/// Whether bytes hold a letter or digit that is not just the letter of an escape (`\n`).
fn significant(bytes: &[u8]) -> bool {
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

fn placeholder(kind: &str) -> String {
    format!("[REDACTED:{kind}]")
}

/// Disjoint claimed spans by start; `None` marks a placeholder found in the input.
#[derive(Default)]
struct Claims {
    spans: BTreeMap<usize, (usize, Option<&'static str>)>,
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

struct Candidate {
    start: usize,
    end: usize,
    rank: usize,
}

fn rank(kind: &str) -> usize {
    KINDS
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(KINDS.len() - 1)
}

/// Matches of every pattern rule in `text`, which starts at `offset` in the input.
fn pattern_candidates(text: &[u8], offset: usize) -> Vec<Candidate> {
    let mut out = Vec::new();
    if text.is_empty() {
        return out;
    }
    for rule in RULES.iter() {
        let rank = rank(rule.kind);
        for caps in rule.re.captures_iter(text) {
            let Some(whole) = caps.get(0) else { continue };
            // Rules with groups redact only the first group that took part (the value of
            // an assignment); rules without redact the whole match.
            let value = if caps.len() > 1 {
                (1..caps.len()).find_map(|i| caps.get(i))
            } else {
                Some(whole)
            };
            let Some(value) = value else { continue };
            if value.is_empty() || !(rule.keep)(whole.as_bytes(), value.as_bytes()) {
                continue;
            }
            out.push(Candidate {
                start: offset + value.start(),
                end: offset + value.end(),
                rank,
            });
        }
    }
    out
}

/// PEM and PGP private key blocks. The regex crate has no backreferences, so the END
/// line that matches a BEGIN line is looked up by hand.
fn private_key_blocks(input: &[u8]) -> Vec<Candidate> {
    let rank = rank("private_key_block");
    let mut out = Vec::new();
    let mut pos = 0;
    // END lines known to be absent from some earlier offset to the end: searching again
    // for each BEGIN would make a crafted input quadratic.
    let mut absent: Vec<Vec<u8>> = Vec::new();
    while let Some(caps) = PEM_BEGIN.captures_at(input, pos) {
        let Some(begin) = caps.get(0) else { break };
        let label = caps.get(1).map(|m| m.as_bytes()).unwrap_or_default();
        let block = caps.get(2).map(|m| m.as_bytes()).unwrap_or_default();
        let mut end_line = b"-----END ".to_vec();
        end_line.extend_from_slice(label);
        end_line.extend_from_slice(b"PRIVATE KEY");
        end_line.extend_from_slice(block);
        end_line.extend_from_slice(b"-----");
        let exact = if absent.contains(&end_line) {
            None
        } else {
            let found = find(&input[begin.end()..], &end_line);
            if found.is_none() {
                absent.push(end_line.clone());
            }
            found
        };
        let end = exact
            .map(|i| begin.end() + i + end_line.len())
            .or_else(|| PEM_ANY_END.find_at(input, begin.end()).map(|m| m.end()))
            // No END line at all: the key may run on to the end, and cutting it short
            // would leak the rest of it. Fail closed.
            .unwrap_or(input.len());
        out.push(Candidate {
            start: begin.start(),
            end,
            rank,
        });
        pos = end;
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

struct Rule {
    kind: &'static str,
    re: Regex,
    /// Whether a match (whole match, redacted value) is a secret worth redacting.
    keep: fn(&[u8], &[u8]) -> bool,
}

fn always(_: &[u8], _: &[u8]) -> bool {
    true
}

fn regex(pattern: &str) -> Regex {
    // Every pattern is a constant checked by the tests, so a failure here is a bug in this
    // file, not bad input.
    Regex::new(pattern).expect("secret pattern must compile")
}

/// Anything shaped like our own placeholder (any kind name) is left alone.
static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| regex(r"(?-u)\[REDACTED:[a-z0-9_]+\]"));

static PEM_BEGIN: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?-u)-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----"));

static PEM_ANY_END: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?-u)-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"));

/// Key names whose value is a secret. A `_key` suffix is allowed so that `SECRET_KEY`
/// and `TOKEN_KEY` count, but not other suffixes: `token_count` and `max_tokens` are not
/// secrets.
const KEY: &str = r"[A-Za-z0-9_.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret|private[_-]?key|account[_-]?key)(?:[_-]?key)?";

/// The value forms of an assignment, each one capture group, tried in order:
/// `"double quoted"` (JSON escapes kept whole; never starting like the JSON punctuation
/// between two strings, so `"?token=", "next": 1` is not taken for a quoted value),
/// `\"JSON-escaped quotes\"` (a shell line inside a transcript string), `'single quoted'`,
/// and bare, which stops at whitespace, a quote or an escaped newline, and never starts
/// with `{`, `[`, `=` or `:` (an object, `==`, `::`).
const VALUE: &str = r#"(?:"((?:[^"\\\r\n\s,:}\]]|\\[^\r\n])(?:[^"\\\r\n]|\\[^\r\n])*)"|\\"((?:[^"\\\r\n]|\\[^"\r\n])+)\\"|'((?:[^'"\\\r\n]|\\[^\r\n])+)'|((?:[^\s"'\\{\[=:]|\\[^nrt"'\s])(?:[^\s"'\\]|\\[^nrt"'\s])*))"#;

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        Rule {
            kind: "aws_secret_key",
            re: regex(
                r#"(?-u)(?i:aws_secret_access_key)(?:\\?["'])?[ \t]*(?::=|=>|=|:)[ \t]*(?:\\?["'])?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            ),
            keep: always,
        },
        Rule {
            kind: "anthropic_api_key",
            re: regex(r"(?-u)sk-ant-[A-Za-z0-9_-]{20,}"),
            keep: always,
        },
        Rule {
            kind: "openai_api_key",
            re: regex(r"(?-u)(?:\bsk-|sk-proj-)[A-Za-z0-9_-]{20,}"),
            keep: |m, _| !m.starts_with(b"sk-ant-"),
        },
        Rule {
            kind: "github_token",
            re: regex(r"(?-u)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
            keep: always,
        },
        Rule {
            kind: "stripe_key",
            re: regex(r"(?-u)\b[sr]k_(?:live|test)_[A-Za-z0-9]{20,}"),
            keep: always,
        },
        Rule {
            kind: "slack_token",
            re: regex(r"(?-u)xox[abposr]-[A-Za-z0-9-]{10,}"),
            keep: always,
        },
        Rule {
            kind: "google_api_key",
            re: regex(r"(?-u)AIza[0-9A-Za-z_-]{35}"),
            keep: always,
        },
        Rule {
            kind: "aws_access_key",
            re: regex(r"(?-u)(?:AKIA|ASIA)[A-Z0-9]{16}"),
            keep: always,
        },
        Rule {
            kind: "gitlab_token",
            re: regex(r"(?-u)glpat-[A-Za-z0-9_-]{20,}"),
            keep: always,
        },
        Rule {
            kind: "npm_token",
            re: regex(r"(?-u)\bnpm_[A-Za-z0-9]{36}"),
            keep: always,
        },
        Rule {
            kind: "huggingface_token",
            re: regex(r"(?-u)\bhf_[A-Za-z]{34,}"),
            keep: always,
        },
        Rule {
            kind: "bearer_jwt",
            re: regex(r"(?-u)eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"),
            keep: always,
        },
        Rule {
            kind: "bearer_token",
            re: regex(r"(?-u)\b(?i:bearer)[ \t]+([A-Za-z0-9._~+/-]{20,}=*)"),
            keep: always,
        },
        Rule {
            kind: "url_credentials",
            re: regex(r#"(?-u)[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@"'<>\\]*:([^\s/@"'<>\\]+)@"#),
            keep: |_, v| !is_placeholder_value(v),
        },
        // A raw JSON key: only a string value is a secret, and anything else (null, a
        // number, an object) must stay intact for the line to remain JSON.
        Rule {
            kind: "password_assignment",
            re: regex(&format!(
                r#"(?-u)(?i)\b{KEY}"[ \t]*[:=][ \t]*"((?:[^"\\\r\n]|\\[^\r\n])+)""#
            )),
            keep: |_, v| !is_placeholder_value(v),
        },
        // A typed declaration with a value, `password: str = "..."`: the type is not the
        // secret, the value is.
        Rule {
            kind: "password_assignment",
            re: regex(&format!(
                r"(?-u)(?i)\b{KEY}[ \t]*:[ \t]*[A-Za-z_][A-Za-z0-9_.<>\[\]&']*[ \t]*=[ \t]*{VALUE}"
            )),
            keep: |_, v| !is_placeholder_value(v),
        },
        Rule {
            kind: "password_assignment",
            re: regex(&format!(
                r#"(?-u)(?i)\b{KEY}(?:\\["']|')?[ \t]*(?::=|=>|=|:)[ \t]*{VALUE}"#
            )),
            keep: keep_assignment,
        },
    ]
});

fn keep_assignment(whole: &[u8], value: &[u8]) -> bool {
    if is_placeholder_value(value) {
        return false;
    }
    let key_len = whole
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || b"_.-".contains(b)))
        .unwrap_or(whole.len());
    let key = whole[..key_len].to_ascii_lowercase();
    // `PWD=/home/me` in an environment dump is the working directory, not a password.
    if (key == b"pwd" || key == b"oldpwd") && matches!(value.first(), Some(b'/' | b'~')) {
        return false;
    }
    let after_key = &whole[key_len..];
    let sep = after_key
        .iter()
        .find(|b| !matches!(b, b'"' | b'\'' | b'\\' | b' ' | b'\t'));
    let colon = sep == Some(&b':') && !after_key.windows(2).any(|w| w == b":=");
    // `password: &str` in a signature or `token: Token` in a struct names a type; code
    // like this is common in transcripts and redacting it helps nobody.
    !(colon && looks_like_type(value))
}

fn looks_like_type(value: &[u8]) -> bool {
    let v = value
        .iter()
        .rposition(|b| !b",;)".contains(b))
        .map(|i| &value[..=i])
        .unwrap_or_default();
    const TYPES: &[&[u8]] = &[
        b"String",
        b"str",
        b"string",
        b"bool",
        b"boolean",
        b"number",
        b"any",
        b"int",
        b"bytes",
        b"usize",
        b"u8",
        b"u16",
        b"u32",
        b"u64",
        b"u128",
        b"i32",
        b"i64",
        b"Token",
        b"Secret",
        b"SecretString",
        b"Password",
    ];
    const GENERICS: &[&[u8]] = &[
        b"Option<",
        b"Vec<",
        b"Box<",
        b"Arc<",
        b"Rc<",
        b"Cow<",
        b"Optional[",
        b"List[",
    ];
    v.first() == Some(&b'&') || TYPES.contains(&v) || GENERICS.iter().any(|g| v.starts_with(g))
}

/// Values that stand for a secret rather than being one: `***`, `<redacted>`, `${VAR}`,
/// `$VAR`, `{{ var }}`. When unsure we redact, so this list stays short.
fn is_placeholder_value(value: &[u8]) -> bool {
    let v = value;
    let var_name = |s: &[u8]| {
        !s.is_empty()
            && !s[0].is_ascii_digit()
            && s.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
    };
    v.iter().all(|b| *b == b'*')
        || (v.starts_with(b"<") && v.ends_with(b">"))
        || (v.starts_with(b"${") && v.ends_with(b"}"))
        || (v.starts_with(b"{{") && v.ends_with(b"}}"))
        || (v.starts_with(b"$") && var_name(&v[1..]))
}

#[cfg(test)]
mod escape_tests {
    use super::*;

    #[test]
    fn tokens_right_after_a_json_escape_are_found() {
        let line = br#"{"out":"x\nsk-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6Kl9No2Qr5T\tnpm_UniqueNpmToken0123456789abcdefghijkl\rhf_abcdefghijklmnopqrstuvwxyzABCDEFGH\nsk_live_abcdefghijklmnopqrstuvwx"}"#;
        let r = redact(line);
        for secret in [
            &b"sk-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6Kl9No2Qr5T"[..],
            b"npm_UniqueNpmToken0123456789abcdefghijkl",
            b"hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
            b"sk_live_abcdefghijklmnopqrstuvwx",
        ] {
            assert!(
                !r.bytes.windows(secret.len()).any(|w| w == secret),
                "{}",
                String::from_utf8_lossy(&r.bytes)
            );
        }
        assert!(serde_json::from_slice::<serde_json::Value>(&r.bytes).is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &Redaction) -> String {
        String::from_utf8_lossy(&r.bytes).into_owned()
    }

    fn counts(pairs: &[(&'static str, u64)]) -> BTreeMap<&'static str, u64> {
        pairs.iter().copied().collect()
    }

    /// Redact, check every secret is gone and the result is stable, and return the text.
    fn check(input: &str, secrets: &[&str], expected: &[(&'static str, u64)]) -> String {
        let r = redact(input.as_bytes());
        let out = text(&r);
        for s in secrets {
            assert!(!out.contains(s), "secret {s:?} survived in {out:?}");
        }
        assert_eq!(
            r.counts,
            counts(expected),
            "counts for {input:?} -> {out:?}"
        );
        let again = redact(&r.bytes);
        assert_eq!(again.bytes, r.bytes, "not idempotent: {out:?}");
        assert!(
            again.counts.is_empty(),
            "second pass found {:?}",
            again.counts
        );
        assert_eq!(scan(input.as_bytes()), r.counts);
        out
    }

    const AWS_ID: &str = "AKIAIOSFODNN7EXAMPLE";
    const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    const GH: &str = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789";
    const GH_PAT: &str = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz";
    const ANT: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz_0123456789-abc";
    const OAI: &str = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
    const OAI_OLD: &str = "sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ab";
    const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
    const SLACK: &str = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp";
    const STRIPE: &str = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";
    const GOOGLE: &str = "AIzaSyA-1234567890abcdefghijklmnopqrstu";
    const GITLAB: &str = "glpat-AbCdEfGhIjKlMnOpQrSt";
    const NPM: &str = "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
    const HF: &str = "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh";

    #[test]
    fn patterns_compile_and_kinds_are_known() {
        LazyLock::force(&RULES);
        LazyLock::force(&PLACEHOLDER);
        for rule in RULES.iter() {
            assert!(KINDS.contains(&rule.kind), "{}", rule.kind);
        }
        for kind in KINDS {
            assert!(
                !PLACEHOLDER.is_match(kind.as_bytes())
                    && PLACEHOLDER.is_match(placeholder(kind).as_bytes())
            );
        }
    }

    #[test]
    fn dotenv_file() {
        let env = format!(
            "# local settings\nAWS_ACCESS_KEY_ID={AWS_ID}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\n\
             GITHUB_TOKEN={GH}\nANTHROPIC_API_KEY={ANT}\nOPENAI_API_KEY={OAI}\n\
             DB_PASSWORD=hunter2-Very$ecret\nSTRIPE_SECRET_KEY={STRIPE}\nDEBUG=true\n"
        );
        let out = check(
            &env,
            &[
                AWS_ID,
                AWS_SECRET,
                GH,
                ANT,
                OAI,
                "hunter2-Very$ecret",
                STRIPE,
            ],
            &[
                ("aws_access_key", 1),
                ("aws_secret_key", 1),
                ("github_token", 1),
                ("anthropic_api_key", 1),
                ("openai_api_key", 1),
                ("password_assignment", 1),
                ("stripe_key", 1),
            ],
        );
        assert!(out.contains("AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]\n"));
        assert!(out.contains("ANTHROPIC_API_KEY=[REDACTED:anthropic_api_key]\n"));
        assert!(out.contains("DB_PASSWORD=[REDACTED:password_assignment]\n"));
        assert!(out.contains("DEBUG=true\n# local") || out.ends_with("DEBUG=true\n"));
        assert!(out.starts_with("# local settings\n"));
    }

    #[test]
    fn json_config_stays_json() {
        let config = format!(
            r#"{{"aws_secret_access_key": "{AWS_SECRET}", "client_secret": "s3cr3t \"quoted\"",
  "google": {{"key": "{GOOGLE}"}}, "token": null, "max_tokens": 4096, "password": "",
  "apikey": "${{API_KEY}}", "slack": "{SLACK}", "dsn": "postgres://app:pa55word@db:5432/app"}}"#
        );
        let out = check(
            &config,
            &[AWS_SECRET, "s3cr3t", GOOGLE, SLACK, "pa55word"],
            &[
                ("aws_secret_key", 1),
                ("password_assignment", 1),
                ("google_api_key", 1),
                ("slack_token", 1),
                ("url_credentials", 1),
            ],
        );
        let value: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
        assert_eq!(value["token"], serde_json::Value::Null);
        assert_eq!(value["max_tokens"], 4096);
        assert_eq!(value["apikey"], "${API_KEY}");
        assert_eq!(value["client_secret"], "[REDACTED:password_assignment]");
        assert_eq!(
            value["dsn"],
            "postgres://app:[REDACTED:url_credentials]@db:5432/app"
        );
    }

    #[test]
    fn shell_history_and_transcript_lines() {
        let history = format!(
            "  501  export GH_TOKEN={GH_PAT}\n  502  curl -u admin:x https://admin:Tr0ub4dor@example.com/api\n  \
             503  mysql -u root --password='c0rrect horse' app\n  504  ls -la\n"
        );
        let out = check(
            &history,
            &[GH_PAT, "Tr0ub4dor", "c0rrect horse"],
            &[
                ("github_token", 1),
                ("url_credentials", 1),
                ("password_assignment", 1),
            ],
        );
        assert!(out.contains("--password='[REDACTED:password_assignment]' app"));
        assert!(out.contains("504  ls -la"));

        // The same commands as a transcript event: the shell line is inside a JSON
        // string, so its quotes are escaped and redaction must keep the line valid JSON.
        let event = serde_json::json!({
            "role": "tool",
            "content": format!("$ export PASSWORD=\"open sesame\" TOKEN=abc123\n$ echo {OAI_OLD}\nAuthorization: Bearer {JWT}\n"),
        })
        .to_string();
        let out = check(
            &event,
            &["open sesame", "abc123", OAI_OLD, JWT],
            &[
                ("password_assignment", 2),
                ("openai_api_key", 1),
                ("bearer_jwt", 1),
            ],
        );
        let back: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
        let content = back["content"].as_str().unwrap_or_default();
        assert!(
            content.contains("PASSWORD=\"[REDACTED:password_assignment]\""),
            "{content}"
        );
        assert!(content.contains("Authorization: Bearer [REDACTED:bearer_jwt]\n"));
    }

    #[test]
    fn jwt_with_and_without_bearer() {
        let http =
            format!("GET /v1/me HTTP/1.1\r\nAuthorization: Bearer {JWT}\r\nX-Id-Token: {JWT}\r\n");
        let out = check(&http, &[JWT], &[("bearer_jwt", 2)]);
        assert!(out.contains("Authorization: Bearer [REDACTED:bearer_jwt]\r\n"));
        let opaque = "Authorization: bearer 8f14e45fceea167a5a36dedd4bea2543aa\n";
        check(
            opaque,
            &["8f14e45fceea167a5a36dedd4bea2543aa"],
            &[("bearer_token", 1)],
        );
    }

    #[test]
    fn pem_blocks() {
        let rsa = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgwMbRvI0MBZhpF\n-----END RSA PRIVATE KEY-----";
        let ssh = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----";
        let pgp = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF8Vq8sBCAC5\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----";
        let cert = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----";
        let file = format!("key:\n{rsa}\nssh:\n{ssh}\npgp:\n{pgp}\ncert:\n{cert}\nend\n");
        let out = check(
            &file,
            &["MIIEpAIBAAKCAQEA", "b3BlbnNzaC1rZXkt", "lQOYBF8Vq8sBCAC5"],
            &[("private_key_block", 3)],
        );
        assert_eq!(
            out,
            format!(
                "key:\n[REDACTED:private_key_block]\nssh:\n[REDACTED:private_key_block]\n\
                 pgp:\n[REDACTED:private_key_block]\ncert:\n{cert}\nend\n"
            )
        );
        // A service-account JSON holds its key with escaped newlines.
        let json = r#"{"type":"service_account","private_key":"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n","client_email":"x@y.iam"}"#;
        let out = check(json, &["MIIEvQIBADANBgkq"], &[("private_key_block", 1)]);
        assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
    }

    #[test]
    fn mismatched_end_line_still_ends_the_block() {
        let text = "-----BEGIN RSA PRIVATE KEY-----\nQUJDREVG\n-----END PRIVATE KEY-----\nafter\n";
        let out = check(text, &["QUJDREVG"], &[("private_key_block", 1)]);
        assert_eq!(out, "[REDACTED:private_key_block]\nafter\n");
        // Many BEGIN lines with no END of their own stay linear, not quadratic.
        let many =
            "-----BEGIN DSA PRIVATE KEY-----\nx\n-----END EC PRIVATE KEY-----\n".repeat(20_000);
        let r = redact(many.as_bytes());
        assert_eq!(r.counts, counts(&[("private_key_block", 20_000)]));
    }

    #[test]
    fn more_token_kinds() {
        let text = format!(
            "git remote add origin https://oauth2:{GITLAB}@gitlab.com/a/b.git\n\
             //registry.npmjs.org/:_authToken={NPM}\nHF_TOKEN={HF}\n"
        );
        check(
            &text,
            &[GITLAB, NPM, HF],
            &[
                ("gitlab_token", 1),
                ("npm_token", 1),
                ("huggingface_token", 1),
            ],
        );
    }

    #[test]
    fn unterminated_key_block_fails_closed() {
        let text = "here it is:\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY/PuoAoGCCqGSM49\nand then the output was cut";
        let out = check(
            text,
            &["MHcCAQEEIIrYSSNQ", "cut"],
            &[("private_key_block", 1)],
        );
        assert_eq!(out, "here it is:\n[REDACTED:private_key_block]");
    }

    #[test]
    fn anthropic_wins_over_openai() {
        let out = check(
            &format!("key {ANT} and {OAI_OLD}"),
            &[ANT, OAI_OLD],
            &[("anthropic_api_key", 1), ("openai_api_key", 1)],
        );
        assert_eq!(
            out,
            "key [REDACTED:anthropic_api_key] and [REDACTED:openai_api_key]"
        );
    }

    #[test]
    fn assignment_keeps_key_and_skips_placeholders() {
        let out = check(
            "password=\npassword=***\npassword=<redacted>\npassword=${DB_PASS}\nPassword: $DB_PASS\n\
             db.password = \"s3cret!\"\nSECRET_KEY='django-insecure-xyz'\ntoken: abc.def\n\
             pwd=/home/me\nServer=db;Uid=sa;Pwd=Sup3r;\n",
            &["s3cret!", "django-insecure-xyz", "abc.def", "Sup3r"],
            &[("password_assignment", 4)],
        );
        assert!(out.starts_with("password=\npassword=***\npassword=<redacted>\npassword=${DB_PASS}\nPassword: $DB_PASS\n"));
        assert!(out.contains("db.password = \"[REDACTED:password_assignment]\"\n"));
        assert!(out.contains("SECRET_KEY='[REDACTED:password_assignment]'\n"));
        assert!(out.contains("pwd=/home/me\n"));
    }

    #[test]
    fn generic_match_covering_a_token_removes_all_of_it() {
        let input = format!("token={GH}::extra-bits\n");
        let out = check(&input, &[GH, "extra-bits"], &[("password_assignment", 1)]);
        assert_eq!(out, "token=[REDACTED:password_assignment]\n");
        // Exactly the token: the specific kind names the placeholder.
        let out = check(&format!("token={GH}\n"), &[GH], &[("github_token", 1)]);
        assert_eq!(out, "token=[REDACTED:github_token]\n");
    }

    #[test]
    fn placeholders_in_input_are_left_alone() {
        let input = "password=[REDACTED:password_assignment] key=[REDACTED:openai_api_key]\nhttps://u:[REDACTED:url_credentials]@h\n";
        check(input, &[], &[]);
        assert_eq!(redact(input.as_bytes()).bytes, input.as_bytes());
    }

    #[test]
    fn ordinary_code_and_prose() {
        let rust = r#"//! Sessions.
/// Check the password field before the token expires; see the secret rotation doc.
pub fn login(user: &str, password: &str, token: Option<Token>) -> Result<Session, Error> {
    let max_tokens = 4096;
    let token_count = tokens.len();
    if token == expected { return Err(Error::usage("bad password")); }
    let kind = token::Kind::Secret;
    let x = api.access_key_id();
    Ok(Session { user: user.to_string(), token })
}
"#;
        let r = redact(rust.as_bytes());
        assert_eq!(text(&r), rust, "{:?}", r.counts);

        let prose = "Rotate the API key and the password in the vault. The token field is \
                     optional. Bearer tokens are short-lived. Use sk-learn for models.\n";
        assert_eq!(text(&redact(prose.as_bytes())), prose);
    }

    #[test]
    fn code_assigning_an_expression_is_redacted() {
        // `let token = next_token();` has a code expression, not a secret, on the right.
        // We cannot tell the two apart without parsing every language, so it is redacted:
        // a mangled line of code beats a leaked credential.
        let out = check(
            "let token = next_token();\nSession { password: password.into() }\n",
            &["next_token", "password.into"],
            &[("password_assignment", 2)],
        );
        assert_eq!(
            out,
            "let token = [REDACTED:password_assignment]\n\
             Session { password: [REDACTED:password_assignment] }\n"
        );
    }

    #[test]
    fn typed_declaration_redacts_the_value() {
        let out = check(
            "API_TOKEN: str = \"tok_live_abcdef\"\n",
            &["tok_live_abcdef"],
            &[("password_assignment", 1)],
        );
        assert_eq!(out, "API_TOKEN: str = \"[REDACTED:password_assignment]\"\n");
    }

    #[test]
    fn binary_input_is_scanned() {
        let mut blob = vec![0u8, 159, 146, 150, 255, 0];
        blob.extend_from_slice(AWS_ID.as_bytes());
        blob.extend_from_slice(&[0xc3, 0x28, 0]);
        let r = redact(&blob);
        assert_eq!(r.counts, counts(&[("aws_access_key", 1)]));
        assert!(
            !r.bytes
                .windows(AWS_ID.len())
                .any(|w| w == AWS_ID.as_bytes())
        );
        assert!(r.bytes.starts_with(&[0u8, 159, 146, 150, 255, 0]));
        assert!(r.bytes.ends_with(&[0xc3, 0x28, 0]));
    }

    #[test]
    fn every_kind_is_exercised() {
        let all = format!(
            "{AWS_ID} aws_secret_access_key: {AWS_SECRET}\n{GH} {ANT} {OAI}\n\
             -----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n{JWT} {SLACK} {STRIPE} {GOOGLE}\n\
             Bearer abcdefghijklmnopqrstuvwxyz0123 password=x https://u:p@h\n\
             {GITLAB} {NPM} {HF}\n"
        );
        let found = scan(all.as_bytes());
        for kind in KINDS {
            assert_eq!(found.get(kind), Some(&1), "{kind}: {found:?}");
        }
    }

    #[test]
    fn mixtures_are_idempotent_and_leak_nothing() {
        let pieces: Vec<String> = vec![
            format!("token={GH}"),
            format!("\"password\": \"{OAI}\""),
            format!("Bearer {JWT}"),
            "https://me:Pa55-w0rd%2F.x@host/".to_string(),
            format!("AWS_SECRET_ACCESS_KEY={AWS_SECRET}"),
            "-----BEGIN RSA PRIVATE KEY-----\nQUJD\n-----END RSA PRIVATE KEY-----".to_string(),
            format!("api_key='{ANT}'"),
            format!("{SLACK},{STRIPE};{GOOGLE}"),
            format!("\\\"secret\\\": \\\"{AWS_ID}\\\""),
            "password: [REDACTED:x]".to_string(),
            "let token = make();".to_string(),
            " ".to_string(),
            "\n".to_string(),
            "=".to_string(),
            ":".to_string(),
            "\"".to_string(),
            "@".to_string(),
            "word ".to_string(),
            "-----BEGIN EC PRIVATE KEY-----\nQUJD".to_string(),
            "[REDACTED:github_token]".to_string(),
            "Bearer ".to_string(),
            "sk-".to_string(),
            "\\".to_string(),
            "'".to_string(),
            "password".to_string(),
            format!("{GITLAB} {NPM} {HF} "),
        ];
        let secrets = [
            GH,
            OAI,
            JWT,
            AWS_SECRET,
            "Pa55-w0rd",
            "QUJD",
            ANT,
            SLACK,
            STRIPE,
            GOOGLE,
            AWS_ID,
            GITLAB,
            NPM,
            HF,
        ];
        // A small deterministic generator; the test must not depend on a seed source.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..4000 {
            let mut input = String::new();
            for _ in 0..6 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                input.push_str(&pieces[(state % pieces.len() as u64) as usize]);
            }
            let r = redact(input.as_bytes());
            let out = text(&r);
            for s in secrets {
                assert!(!out.contains(s), "{s:?} leaked from {input:?}: {out:?}");
            }
            let again = redact(&r.bytes);
            assert_eq!(text(&again), out, "from {input:?}");
            assert!(again.counts.is_empty(), "{input:?}: {:?}", again.counts);

            // The same text as a string in a JSON line, the way transcripts hold it: the
            // line must stay JSON. An unterminated key block is exempt: it fails closed
            // and takes the rest of the input, closing quote included.
            if input.contains("-----BEGIN EC") {
                continue;
            }
            let line = serde_json::json!({ "text": input }).to_string();
            let r = redact(line.as_bytes());
            let out = text(&r);
            let back: serde_json::Value = match serde_json::from_str(&out) {
                Ok(v) => v,
                Err(e) => panic!("{e}: {line} -> {out}"),
            };
            let inner = back["text"].as_str().unwrap_or_default();
            for s in secrets {
                assert!(!inner.contains(s), "{s:?} leaked from {line}: {out}");
            }
            assert_eq!(redact(&r.bytes).bytes, r.bytes, "from {line}");
        }
    }
}
