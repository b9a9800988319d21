//! Unit tests of secret redaction: each kind, overlaps, JSON safety and idempotence.

mod escape_tests {
    use super::super::*;

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

mod cases {
    use super::super::*;
    use std::sync::LazyLock;

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
    const SENDGRID: &str = "SG.u8jzPde0IgxLd6GncfBAep.fJBd0Kh8oOOL8dKLzdocJ2isAjIhKtJ0RlgLKOmxgJT";
    const PYPI: &str =
        "pypi-AgEIcHlwaS5vcmcihA-2O76UMFxFkM-R5Kjp1vRt_1fjORS-6ilI8ihN5KXSc7Tvo-hBKqFYY-k";
    const TWILIO_SK: &str = "SK5ec84d8dbc74254770f58904dba41ecc";
    const TWILIO_AC: &str = "ACcc3fc1626e53a13043b026c48bbf33fe";
    const DIGITALOCEAN: &str =
        "dop_v1_ff9243a8f506b40928b5b7a767c76fb008f86bebb2737f6a6f0fb23c6f5da2ce";
    const SHOPIFY: &str = "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";
    const AGE: &str = "AGE-SECRET-KEY-16GFPUTQFTF78R57XR0V3ZXUPYU5V3U70SVUG68EU5Y0MYDN8FHFSGAWXEL";
    const VAULT: &str = "hvs.kQ1okTBGzvAmwufUxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B26R08qzjI6GKFSufrdZSlB5er8bOfZqfM2oeq3hDavJA7";
    const DOPPLER: &str = "dp.pt.6rNicHTp8hkqdlm7tOtHWnsCGRlrwZbqcabUGJmGEp7";
    const DATABRICKS: &str = "dapie3dfc967a64cb14028d512c9791e558e";
    const LINEAR: &str = "lin_api_aqx9vJupc94tnwlavyfErGPmpGXafq0fjzLczbtt";
    const POSTMAN: &str = "PMAK-724caf4941d4072014b3ce10-7f80e222f828767efc2f91624a8940f1f8";
    const PULUMI: &str = "pul-36f99eee3692f09e2e8c662248b483b7ffc050fe";
    const SQUARE: &str = "sq0atp-ztUjAwyuh1vauWv1zh87mT";
    const GRAFANA: &str = "glsa_a5Vsqxezy3Lex7BWr2drgd1QsO7jprBG_a6bd0c62";
    const SENTRY: &str = "sntrys_d7UACNWiP3sFd67JikEAvstqVVPqzPptEJQzhkPkenG5ZFJoC6vWCBiJmpfl";
    const NEWRELIC: &str = "NRAK-V9FUPXQMB0Y07NYRVD5RXI67NFR";
    const MAILCHIMP: &str = "7cced9041dff02cee737443e21047194-us14";
    const BASIC: &str = "dXNlcjpodW50ZXIyLWJhc2ljLWF1dGg=";

    /// One example of each kind added for issue 10, with its kind.
    const NEW_KINDS: &[(&str, &str)] = &[
        ("sendgrid_api_key", SENDGRID),
        ("pypi_token", PYPI),
        ("twilio_key", TWILIO_SK),
        ("twilio_key", TWILIO_AC),
        ("digitalocean_token", DIGITALOCEAN),
        ("shopify_token", SHOPIFY),
        ("age_secret_key", AGE),
        ("vault_token", VAULT),
        ("doppler_token", DOPPLER),
        ("databricks_token", DATABRICKS),
        ("linear_api_key", LINEAR),
        ("postman_api_key", POSTMAN),
        ("pulumi_token", PULUMI),
        ("square_token", SQUARE),
        ("grafana_token", GRAFANA),
        ("sentry_token", SENTRY),
        ("new_relic_key", NEWRELIC),
        ("mailchimp_api_key", MAILCHIMP),
    ];

