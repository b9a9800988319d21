//! Private key blocks: PEM and PGP armour between its BEGIN and END lines, and the same
//! armour base64-encoded (a Kubernetes secret's `tls.key`, a kubeconfig's
//! `client-key-data`, `base64 key.pem`), which no pattern over the text can see.

use base64::Engine;

use super::claims::{Candidate, rank};
use super::may_hold_key_block;
use super::rules::{PEM_ANY_END, PEM_BEGIN};

/// PEM and PGP private key blocks. The regex crate has no backreferences, so the END
/// line that matches a BEGIN line is looked up by hand.
pub(super) fn private_key_blocks(input: &[u8]) -> Vec<Candidate> {
    let rank = rank("private_key_block");
    let mut out = Vec::new();
    let mut pos = 0;
    // END lines known to be absent from some earlier offset to the end: searching again
    // for each BEGIN would make a crafted input quadratic.
    let mut absent: Vec<Vec<u8>> = Vec::new();
    if !may_hold_key_block(input) {
        return out;
    }
    while let Some(caps) = PEM_BEGIN.captures_at(input, pos) {
        let Some(begin) = caps.get(0) else { break };
        if !body_follows(&input[begin.end()..]) {
            // `"-----BEGIN RSA PRIVATE KEY-----"` in code or prose names the armour; no
            // key follows it.
            pos = begin.end();
            continue;
        }
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

/// Whether what follows a BEGIN line can be a key's body: past blanks and escaped line
/// breaks (`\n` in a JSON string), a base64 character or a header line (`Proc-Type:`),
/// or nothing at all (output cut right after the BEGIN line: fail closed). A quote, a
/// bracket or other punctuation there ends a string literal or a sentence that names
/// the armour.
fn body_follows(after: &[u8]) -> bool {
    let mut i = 0;
    while i < after.len() {
        match after[i] {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'\\' if matches!(after.get(i + 1), Some(b'n' | b'r' | b't')) => i += 2,
            b => return b.is_ascii_alphanumeric() || b == b'+' || b == b'/',
        }
    }
    true
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// What the key-block matchers do, for the policy fingerprint (`rules::fingerprint`):
/// change it with them.
pub(super) const MATCHER: &str = "key blocks v3: PEM/PGP BEGIN (a body after it) to END; base64 from LS0tLS1CRUdJTi, 64 decoded, 60-char wrap";

/// How every encoded key block starts: the base64 of `-----BEGIN` (at the start of the
/// encoded text, as an encoder writes a PEM file it was given whole).
pub(super) const ENCODED_BEGIN: &[u8] = b"LS0tLS1CRUdJTi";

/// The encoded characters decoded to tell a key from a certificate: 48 bytes, more than
/// the longest BEGIN line of a private key (`-----BEGIN ENCRYPTED PRIVATE KEY-----`, 37).
const ENCODED_HEAD: usize = 64;

/// An encoded line at least this long is taken to be wrapped (`base64` wraps at 76,
/// OpenSSL at 64): the next line continues the block. It also holds the whole BEGIN line,
/// so the first line of a block is a finding on its own (SPEC 5.1, appended lines).
const WRAPPED_LINE: usize = 60;

/// Whether `text` may hold an encoded key block (the literal every one starts with).
pub(super) fn may_hold_encoded_key_block(text: &[u8]) -> bool {
    memchr::memmem::find(text, ENCODED_BEGIN).is_some()
}

/// Base64-encoded private key blocks: a base64 run that starts a word with
/// [`ENCODED_BEGIN`] and decodes to the BEGIN line of a private key (certificates and
/// public keys decode to other labels and are left alone). The run goes on across line
/// ends (raw, or escaped as in a JSON string) after every full-length line.
pub(super) fn encoded_key_blocks(input: &[u8]) -> Vec<Candidate> {
    let mut out = Vec::new();
    if !may_hold_encoded_key_block(input) {
        return out;
    }
    let rank = rank("private_key_block");
    let mut after = 0;
    for start in memchr::memmem::find_iter(input, ENCODED_BEGIN) {
        if start < after || start > 0 && is_base64(input[start - 1]) {
            continue;
        }
        let first = line_end(input, start);
        if !decodes_to_key_begin(&input[start..first]) {
            continue;
        }
        let mut end = first;
        while end - line_start(input, end) >= WRAPPED_LINE && input[end - 1] != b'=' {
            let Some(next) = after_line_break(input, end) else {
                break;
            };
            if !input.get(next).copied().is_some_and(is_base64) {
                break;
            }
            end = line_end(input, next);
        }
        out.push(Candidate { start, end, rank });
        after = end;
    }
    out
}

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

/// The end of the base64 run (padding included) that starts at `from`.
fn line_end(input: &[u8], from: usize) -> usize {
    let mut end = from;
    while end < input.len() && is_base64(input[end]) {
        end += 1;
    }
    let mut padding = 0;
    while padding < 2 && end < input.len() && input[end] == b'=' {
        end += 1;
        padding += 1;
    }
    end
}

/// Where the run that ends at `end` started (the start of its line of the block).
fn line_start(input: &[u8], end: usize) -> usize {
    let mut start = end;
    while start > 0 && (is_base64(input[start - 1]) || input[start - 1] == b'=') {
        start -= 1;
    }
    start
}

/// The position after the line break at `at`: `\n` or `\r\n`, raw or escaped.
fn after_line_break(input: &[u8], at: usize) -> Option<usize> {
    let rest = &input[at..];
    [&b"\r\n"[..], b"\n", b"\\r\\n", b"\\n"]
        .iter()
        .find(|eol| rest.starts_with(eol))
        .map(|eol| at + eol.len())
}

/// Whether the first characters of an encoded run decode to a private key's BEGIN line.
fn decodes_to_key_begin(run: &[u8]) -> bool {
    let text: Vec<u8> = run.iter().copied().filter(|b| *b != b'=').collect();
    let take = text.len().min(ENCODED_HEAD) / 4 * 4;
    let Ok(decoded) = base64::engine::general_purpose::STANDARD_NO_PAD.decode(&text[..take]) else {
        return false;
    };
    PEM_BEGIN.find(&decoded).is_some_and(|m| m.start() == 0)
}
