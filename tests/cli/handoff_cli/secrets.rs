//! Handoff CLI: secrets never reach the store.

use super::*;

// ---------------------------------------------------------------------------------------
// 3. Secrets never reach the store
// ---------------------------------------------------------------------------------------

/// One planted example per secret kind: (kind, the secret value that must vanish, the
/// line it is planted in).
fn planted_secrets() -> Vec<(&'static str, String, String)> {
    let pem_body = "MIIEowIBAAKCAQEAv1QmZx7Yp3kTnR8sWqLd2Fh0Uc9JbVe4Ga6KoXiMtNwPyEzDr";
    let pem = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\nQm5hY2tlZCBrZXkgbWF0ZXJpYWwgZm9yIHRlc3RpbmcgcHVycG9zZXMgb25seQ\n-----END RSA PRIVATE KEY-----"
    );
    let aws_id = "AKIAQWERTYUIOPASDF12".to_string();
    let aws_secret = "Zx9/Kq2+Lm4Np6Rs8Tu0Vw1Xy3Za5Bc7De9Fg2Hj".to_string();
    let ghp = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8".to_string();
    let pat = "github_pat_11AAAAAAA0bcdefghijklm_NOPQRSTUVWXYZabcdef0123456789".to_string();
    let ant = "sk-ant-api03-Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe_dcba-9876".to_string();
    let oai = "sk-proj-Mn8Bv7Cx6Zl5Kj4Hg3Fd2Sa1Qw0ErTyUiOp".to_string();
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZXBsb3kiLCJleHAiOjk5OTk5OTk5OTl9.dGhpcy1pcy1ub3QtYS1yZWFsLXNpZ25hdHVyZQ".to_string();
    let slack = "xoxb-2048-4096-QwErTyUiOpAsDfGh".to_string();
    let stripe = "sk_live_51HxYzAbCdEfGhIjKlMnOpQr".to_string();
    let google = "AIzaSyB-abcdefghij0123456789_KLMNOPQRST".to_string();
    let gitlab = "glpat-x1Y2z3W4v5U6t7S8r9Q0".to_string();
    let npm = "npm_Zq8Wx7Ec6Rv5Tb4Yn3Um2Ik1Ol0PaSdFgHjK".to_string();
    let hf = "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".to_string();
    let bearer = "8f14e45fceea167a5a36dedd4bea2543aa01".to_string();
    let url_pw = "Tr0ub4dor-and-3".to_string();
    let db_pw = "Corr3ct-H0rse-Battery".to_string();
    let mut planted = vec![
        (
            "aws_access_key",
            aws_id.clone(),
            format!("The deploy user is {aws_id} in us-east-1."),
        ),
        (
            "aws_secret_key",
            aws_secret.clone(),
            format!("aws_secret_access_key = {aws_secret}"),
        ),
        (
            "github_token",
            ghp.clone(),
            format!("CI uses {ghp} for releases."),
        ),
        (
            "github_token",
            pat.clone(),
            format!("The bot's fine-grained token: {pat}"),
        ),
        (
            "anthropic_api_key",
            ant.clone(),
            format!("Claude key {ant} is in the vault."),
        ),
        (
            "openai_api_key",
            oai.clone(),
            format!("The embedding job calls {oai} nightly."),
        ),
        ("private_key_block", pem_body.to_string(), pem),
        (
            "bearer_jwt",
            jwt.clone(),
            format!("A session cookie looked like {jwt} in the log."),
        ),
        (
            "slack_token",
            slack.clone(),
            format!("Alerts post with {slack} to #ops."),
        ),
        (
            "stripe_key",
            stripe.clone(),
            format!("Billing tests were run with {stripe} by mistake."),
        ),
        (
            "google_api_key",
            google.clone(),
            format!("Maps are loaded with {google} today."),
        ),
        (
            "gitlab_token",
            gitlab.clone(),
            format!("The mirror pushes with {gitlab} nightly."),
        ),
        (
            "npm_token",
            npm.clone(),
            format!("Publishing uses {npm} from CI."),
        ),
        (
            "huggingface_token",
            hf.clone(),
            format!("Model downloads use {hf} for auth."),
        ),
        (
            "bearer_token",
            bearer.clone(),
            format!("curl -H 'Authorization: Bearer {bearer}' https://api.example.com/v1/me"),
        ),
        (
            "url_credentials",
            url_pw.clone(),
            format!(
                "The old remote was https://deploy:{url_pw}@git.example.com/app.git until May."
            ),
        ),
        (
            "password_assignment",
            db_pw.clone(),
            format!("DB_PASSWORD={db_pw}"),
        ),
    ];
    // The kinds added for issue 10, each in a sentence (SendGrid and PyPI went through
    // in full before).
    for (kind, value) in [
        (
            "sendgrid_api_key",
            "SG.u8jzPde0IgxLd6GncfBAep.fJBd0Kh8oOOL8dKLzdocJ2isAjIhKtJ0RlgLKOmxgJT",
        ),
        (
            "pypi_token",
            "pypi-AgEIcHlwaS5vcmcihA-2O76UMFxFkM-R5Kjp1vRt_1fjORS-6ilI8ihN5KXSc7Tvo-hBKqFYY-k",
        ),
        ("twilio_key", "SK5ec84d8dbc74254770f58904dba41ecc"),
        (
            "digitalocean_token",
            "dop_v1_ff9243a8f506b40928b5b7a767c76fb008f86bebb2737f6a6f0fb23c6f5da2ce",
        ),
        ("shopify_token", "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"),
        (
            "age_secret_key",
            "AGE-SECRET-KEY-16GFPUTQFTF78R57XR0V3ZXUPYU5V3U70SVUG68EU5Y0MYDN8FHFSGAWXEL",
        ),
        (
            "vault_token",
            "hvs.kQ1okTBGzvAmwufUxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B26R08qzjI6GKFSufrdZSlB5er8bOfZqfM2oeq3hDavJA7",
        ),
        (
            "doppler_token",
            "dp.pt.6rNicHTp8hkqdlm7tOtHWnsCGRlrwZbqcabUGJmGEp7",
        ),
        ("databricks_token", "dapie3dfc967a64cb14028d512c9791e558e"),
        (
            "linear_api_key",
            "lin_api_aqx9vJupc94tnwlavyfErGPmpGXafq0fjzLczbtt",
        ),
        (
            "postman_api_key",
            "PMAK-724caf4941d4072014b3ce10-7f80e222f828767efc2f91624a8940f1f8",
        ),
        (
            "pulumi_token",
            "pul-36f99eee3692f09e2e8c662248b483b7ffc050fe",
        ),
        ("square_token", "sq0atp-ztUjAwyuh1vauWv1zh87mT"),
        (
            "grafana_token",
            "glsa_a5Vsqxezy3Lex7BWr2drgd1QsO7jprBG_a6bd0c62",
        ),
        (
            "sentry_token",
            "sntrys_d7UACNWiP3sFd67JikEAvstqVVPqzPptEJQzhkPkenG5ZFJoC6vWCBiJmpfl",
        ),
        ("new_relic_key", "NRAK-V9FUPXQMB0Y07NYRVD5RXI67NFR"),
        ("mailchimp_api_key", "7cced9041dff02cee737443e21047194-us14"),
    ] {
        planted.push((
            kind,
            value.to_string(),
            format!("Also found {value} in a config."),
        ));
    }
    let basic = "dXNlcjpodW50ZXIyLWJhc2ljLWF1dGg=";
    planted.push((
        "basic_auth",
        basic.to_string(),
        format!("curl -H 'Authorization: Basic {basic}' https://api.example.com/"),
    ));
    planted
}