    #[test]
    fn patterns_compile_and_kinds_are_known() {
        use super::super::rules::{PLACEHOLDER, RULES};
        LazyLock::force(&RULES);
        LazyLock::force(&PLACEHOLDER);
        for rule in RULES.iter() {
            rule.re();
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
            "content": format!("$ export PASSWORD=\"open s3same\" TOKEN=abc123def456\n$ echo {OAI_OLD}\nAuthorization: Bearer {JWT}\n"),
        })
        .to_string();
        let out = check(
            &event,
            &["open s3same", "abc123def456", OAI_OLD, JWT],
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
             db.password = \"s3cret!\"\nSECRET_KEY='django-insecure-3k!x9m2q'\ntoken: abc-d3f.9xk2m\n\
             pwd=/home/me\nServer=db;Uid=sa;Pwd=Sup3r;\n",
            &[
                "s3cret!",
                "django-insecure-3k!x9m2q",
                "abc-d3f.9xk2m",
                "Sup3r",
            ],
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
    fn code_assigning_an_expression_is_kept() {
        // `let token = next_token();` has a code expression, not a secret, on the right
        // (issue 29: redacting it mangled code and refused ordinary trees). A literal
        // after it on the same line is still found.
        let code = "let token = next_token();\nSession { password: password.into() }\n";
        assert_eq!(check(code, &[], &[]), code);
        let out = check(
            "let token = make();PASSWORD=hunter2xyz\n",
            &["hunter2xyz"],
            &[("password_assignment", 1)],
        );
        assert_eq!(
            out,
            "let token = make();PASSWORD=[REDACTED:password_assignment]\n"
        );
    }

    #[test]
    fn typed_declaration_redacts_the_value() {
        let out = check(
            "API_TOKEN: str = \"tok_live_4bcd3f\"\n",
            &["tok_live_4bcd3f"],
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
             Bearer abcdefghijklmnopqrstuvwxyz0123 password=x7Kp2q https://u:p4ss-w0rd@h\n\
             {GITLAB} {NPM} {HF}\nAuthorization: Basic {BASIC}\n{SENDGRID} {PYPI} {TWILIO_SK}\n\
             {DIGITALOCEAN} {SHOPIFY} {AGE} {VAULT} {DOPPLER} {DATABRICKS} {LINEAR} {POSTMAN}\n\
             {PULUMI} {SQUARE} {GRAFANA} {SENTRY} {NEWRELIC} {MAILCHIMP}\n"
        );
        let found = scan(all.as_bytes());
        for kind in KINDS {
            assert_eq!(found.get(kind), Some(&1), "{kind}: {found:?}");
        }
    }

    #[test]
    fn new_token_kinds_in_text_env_and_json() {
        for (kind, secret) in NEW_KINDS {
            check(&format!("leaked {secret} here"), &[secret], &[(kind, 1)]);
            check(secret, &[secret], &[(kind, 1)]);
            let line = serde_json::json!({ "out": format!("x\n{secret}\ty") }).to_string();
            let out = check(&line, &[secret], &[(kind, 1)]);
            serde_json::from_str::<serde_json::Value>(&out).expect("still JSON");
        }
        for header in [
            format!("Authorization: Basic {BASIC}"),
            format!("curl -H 'authorization: basic {BASIC}' https://x"),
            format!("{{\"Authorization\": \"Basic {BASIC}\"}}"),
        ] {
            let out = check(&header, &[BASIC], &[("basic_auth", 1)]);
            assert!(
                out.to_lowercase().contains("basic [redacted:basic_auth]"),
                "{out}"
            );
        }
    }

    #[test]
    fn json_escapes_do_not_hide_tokens() {
        // One character of a GitHub token as \u escape, a surrogate pair next to it, and
        // an Anthropic key split by an escaped slash.
        let gh_escaped = GH.replacen('a', "\\u0061", 1);
        let ant_split = format!("{}\\/{}", &ANT[..24], &ANT[24..]);
        let line = format!(
            r#"{{"role":"tool","content":"token {gh_escaped} \ud83d\ude00 and key {ant_split}","n":1.50}}"#
        );
        let out = check(
            &line,
            &[GH, &GH[4..], &ANT[..24], &ANT[24..]],
            &[("github_token", 1), ("anthropic_api_key", 1)],
        );
        let back: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
        assert_eq!(
            back["content"],
            "token [REDACTED:github_token] \u{1f600} and key [REDACTED:anthropic_api_key]"
        );
        // The rest of the line is kept byte for byte.
        assert!(out.starts_with(r#"{"role":"tool","content":"#), "{out}");
        assert!(out.ends_with(r#","n":1.50}"#), "{out}");
        // Every escape form spelling the token, in a pretty-printed JSON document.
        let all_escaped: String = GH.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        let doc = format!("{{\n  \"a\": [\n    \"{all_escaped}\"\n  ]\n}}\n");
        let out = check(&doc, &[GH], &[("github_token", 1)]);
        serde_json::from_str::<serde_json::Value>(&out).expect("still JSON");
        // JSON held in a JSON string (a tool's output), its escape escaped once more.
        let inner = serde_json::json!({ "k": format!("x {gh_escaped}") }).to_string();
        let inner = inner.replace("\\\\u0061", "\\u0061");
        assert!(inner.contains(r"\u0061"), "{inner}");
        let outer = serde_json::json!({ "out": inner }).to_string();
        assert!(outer.contains(r"\\u0061"), "{outer}");
        let out = check(&outer, &[GH, &GH[5..]], &[("github_token", 1)]);
        serde_json::from_str::<serde_json::Value>(&out).expect("still JSON");
        // Plain text is not decoded: the escape there is just text.
        let text = format!("not json: {gh_escaped}");
        assert_eq!(redact(text.as_bytes()).bytes, text.as_bytes());
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
