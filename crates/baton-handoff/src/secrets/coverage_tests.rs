//! Unit tests of what issue 28 found the scan missing: a secret split across adjacent text
//! blocks of one message, a `\/` inside a token before the rule's minimum length, a bare
//! AWS secret access key beside its key id, a base64-encoded PEM private key; and each
//! new rule kept off text that only looks like one.

use super::*;
use base64::Engine;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Redact `input`; every piece must be gone, the counts must be `expected`, a second
/// pass must change nothing, and JSON input must stay JSON.
fn check(input: &str, pieces: &[&str], expected: &[(&'static str, u64)]) -> String {
    let r = redact(input.as_bytes());
    let out = text(&r.bytes);
    for piece in pieces {
        assert!(!out.contains(piece), "{piece:?} survived: {out}");
    }
    let want: BTreeMap<&'static str, u64> = expected.iter().copied().collect();
    assert_eq!(r.counts, want, "counts of {input} -> {out}");
    let again = redact(&r.bytes);
    assert_eq!(text(&again.bytes), out, "not idempotent: {input}");
    assert!(again.counts.is_empty(), "second pass: {:?}", again.counts);
    if serde_json::from_str::<serde_json::Value>(input).is_ok() {
        serde_json::from_str::<serde_json::Value>(&out).expect("still JSON");
    }
    out
}

/// A 95-character Anthropic key, as in the report.
fn long_anthropic_key() -> String {
    let key = format!(
        "sk-ant-api03-{}A1b2",
        "Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz2Xc4Vb6Nm8".repeat(2)
    );
    assert_eq!(key.len(), 95);
    key
}

mod split_blocks {
    use super::*;

    /// A Claude Code assistant entry whose message holds `blocks` as text blocks.
    fn entry(blocks: &[&str]) -> String {
        let content: Vec<_> = blocks
            .iter()
            .map(|t| serde_json::json!({"type": "text", "text": t}))
            .collect();
        serde_json::json!({
            "type": "assistant",
            "sessionId": "s-1",
            "timestamp": "2026-12-01T00:00:00Z",
            "message": {"id": "msg_1", "role": "assistant", "content": content},
        })
        .to_string()
    }

    #[test]
    fn a_key_split_across_two_text_blocks_of_a_session_line_goes_whole() {
        let key = long_anthropic_key();
        let (left, right) = key.split_at(30);
        let line = entry(&[&format!("The key is {left}"), &format!("{right} and more.")]);
        let out = check(
            &line,
            &[right, &left[13..], &right[..20]],
            &[("anthropic_api_key", 1)],
        );
        let back: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            back["message"]["content"][0]["text"],
            "The key is [REDACTED:anthropic_api_key]"
        );
        assert_eq!(
            back["message"]["content"][1]["text"],
            "[REDACTED:anthropic_api_key] and more."
        );
        // Neither half is a key on its own here: only the two blocks together are.
        let oai = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
        let (left, right) = oai.split_at(16);
        check(
            &entry(&[&format!("use {left}"), &format!("{right} now")]),
            &[&left[8..], right],
            &[("openai_api_key", 1)],
        );
        // Across three blocks, no pair of which holds the rule's minimum.
        let parts = [&oai[..12], &oai[12..22], &oai[22..]];
        check(
            &entry(&[
                &format!("a {}", parts[0]),
                parts[1],
                &format!("{} b", parts[2]),
            ]),
            &[&oai[8..12], parts[1], parts[2]],
            &[("openai_api_key", 1)],
        );
        // A JSONL file of such lines, the second one split.
        let file = format!(
            "{}\n{}\n",
            entry(&["hello"]),
            entry(&[&format!("k {left}"), right])
        );
        check(&file, &[&left[8..], right], &[("openai_api_key", 1)]);
    }

    #[test]
    fn blocks_that_only_sit_side_by_side_are_left_alone() {
        // Adjacent blocks whose join holds no secret are not touched, nor are text
        // blocks with another block between them.
        let line = entry(&["The prefix is sk-", "proj and nothing else"]);
        assert_eq!(redact(line.as_bytes()).bytes, line.as_bytes());
        let oai = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
        let apart = serde_json::json!({"content": [
            {"type": "text", "text": &oai[..16]},
            {"type": "image", "source": {}},
            {"type": "text", "text": &oai[16..]},
        ]})
        .to_string();
        assert_eq!(redact(apart.as_bytes()).bytes, apart.as_bytes());
    }

    #[test]
    fn the_normalised_transcript_keeps_a_split_key_in_one_event() {
        let key = long_anthropic_key();
        let (left, right) = key.split_at(30);
        let tool_result = serde_json::json!({
            "type": "user",
            "timestamp": "2026-12-01T00:00:01Z",
            "message": {"role": "user", "content": [{
                "type": "tool_result", "tool_use_id": "t1",
                "content": [{"type": "text", "text": format!("env {left}")},
                            {"type": "text", "text": format!("{right}\n")}],
            }]},
        })
        .to_string();
        let session = format!(
            "{}\n{}\n",
            entry(&[&format!("The key is {left}"), &format!("{right} and more.")]),
            tool_result
        );
        let path = std::path::Path::new("s.jsonl");
        let (_, drafts) = crate::sessions::claude_code::read(path, session.as_bytes()).unwrap();
        let events = crate::events::finish("claude-code", "s-1", drafts);
        let jsonl = text(&crate::events::to_jsonl(&events));
        let out = check(
            &jsonl,
            &[right, &left[13..], &right[..20]],
            &[("anthropic_api_key", 2)],
        );
        assert!(out.contains("The key is [REDACTED:anthropic_api_key] and more."));
        // Blocks that hold no secret across their join stay as they were.
        let plain = entry(&["First block.", "Second block."]);
        let (_, drafts) = crate::sessions::claude_code::read(path, plain.as_bytes()).unwrap();
        let texts: Vec<_> = drafts.iter().map(|d| d.text.as_str()).collect();
        assert_eq!(texts, ["First block.", "Second block."]);
    }
}

mod slash_escapes {
    use super::*;

    #[test]
    fn an_escaped_slash_before_the_minimum_does_not_cut_a_token() {
        let gh_left = "ghp_0123456789";
        let gh_right = "aBcDeFgHiJkLmNoPqRsTuVwXyZ";
        let gh = format!("{gh_left}\\/{gh_right}");
        // In a JSON line, and in text that is not JSON (PHP, JavaScript, a log line).
        let pieces = [&gh_left[4..], gh_right];
        check(
            &format!(r#"{{"t":"token {gh}"}}"#),
            &pieces,
            &[("github_token", 1)],
        );
        check(
            &format!("echo \"{gh}\" | gh auth login --with-token"),
            &pieces,
            &[("github_token", 1)],
        );
        let oai = "sk-proj-AbCdEfGh\\/IjKlMnOpQrStUvWxYz01";
        check(
            &format!(r#"log: {{"key":"{oai}"}}"#),
            &["AbCdEfGh", "IjKlMnOpQrStUvWxYz01"],
            &[("openai_api_key", 1)],
        );
        // Secrets whose alphabet has a slash, escaped by a JSON writer (PHP's), in text
        // that is not JSON as a whole.
        check(
            r#"log('{"id":"AKIAQWERTYUIOPASDF12","key":"wJalrXUtnFEMI\/K7MDENG\/bPxRfiCYEXAMPLEKEY"}');"#,
            &[
                "AKIAQWERTYUIOPASDF12",
                "wJalrXUtnFEMI",
                "bPxRfiCYEXAMPLEKEY",
            ],
            &[("aws_access_key", 1), ("aws_secret_key", 1)],
        );
        check(
            r#"const hook = "https:\/\/hooks.slack.com\/services\/T00000000\/B00000000\/XXXXXXXXXXXXXXXXXXXXXXXX";"#,
            &["T00000000", "XXXXXXXXXXXXXXXXXXXXXXXX"],
            &[("slack_token", 1)],
        );
        check(
            r#"var remote = "https:\/\/deploy:Tr0ub4dor-and-3@git.example.com\/app.git";"#,
            &["Tr0ub4dor-and-3"],
            &[("url_credentials", 1)],
        );
        check(
            r#"curl -H "Authorization: Bearer abcdefghij\/klmnopqrstuvwxyz0123""#,
            &["abcdefghij", "klmnopqrstuvwxyz0123"],
            &[("bearer_token", 1)],
        );
    }

    #[test]
    fn an_escaped_slash_with_another_escape_still_hides_nothing() {
        // A `\u` escape and a `\/` in the same token; then a token found decoded in the
        // same string as one split by `\/`, whose string is re-encoded.
        check(
            r#"{"t":"\u0067hp_0123456789\/aBcDeFgHiJkLmNoPqRsTuVwXyZ"}"#,
            &["0123456789", "aBcDeFgHiJkLmNoPqRsTuVwXyZ"],
            &[("github_token", 1)],
        );
        check(
            r#"{"t":"\u0067hp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 and ghp_0123456789\/aBcDeFgHiJkLmNoPqRsTuVwXyZ"}"#,
            &["0123456789", "aBcDeFgHiJkLmNoPqRsTuVwXyZ"],
            &[("github_token", 2)],
        );
    }

    #[test]
    fn escaped_slashes_in_ordinary_json_and_code_stay() {
        for plain in [
            r#"{"url":"https:\/\/github.com\/rust-lang\/regex\/blob\/master\/src\/lib.rs"}"#,
            r#"{"path":"src\/handoff\/secrets\/rules.rs","line":12}"#,
            r#"const re = /^https?:\/\/[a-z]+\/docs\/[A-Za-z0-9_-]{20,}$/;"#,
            r#"sed -e 's/\/usr\/local\/lib\/python3\/dist-packages/\/opt/' setup.cfg"#,
        ] {
            let r = redact(plain.as_bytes());
            assert!(r.counts.is_empty(), "{plain}: {:?}", r.counts);
        }
    }
}

mod aws_pair {
    use super::*;

    const ID: &str = "AKIAQWERTYUIOPASDF12";
    const SESSION_ID: &str = "ASIAQWERTYUIOPASDF34";
    const SECRET: &str = "Zx9/Kq2+Lm4Np6Rs8Tu0Vw1Xy3Za5Bc7De9Fg2Hj";

    #[test]
    fn a_bare_secret_key_beside_its_key_id_is_found() {
        let both = [("aws_access_key", 1), ("aws_secret_key", 1)];
        check(&format!("{ID} {SECRET}"), &[ID, SECRET], &both);
        check(&format!("keys: {ID}, {SECRET}."), &[ID, SECRET], &both);
        // The credentials CSV the AWS console hands out.
        check(
            &format!("User name,Access key ID,Secret access key\ndeploy,{ID},{SECRET}\n"),
            &[ID, SECRET],
            &both,
        );
        // `aws sts assume-role --output text`: the expiry between id and secret.
        check(
            &format!(
                "CREDENTIALS\t{SESSION_ID}\t2026-12-03T13:00:00+00:00\t{SECRET}\tFwoGZXIvYXdzEBYaDH\n"
            ),
            &[SESSION_ID, SECRET],
            &both,
        );
        // The same output inside a transcript's JSON string (tabs escaped).
        let line = serde_json::json!({"out": format!("CREDENTIALS\t{SESSION_ID}\t2026-12-03T13:00:00+00:00\t{SECRET}\n")}).to_string();
        check(&line, &[SESSION_ID, SECRET], &both);
    }

    #[test]
    fn a_key_id_beside_something_else_finds_only_the_id() {
        let id_only = [("aws_access_key", 1)];
        let word = "abcdefghij".repeat(4);
        for other in [
            // A commit id, a long word, a path, a 41-character run.
            "0123456789abcdef0123456789abcdef01234567",
            word.as_str(),
            "src/handoff/secrets/rules/table/aws/keys",
            "Zx9/Kq2+Lm4Np6Rs8Tu0Vw1Xy3Za5Bc7De9Fg2HjQ",
        ] {
            check(&format!("{ID} {other}"), &[ID], &id_only);
        }
        // The secret on the next line is no longer beside the id.
        let out = check(&format!("{ID}\n{SECRET}\n"), &[ID], &id_only);
        assert!(out.contains(SECRET), "{out}");
        // Too far away.
        let far = format!("{ID} {} {SECRET}", "word ".repeat(20));
        let out = check(&far, &[ID], &id_only);
        assert!(out.contains(SECRET), "{out}");
    }
}

mod base64_pem {
    use super::*;

    fn pem(label: &str) -> String {
        format!(
            "-----BEGIN {label}-----\nMIIEowIBAAKCAQEAv1QmZx7Yp3kTnR8sWqLd2Fh0Uc9JbVe4Ga6KoXiMtNwPyEzDr\n\
             Qm5hY2tlZCBrZXkgbWF0ZXJpYWwgZm9yIHRlc3RpbmcgcHVycG9zZXMgb25seQ\n-----END {label}-----\n"
        )
    }

    fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    #[test]
    fn a_base64_encoded_private_key_is_found() {
        for label in [
            "RSA PRIVATE KEY",
            "PRIVATE KEY",
            "OPENSSH PRIVATE KEY",
            "EC PRIVATE KEY",
            "ENCRYPTED PRIVATE KEY",
        ] {
            let encoded = b64(&pem(label));
            assert!(encoded.starts_with("LS0tLS1CRUdJTi"), "{encoded}");
            let middle = &encoded[80..120];
            let tail = &encoded[encoded.len() - 30..];
            let want = [("private_key_block", 1)];
            // A kubeconfig or a Kubernetes secret, a JSON value, a bare line.
            check(
                &format!("users:\n- user:\n    client-key-data: {encoded}\n"),
                &[middle, tail],
                &want,
            );
            check(
                &serde_json::json!({"data": {"tls.key": encoded}}).to_string(),
                &[middle, tail],
                &want,
            );
            check(&encoded, &[middle, tail], &want);
            // `base64 key.pem`: wrapped at 76 columns, every line goes.
            let wrapped: Vec<&str> = encoded
                .as_bytes()
                .chunks(76)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            let last = wrapped[wrapped.len() - 1];
            let out = check(
                &format!("{}\nnext: line\n", wrapped.join("\n")),
                &[middle, &wrapped[1][..40], last],
                &want,
            );
            assert!(out.ends_with("\nnext: line\n"), "{out}");
        }
    }

    #[test]
    fn base64_of_certificates_and_public_keys_stays() {
        for label in ["CERTIFICATE", "PUBLIC KEY", "RSA PUBLIC KEY", "X509 CRL"] {
            let encoded = b64(&pem(label));
            let yaml = format!("    certificate-authority-data: {encoded}\n");
            assert!(redact(yaml.as_bytes()).counts.is_empty(), "{label}: {yaml}");
        }
        // The prefix alone, in code that tests for it.
        let code = r#"if data.starts_with("LS0tLS1CRUdJTi") { decode_pem(data) }"#;
        assert!(redact(code.as_bytes()).counts.is_empty());
    }
}
