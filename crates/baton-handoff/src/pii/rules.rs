//! The patterns of the personal-data scan and the checks that keep them precise: the
//! characters around a match, the SSA's unissued ranges, issuer prefixes and Luhn.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::LazyLock;

use regex::bytes::Regex;

use super::Keep;

fn re(pattern: &str) -> Regex {
    match Regex::new(pattern) {
        Ok(re) => re,
        Err(e) => panic!("personal-data pattern {pattern:?}: {e}"),
    }
}

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i-u)[a-z0-9._%+\-]+@(?:[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?\.)+[a-z]{2,24}")
});
/// `+` and a country code, then groups with optional separators and a `(0)` trunk.
static E164: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?-u)\+[1-9][0-9]{0,3}(?:[ .\-]?(?:\(0\)[ .\-]?)?\(?[0-9]{1,5}\)?){1,6}")
});
/// North American: `(415) 555-2671`, `415-555-2671`, `415.555.2671`, optionally `1-`.
static NANP: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?-u)(?:1[ .\-])?(?:\([2-9][0-9]{2}\)[ ]?|[2-9][0-9]{2}([.\-]))[2-9][0-9]{2}([ .\-])[0-9]{4}",
    )
});
/// Any grouping of digits, a phone only after a context word.
static NATIONAL: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?-u)\(?[0-9]+\)?(?:[ .\-/]?\(?[0-9]+\)?){0,5}"));
static PHONE_CONTEXT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:phone|phones|telephone|tel|mobile|cell|cellphone|fax|call|whatsapp|sms|landline|telefon|téléphone|tél|handy|móvil)\b",
    )
});
/// Header fields whose `<id@host>` is a message id, not an address.
static MESSAGE_ID: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(?:message-id|in-reply-to|references|content-id|msgid)\s*[:=]"));
static SSN: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?-u)([0-9]{3})([\- ]?)([0-9]{2})([\- ]?)([0-9]{4})"));
static SSN_CONTEXT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(?:ssn|ss#|social security|soc\. sec\.)"));
static CARD: LazyLock<Regex> = LazyLock::new(|| re(r"(?-u)[0-9](?:[ \-]?[0-9]){12,18}"));
/// A run of digits without separators is a card only after one of these.
static CARD_CONTEXT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:card|cards|credit|debit|visa|mastercard|amex|discover|jcb|unionpay|diners|cc|pan|payment|kreditkarte|carte|tarjeta)\b",
    )
});

