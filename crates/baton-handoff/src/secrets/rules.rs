//! The pattern table of secret redaction: one rule per pattern, the placeholder and key
//! block markers, and the tests a match must pass to count (placeholders, types).

use std::sync::{LazyLock, OnceLock};

use regex::bytes::Regex;

use super::prefilter::Prefilter;
use super::values::may_be_secret;
#[cfg(test)]
use regex::bytes::RegexSet;

pub(super) struct Rule {
    pub(super) kind: &'static str,
    /// Literals one of which every match contains (ASCII case ignored): the prefilter
    /// runs a rule only when one of them occurs.
    pub(super) anchors: &'static [&'static str],
    /// The regex's source; compiled on first use ([`Rule::re`]), so a scan pays only for
    /// the rules whose anchors it meets, and a command that scans nothing pays nothing.
    pattern: String,
    compiled: OnceLock<Regex>,
    /// Whether a match (whole match, redacted value) is a secret worth redacting.
    pub(super) keep: fn(&[u8], &[u8]) -> bool,
}

impl Rule {
    /// The rule's regex, compiled the first time it is needed.
    pub(super) fn re(&self) -> &Regex {
        self.compiled.get_or_init(|| regex(&self.pattern))
    }

    /// The regex's source (what the policy fingerprint hashes).
    pub(super) fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether [`Rule::re`] has been called on this rule.
    #[cfg(test)]
    pub(super) fn is_compiled(&self) -> bool {
        self.compiled.get().is_some()
    }
}

fn always(_: &[u8], _: &[u8]) -> bool {
    true
}

/// A token rule: `pattern`, then any `/` (or JSON's `\/`) and more token characters, so
/// that a token split by a slash escape goes whole.
fn token(pattern: &str) -> String {
    format!(r"(?-u){pattern}(?:\\?/[A-Za-z0-9_-]+)*")
}

fn regex(pattern: &str) -> Regex {
    // Every pattern is a constant checked by the tests, so a failure here is a bug in this
    // file, not bad input.
    Regex::new(pattern).expect("secret pattern must compile")
}

// The fixed patterns' texts apart from their compiled forms: the policy fingerprint
// hashes the texts, and compiling all three for it cost every handoff a few hundred
// microseconds.
const PLACEHOLDER_PATTERN: &str = r"(?-u)\[REDACTED:[a-z0-9_]+\]";
const PEM_BEGIN_PATTERN: &str = r"(?-u)-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----";
const PEM_ANY_END_PATTERN: &str = r"(?-u)-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----";

/// Anything shaped like our own placeholder (any kind name) is left alone.
pub(super) static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| regex(PLACEHOLDER_PATTERN));

pub(super) static PEM_BEGIN: LazyLock<Regex> = LazyLock::new(|| regex(PEM_BEGIN_PATTERN));

pub(super) static PEM_ANY_END: LazyLock<Regex> = LazyLock::new(|| regex(PEM_ANY_END_PATTERN));

/// Key names whose value is a secret. A `_key` suffix is allowed so that `SECRET_KEY`
/// and `TOKEN_KEY` count, but not other suffixes: `token_count` and `max_tokens` are not
/// secrets.
const KEY: &str = r"[A-Za-z0-9_.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret|private[_-]?key|account[_-]?key)(?:[_-]?key)?";

/// The words one of which every [`KEY`] contains.
const KEY_ANCHORS: &[&str] = &[
    "passw", "pwd", "secret", "token", "api", "access", "private", "account",
];

/// The value forms of an assignment, each one capture group, tried in order:
/// `"double quoted"` (JSON escapes kept whole; never starting like the JSON punctuation
/// between two strings, so `"?token=", "next": 1` is not taken for a quoted value),
/// `\"JSON-escaped quotes\"` (a shell line inside a transcript string), `'single quoted'`,
/// and bare, which stops at whitespace, a quote or an escaped newline, and never starts
/// with `{`, `[`, `=` or `:` (an object, `==`, `::`).
const VALUE: &str = r#"(?:"((?:[^"\\\r\n\s,:}\]]|\\[^\r\n])(?:[^"\\\r\n]|\\[^\r\n])*)"|\\"((?:[^"\\\r\n]|\\[^"\r\n])+)\\"|'((?:[^'"\\\r\n]|\\[^\r\n])+)'|((?:[^\s"'\\{\[=:]|\\[^nrt"'\s])(?:[^\s"'\\]|\\[^nrt"'\s])*))"#;

pub(super) static RULES: LazyLock<Vec<Rule>> = LazyLock::new(table);

