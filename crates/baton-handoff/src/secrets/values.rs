//! What the generic rules (`password_assignment`, `url_credentials`) take for a secret
//! value: a literal, not code or a reference to one (issue 29: `process.env.API_KEY`,
//! `getPasswordFromVault()`, `os.environ["X"]`, `${X}`, a struct tag, prose).
//!
//! Modelled on gitleaks' `generic-api-key` allowlists: a value made of letters and
//! `_ . -` alone (no digit, no other symbol) is a word or a name, not a secret; a value
//! too short to guess at is none either. On top of that, the shapes of code: a call or an
//! index (`name(`, `a.b[`), a dotted path of identifiers (`config.db.password`), and
//! template or environment references (`${X}`, `$X`, `{{ .X }}`, `%(x)s`, `#{x}`,
//! `$(cmd)`, `{x}`), which stand for a value held elsewhere.

/// What this module takes for a secret, for the policy fingerprint
/// (`rules::fingerprint`): change it with the code.
pub(super) const MATCHER: &str = "values v5: no words (but random letters), code, references; a password 4 alphanumerics, a token 10, machine-made";

/// Fewer letters and digits than this is no password worth the name (`accesskey="n"`,
/// `pwd = 42`): what a person picks may be short.
pub(super) const MIN_PASSWORD: usize = 4;
/// A token or key is made by a machine, and none is shorter than this (gitleaks' generic
/// rule takes 10 or more): `__token = "mt19937"`, `U_UNEXPECTED_TOKEN=0x10100` are not.
pub(super) const MIN_TOKEN: usize = 10;

/// Whether `key` names what a person picks (a password) rather than what a machine
/// makes (a token, a key, a client secret).
fn is_human(key: &[u8]) -> bool {
    let key = key.to_ascii_lowercase();
    let human = [&b"password"[..], b"passwd", b"pwd"];
    human.iter().any(|h| key.ends_with(h))
}

/// The fewest letters and digits a secret assigned to `key` has: [`MIN_PASSWORD`] for a
/// password, [`MIN_TOKEN`] for a token, a key or a secret.
pub(super) fn min_len(key: &[u8]) -> usize {
    if is_human(key) {
        MIN_PASSWORD
    } else {
        MIN_TOKEN
    }
}

/// Whether `value`, assigned to the secret-named `key`, is a literal that may be a
/// secret. `quoted`: the value was a string literal (code shapes do not apply to it, but
/// references and words do).
pub(super) fn may_be_secret(value: &[u8], quoted: bool, key: &[u8]) -> bool {
    let rest = without_references(value);
    let referenced = rest.len() != value.len();
    // A bare value ends where code or markdown closes around it (`?token=X)](https://..`).
    let rest = match rest.iter().position(|&b| b == b')' || b == b']') {
        Some(close) if !quoted => rest[..close].to_vec(),
        _ => rest,
    };
    let core = trim_code_punctuation(&rest);
    if core.iter().filter(|b| b.is_ascii_alphanumeric()).count() < min_len(key)
        && !core.iter().any(|&b| b >= 0x80)
    {
        return false;
    }
    // A word is no secret, but random letters are no word.
    if is_word_like(core, quoted) && !random_letters(core) {
        return false;
    }
    if !is_human(key) && !machine_made(core) {
        return false;
    }
    if !quoted && !referenced && is_code(core) {
        return false;
    }
    true
}

/// Whether a token's or key's value looks made by a machine: it holds a digit (as
/// gitleaks' generic rule asks) or is random letters, it is no name with a number after
/// it (`previousToken2`, `ArrowToken$1`), and its letters are not mostly one repeated
/// (Shannon entropy at least 0.7 of the most its length allows, up to 16 symbols, 10
/// for digits: `1111111111` is none, `021750033302039727` and `su3mUaaqx1uu7G` are).
fn machine_made(value: &[u8]) -> bool {
    let digits = value.iter().filter(|b| b.is_ascii_digit()).count();
    if digits == 0 && !random_letters(value) {
        return false;
    }
    let name = value
        .iter()
        .take_while(|b| b.is_ascii_alphabetic() || b"_$".contains(b))
        .count();
    if name > 0 && name < value.len() && value.len() - name <= 3 && digits == value.len() - name {
        return false;
    }
    let symbols = if digits == value.len() { 10 } else { 16 };
    let most = (value.len().min(symbols) as f64).log2();
    entropy(value) >= 0.7 * most
}

/// Letters that read as random, not as a word or a name: 16 or more, no run of four
/// lower-case letters (words and CamelCase have them), and Shannon entropy of 3.5 bits
/// or more (gitleaks' threshold): `ACCABQZHRVONAIRCFDWL`.
fn random_letters(value: &[u8]) -> bool {
    if value.len() < 16 || !value.iter().all(u8::is_ascii_alphabetic) {
        return false;
    }
    let mut run = 0;
    for b in value {
        run = if b.is_ascii_lowercase() { run + 1 } else { 0 };
        if run >= 4 {
            return false;
        }
    }
    entropy(value) >= 3.5
}