/// A valid briefing with every planted secret in its Current State.
fn secret_briefing(secrets: &[(&str, String, String)]) -> String {
    let mut text = String::from(
        "# Handoff\n\n## Objective\n\nRotate every credential that leaked into the repository.\n\n\
         ## Current State\n\nFound so far:\n\n",
    );
    for (_, _, line) in secrets {
        text.push_str("```\n");
        text.push_str(line);
        text.push_str("\n```\n\n");
    }
    text.push_str("## Next Steps\n\n1. Revoke each of them.\n");
    text
}

/// A transcript with each planted line as a JSON string value.
fn secret_transcript(secrets: &[(&str, String, String)]) -> String {
    let mut text = String::new();
    text.push_str(&json!({ "role": "user", "content": "find the leaked credentials" }).to_string());
    text.push('\n');
    for (i, (_, _, line)) in secrets.iter().enumerate() {
        let event =
            json!({ "role": "tool", "n": i, "content": format!("$ grep -r creds\n{line}\n") });
        text.push_str(&event.to_string());
        text.push('\n');
    }
    text
}

#[test]
fn secrets_are_redacted_everywhere_and_block_writes_nothing() {
    let secrets = planted_secrets();
    let planted_kinds: BTreeSet<&str> = secrets.iter().map(|(k, _, _)| *k).collect();
    let known: BTreeSet<&str> = KINDS.iter().copied().collect();
    assert_eq!(
        planted_kinds, known,
        "plant one example of every kind in KINDS"
    );

    let env = Env::new();
    env.init();
    // The workspace is a git repository with the same secrets in a staged file, so they
    // are in the staged patch too.
    let work = git_init(&env.path().join("work"));
    commit(&work, "README.md", "# app\n", "first");
    let all_lines: String = secrets.iter().map(|(_, _, l)| format!("{l}\n")).collect();
    fs::write(work.join("leak.txt"), &all_lines).expect("write");
    git(&work, &["add", "leak.txt"]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, secret_briefing(&secrets)).expect("write");
    let transcript = env.path().join("session.jsonl");
    fs::write(&transcript, secret_transcript(&secrets)).expect("write");
    let attach_dir = env.path().join("evidence-files");
    fs::create_dir_all(&attach_dir).expect("mkdir");
    fs::write(attach_dir.join("creds.txt"), &all_lines).expect("write");
    let save_args = |mode: &str| -> Vec<String> {
        vec![
            "save".into(),
            "--brief".into(),
            s(&brief),
            "--transcript".into(),
            s(&transcript),
            "--attach".into(),
            s(&attach_dir),
            "--secrets".into(),
            mode.into(),
        ]
    };
    let no_values = |text: &str, what: &str| {
        for (kind, value, _) in &secrets {
            assert!(
                !text.contains(value.as_str()),
                "{what} shows the {kind} value: {text}"
            );
        }
    };

    // Every location holds every planted line once: briefing, transcript, attachment,
    // staged patch. github_token has two examples.
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for (kind, _, _) in &secrets {
        *expected.entry(kind.to_string()).or_insert(0) += 4;
    }
    let described = expected
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");

    // Block: refused with exit 6, nothing written, no value echoed.
    let before = snapshot_files(&env.store());
    let args = save_args("block");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = baton_in(&env, &work, &args);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: refusing to save: the handoff contains secrets ("),
        "{err}"
    );
    assert!(err.contains(&described), "{err}");
    no_values(&err, "block stderr");
    no_values(&stdout(&out), "block stdout");
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "block wrote to the store"
    );
    let mut json_args = vec!["--json"];
    json_args.extend_from_slice(&args);
    let out = baton_in(&env, &work, &json_args);
    assert_eq!(code(&out), 6);
    let d = doc(&out);
    assert_eq!(d["error"]["code"], "security");
    no_values(&d.to_string(), "block --json");
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "block wrote to the store"
    );

    // Redact (the default): kinds and counts in the note, never a value.
    let args = save_args("redact");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = baton_in(&env, &work, &args[..args.len() - 2]);
    let out_text = ok(out.clone(), "save");
    assert_eq!(out_text.trim().len(), 64, "{out_text}");
    let err = stderr(&out);
    assert!(
        err.contains(&format!("note: redacted secrets ({described})")),
        "{err}"
    );
    no_values(&err, "save stderr");
    no_values(&out_text, "save stdout");
    let saved = json_in(&env, &work, &args);
    assert_eq!(
        saved["secrets"],
        serde_json::to_value(&expected).expect("json")
    );
    no_values(&saved.to_string(), "save --json");
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["metadata"]["secrets.redacted"], described.as_str());
    assert_eq!(
        show["summary"],
        "Rotate every credential that leaked into the repository."
    );

    // The redacted files are still what they were: a valid briefing, JSON lines.
    let handoff = cat(&env, "current:handoff.md");
    let transcript_back = cat(&env, "current:transcript.jsonl");
    for line in transcript_back.lines() {
        serde_json::from_str::<Value>(line).expect("transcript line is still JSON");
    }
    let attachment = cat(&env, "current:attachments/evidence-files/creds.txt");
    let patch = cat(&env, "current:evidence/staged.patch");
    for (kind, _, _) in &secrets {
        let placeholder = format!("[REDACTED:{kind}]");
        for (what, text) in [
            ("handoff.md", &handoff),
            ("transcript", &transcript_back),
            ("attachment", &attachment),
            ("staged.patch", &patch),
        ] {
            assert!(
                text.contains(&placeholder),
                "{what} lacks {placeholder}:\n{text}"
            );
        }
    }
    let found = json_ok(&env, &["search", "current", "REDACTED"]);
    assert_eq!(found["total_matches"], secrets.len());

    // Every byte of the store: decompressed objects (loose and packed) and plain files.
    let objects = all_objects(&env.store());
    assert!(objects.len() >= 10, "{} objects", objects.len());
    for (where_, content) in objects.iter().chain(plain_files(&env.store()).iter()) {
        for (kind, value, _) in &secrets {
            assert!(
                !contains(content, value.as_bytes()),
                "the {kind} value is in {where_}"
            );
        }
    }
    for kind in KINDS {
        let placeholder = format!("[REDACTED:{kind}]");
        assert!(
            objects
                .iter()
                .any(|(_, c)| contains(c, placeholder.as_bytes())),
            "no object holds {placeholder}"
        );
    }
    // The same holds after a push: the remote holds packs, and they are clean too.
    let remote = env.path().join("remote");
    env.ok(&["target", "add", "r", &s(&remote)]);
    env.ok(&["push"]);
    let packed = all_objects(&remote);
    assert!(
        packed.iter().any(|(w, _)| w.starts_with("packs/")),
        "no packs"
    );
    for (where_, content) in &packed {
        for (kind, value, _) in &secrets {
            assert!(
                !contains(content, value.as_bytes()),
                "the {kind} value is in {where_}"
            );
        }
    }
}