/// The rules, most specific kind first (uncompiled: see [`Rule::re`]), each taking
/// JSON's escaped slash inside its counted runs ([`through_slash_escapes`]).
pub(super) fn table() -> Vec<Rule> {
    let mut rules = patterns();
    for rule in &mut rules {
        rule.pattern = through_slash_escapes(&rule.pattern);
    }
    rules
}

/// `pattern` with every counted run of a character class (`[...]{n}`, `{n,}`, `{n,m}`)
/// reading JSON's escaped slash `\/` too, so that the escape cannot cut a secret below
/// the rule's minimum: as the `/` it stands for in a class that has one (an AWS secret
/// key, a webhook path), as nothing in one that has none (it never counts towards the
/// minimum, as a `/` after a whole token does not).
pub(super) fn through_slash_escapes(pattern: &str) -> String {
    static COUNTED_CLASS: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"\[((?:\\.|[^\]\\])+)\](\{[0-9]+(?:,[0-9]*)?\})")
            .expect("the rewrite pattern compiles")
    });
    COUNTED_CLASS
        .replace_all(pattern, |caps: &regex::Captures<'_>| {
            let (class, count) = (&caps[1], &caps[2]);
            if class.starts_with('^') {
                caps[0].to_string()
            } else if class.contains('/') {
                format!(r"(?:\\/|[{class}]){count}")
            } else {
                format!(r"(?:(?:\\/)?[{class}]){count}")
            }
        })
        .into_owned()
}

