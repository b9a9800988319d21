//! Secrets hidden by JSON string escapes: `\u0061`, `\/`, surrogate pairs and the rest
//! make a token unreadable to a pattern over the raw bytes, so every JSON string that
//! holds such an escape is decoded, scanned, and re-encoded when a secret was found in it
//! (`\n`, `\t`, `\r`, `\"` and `\\` alone need no decoding: see `has_hiding_escape`).
//!
//! What counts as JSON: the whole input when `serde_json` parses it (a pretty-printed
//! file), else each line that it parses (a transcript's JSON lines). Other text is left
//! to the raw patterns: string boundaries guessed in it could swallow what a raw pattern
//! needs (the BEGIN line of a key block). Only a string that held a secret is replaced,
//! so the rest of the text is kept byte for byte.

use std::collections::BTreeMap;

/// How deep JSON held in a JSON string (a tool's output in a transcript) is decoded.
const MAX_DEPTH: usize = 4;

/// Redact the secrets inside escaped JSON strings of `input`. `None` when nothing was
/// found, so the caller keeps the input as is.
pub(super) fn redact_strings(
    input: &[u8],
    depth: usize,
    content: super::Content,
) -> Option<(Vec<u8>, BTreeMap<&'static str, u64>)> {
    if depth >= MAX_DEPTH || !has_hiding_escape(input) {
        return None;
    }
    let mut counts = BTreeMap::new();
    let first = input.iter().position(|b| !b.is_ascii_whitespace())?;
    if matches!(input[first], b'{' | b'[' | b'"')
        && serde_json::from_slice::<serde::de::IgnoredAny>(input).is_ok()
    {
        let out = redact_literals(input, depth, content, &mut counts)?;
        return Some((out, counts));
    }
    let mut out = Vec::with_capacity(input.len());
    let mut changed = false;
    for line in input.split_inclusive(|&b| b == b'\n') {
        let looks_like_json = line
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|b| matches!(b, b'{' | b'['))
            && has_hiding_escape(line)
            && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok();
        match looks_like_json
            .then(|| redact_literals(line, depth, content, &mut counts))
            .flatten()
        {
            Some(redacted) => {
                out.extend_from_slice(&redacted);
                changed = true;
            }
            None => out.extend_from_slice(line),
        }
    }
    changed.then_some((out, counts))
}

/// Every string literal of `text` that holds an escape, decoded and redacted; the text
/// with those that held a secret re-encoded, or `None` if none did.
fn redact_literals(
    text: &[u8],
    depth: usize,
    content: super::Content,
    counts: &mut BTreeMap<&'static str, u64>,
) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while i < text.len() {
        if text[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let mut escaped = false;
        while i < text.len() && text[i] != b'"' && text[i] != b'\n' {
            if text[i] == b'\\' {
                escaped = true;
                i += 1;
            }
            i += 1;
        }
        let body_end = i.min(text.len());
        // An unterminated literal (a line cut short) still has its body scanned.
        let end = if i < text.len() && text[i] == b'"' {
            i + 1
        } else {
            body_end
        };
        i = end;
        if !escaped || !has_hiding_escape(&text[start + 1..body_end]) {
            continue;
        }
        let body = &text[start + 1..body_end];
        let decoded = decode(body);
        // Most decoded strings hold nothing: one pass of the rule set tells.
        if !super::may_hold_secret(decoded.as_bytes()) && !has_hiding_escape(decoded.as_bytes()) {
            continue;
        }
        let mut r = super::redact_at_depth(decoded.as_bytes(), depth + 1, content);
        // Decoded, a `\/` is a `/` that cuts a token; raw, the rules read through it but
        // not through another escape. A string with both is scanned once more with its
        // escaped slashes dropped, and redacted whole if that finds more.
        let slashes = memchr::memmem::find(body, br"\/").is_some();
        let dropped = if slashes {
            drop_escaped_slashes(body)
        } else {
            Vec::new()
        };
        if slashes && has_hiding_escape(&dropped) {
            let variant = super::redact_at_depth(decode(&dropped).as_bytes(), depth + 1, content);
            let found = |c: &BTreeMap<&'static str, u64>| c.values().sum::<u64>();
            if found(&variant.counts) > found(&r.counts)
                && let Some((&kind, _)) = variant.counts.iter().max_by_key(|(_, n)| **n)
            {
                r = super::Redaction {
                    bytes: super::placeholder(kind).into_bytes(),
                    counts: variant.counts,
                };
            }
        }
        if r.counts.is_empty() {
            continue;
        }
        for (kind, n) in r.counts {
            *counts.entry(kind).or_insert(0) += n;
        }
        let clean = String::from_utf8_lossy(&r.bytes);
        let mut encoded = serde_json::to_string(clean.as_ref()).unwrap_or_else(|_| "\"\"".into());
        if slashes {
            // Re-encoded, every `/` escaped again: a token cut by one that this string's
            // scan did not take is still cut by an escape the raw rules read through.
            encoded = encoded.replace('/', r"\/");
        }
        out.extend_from_slice(&text[pos..start]);
        out.extend_from_slice(encoded.as_bytes());
        pos = end;
    }
    if pos == 0 {
        return None;
    }
    out.extend_from_slice(&text[pos..]);
    Some(out)
}