/// Shannon entropy of `value`'s bytes, in bits per byte.
fn entropy(value: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for &b in value {
        counts[usize::from(b)] += 1;
    }
    let n = value.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// `value` without its template and environment references (`${X}`, `{{ x }}`,
/// `%(x)s`, `#{x}`, `$(cmd)`, `$X`, `{x}`): what is left is all that may be a literal.
fn without_references(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        let rest = &value[i..];
        // An opener whose close lies beyond the value (a bare value stops at a quote:
        // `${t.assignOr(` of `${t.assignOr("x", "{}")}`) takes the rest of it.
        let close = |open: usize, closer: &[u8]| {
            Some(
                memchr::memmem::find(&rest[open..], closer)
                    .map_or(rest.len(), |at| open + at + closer.len()),
            )
        };
        let skip = if rest.starts_with(b"${{") {
            close(3, b"}}")
        } else if rest.starts_with(b"${") || rest.starts_with(b"#{") {
            close(2, b"}")
        } else if rest.starts_with(b"{{") {
            close(2, b"}}")
        } else if rest.starts_with(b"$(") || rest.starts_with(b"%(") {
            close(2, b")").map(|end| {
                // `%(name)s`: the conversion letter belongs to the reference.
                end + usize::from(
                    rest[0] == b'%' && rest.get(end).is_some_and(u8::is_ascii_alphabetic),
                )
            })
        } else if rest[0] == b'$' {
            let n = ident_len(&rest[1..]);
            (n > 0).then_some(1 + n)
        } else if rest[0] == b'{' {
            // `{name}`, `{0}`, `{}`: a format field (Python, C#, Rust).
            let n = rest[1..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || b"_.:".contains(b))
                .count();
            (rest.get(1 + n) == Some(&b'}')).then_some(n + 2)
        } else if rest[0] == b'%' && rest.get(1).is_some_and(|b| b"sdr".contains(b)) {
            Some(2)
        } else {
            None
        };
        match skip {
            Some(n) => i += n,
            None => {
                out.push(value[i]);
                i += 1;
            }
        }
    }
    out
}

/// `value` without the punctuation code puts after an expression (`;`, `,`, `)`, `:`).
fn trim_code_punctuation(value: &[u8]) -> &[u8] {
    let end = value
        .iter()
        .rposition(|b| !b";,)}]:".contains(b))
        .map_or(0, |i| i + 1);
    &value[..end]
}

/// Letters and `_ . - / *` alone, as gitleaks allows (and paths, globs); in a string literal also spaces and
/// the punctuation of prose (`"Enter your password."`), and letters beyond ASCII (a
/// translated label, `"Contraseña"`).
fn is_word_like(value: &[u8], quoted: bool) -> bool {
    let prose: &[u8] = if quoted { b" ,!?:;()'" } else { b"" };
    value.iter().all(|&b| {
        b.is_ascii_alphabetic()
            || b"_.-/*".contains(&b)
            || prose.contains(&b)
            || (quoted && b >= 0x80)
    })
}

/// The length of the identifier at the start of `text` (`[A-Za-z_][A-Za-z0-9_$]*`: a
/// `$` inside, as JavaScript bundlers name things, `this$1`).
fn ident_len(text: &[u8]) -> usize {
    match text.first() {
        Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {
            1 + text[1..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || b"_$".contains(b))
                .count()
        }
        _ => 0,
    }
}

