//! The personal-data scan on the shapes it must find and the look-alikes it must not.

use super::*;

fn kinds(text: &str) -> Vec<&'static str> {
    find(text.as_bytes(), &Keep::default())
        .into_iter()
        .map(|(_, k)| k)
        .collect()
}

fn redacted(text: &str) -> String {
    String::from_utf8(redact(text.as_bytes(), &Keep::default()).bytes).unwrap()
}

#[test]
fn finds_each_kind() {
    for (text, kind) in [
        ("mail jane.doe+x@corp-mail.co.uk today", "email"),
        ("call +1 415 555 2671", "phone"),
        ("+44 20 7946 0958", "phone"),
        ("+49 (0)30 1234567", "phone"),
        ("+14155552671", "phone"),
        ("(415) 555-2671", "phone"),
        ("415-555-2671", "phone"),
        ("1-800-555-2671", "phone"),
        ("415.555.2671", "phone"),
        ("Tel: 020 7946 0958", "phone"),
        ("mobile 06 12 34 56 78", "phone"),
        ("call 07113 539569", "phone"),
        ("+81-3-6088-3775", "phone"),
        ("+33 1 23 45 67 89", "phone"),
        ("SSN 123-45-6789", "ssn"),
        ("123-45-6789", "ssn"),
        ("ssn: 123 45 6789", "ssn"),
        ("4111 1111 1111 1111", "card"),
        ("4111-1111-1111-1111", "card"),
        ("card 5555555555554444", "card"),
        ("Visa: 4012888888881881", "card"),
        ("3782 822463 10005", "card"),
    ] {
        assert_eq!(kinds(text), vec![kind], "{text}");
    }
}

#[test]
fn placeholders_are_typed() {
    assert_eq!(
        redacted("Jane <jane@corp.io>, 415-555-2671, 123-45-6789, 4111 1111 1111 1111."),
        "Jane <[REDACTED:email]>, [REDACTED:phone], [REDACTED:ssn], [REDACTED:card]."
    );
    let once = redacted("jane@corp.io +1 415 555 2671");
    assert_eq!(redacted(&once), once);
}

#[test]
fn leaves_look_alikes() {
    for text in [
        "version 1.2.3.4567 and 10.0.0.1:8080",
        "2026-12-04 19:26:42 +0000, 2026-12-04T19:26:42+05:30",
        "src/main.rs:415:55 and ports 8000-8080",
        "commit 4111111111111111abc and 0x4111111111111111",
        "4111111111111112",
        "000-12-3456 666-12-3456 912-34-5678 123-00-4567 123-45-0000",
        "256 512 1024 2048",
        "415 555 2671",
        "1700000000000000000",
        "git@github.com:owner/repo.git",
        "ssh://git@host/x and https://jane@host.io/path",
        "icon@2x.png and x@y.js",
        "noreply@anthropic.com 12345+jane@users.noreply.github.com bob@example.com a@b.test",
        "1.0.0+20130313144700 x+12345678 +12345678",
        "uuid 550e8400-e29b-41d4-a716-446655440000",
        "123456789 and 123 45 6789 without a context word",
        "divide  5578481572827551   5578481572822945",
        "card 4000000000000002 and x = -4012888888881881",
        "+2147483648 +4294967296 +10011010010 +2.99999999999 +345678.5432",
        "aes128-gcm@openssh.com",
        "Message-ID: <15975.17901@mail.corp.io>",
    ] {
        assert_eq!(kinds(text), Vec::<&str>::new(), "{text}");
    }
}

#[test]
fn keeps_commit_identities() {
    let keep = Keep::from_identities(["Jane Doe <Jane@Corp.io>"]);
    assert!(find(b"by jane@corp.io", &keep).is_empty());
    assert_eq!(find(b"by bob@corp.io", &keep).len(), 1);
}

#[test]
fn never_breaks_json_escapes() {
    let line = r#"{"text":"a\nbob@corp.io\u003cjane@corp.io\u003e\n+1 415 555 2671 card\u00204111111111111111"}"#;
    let out = redacted(line);
    assert_eq!(
        out,
        r#"{"text":"a\n[REDACTED:email]\u003c[REDACTED:email]\u003e\n[REDACTED:phone] card\u0020[REDACTED:card]"}"#
    );
    let _: serde_json::Value = serde_json::from_str(&out).unwrap();
}

#[test]
fn luhn_checks() {
    let d = |s: &str| s.bytes().map(|b| b - b'0').collect::<Vec<u8>>();
    assert!(rules::luhn(&d("79927398713")));
    assert!(!rules::luhn(&d("79927398710")));
}
