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
