//! Handoff CLI: the secret shapes issue 28 found stored (a key split across two text
//! blocks of a session, a bare AWS secret key beside its id, a base64-encoded PEM key, a
//! token cut by `\/`), and what `save DIR` stores besides file contents (names, symlink
//! targets, the manifest's fields).

use super::*;

/// A Claude Code session whose key is split across two text blocks of one message
/// (issue 28: 65 of the key's 95 characters were stored): the key goes whole from the
/// normalised transcript and from the session's own attachment, and block refuses.
#[test]
fn a_key_split_across_two_text_blocks_never_reaches_the_store() {
    let env = Env::new();
    env.init();
    let ws = common::git_workspace(&env);
    let sessions = common::claude_project_dir(env.path(), &ws);
    let key = format!(
        "sk-ant-api03-{}A1b2",
        "Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz2Xc4Vb6Nm8".repeat(2)
    );
    assert_eq!(key.len(), 95);
    let (left, right) = key.split_at(30);
    let id = "5p117000-aaaa-4bbb-8ccc-000000000001";
    let header = |t: &str| json!({"sessionId": id, "cwd": s(&ws), "timestamp": t});
    let mut user = header("2026-12-01T10:00:00.000Z");
    user["type"] = json!("user");
    user["message"] = json!({"role": "user", "content": "Where is the deploy key?"});
    let mut assistant = header("2026-12-01T10:00:05.000Z");
    assistant["type"] = json!("assistant");
    assistant["message"] = json!({"id": "msg_01", "role": "assistant", "content": [
        {"type": "text", "text": format!("It is {left}")},
        {"type": "text", "text": format!("{right}, in .env.")},
    ]});
    fs::write(
        sessions.join(format!("{id}.jsonl")),
        format!("{user}\n{assistant}\n"),
    )
    .expect("write session");
    let args = ["save", "--no-brief", "--transcript", "claude-code:latest"];

    let before = snapshot_files(&env.store());
    let mut block = args.to_vec();
    block.extend(["--secrets", "block"]);
    let out = baton_in(&env, &ws, &block);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("anthropic_api_key"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains(right), "{}", stderr(&out));
    assert_eq!(snapshot_files(&env.store()), before, "block wrote");

    let saved = json_in(&env, &ws, &args);
    assert_eq!(
        saved["secrets"],
        json!({ "anthropic_api_key": 2 }),
        "{saved}"
    );
    let events: Vec<Value> = cat(&env, "current:transcript.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("transcript line is JSON"))
        .collect();
    assert_eq!(
        events.last().expect("events")["text"],
        "It is [REDACTED:anthropic_api_key], in .env."
    );
    let raw_path = bundle_files(&env, "current")
        .into_keys()
        .find(|p| p.starts_with("attachments/transcript/claude-code-"))
        .expect("the session's attachment");
    let raw = cat(&env, &format!("current:{raw_path}"));
    let line: Value = serde_json::from_str(raw.lines().nth(1).expect("line 2")).expect("JSON");
    assert_eq!(
        line["message"]["content"][0]["text"],
        "It is [REDACTED:anthropic_api_key]"
    );
    assert_eq!(
        line["message"]["content"][1]["text"],
        "[REDACTED:anthropic_api_key], in .env."
    );
    for (where_, content) in all_objects(&env.store())
        .iter()
        .chain(plain_files(&env.store()).iter())
    {
        for piece in [right, &right[..20], &right[45..], &left[13..]] {
            assert!(
                !contains(content, piece.as_bytes()),
                "{piece} is in {where_}"
            );
        }
    }
}

/// `save DIR` scans what handoffs scan besides file contents (issue 28): file and
/// directory names, symlink targets and the manifest's fields, under the same
/// `--secrets` mode as the contents. Block refuses naming kind and place, redact stores
/// placeholders (names too, never two entries under one name), allow stores and reports.
#[test]
fn save_dir_scans_names_symlink_targets_and_fields() {
    let env = Env::new();
    env.init();
    let token = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8";
    let aws = "AKIAQWERTYUIOPASDF12";
    let password = "Corr3ct-H0rse-Battery";
    let dir = env.path().join("d");
    fs::create_dir_all(dir.join(format!("keys-{aws}"))).expect("mkdir");
    fs::write(dir.join(format!("{token}.txt")), "clean\n").expect("write");
    fs::write(dir.join(format!("keys-{aws}/a.cfg")), "clean\n").expect("write");
    fs::write(dir.join("plain.txt"), "nothing here\n").expect("write");
    std::os::unix::fs::symlink(format!("/run/keys/{token}"), dir.join("link")).expect("link");
    let summary = format!("rotate {token}");
    let meta = format!("ci={token}");
    let note = format!("DB_PASSWORD={password}");
    let from = format!("bot {token}");
    let to = format!("ops {aws}");
    let args = |mode: &'static str| -> Vec<String> {
        [
            "save",
            "d",
            "--summary",
            &summary,
            "--note",
            &note,
            "--meta",
            &meta,
            "--from",
            &from,
            "--to",
            &to,
            "--secrets",
            mode,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let values = [token, aws, password];
    let no_values = |text: &str, what: &str| {
        for value in values {
            assert!(!text.contains(value), "{what} shows {value}: {text}");
        }
    };

    let before = snapshot_files(&env.store());
    let block = args("block");
    let block: Vec<&str> = block.iter().map(String::as_str).collect();
    let out = baton_in(&env, env.path(), &block);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    let err = stderr(&out);
    for place in [
        "the name of [REDACTED:github_token].txt",
        "the name of keys-[REDACTED:aws_access_key]",
        "the target of symlink link",
        "--summary",
        "--note",
        "--meta ci",
        "--from",
        "--to",
    ] {
        assert!(err.contains(place), "{place} not named: {err}");
    }
    for kind in ["github_token", "aws_access_key", "password_assignment"] {
        assert!(err.contains(kind), "{kind} not named: {err}");
    }
    no_values(&err, "block stderr");
    assert_eq!(snapshot_files(&env.store()), before, "block wrote");

    // Redact: placeholders in names, the target and every field; reported by place.
    let redact = args("redact");
    let redact: Vec<&str> = redact.iter().map(String::as_str).collect();
    let saved = json_ok(&env, &redact);
    no_values(&saved.to_string(), "redact --json");
    let placed: BTreeSet<(String, String)> = saved["secrets"]
        .as_array()
        .expect("secrets")
        .iter()
        .map(|f| {
            (
                f["in"].as_str().unwrap_or_default().to_string(),
                f["path"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    for (place, path) in [
        ("name", "[REDACTED:github_token].txt"),
        ("name", "keys-[REDACTED:aws_access_key]"),
        ("symlink_target", "link"),
        ("--summary", ""),
        ("--meta ci", ""),
    ] {
        assert!(
            placed.contains(&(place.to_string(), path.to_string())),
            "{place} {path}: {placed:?}"
        );
    }
    let show = json_ok(&env, &["show", "current"]);
    let paths: BTreeSet<&str> = show["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["path"].as_str().expect("path"))
        .collect();
    assert_eq!(
        paths,
        BTreeSet::from([
            "[REDACTED:github_token].txt",
            "keys-[REDACTED:aws_access_key]",
            "keys-[REDACTED:aws_access_key]/a.cfg",
            "link",
            "plain.txt"
        ])
    );
    assert_eq!(
        cat(&env, "current:link"),
        "/run/keys/[REDACTED:github_token]"
    );
    assert_eq!(show["summary"], "rotate [REDACTED:github_token]");
    assert_eq!(show["note"], "DB_PASSWORD=[REDACTED:password_assignment]");
    assert_eq!(show["metadata"]["ci"], "[REDACTED:github_token]");
    assert_eq!(show["from"], "bot [REDACTED:github_token]");
    assert_eq!(show["to"], "ops [REDACTED:aws_access_key]");
    let reported = show["metadata"]["secrets.redacted"]
        .as_str()
        .expect("report");
    for part in ["github_token (", "file name", "symlink target", "--summary"] {
        assert!(reported.contains(part), "{part}: {reported}");
    }
    for (where_, content) in all_objects(&env.store())
        .iter()
        .chain(plain_files(&env.store()).iter())
    {
        for value in values {
            assert!(
                !contains(content, value.as_bytes()),
                "{value} is in {where_}"
            );
        }
    }

    // Allow: stored as they are, and reported.
    let allow = args("allow");
    let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
    let saved = json_ok(&env, &allow);
    assert!(
        saved["secrets"].as_array().is_some_and(|a| a.len() >= 8),
        "{saved}"
    );
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["summary"], summary.as_str());
    assert_eq!(cat(&env, "current:link"), format!("/run/keys/{token}"));
    let allowed = show["metadata"]["secrets.allowed"]
        .as_str()
        .expect("report");
    for part in ["github_token (", "aws_access_key (", "--note"] {
        assert!(allowed.contains(part), "{part}: {allowed}");
    }

    // Two names that redact to one are refused, not merged.
    let twins = env.path().join("twins");
    fs::create_dir_all(&twins).expect("mkdir");
    fs::write(twins.join(format!("{token}.txt")), "one\n").expect("write");
    fs::write(
        twins.join("ghp_Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2.txt"),
        "two\n",
    )
    .expect("write");
    let before = snapshot_files(&env.store());
    let out = baton_in(&env, env.path(), &["save", "twins", "--secrets", "redact"]);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[REDACTED:github_token].txt"),
        "{}",
        stderr(&out)
    );
    no_values(&stderr(&out), "collision stderr");
    assert_eq!(snapshot_files(&env.store()), before, "a collision wrote");
}

/// The rules issue 28 added, end to end through `save DIR`: a bare AWS secret key beside
/// its id, a base64-encoded PEM key and a token cut by `\/` before its minimum.
#[test]
fn save_dir_finds_the_new_secret_shapes() {
    use base64::Engine;
    let env = Env::new();
    env.init();
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAv1QmZx7Yp3kTnR8sWqLd2Fh0Uc9JbVe4Ga6KoXiMtNwPyEzDr\n-----END RSA PRIVATE KEY-----\n";
    let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
    let aws_secret = "Zx9/Kq2+Lm4Np6Rs8Tu0Vw1Xy3Za5Bc7De9Fg2Hj";
    env.write_tree(
        "n",
        &[
            (
                "creds.csv",
                format!("Access key ID,Secret access key\nAKIAQWERTYUIOPASDF12,{aws_secret}\n")
                    .as_bytes(),
            ),
            (
                "kubeconfig",
                format!("users:\n- user:\n    client-key-data: {b64}\n").as_bytes(),
            ),
            (
                "api.js",
                br#"fetch(u, {headers: {"X": "ghp_0123456789\/aBcDeFgHiJkLmNoPqRsTuVwXyZ"}});"#,
            ),
        ],
    );
    let before = snapshot_files(&env.store());
    let out = baton_in(&env, env.path(), &["save", "n"]);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("3 files hold secrets"), "{err}");
    for kind in ["aws_secret_key", "private_key_block", "github_token"] {
        assert!(err.contains(kind), "{kind}: {err}");
    }
    assert_eq!(snapshot_files(&env.store()), before);
    let saved = json_ok(&env, &["save", "n", "--secrets", "redact"]);
    assert_eq!(
        saved["secrets"].as_array().map(Vec::len),
        Some(3),
        "{saved}"
    );
    for (where_, content) in all_objects(&env.store()) {
        for piece in [
            aws_secret,
            &b64[40..100],
            "0123456789",
            "aBcDeFgHiJkLmNoPqRsTuVwXyZ",
        ] {
            assert!(
                !contains(&content, piece.as_bytes()),
                "{piece} is in {where_}"
            );
        }
    }
}

/// A handoff's `--meta` keys and its workspace's path go into the manifest: scanned like
/// its values (issue 28 left them out), redacted by default, refused under block.
#[test]
fn a_handoff_scans_meta_keys_and_the_workspace_path() {
    let env = Env::new();
    env.init();
    let token = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8";
    let ws = env.path().join(format!("ws-{token}"));
    fs::create_dir_all(&ws).expect("workspace");
    fs::write(ws.join("a.txt"), "one\n").expect("a.txt");
    common::git(&ws, &["init", "-q"]);
    common::git(&ws, &["add", "-A"]);
    common::git(&ws, &["commit", "-q", "-m", "base"]);
    let meta = format!("{token}=x");
    let store = env.store();
    let store = store.to_str().expect("store path");

    let before = snapshot_files(&env.store());
    let out = baton_in(
        &env,
        &ws,
        &[
            "--store",
            store,
            "save",
            "--no-brief",
            "--meta",
            &meta,
            "--secrets",
            "block",
        ],
    );
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(!stderr(&out).contains(token), "{}", stderr(&out));
    assert_eq!(snapshot_files(&env.store()), before, "block wrote");

    let out = baton_in(
        &env,
        &ws,
        &[
            "--store",
            store,
            "--json",
            "save",
            "--no-brief",
            "--meta",
            &meta,
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let shown = baton_in(&env, &ws, &["--store", store, "--json", "show", "current"]);
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(shown.contains("[REDACTED:github_token]"), "{shown}");
    assert!(
        !shown.contains(token),
        "the manifest keeps the token: {shown}"
    );
}
