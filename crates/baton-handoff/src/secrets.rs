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
//! | `private_key_block` | `-----BEGIN [<LABEL> ]PRIVATE KEY[ BLOCK]-----` through the matching `-----END ...-----` (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP ... BLOCK); an unterminated block runs to the end of the input. Also such a block base64-encoded: a run starting a word with `LS0tLS1CRUdJTi` that decodes to a private key's BEGIN line (not a certificate's or a public key's), on across wrapped lines of 60 or more characters (`secrets/key_blocks.rs`) |
//! | `aws_secret_key` | the 40-char `[A-Za-z0-9/+]` value of `aws_secret_access_key` (any case) after `=`, `:` or `"key": "`; or a 40-char `[A-Za-z0-9/+]` word with upper and lower case and a digit, `/` or `+`, within 64 characters after an `AKIA`/`ASIA` key id on the same line |
//! | `anthropic_api_key` | `sk-ant-` + 20 or more `[A-Za-z0-9_-]` (a `/` or `\/` inside is taken too) |
//! | `openai_api_key` | `sk-` or `sk-proj-` + 20 or more `[A-Za-z0-9_-]` in upper and lower case, never `sk-ant-` |
//! | `github_token` | `gh[pousr]_` + 36 or more alphanumerics, `github_pat_` + 22 or more `[A-Za-z0-9_]` |
//! | `stripe_key` | `sk_` or `rk_` + `live_`, `test_` or `prod_` + 20 or more alphanumerics |
//! | `slack_token` | `xox[abposre]-` + 10 or more `[A-Za-z0-9-]`, `xapp-N-...`, `hooks.slack.com/services/...` webhooks |
//! | `google_api_key` | `AIza` + 35 `[A-Za-z0-9_-]` |
//! | `aws_access_key` | `AKIA`, `ASIA`, `ABIA`, `ACCA` or `A3T` + one more `[A-Z0-9]`, then 16 `[A-Z0-9]` |
//! | `gitlab_token` | `glpat-`, `glptt-`, `glrt-`, `gldt-`, `glcbt-`, `glft-`, `glimt-`, `gloas-`, `glsoat-` + 20 or more `[A-Za-z0-9_-]` |
//! | `npm_token` | `npm_` + 36 alphanumerics |
//! | `huggingface_token` | `hf_` or `api_org_` + 34 or more letters |
//! | `sendgrid_api_key` | `SG.` + 22 + `.` + 43 `[A-Za-z0-9_-]` |
//! | `pypi_token` | `pypi-AgEIcHlwaS5vcmc` + 50 or more `[A-Za-z0-9_-]` |
//! | `twilio_key` | `SK` or `AC` + 32 hex digits, a whole word |
//! | `digitalocean_token` | `dop_v1_`, `doo_v1_`, `dor_v1_` + 64 hex digits |
//! | `shopify_token` | `shpat_`, `shpca_`, `shppa_`, `shpss_` + 32 hex digits |
//! | `age_secret_key` | `AGE-SECRET-KEY-1` + 58 bech32 characters |
//! | `vault_token` | `hvs.` or `hvb.` + 90 or more `[A-Za-z0-9_-]` |
//! | `doppler_token` | `dp.pt.`, `dp.st.`, `dp.sa.`, `dp.ct.`, `dp.scim.`, `dp.audit.` + 40 to 44 alphanumerics |
//! | `databricks_token` | `dapi` + 32 hex digits |
//! | `linear_api_key` | `lin_api_` + 40 alphanumerics |
//! | `postman_api_key` | `PMAK-` + 24 hex + `-` + 34 hex |
//! | `pulumi_token` | `pul-` + 40 hex digits |
//! | `square_token` | `sq0atp-` + 22, `sq0csp-` + 43, `EAAA` + 60 `[A-Za-z0-9_-]` |
//! | `grafana_token` | `glc_` + 32 or more base64, `glsa_` + 32 alphanumerics + `_` + 8 hex |
//! | `sentry_token` | `sntrys_` or `sntryu_` + 40 or more token characters |
//! | `new_relic_key` | `NRAK-`, `NRII-`, `NRJS-` + 27 or more alphanumerics |
//! | `mailchimp_api_key` | 32 hex digits + `-us` + a data-centre number, a whole word |
//! | `basic_auth` | the credentials of `Authorization: Basic <base64>` (header, curl line, JSON or YAML); the scheme stays |
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
//! The generic rules (`password_assignment`, `url_credentials`) take a literal value
//! only (`secrets/values.rs`, after gitleaks' generic-api-key allowlists; issue 29):
//! values that merely stand for a secret (`password=`, `***`, `<redacted>`, `${VAR}`,
//! `$VAR`, `{{ .Values.x }}`, `%(x)s`, `os.environ[...]`, `process.env.X`), code (a
//! call `getPassword()`, an index, a dotted path `self.token`), type annotations
//! (`password: &str`, `token: Option<Token>`), words and names (letters and `_.-`
//! alone, as a struct tag's `json:"password"`, `pwd: Jim`, or prose in a string
//! literal), and values of fewer than 4 letters or digits (`accesskey="n"`) are left
//! alone. `password = "hunter2xyz"`, `Pwd=Sup3r;` and `SECRET_KEY=4f9a...` are redacted.
//! Binary content (a NUL among the first 8000 bytes, as git and ripgrep tell) is not run
//! through the generic rules at all ([`Content`]); the token formats still are.
//!
//! Every token rule also takes a `/` or `\/` and more token characters right after the
//! token, and every counted run of a rule reads JSON's `\/` (as the `/` it stands for
//! where the run may hold one, as nothing where it may not), so a slash escape cannot cut
//! a token in two, before the rule's minimum or after it. JSON strings are scanned
//! decoded as well (see `secrets/json.rs`): `\u0067hp_...` or a surrogate pair inside a
//! token hides nothing. A secret cut across adjacent text blocks of one message is found
//! in the blocks joined (`secrets/fragments.rs`) and replaced in each. One Aho-Corasick pass over the text looks for every rule's anchors (literals
//! one of which each match contains); only the rules whose anchors occur run their
//! regex, and a rule's regex is compiled the first time it runs, so a command that scans
//! little compiles little. The patterns themselves are in `secrets/rules.rs`.
//!
//! Transcripts are JSON lines, so a redaction must never break JSON: no span ends in the
//! middle of a backslash escape or crosses an unescaped `"`, and a raw JSON key (`"token":`)
//! only has a string value redacted, never `null`, a number or an object.