/// A bare value shaped like code: an identifier path (`a.b`, `a::b`, `a->b`, `a?.b`)
/// followed by a call, an index or type arguments (`f(`, `os.environ[`, `env!(`,
/// `KeyExportResult<T[`), a path of two or more
/// identifiers none of which has a digit but at its end (`self.token`, `type2.kind`,
/// `process.env.API_KEY`; not `s.ZC9Ecf4M5g`), either
/// after an opening `(`, `&`, `*` or `!` (`(SEC_ERROR_BASE`, `(p).pws.pw_name`), or a
/// hexadecimal number (`0x10100`).
fn is_code(value: &[u8]) -> bool {
    if let Some(hex) = value
        .strip_prefix(b"0x")
        .or_else(|| value.strip_prefix(b"0X"))
    {
        return !hex.is_empty() && hex.iter().all(u8::is_ascii_hexdigit);
    }
    let opened = value.iter().take_while(|b| b"(&*!".contains(b)).count();
    let value = &value[opened..];
    // `HKDF-SHA256(`: a call of a name with dashes (pseudo-code, shell functions).
    if let Some(name) = value.strip_suffix(b"(")
        && name.first().is_some_and(u8::is_ascii_alphabetic)
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(b))
    {
        return true;
    }
    let mut i = 0;
    let mut segments = 0;
    let mut digit_inside = false;
    loop {
        let n = ident_len(&value[i..]);
        if n == 0 {
            return false;
        }
        let segment = &value[i..i + n];
        // `pat.cn54g4chc0gox26c5k7wx9`: digits inside a segment are a token's, not a
        // name's (`token2`, `v1`, `this$1` end in theirs), unless a call follows
        // (`SSH2_ALLOC(`).
        let digits_end = segment
            .iter()
            .rposition(|b| !b.is_ascii_digit() && *b != b'$')
            .map_or(0, |last| last + 1);
        digit_inside |= segment[..digits_end].iter().any(u8::is_ascii_digit);
        segments += 1;
        i += n;
        // `(p).x`: the group opened before the first identifier closes after it.
        if segments == 1 && opened > 0 && value.get(i) == Some(&b')') {
            i += 1;
        }
        let rest = &value[i..];
        let sep = [&b"?."[..], b"::", b"->", b"."]
            .into_iter()
            .find(|s| rest.starts_with(s));
        match sep {
            Some(s) => i += s.len(),
            None => {
                let rest = rest.strip_prefix(b"!").unwrap_or(rest);
                return matches!(rest.first(), Some(b'(' | b'[' | b'<'))
                    || (rest.is_empty() && (segments >= 2 || opened > 0) && !digit_inside);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_references_and_words_are_not_secrets() {
        for (value, quoted) in [
            ("process.env.API_KEY;", false),
            ("getPasswordFromVault();", false),
            ("Phoenix.Token.sign(socket,", false),
            ("os.environ[", false),
            ("os.getenv(", false),
            ("list(&mut", false),
            ("env::var(", false),
            ("env!(", false),
            ("self.token_2", false),
            ("${DB_PASSWORD}", false),
            ("${DB_PASSWORD}/x", false),
            ("${{ secrets.TOKEN }}", true),
            ("{{ .Values.password }}", true),
            ("%(password)s", true),
            ("#{ENV['X']}", true),
            ("$(cat /run/secrets/db)", true),
            ("{password}", true),
            ("password", true),
            ("n", true),
            ("42", false),
            ("Jim", false),
            ("Enter your password:", true),
            ("None", false),
        ] {
            assert!(
                !may_be_secret(value.as_bytes(), quoted, b"password"),
                "{value:?}"
            );
        }
        for (value, quoted) in [
            ("hunter2xyz", true),
            ("hunter2xyz", false),
            ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", false),
            ("4f9a1c2e7b", false),
            ("c0rrect horse", true),
            ("Sup3r;", false),
            ("abc123", false),
            ("${USER}:s3cr3t!", true),
            ("pa55word", false),
        ] {
            assert!(
                may_be_secret(value.as_bytes(), quoted, b"password"),
                "{value:?}"
            );
        }
        for value in [
            "(SEC_ERROR_BASE",
            "(p).pws.pw_name",
            "&buf",
            "0x10100",
            "CommentOrToken):",
            "KeyExportResult<T[",
            "SSH2_ALLOC(session,",
            "asn1container(ASN1_OCTET_STRING,",
            "HKDF-SHA256(",
        ] {
            assert!(
                !may_be_secret(value.as_bytes(), false, b"password"),
                "{value:?}"
            );
        }
        // A token is long: a short value is a name or a default, not one.
        assert_eq!(min_len(b"__token"), MIN_TOKEN);
        assert_eq!(min_len(b"DB_PASSWORD"), MIN_PASSWORD);
        assert!(!may_be_secret(b"mt19937", true, b"__token"));
        assert!(may_be_secret(b"4f9a1c2e7b3d8a6f", false, b"SECRET_KEY"));
        // A token is machine-made: a name with a number, a regex, a repeat are not.
        for value in [
            "ArrowToken$1;",
            "previousToken2",
            "/^Unexpected",
            "1111111111",
            "this$1$1.getToken(",
            "${t.assignOr(",
        ] {
            assert!(!may_be_secret(value.as_bytes(), false, b"token"), "{value}");
        }
        // Words are no secrets, as gitleaks has it, whatever the key; random letters are.
        for label in ["Passwort", "password", "rootpasswd", "*all*tokens*updated*"] {
            assert!(
                !may_be_secret(label.as_bytes(), true, b"db_password"),
                "{label}"
            );
        }
        assert!(!may_be_secret(b"refreshtoken", true, b"token"));
        assert!(may_be_secret(b"ACCABQZHRVONAIRCFDWL", true, b"AWSToken"));
        assert!(!may_be_secret(
            b"PrivateKeyExportType",
            false,
            b"privateKey"
        ));
        assert!(may_be_secret(
            b"s.ZC9Ecf4M5g9o34Q6RkzGsj0z",
            false,
            b"token"
        ));
        assert!(may_be_secret(
            b"pat.cn54g4chc0gox26c5k7wx9.rtklzuv4",
            false,
            b"token"
        ));
        for value in [
            "1089446170773982",
            "021750033302039727",
            "su3mUaaqx1uu7G",
            "22ac42ca2e80451040210a6f52d2a189",
        ] {
            assert!(
                may_be_secret(value.as_bytes(), true, b"asanaToken"),
                "{value}"
            );
        }
    }
}