/// Tokens hidden by JSON escapes in a transcript and a JSON attachment: a `\u0061` in a
/// GitHub token (stored verbatim before), a `\/` splitting an Anthropic key (half
/// redacted before). They are found decoded, and the stored lines stay JSON.
#[test]
fn secrets_behind_json_escapes_never_reach_the_store() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let gh = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8";
    let ant = "sk-ant-api03-Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe_dcba-9876";
    // Pieces that must not survive anywhere, escaped or not.
    let pieces = [&gh[5..], &ant[..24], &ant[25..]];
    let gh_escaped = format!("{}\\u0031{}", &gh[..4], &gh[5..]);
    let ant_split = format!("{}\\/{}", &ant[..24], &ant[24..]);
    let transcript = env.path().join("session.jsonl");
    fs::write(
        &transcript,
        format!(
            "{{\"role\":\"user\",\"content\":\"hi\"}}\n\
             {{\"role\":\"tool\",\"content\":\"GH_TOKEN is {gh_escaped}\\n\"}}\n\
             {{\"role\":\"tool\",\"content\":\"key {ant_split} \\ud83d\\ude00\"}}\n"
        ),
    )
    .expect("write");
    let attach = env.path().join("creds.json");
    fs::write(
        &attach,
        format!("{{\n  \"a\": \"{gh_escaped}\",\n  \"b\": [\"{ant_split}\"]\n}}\n"),
    )
    .expect("write");
    let args = [
        "save",
        "--brief",
        &s(&brief),
        "--transcript",
        &s(&transcript),
        "--attach",
        &s(&attach),
    ];
    let before = snapshot_files(&env.store());
    let mut block = args.to_vec();
    block.extend(["--secrets", "block"]);
    let out = baton_in(&env, &ws, &block);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("anthropic_api_key: 2, github_token: 2"),
        "{}",
        stderr(&out)
    );
    assert_eq!(snapshot_files(&env.store()), before, "block wrote");

    let saved = json_in(&env, &ws, &args);
    assert_eq!(
        saved["secrets"],
        json!({ "anthropic_api_key": 2, "github_token": 2 })
    );
    let back = cat(&env, "current:transcript.jsonl");
    let lines: Vec<Value> = back
        .lines()
        .map(|l| serde_json::from_str(l).expect("transcript line is still JSON"))
        .collect();
    assert_eq!(lines[1]["content"], "GH_TOKEN is [REDACTED:github_token]\n");
    assert_eq!(
        lines[2]["content"],
        "key [REDACTED:anthropic_api_key] \u{1f600}"
    );
    let json_back: Value =
        serde_json::from_str(&cat(&env, "current:attachments/creds.json")).expect("still JSON");
    assert_eq!(json_back["a"], "[REDACTED:github_token]");
    for (where_, content) in all_objects(&env.store())
        .iter()
        .chain(plain_files(&env.store()).iter())
    {
        for piece in pieces {
            assert!(
                !contains(content, piece.as_bytes()),
                "{piece} is in {where_}"
            );
        }
    }
}

#[test]
fn secrets_in_manifest_fields_are_redacted_too() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let token = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8";
    let out = baton_in(
        &env,
        &ws,
        &[
            "save",
            "--brief",
            &s(&brief),
            "--summary",
            &format!("rotate {token}"),
            "--note",
            "DB_PASSWORD=Corr3ct-H0rse-Battery",
            "--meta",
            &format!("ci={token}"),
        ],
    );
    ok(out, "save");
    for (where_, content) in all_objects(&env.store())
        .iter()
        .chain(plain_files(&env.store()).iter())
    {
        for value in [token, "Corr3ct-H0rse-Battery"] {
            assert!(
                !contains(content, value.as_bytes()),
                "{value} is in {where_}"
            );
        }
    }
}