use std::collections::BTreeMap;

mod claims;
pub mod files;
mod fragments;
mod json;
mod key_blocks;
mod prefilter;
mod rules;
mod stream;
mod values;

pub use stream::{CHUNK as STREAM_CHUNK, scan_reader};

use claims::find_once;

/// Redacts everything one bundle is made of (file bytes, file names, manifest fields),
/// adding up the kinds found, so that every writer scans the same way and reports (or
/// refuses) once: the one scrub loop.
#[derive(Debug, Default)]
pub struct Scrubber {
    /// Secrets found so far, by kind.
    pub found: BTreeMap<&'static str, u64>,
}

impl Scrubber {
    /// `input` with its secrets replaced by placeholders.
    pub fn bytes(&mut self, input: &[u8]) -> Vec<u8> {
        let redaction = redact(input);
        for (kind, n) in redaction.counts {
            *self.found.entry(kind).or_default() += n;
        }
        redaction.bytes
    }

    /// A text with its secrets replaced (placeholders are ASCII, so UTF-8 stays UTF-8;
    /// a lossy decode only guards against a rule ever cutting inside a character).
    pub fn text(&mut self, input: &str) -> String {
        let bytes = self.bytes(input.as_bytes());
        match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }

    /// Whether any secret was found.
    pub fn found_any(&self) -> bool {
        !self.found.is_empty()
    }

    /// With `block`, refuse (exit 6) when anything was found; kinds and counts, never values.
    pub fn refuse_if(&self, block: bool) -> baton_error::Result<()> {
        if block && self.found_any() {
            return Err(refusal(&self.found));
        }
        Ok(())
    }
}

/// The refusal of a write that found secrets under `--secrets block` (exit 6).
pub fn refusal(found: &BTreeMap<&'static str, u64>) -> baton_error::Error {
    baton_error::Error::new(
        baton_error::ErrorKind::Security,
        format!(
            "refusing to save: the handoff contains secrets ({})",
            describe_counts(found)
        ),
    )
    .with_hint("remove them, or save with --secrets redact to replace them by placeholders")
}

/// "aws_access_key: 1, github_token: 2": kinds and counts, never values.
pub fn describe_counts(counts: &BTreeMap<&'static str, u64>) -> String {
    counts
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

use rules::PEM_BEGIN;

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
    "sendgrid_api_key",
    "pypi_token",
    "twilio_key",
    "digitalocean_token",
    "shopify_token",
    "age_secret_key",
    "vault_token",
    "doppler_token",
    "databricks_token",
    "linear_api_key",
    "postman_api_key",
    "pulumi_token",
    "square_token",
    "grafana_token",
    "sentry_token",
    "new_relic_key",
    "mailchimp_api_key",
    "basic_auth",
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
    redact_as(input, Content::of(input))
}

/// [`redact`] of `input` taken as `content` (a chunk of a stream is what the stream's
/// start says it is).
pub fn redact_as(input: &[u8], content: Content) -> Redaction {
    redact_at_depth(input, 0, content)
}

/// How many leading bytes tell binary content from text: git's `buffer_is_binary` and
/// ripgrep look for a NUL byte among the first 8000.
pub const BINARY_SNIFF: usize = 8000;

/// What a scanned input is: text, or binary (git's test). The generic rules
/// (`password_assignment`, `url_credentials`: a key or a scheme, then any value) do not
/// run over binary content, where their anchors occur by chance (a 256 MiB file of
/// random bytes held a `pwd=` match about 2 times in 3); the token formats with fixed
/// prefixes and key blocks still do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    Text,
    Binary,
}

impl Content {
    /// Binary when a NUL byte occurs among the first [`BINARY_SNIFF`] bytes.
    pub fn of(input: &[u8]) -> Content {
        let head = &input[..input.len().min(BINARY_SNIFF)];
        if memchr::memchr(0, head).is_some() {
            Content::Binary
        } else {
            Content::Text
        }
    }
}