/// E.164 country codes of two and three digits (ITU-T E.164 assignments; `1` and `7` are
/// the only ones of one digit). The codes are prefix-free, so the first that matches is
/// the code.
const COUNTRY_CODES_2: &[u16] = &[
    20, 27, 30, 31, 32, 33, 34, 36, 39, 40, 41, 43, 44, 45, 46, 47, 48, 49, 51, 52, 53, 54, 55, 56,
    57, 58, 60, 61, 62, 63, 64, 65, 66, 81, 82, 84, 86, 90, 91, 92, 93, 94, 95, 98,
];
/// Three-digit codes as (first two digits, assigned third digits).
const COUNTRY_CODES_3: &[(u16, &[u8])] = &[
    (21, &[1, 2, 3, 6, 8]),
    (22, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    (23, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    (24, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    (25, &[0, 1, 2, 3, 4, 5, 6, 7, 8]),
    (26, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    (29, &[0, 1, 7, 8, 9]),
    (35, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    (37, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    (38, &[0, 1, 2, 3, 5, 6, 7, 9]),
    (42, &[0, 1, 3]),
    (50, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    (59, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    (67, &[0, 2, 3, 4, 5, 6, 7, 8, 9]),
    (68, &[0, 1, 2, 3, 5, 6, 7, 8, 9]),
    (69, &[0, 1, 2]),
    (80, &[0, 8]),
    (85, &[0, 2, 3, 5, 6]),
    (87, &[0]),
    (88, &[0, 1, 2, 3, 6, 8]),
    (96, &[0, 1, 2, 3, 4, 5, 6, 7, 8]),
    (97, &[0, 1, 2, 3, 4, 5, 6, 7]),
    (99, &[2, 3, 4, 5, 6, 8]),
];

/// The length of the country code `d` starts with, if it starts with an assigned one.
fn country_code(d: &[u8]) -> Option<usize> {
    let n = |k: usize| d.iter().take(k).fold(0u16, |v, x| v * 10 + u16::from(*x));
    if matches!(d.first(), Some(1 | 7)) {
        return Some(1);
    }
    if d.len() >= 2 && COUNTRY_CODES_2.contains(&n(2)) {
        return Some(2);
    }
    let third = *d.get(2)?;
    COUNTRY_CODES_3
        .iter()
        .any(|(two, thirds)| *two == n(2) && thirds.contains(&third))
        .then_some(3)
}

/// How far before a number its context word may be, on the same line.
const CONTEXT_BYTES: usize = 40;

/// File name extensions: `icon@2x.png` and `name@sha.js` are file names, not addresses.
const FILE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "js", "mjs", "cjs", "ts", "tsx",
    "jsx", "css", "scss", "map", "json", "html", "htm", "md", "txt", "py", "pyc", "rs", "go", "rb",
    "java", "kt", "cpp", "hpp", "toml", "yaml", "yml", "xml", "lock", "wasm", "zip", "gz", "tgz",
    "tar", "whl", "jar", "pdf", "csv", "log", "svelte", "vue", "php", "swift",
];

pub(super) fn find(input: &[u8], keep: &Keep) -> Vec<(Range<usize>, &'static str)> {
    // Start -> (end, kind): kinds are taken in `KINDS` order, a match overlapping an
    // earlier one dropped.
    let mut taken: BTreeMap<usize, (usize, &'static str)> = BTreeMap::new();
    let mut take = |range: Range<usize>, kind: &'static str| {
        let before = taken.range(..range.end).next_back();
        if before.is_some_and(|(_, (end, _))| *end > range.start) {
            return;
        }
        taken.insert(range.start, (range.end, kind));
    };
    if memchr::memchr(b'@', input).is_some() {
        for range in matches(&EMAIL, input, false, |r| email(input, r, keep)) {
            take(range, "email");
        }
    }
    if !input.iter().any(u8::is_ascii_digit) {
        return collect(taken);
    }
    for range in matches(&SSN, input, true, |r| ssn(input, r)) {
        take(range, "ssn");
    }
    for range in matches(&CARD, input, true, |r| card(input, r)) {
        take(range, "card");
    }
    for range in matches(&E164, input, true, |r| e164(input, r)) {
        take(range, "phone");
    }
    for range in matches(&NANP, input, true, |r| nanp(input, r)) {
        take(range, "phone");
    }
    for range in matches(&NATIONAL, input, true, |r| national(input, r)) {
        take(range, "phone");
    }
    collect(taken)
}

fn collect(taken: BTreeMap<usize, (usize, &'static str)>) -> Vec<(Range<usize>, &'static str)> {
    taken
        .into_iter()
        .map(|(start, (end, kind))| (start..end, kind))
        .collect()
}

/// Every match of `re` that `check` accepts (perhaps narrowed); a match starting inside
/// a JSON escape is tried again after the escape, a rejected one one byte further with
/// `inside` (a number may start within what a greedy match took: `1234 4111 1111 ...`),
/// else after its end (the rest of a rejected address is no address).
fn matches(
    re: &Regex,
    input: &[u8],
    inside: bool,
    mut check: impl FnMut(Range<usize>) -> Option<Range<usize>>,
) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < input.len() {
        let Some(m) = re.find_at(input, at) else {
            break;
        };
        if let Some(end) = inside_escape(input, m.start()) {
            at = end;
            continue;
        }
        match check(m.range()) {
            Some(range) => {
                at = range.end.max(m.start() + 1);
                out.push(range);
            }
            None if inside => at = m.start() + 1,
            None => at = m.end(),
        }
    }
    out
}

/// When `at` is inside a JSON backslash escape (`\n`, `\"`, `\u00e9`; the backslash
/// itself excluded), where the escape ends.
fn inside_escape(input: &[u8], at: usize) -> Option<usize> {
    for k in 1..=5.min(at) {
        let slash = at - k;
        if input[slash] != b'\\' {
            continue;
        }
        let run = input[..=slash]
            .iter()
            .rev()
            .take_while(|b| **b == b'\\')
            .count();
        if run.is_multiple_of(2) {
            return None;
        }
        let len = if input.get(slash + 1) == Some(&b'u') {
            6
        } else {
            2
        };
        return (at < slash + len).then_some(slash + len);
    }
    None
}

/// The character before `at` as a boundary sees it: an escape that ends there is a
/// separator (`\n415-555-2671`).
fn before(input: &[u8], at: usize) -> Option<u8> {
    if at == 0 {
        return None;
    }
    if inside_escape(input, at - 1) == Some(at) {
        return Some(b' ');
    }
    Some(input[at - 1])
}

fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A number starts here, not inside a longer token (`v1.415...`, `a/1234`, `x+1`).
fn number_starts(input: &[u8], at: usize) -> bool {
    match before(input, at) {
        None => true,
        Some(b) if word(b) => false,
        Some(b'.' | b'-' | b'/' | b':' | b'+' | b',') => {
            at < 2 || !input[at - 2].is_ascii_alphanumeric()
        }
        Some(_) => true,
    }
}

/// A number ends here (`2671.` ends a sentence; `2671.5`, `2671-3`, `2671:12` go on).
fn number_ends(input: &[u8], end: usize) -> bool {
    match input.get(end) {
        None => true,
        Some(b) if word(*b) => false,
        Some(b'.' | b'-' | b'/' | b':' | b',') => {
            !input.get(end + 1).is_some_and(u8::is_ascii_alphanumeric)
        }
        Some(_) => true,
    }
}

fn digits(text: &[u8]) -> Vec<u8> {
    text.iter()
        .filter(|b| b.is_ascii_digit())
        .map(|b| b - b'0')
        .collect()
}

fn email(input: &[u8], range: Range<usize>, keep: &Keep) -> Option<Range<usize>> {
    let mut start = range.start;
    while input.get(start) == Some(&b'.') {
        start += 1;
    }
    let text = std::str::from_utf8(&input[start..range.end]).ok()?;
    let (local, domain) = text.rsplit_once('@')?;
    if local.is_empty() || local.ends_with('.') || local.contains("..") {
        return None;
    }
    // `scheme://user@host`: a URL's user; `user@host:path`: an SSH remote.
    if start >= 2 && &input[start - 2..start] == b"//" {
        return None;
    }
    match input.get(range.end) {
        Some(b':')
            if input
                .get(range.end + 1)
                .is_some_and(|b| !b.is_ascii_whitespace()) =>
        {
            return None;
        }
        Some(b) if word(*b) || matches!(b, b'-' | b'@') => return None,
        _ => {}
    }
    // `frontend.Values`, `Tests.testCase`: an attribute in code, not a domain.
    let tld = domain.rsplit('.').next()?;
    let lower = tld.to_ascii_lowercase();
    if tld != lower && tld != tld.to_ascii_uppercase() {
        return None;
    }
    if FILE_EXTENSIONS.contains(&lower.as_str()) {
        return None;
    }
    if keep.keeps(text) || context_before(input, start, &MESSAGE_ID) {
        return None;
    }
    Some(start..range.end)
}

fn ssn(input: &[u8], range: Range<usize>) -> Option<Range<usize>> {
    let caps = SSN.captures(&input[range.clone()])?;
    let part = |i: usize| caps.get(i).map(|m| m.as_bytes()).unwrap_or_default();
    let (sep1, sep2) = (part(2), part(4));
    if sep1 != sep2 {
        return None;
    }
    if sep1 != b"-" && !context_before(input, range.start, &SSN_CONTEXT) {
        return None;
    }
    if !number_starts(input, range.start) || !number_ends(input, range.end) {
        return None;
    }
    let area = part(1);
    if area == b"000" || area == b"666" || area[0] == b'9' {
        return None;
    }
    if part(3) == b"00" || part(5) == b"0000" {
        return None;
    }
    Some(range)
}

fn card(input: &[u8], range: Range<usize>) -> Option<Range<usize>> {
    if !number_starts(input, range.start) || !number_ends(input, range.end) {
        return None;
    }
    let text = &input[range.clone()];
    let seps: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_digit())
        .collect();
    if seps.windows(2).any(|w| w[0] != w[1]) {
        return None;
    }
    let groups: Vec<usize> = text
        .split(|b| !b.is_ascii_digit())
        .map(<[u8]>::len)
        .collect();
    let grouped = match groups.as_slice() {
        // Unseparated digits are a card only where the text says so: columns of long
        // numbers (test data, ids) pass the Luhn check one time in ten.
        [_] => {
            !matches!(
                before(input, range.start),
                Some(b'-' | b'+' | b'*' | b'/' | b'^')
            ) && context_before(input, range.start, &CARD_CONTEXT)
        }
        [4, 6, 5] | [4, 6, 4] => true,
        [4, 4, 4, last] | [4, 4, 4, 4, last] => (1..=4).contains(last),
        _ => false,
    };
    let d = digits(text);
    let zeros = text.windows(6).any(|w| w == b"000000");
    (grouped && !zeros && issuer(&d) && luhn(&d)).then_some(range)
}

/// Whether `d` (13 to 19 digits) has the prefix and length of a card issuer (Visa,
/// Mastercard, Mir, Amex, JCB, Diners, Discover, UnionPay; not Maestro, whose prefixes
/// cover most numbers).
fn issuer(d: &[u8]) -> bool {
    let prefix = |n: usize| d.iter().take(n).fold(0u32, |v, x| v * 10 + u32::from(*x));
    let len = d.len();
    let (p2, p3, p4) = (prefix(2), prefix(3), prefix(4));
    match d.first() {
        Some(4) => matches!(len, 13 | 16 | 19),
        Some(2) => ((2221..=2720).contains(&p4) && len == 16) || (2200..=2204).contains(&p4),
        Some(5) => (51..=55).contains(&p2) && len == 16,
        Some(3) => {
            (matches!(p2, 34 | 37) && len == 15)
                || ((3528..=3589).contains(&p4) && len >= 16)
                || ((300..=305).contains(&p3) || p4 == 3095 || matches!(p2, 36 | 38 | 39))
                    && len >= 14
        }
        Some(6) => {
            len >= 16 && (prefix(4) == 6011 || (644..=649).contains(&p3) || matches!(p2, 62 | 65))
        }
        _ => false,
    }
}

pub(super) fn luhn(d: &[u8]) -> bool {
    let sum: u32 = d
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &x)| {
            let x = u32::from(x);
            if i % 2 == 1 {
                let y = x * 2;
                if y > 9 { y - 9 } else { y }
            } else {
                x
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

fn e164(input: &[u8], range: Range<usize>) -> Option<Range<usize>> {
    // A closing bracket the pattern took without its opening one is not part of it.
    let mut end = range.end;
    let text = &input[range.start..end];
    if text.ends_with(b")") && !text[..text.len() - 1].contains(&b'(') {
        end -= 1;
    }
    if !number_starts(input, range.start) || !number_ends(input, end) {
        return None;
    }
    let text = &input[range.start + 1..end];
    let trunkless: Vec<u8> = {
        let s = String::from_utf8_lossy(text).replace("(0)", " ");
        s.into_bytes()
    };
    let groups: Vec<&[u8]> = trunkless
        .split(|b| !b.is_ascii_digit())
        .filter(|g| !g.is_empty())
        .collect();
    let n: usize = groups.iter().map(|g| g.len()).sum();
    if !(8..=15).contains(&n) {
        return None;
    }
    // An assigned country code, not cut by a separator (`+2.999...` is a number), and
    // North America's and Russia's numbers of their one length.
    let d = digits(&trunkless);
    let cc = country_code(&d)?;
    if groups[0].len() < cc {
        return None;
    }
    if cc == 1 && (n != 11 || d[1] < 2 || d[4] < 2) || (d[0] == 7 && n != 11) {
        return None;
    }
    // One dot and nothing else is a decimal (`+345678.5432`).
    let seps: Vec<&u8> = trunkless.iter().filter(|b| !b.is_ascii_digit()).collect();
    if seps.len() == 1 && *seps[0] == b'.' {
        return None;
    }
    // Unseparated, at least 10 digits (`+12345678` is a diff line or a sum); separated,
    // every group after the area code (which may be one digit: `+81-3-...`) of two or
    // more (`+1 2 3 4 ...` is arithmetic).
    if groups.len() == 1 && n < 10 {
        return None;
    }
    if groups.iter().skip(2).any(|g| g.len() < 2) {
        return None;
    }
    Some(range.start..end)
}

fn nanp(input: &[u8], range: Range<usize>) -> Option<Range<usize>> {
    let caps = NANP.captures(&input[range.clone()])?;
    if let (Some(a), Some(b)) = (caps.get(1), caps.get(2))
        && a.as_bytes() != b.as_bytes()
    {
        return None;
    }
    // `415 555 2671` alone is a row of numbers; with the area code in brackets, a phone.
    if caps.get(1).is_none() && caps.get(2).is_some_and(|m| m.as_bytes() == b" ") {
        return None;
    }
    let starts = match before(input, range.start) {
        Some(b'(') => true,
        _ => number_starts(input, range.start),
    };
    (starts && number_ends(input, range.end)).then_some(range)
}

fn national(input: &[u8], range: Range<usize>) -> Option<Range<usize>> {
    let mut range = range;
    let text = &input[range.clone()];
    if text.ends_with(b")") && !text[..text.len() - 1].contains(&b'(') {
        range.end -= 1;
    }
    if text.starts_with(b"(") && !text.contains(&b')') {
        range.start += 1;
    }
    let text = &input[range.clone()];
    let n = digits(text).len();
    if !(8..=13).contains(&n) {
        return None;
    }
    // A date (`2026-12-04 10`, `04.12.2026`) is not a phone whatever precedes it.
    let groups: Vec<usize> = text
        .split(|b| !b.is_ascii_digit())
        .filter(|g| !g.is_empty())
        .map(<[u8]>::len)
        .collect();
    if matches!(
        groups.as_slice(),
        [4, 2, 2, ..] | [2, 2, 4, ..] | [1 | 2, 1 | 2, 4, ..]
    ) {
        return None;
    }
    if !number_starts(input, range.start) || !number_ends(input, range.end) {
        return None;
    }
    context_before(input, range.start, &PHONE_CONTEXT).then_some(range)
}

/// Whether `context` occurs within [`CONTEXT_BYTES`] before `at` on the same line.
fn context_before(input: &[u8], at: usize, context: &Regex) -> bool {
    let from = at.saturating_sub(CONTEXT_BYTES);
    let window = &input[from..at];
    let line = match memchr::memrchr(b'\n', window) {
        Some(nl) => &window[nl + 1..],
        None => window,
    };
    context.is_match(line)
}
