//! The prefilter: every rule is reachable through its anchors, and the rules it selects
//! are always a superset of those the full rule set says match.

use super::rules::{RULE_SET, RULES, candidate_rules};

/// A text that each rule matches, by kind (several for a kind with several rules).
fn samples() -> Vec<(&'static str, String)> {
    let a = |n: usize| "a".repeat(n);
    let hex32 = "0123456789abcdef".repeat(2);
    vec![
        (
            "aws_secret_key",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n".into(),
        ),
        (
            "aws_secret_key",
            "ASIAABCDEFGHIJKLMNOP\tZx9/Kq2+Lm4Np6Rs8Tu0Vw1Xy3Za5Bc7De9Fg2Hj\n".into(),
        ),
        ("anthropic_api_key", format!("sk-ant-api03-{}", a(24))),
        ("openai_api_key", format!("key sk-{}", a(24))),
        ("openai_api_key", format!("sk-proj-{}", a(24))),
        ("github_token", format!("ghp_{}", "a1B2c3D4e5".repeat(4))),
        ("github_token", format!("github_pat_{}", a(22))),
        ("stripe_key", format!("rk_test_{}", a(24))),
        ("slack_token", "xoxb-1234567890-abcdefghij".into()),
        ("google_api_key", format!("AIza{}", a(35))),
        ("aws_access_key", "ASIAABCDEFGHIJKLMNOP".into()),
        ("gitlab_token", format!("glsoat-{}", a(20))),
        ("npm_token", format!("npm_{}", a(36))),
        ("huggingface_token", format!("api_org_{}", a(34))),
        ("sendgrid_api_key", format!("SG.{}.{}", a(22), a(43))),
        ("pypi_token", format!("pypi-AgEIcHlwaS5vcmc{}", a(50))),
        ("twilio_key", format!("AC{hex32}")),
        ("digitalocean_token", format!("dor_v1_{}", a(64))),
        ("shopify_token", format!("shpss_{}", a(32))),
        (
            "age_secret_key",
            format!("AGE-SECRET-KEY-1{}", "Q".repeat(58)),
        ),
        ("vault_token", format!("hvb.{}", a(90))),
        ("doppler_token", format!("dp.audit.{}", a(40))),
        ("databricks_token", format!("dapi{}", a(32))),
        ("linear_api_key", format!("lin_api_{}", a(40))),
        ("postman_api_key", format!("PMAK-{}-{}", a(24), a(34))),
        ("pulumi_token", format!("pul-{}", a(40))),
        ("square_token", format!("EAAA{}", a(60))),
        ("grafana_token", format!("glsa_{}_{}", a(32), "0a1b2c3d")),
        ("sentry_token", format!("sntryu_{}", a(40))),
        ("new_relic_key", format!("NRJS-{}", a(27))),
        ("mailchimp_api_key", format!("{hex32}-us12")),
        ("basic_auth", "AUTHORIZATION: basic dXNlcjpwYXNz".into()),
        ("bearer_jwt", "eyJhbGciOiJ.eyJzdWIiOiIx.c2ln".into()),
        ("bearer_token", format!("BeArEr {}", a(24))),
        ("url_credentials", "https://user:hunter2@example.com".into()),
        (
            "url_credentials",
            r"https:\/\/user:hunter2@example.com".into(),
        ),
        (
            "slack_token",
            format!(r"hooks.slack.com\/services\/{}", "T0\\/".repeat(15)),
        ),
        (
            "password_assignment",
            r#""Client_Secret": "hunter2""#.into(),
        ),
        (
            "password_assignment",
            r#"ACCOUNT-KEY: str = "hunter2""#.into(),
        ),
        ("password_assignment", "DB_PASSWD=hunter2".into()),
        ("password_assignment", "apikey: hunter2".into()),
    ]
}

#[test]
fn every_rule_is_reachable_through_the_prefilter() {
    let samples = samples();
    for (index, rule) in RULES.iter().enumerate() {
        assert!(!rule.anchors.is_empty(), "{} has no anchors", rule.kind);
        let matching: Vec<&String> = samples
            .iter()
            .filter(|(kind, text)| *kind == rule.kind && rule.re().is_match(text.as_bytes()))
            .map(|(_, text)| text)
            .collect();
        assert!(
            !matching.is_empty(),
            "no sample matches rule {index} ({})",
            rule.kind
        );
        for text in matching {
            assert!(
                candidate_rules(text.as_bytes()).contains(&index),
                "the prefilter skips rule {index} ({}) for {text:?}",
                rule.kind
            );
            // The anchor is inside the match itself, not just somewhere in the sample.
            let whole = rule
                .re()
                .find(text.as_bytes())
                .map(|m| m.as_bytes().to_ascii_lowercase());
            let whole = whole.unwrap_or_default();
            assert!(
                rule.anchors.iter().any(|a| {
                    let a = a.to_ascii_lowercase();
                    whole.windows(a.len()).any(|w| w == a.as_bytes())
                }),
                "no anchor of rule {index} ({}) inside its match in {text:?}",
                rule.kind
            );
        }
    }
}

#[test]
fn the_prefilter_selects_every_rule_the_full_set_matches() {
    // Texts built from pieces of every sample, mixed with separators, cut at random
    // points and with letters flipped in case: whatever the full set finds, the
    // prefilter must have selected.
    let pieces: Vec<String> = samples().into_iter().map(|(_, t)| t).collect();
    let glue = [
        " ", "\n", "=", ": ", "\"", "\\n", "/", "-", "_", "x", ".", "@",
    ];
    let mut state = 0x5eed_u64;
    let mut next = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as usize) % n
    };
    let mut checked = 0;
    for _ in 0..8000 {
        let mut text = String::new();
        for _ in 0..1 + next(4) {
            let piece = &pieces[next(pieces.len())];
            let from = next(piece.len().min(8) + 1);
            let to = piece.len() - next(piece.len().min(8) + 1);
            if let Some(cut) = piece.get(from..to.max(from)) {
                text.push_str(cut);
            }
            text.push_str(glue[next(glue.len())]);
        }
        if next(3) == 0 {
            text = text
                .chars()
                .map(|c| {
                    if next(4) == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
        }
        let selected = candidate_rules(text.as_bytes());
        for index in RULE_SET.matches(text.as_bytes()).iter() {
            checked += 1;
            assert!(
                selected.contains(&index),
                "rule {index} ({}) matches {text:?} but the prefilter skipped it",
                RULES[index].kind
            );
        }
    }
    assert!(checked > 1500, "too few matches exercised: {checked}");
}