/// The kinds of the generic rules, which [`Content::Binary`] skips.
const GENERIC_KINDS: &[&str] = &["password_assignment", "url_credentials"];

/// [`redact`] of text found `depth` levels of JSON strings deep.
fn redact_at_depth(input: &[u8], depth: usize, content: Content) -> Redaction {
    // Secrets that run from one text block of a message into the next first, while the
    // blocks are as the harness wrote them; then JSON strings, decoded: an escape
    // (`\u0061`, `\/`) hides a token from the patterns below, which see the raw bytes.
    // What is left is scanned raw as well.
    let mut counts = BTreeMap::new();
    let joined = fragments::redact_across_blocks(input, &mut counts);
    let input = joined.as_deref().unwrap_or(input);
    let start = match json::redact_strings(input, depth, content) {
        Some((bytes, found)) => {
            add_counts(&mut counts, found);
            bytes
        }
        None => input.to_vec(),
    };
    let mut raw = redact_raw(&start, content);
    add_counts(&mut raw.counts, counts);
    raw
}

pub(super) fn add_counts(
    into: &mut BTreeMap<&'static str, u64>,
    from: BTreeMap<&'static str, u64>,
) {
    for (kind, n) in from {
        *into.entry(kind).or_insert(0) += n;
    }
}

/// Whether any rule or key block could match in `text`: a cheap test before a full pass.
fn may_hold_secret(text: &[u8]) -> bool {
    rules::any_rule_may_match(text)
        || may_hold_key_block(text) && PEM_BEGIN.is_match(text)
        || key_blocks::may_hold_encoded_key_block(text)
}

/// For each boundary between adjacent `parts` (text blocks of one message, in order):
/// whether a secret runs across it, i.e. the parts joined hold a secret that none of
/// them holds whole. A reader that keeps such blocks apart would split the secret into
/// pieces no rule sees (issue 28: 65 of a key's 95 characters were kept); the
/// normalisers join them there instead.
pub fn secret_across(parts: &[&str]) -> Vec<bool> {
    let mut across = vec![false; parts.len().saturating_sub(1)];
    if parts.len() < 2 {
        return across;
    }
    let joined = parts.concat();
    let bounds = fragments::boundaries(parts.iter().map(|p| p.len()));
    for crossing in fragments::crossings(joined.as_bytes(), &bounds) {
        for (i, flag) in across.iter_mut().enumerate() {
            *flag |= crossing.start < bounds[i] && bounds[i] < crossing.end;
        }
    }
    across
}

/// Whether `text` holds the literal every key block's BEGIN line starts with: without
/// it, `PEM_BEGIN` is neither compiled nor run (compiling the fixed patterns took a
/// typical handoff about half a millisecond).
fn may_hold_key_block(text: &[u8]) -> bool {
    memchr::memmem::find(text, b"-----BEGIN ").is_some()
}

/// Whether `text` holds the literal every placeholder starts with (see above).
fn may_hold_placeholder(text: &[u8]) -> bool {
    memchr::memmem::find(text, b"[REDACTED:").is_some()
}

/// The pattern passes over raw bytes.
fn redact_raw(input: &[u8], content: Content) -> Redaction {
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
        let pass = redact_once(&result.bytes, content);
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
fn redact_once(input: &[u8], content: Content) -> Redaction {
    let (claimed, findings) = find_once(input, content);
    let mut counts = BTreeMap::new();
    for finding in &findings {
        *counts.entry(finding.kind).or_insert(0) += 1;
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

/// What decides whether a scan finds something (rules, kinds, limits, this build), as a
/// string: a file found clean under one policy is scanned again under any other.
pub fn policy() -> String {
    rules::fingerprint()
}

/// Whether `text` surely holds no secret, without a full pass: none of the literals a
/// finding needs occurs in it (a rule's anchor, a key block's BEGIN, an encoded key's
/// start), nor a backslash (an escape a decoded pass would read through), nor the key
/// of a content block's text. For the many short texts of a snapshot (entry names).
pub fn clean_at_a_glance(text: &[u8]) -> bool {
    !may_hold_secret(text)
        && memchr::memchr(b'\\', text).is_none()
        && memchr::memmem::find(text, b"\"text\"").is_none()
}

/// Count the secrets in `input` by kind, without keeping the redacted copy.
pub fn scan(input: &[u8]) -> BTreeMap<&'static str, u64> {
    redact(input).counts
}

/// [`scan`] of `input` taken as `content`.
pub fn scan_as(input: &[u8], content: Content) -> BTreeMap<&'static str, u64> {
    redact_as(input, content).counts
}

pub(super) fn placeholder(kind: &str) -> String {
    format!("[REDACTED:{kind}]")
}

#[cfg(test)]
mod coverage_tests;
#[cfg(test)]
mod line_bound_tests;
#[cfg(test)]
mod precision_tests;
#[cfg(test)]
mod prefilter_search_tests;
#[cfg(test)]
mod prefilter_tests;
#[cfg(test)]
mod tests;