/// The rules as written, before [`through_slash_escapes`].
fn patterns() -> Vec<Rule> {
    vec![
        Rule {
            kind: "aws_secret_key",
            anchors: &["aws_secret_access_key"],
            pattern: String::from(
                r#"(?-u)(?i:aws_secret_access_key)(?:\\?["'])?[ \t]*(?::=|=>|=|:)[ \t]*(?:\\?["'])?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            ),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "anthropic_api_key",
            anchors: &["sk-ant-"],
            pattern: token(r"sk-ant-(?:[A-Za-z0-9_-]|\\?/)*[A-Za-z0-9_-]{20,}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "openai_api_key",
            anchors: &["sk-"],
            pattern: token(r"(?:\bsk-|sk-proj-)[A-Za-z0-9_-]{20,}"),
            // Mixed case, as every OpenAI key has: `sk-ecdsa-sha2-nistp256@openssh.com`
            // (an SSH key type) is none.
            keep: |m, _| {
                !m.starts_with(b"sk-ant-")
                    && m.iter().any(u8::is_ascii_uppercase)
                    && m[3..].iter().any(u8::is_ascii_lowercase)
            },
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "github_token",
            anchors: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
            pattern: token(r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "stripe_key",
            anchors: &["k_live_", "k_test_", "k_prod_"],
            pattern: token(r"\b[sr]k_(?:live|test|prod)_[A-Za-z0-9]{20,}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "slack_token",
            anchors: &["xox", "xapp-", "hooks.slack.com/", r"hooks.slack.com\/"],
            pattern: token(
                r"(?:xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,}|hooks\.slack\.com\\?/(?:services|workflows|triggers)\\?/[A-Za-z0-9+/]{43,56})",
            ),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "google_api_key",
            anchors: &["AIza"],
            pattern: token(r"AIza[0-9A-Za-z_-]{35}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "aws_access_key",
            anchors: &["AKIA", "ASIA", "ABIA", "ACCA", "A3T"],
            pattern: token(r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        // A bare secret access key right after its key id, on the same line (the
        // console's credentials CSV, `--output text`, a pasted pair): the id is
        // `aws_access_key`'s; the secret, 40 base64 characters standing alone, is this.
        Rule {
            kind: "aws_secret_key",
            anchors: &["AKIA", "ASIA"],
            pattern: String::from(
                r"(?-u)(?:AKIA|ASIA)[A-Z0-9]{16}[^\r\n]{0,64}?[^A-Za-z0-9/+\r\n]([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)",
            ),
            keep: |_, secret| looks_random_base64(secret),
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "gitlab_token",
            anchors: &[
                "glpat-", "glptt-", "glrt-", "gldt-", "glcbt-", "glft-", "glimt-", "gloas-",
                "glsoat-",
            ],
            pattern: token(r"gl(?:pat|ptt|rt|dt|cbt|ft|imt|oas|soat)-[A-Za-z0-9_-]{20,}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "npm_token",
            anchors: &["npm_"],
            pattern: token(r"\bnpm_[A-Za-z0-9]{36}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "huggingface_token",
            anchors: &["hf_", "api_org_"],
            pattern: token(r"\b(?:hf_|api_org_)[A-Za-z]{34,}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "sendgrid_api_key",
            anchors: &["SG."],
            pattern: token(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "pypi_token",
            anchors: &["pypi-AgEIcHlwaS5vcmc"],
            pattern: token(r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "twilio_key",
            anchors: &["SK", "AC"],
            pattern: token(r"\b(?:SK|AC)[0-9a-fA-F]{32}\b"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "digitalocean_token",
            anchors: &["_v1_"],
            pattern: token(r"do[opr]_v1_[a-f0-9]{64}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "shopify_token",
            anchors: &["shp"],
            pattern: token(r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "age_secret_key",
            anchors: &["AGE-SECRET-KEY-1"],
            pattern: token(r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "vault_token",
            anchors: &["hvs.", "hvb."],
            pattern: token(r"h(?:vs|vb)\.[A-Za-z0-9_-]{90,}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "doppler_token",
            anchors: &["dp."],
            pattern: token(r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "databricks_token",
            anchors: &["dapi"],
            pattern: token(r"dapi[a-f0-9]{32}(?:-[0-9])?"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "linear_api_key",
            anchors: &["lin_api_"],
            pattern: token(r"lin_api_[A-Za-z0-9]{40}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "postman_api_key",
            anchors: &["PMAK-"],
            pattern: token(r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "pulumi_token",
            anchors: &["pul-"],
            pattern: token(r"pul-[a-f0-9]{40}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "square_token",
            anchors: &["sq0atp-", "sq0csp-", "EAAA"],
            pattern: token(
                r"(?:sq0atp-[A-Za-z0-9_-]{22}|sq0csp-[A-Za-z0-9_-]{43}|EAAA[A-Za-z0-9_-]{60})",
            ),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "grafana_token",
            anchors: &["glc_", "glsa_"],
            pattern: token(r"(?:glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "sentry_token",
            anchors: &["sntry"],
            pattern: token(r"sntry[su]_[A-Za-z0-9+/=_-]{40,}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "new_relic_key",
            anchors: &["NRAK-", "NRII-", "NRJS-"],
            pattern: token(r"NR(?:AK|II|JS)-[A-Za-z0-9]{27,}"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "mailchimp_api_key",
            anchors: &["-us"],
            pattern: token(r"\b[0-9a-f]{32}-us[0-9]{1,2}\b"),
            keep: always,
            compiled: OnceLock::new(),
        },
        // `Authorization: Basic <base64 of user:password>`, in a header, a curl line or a
        // JSON/YAML map of headers: the credentials go, the scheme stays.
        Rule {
            kind: "basic_auth",
            anchors: &["authorization"],
            pattern: String::from(
                r#"(?-u)(?i)\bauthorization(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?[ \t]*basic[ \t]+([A-Za-z0-9+/]{4,}={0,2})"#,
            ),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "bearer_jwt",
            anchors: &["eyJ"],
            pattern: String::from(r"(?-u)eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "bearer_token",
            anchors: &["bearer"],
            pattern: String::from(r"(?-u)\b(?i:bearer)[ \t]+([A-Za-z0-9._~+/-]{20,}=*)"),
            keep: always,
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "url_credentials",
            anchors: &["://", r":\/\/"],
            pattern: String::from(
                r#"(?-u)[A-Za-z][A-Za-z0-9+.-]*:(?://|\\/\\/)[^\s:/@"'<>\\]*:([^\s/@"'<>\\]+)@"#,
            ),
            keep: |_, v| !is_placeholder_value(v) && may_be_secret(v, true, b"password"),
            compiled: OnceLock::new(),
        },
        // A raw JSON key: only a string value is a secret, and anything else (null, a
        // number, an object) must stay intact for the line to remain JSON.
        Rule {
            kind: "password_assignment",
            anchors: KEY_ANCHORS,
            pattern: format!(r#"(?-u)(?i)\b{KEY}"[ \t]*[:=][ \t]*"((?:[^"\\\r\n]|\\[^\r\n])+)""#),
            keep: |w, v| !is_placeholder_value(v) && may_be_secret(v, true, key_of(w)),
            compiled: OnceLock::new(),
        },
        // A typed declaration with a value, `password: str = "..."`: the type is not the
        // secret, the value is.
        Rule {
            kind: "password_assignment",
            anchors: KEY_ANCHORS,
            pattern: format!(
                r"(?-u)(?i)\b{KEY}[ \t]*:[ \t]*[A-Za-z_][A-Za-z0-9_.<>\[\]&']*[ \t]*=[ \t]*{VALUE}"
            ),
            keep: |w, v| !is_placeholder_value(v) && may_be_secret(v, quoted(w, v), key_of(w)),
            compiled: OnceLock::new(),
        },
        Rule {
            kind: "password_assignment",
            anchors: KEY_ANCHORS,
            pattern: format!(r#"(?-u)(?i)\b{KEY}(?:\\["']|')?[ \t]*(?::=|=>|=|:)[ \t]*{VALUE}"#),
            keep: keep_assignment,
            compiled: OnceLock::new(),
        },
    ]
}

/// Every rule's pattern in one set, in the order of [`RULES`] (the tests check the
/// prefilter against it).
#[cfg(test)]
pub(super) static RULE_SET: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(RULES.iter().map(|rule| rule.pattern()))
        .expect("secret patterns must compile as a set")
});

static PREFILTER: LazyLock<Prefilter> = LazyLock::new(|| Prefilter::new(&rule_anchors()));

/// The anchors of each rule of [`RULES`], in its order: what the prefilter is built of.
pub(super) fn rule_anchors() -> Vec<&'static [&'static str]> {
    RULES.iter().map(|rule| rule.anchors).collect()
}

/// The rules that may match in `text`, by index into [`RULES`]: one pass of the
/// automaton over the text, then only these rules run their full regex.
pub(super) fn candidate_rules(text: &[u8]) -> Vec<usize> {
    PREFILTER.candidates(text)
}

/// Whether any rule may match in `text` (the first anchor found says so).
pub(super) fn any_rule_may_match(text: &[u8]) -> bool {
    PREFILTER.any(text)
}

/// A fingerprint of everything that decides what a scan finds: this build's version, the
/// kinds, every pattern and the in-memory scan limit. A file found clean under one
/// fingerprint is not assumed clean under another (the stat cache keys on it).
pub(super) fn fingerprint() -> String {
    let mut hasher = blake3::Hasher::new();
    let mut add = |text: &str| {
        hasher.update(&(text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    };
    add(env!("CARGO_PKG_VERSION"));
    add(&super::files::REDACT_LIMIT.to_string());
    for kind in super::KINDS {
        add(kind);
    }
    for rule in RULES.iter() {
        add(rule.kind);
        add(rule.pattern());
    }
    for pattern in [PLACEHOLDER_PATTERN, PEM_BEGIN_PATTERN, PEM_ANY_END_PATTERN] {
        add(pattern);
    }
    // The matchers that are code rather than patterns: a change to one changes this.
    add(super::key_blocks::MATCHER);
    add(super::fragments::MATCHER);
    add(super::values::MATCHER);
    add(&format!(
        "binary: NUL in {} bytes skips {:?}",
        super::BINARY_SNIFF,
        super::GENERIC_KINDS
    ));
    format!("secrets-v1 {}", hasher.finalize().to_hex())
}

fn keep_assignment(whole: &[u8], value: &[u8]) -> bool {
    if is_placeholder_value(value) {
        return false;
    }
    let key = key_of(whole);
    let key_len = key.len();
    if !may_be_secret(value, quoted(whole, value), key) {
        return false;
    }
    let key = key.to_ascii_lowercase();
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

/// The key an assignment's match starts with (`DB_PASSWORD` of `DB_PASSWORD=...`).
fn key_of(whole: &[u8]) -> &[u8] {
    let len = whole
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || b"_.-".contains(b)))
        .unwrap_or(whole.len());
    &whole[..len]
}

/// Whether `value` (a slice of `whole`, the match) was a string literal: a quote right
/// before it.
fn quoted(whole: &[u8], value: &[u8]) -> bool {
    (value.as_ptr() as usize)
        .checked_sub(whole.as_ptr() as usize)
        .and_then(|at| at.checked_sub(1))
        .and_then(|at| whole.get(at))
        .is_some_and(|b| matches!(b, b'"' | b'\''))
}

/// Whether a 40-character value reads like a random base64 secret rather than a word,
/// a path or a hex digest: upper and lower case letters and a digit, `/` or `+`.
fn looks_random_base64(value: &[u8]) -> bool {
    value.iter().any(u8::is_ascii_uppercase)
        && value.iter().any(u8::is_ascii_lowercase)
        && value
            .iter()
            .any(|b| b.is_ascii_digit() || *b == b'/' || *b == b'+')
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