/// Whether `text` holds an escape that decoding changes in a way the raw patterns cannot
/// see through: a run of backslashes before anything but `n`, `t`, `r` or `"` (`\u0061`,
/// `\/`, `\b`, and nested ones like `\\u0061`, which is `\u0061` one level down). `\n`,
/// `\t`, `\r` read as spaces to the raw patterns already and `\"` stands for a character
/// no token contains, so strings with only those (most of a transcript) need no decoding.
fn has_hiding_escape(text: &[u8]) -> bool {
    let mut i = 0;
    while i < text.len() {
        if text[i] != b'\\' {
            i += 1;
            continue;
        }
        while i < text.len() && text[i] == b'\\' {
            i += 1;
        }
        if i < text.len() && !matches!(text[i], b'n' | b't' | b'r' | b'"') {
            return true;
        }
    }
    false
}

/// A JSON string body without its escaped slashes (`\/`), other escapes kept whole.
fn drop_escaped_slashes(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        match (body[i], body.get(i + 1)) {
            (b'\\', Some(b'/')) => i += 2,
            (b'\\', Some(&next)) => {
                out.extend_from_slice(&[b'\\', next]);
                i += 2;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The value of a JSON string body (without its quotes), leniently: a lone surrogate or
/// a bad escape becomes U+FFFD, an unknown escape letter stands for itself.
fn decode(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let Some(hi) = hex4(&mut chars) else {
                    out.push('\u{fffd}');
                    continue;
                };
                if (0xd800..0xdc00).contains(&hi) {
                    let mut look = chars.clone();
                    if look.next() == Some('\\')
                        && look.next() == Some('u')
                        && let Some(lo) = hex4(&mut look)
                        && (0xdc00..0xe000).contains(&lo)
                    {
                        chars = look;
                        let code = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        continue;
                    }
                    out.push('\u{fffd}');
                } else {
                    out.push(char::from_u32(hi).unwrap_or('\u{fffd}'));
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

fn hex4(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<u32> {
    let mut value = 0;
    for _ in 0..4 {
        value = value * 16 + chars.next()?.to_digit(16)?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_escapes_that_can_hide_a_token_need_decoding() {
        for hiding in [
            &br"a\u0061"[..],
            br"a\/b",
            br"\bx",
            br"\fx",
            br"\\\u0061",
            br"\\u0061",
            br"\q",
        ] {
            assert!(
                has_hiding_escape(hiding),
                "{}",
                String::from_utf8_lossy(hiding)
            );
        }
        for plain in [&br#"a\nb\tc\r\"d\\"#[..], br"\\n", b"plain", br"end\"] {
            assert!(
                !has_hiding_escape(plain),
                "{}",
                String::from_utf8_lossy(plain)
            );
        }
    }

    #[test]
    fn every_escape_form_decodes() {
        assert_eq!(
            decode(br#"a\u0062\/c\n\t\"\\\ud83d\ude00"#),
            "ab/c\n\t\"\\\u{1f600}"
        );
        assert_eq!(decode(br#"\ud800x\u12"#), "\u{fffd}x\u{fffd}");
    }
}
