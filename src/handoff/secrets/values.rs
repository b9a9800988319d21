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
pub(super) const MATCHER: &str = "values v1: no words, code, references or fewer than 4 alphanumerics";

/// Fewer significant characters than this is no secret worth the name (`accesskey="n"`,
/// `token = 42`).
pub(super) const MIN_LEN: usize = 4;

/// Whether `value`, assigned to a secret-named key, is a literal that may be a secret.
/// `quoted`: the value was a string literal (code shapes do not apply to it, but
/// references and words do).
pub(super) fn may_be_secret(value: &[u8], quoted: bool) -> bool {
    let rest = without_references(value);
    let core = trim_code_punctuation(&rest);
    if core.iter().filter(|b| b.is_ascii_alphanumeric()).count() < MIN_LEN
        && !core.iter().any(|&b| b >= 0x80)
    {
        return false;
    }
    if is_word_like(core, quoted) {
        return false;
    }
    if !quoted && rest.len() == value.len() && is_code(core) {
        return false;
    }
    true
}

/// `value` without its template and environment references (`${X}`, `{{ x }}`,
/// `%(x)s`, `#{x}`, `$(cmd)`, `$X`, `{x}`): what is left is all that may be a literal.
fn without_references(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        let rest = &value[i..];
        let close = |open: usize, closer: &[u8]| {
            memchr::memmem::find(&rest[open..], closer).map(|at| open + at + closer.len())
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
                end + usize::from(rest[0] == b'%' && rest.get(end).is_some_and(u8::is_ascii_alphabetic))
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

/// `value` without the punctuation code puts after an expression (`;`, `,`, `)`) or
/// around it.
fn trim_code_punctuation(value: &[u8]) -> &[u8] {
    let end = value
        .iter()
        .rposition(|b| !b";,)}]".contains(b))
        .map_or(0, |i| i + 1);
    &value[..end]
}

/// Letters and `_ . - /` alone, as gitleaks allows (and paths); in a string literal also spaces and
/// the punctuation of prose (`"Enter your password."`), and letters beyond ASCII (a
/// translated label, `"Contraseña"`).
fn is_word_like(value: &[u8], quoted: bool) -> bool {
    let prose: &[u8] = if quoted { b" ,!?:;()'" } else { b"" };
    value.iter().all(|&b| {
        b.is_ascii_alphabetic() || b"_.-/".contains(&b) || prose.contains(&b) || (quoted && b >= 0x80)
    })
}

/// The length of the identifier at the start of `text` (`[A-Za-z_][A-Za-z0-9_]*`).
fn ident_len(text: &[u8]) -> usize {
    match text.first() {
        Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {
            1 + text[1..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count()
        }
        _ => 0,
    }
}

/// A bare value shaped like code: an identifier path (`a.b`, `a::b`, `a->b`, `a?.b`)
/// followed by a call or an index (`f(`, `os.environ[`, `env!(`), or a path of two or
/// more identifiers whose first has no digit (`self.token`, `process.env.API_KEY`).
fn is_code(value: &[u8]) -> bool {
    let mut i = 0;
    let mut segments = 0;
    let mut first_has_digit = false;
    loop {
        let n = ident_len(&value[i..]);
        if n == 0 {
            return false;
        }
        if segments == 0 {
            first_has_digit = value[..n].iter().any(u8::is_ascii_digit);
        }
        segments += 1;
        i += n;
        let rest = &value[i..];
        let sep = [&b"?."[..], b"::", b"->", b"."]
            .into_iter()
            .find(|s| rest.starts_with(s));
        match sep {
            Some(s) => i += s.len(),
            None => {
                let rest = rest.strip_prefix(b"!").unwrap_or(rest);
                return matches!(rest.first(), Some(b'(' | b'['))
                    || (rest.is_empty() && segments >= 2 && !first_has_digit);
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
            assert!(!may_be_secret(value.as_bytes(), quoted), "{value:?}");
        }
        for (value, quoted) in [
            ("hunter2xyz", true),
            ("hunter2xyz", false),
            ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", false),
            ("4f9a1c2e7b", false),
            ("c0rrect horse", true),
            ("Sup3r;", false),
            ("abc123", false),
            ("hunter2.abc", false),
            ("${USER}:s3cr3t!", true),
            ("pa55word", false),
        ] {
            assert!(may_be_secret(value.as_bytes(), quoted), "{value:?}");
        }
    }
}
