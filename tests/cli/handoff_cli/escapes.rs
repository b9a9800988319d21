//! Handoff CLI: audit follow-ups (escapes, imports, flags) and terminal control sequences in stored text.

use super::*;

// ---------------------------------------------------------------------------------------
// Audit follow-ups: escapes, imports and flags
// ---------------------------------------------------------------------------------------

#[test]
fn tokens_after_json_escapes_and_in_from_to_are_redacted() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let transcript = env.path().join("t.jsonl");
    let openai = "sk-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6Kl9No2Qr5T";
    let npm = "npm_UniqueNpmToken0123456789abcdefghijkl";
    fs::write(
        &transcript,
        format!("{{\"out\":\"x\\n{openai}\\t{npm}\"}}\n"),
    )
    .expect("write");
    let aws = "AKIAQ7RZ3K5M2N8P4T6W";
    let out = baton_in(
        &env,
        &ws,
        &[
            "save",
            "--no-brief",
            "--transcript",
            &s(&transcript),
            "--from",
            aws,
            "--secrets",
            "block",
        ],
    );
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    ok(
        baton_in(
            &env,
            &ws,
            &[
                "save",
                "--no-brief",
                "--transcript",
                &s(&transcript),
                "--from",
                aws,
            ],
        ),
        "save",
    );
    for (where_, content) in all_objects(&env.store())
        .iter()
        .chain(plain_files(&env.store()).iter())
    {
        for value in [openai, npm, aws] {
            assert!(!contains(content, value.as_bytes()), "{value} in {where_}");
        }
    }
}

#[test]
fn imported_material_is_scanned_for_secrets() {
    let env = Env::new();
    env.init();
    let dir = env.path().join("fm");
    fs::create_dir_all(&dir).expect("mkdir");
    let token = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8";
    fs::write(
        dir.join("2024-05-01T10-00-00-claude.md"),
        format!(
            "---\nid: a1\nparent: null\nagent: claude\nstatus: completed\nsummary: rotate {token}\nnext_agent: codex\nnext_task: deploy\n---\n\n## Context\npassword=Hunter2Hunter2\n\n## Output\ndone\n"
        ),
    )
    .expect("write");
    let before = snapshot_files(&env.store());
    let out = baton_in(
        &env,
        env.path(),
        &["import-handoff", &s(&dir), "--secrets", "block"],
    );
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert_eq!(snapshot_files(&env.store()), before, "block writes nothing");
    let doc = json_in(&env, env.path(), &["import-handoff", &s(&dir)]);
    assert_eq!(doc["ok"], true, "{doc}");
    assert!(
        doc["secrets"]["github_token"].as_u64().unwrap_or(0) >= 1,
        "{doc}"
    );
    for (where_, content) in all_objects(&env.store())
        .iter()
        .chain(plain_files(&env.store()).iter())
    {
        for value in [token, "Hunter2Hunter2"] {
            assert!(!contains(content, value.as_bytes()), "{value} in {where_}");
        }
    }
}

#[test]
fn handoff_options_without_a_handoff_are_refused() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let before = snapshot_files(&env.store());
    for extra in [
        vec!["--transcript", "t.jsonl"],
        vec!["--attach", "f.txt"],
        // --secrets now applies to plain snapshots too; --no-ignore is a snapshot's only.
        vec!["--no-brief", "--no-ignore"],
    ] {
        let mut args = vec!["save", "."];
        args.extend(extra);
        let out = baton_in(&env, &ws, &args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
    }
    assert_eq!(snapshot_files(&env.store()), before);
}

// ---------------------------------------------------------------------------------------
// Terminal control sequences in stored text
// ---------------------------------------------------------------------------------------

/// Every string value in a JSON document.
fn json_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| json_strings(x, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            out.push(k.clone());
            json_strings(x, out)
        }),
        _ => {}
    }
}

/// A summary, agent names, a file name and a briefing holding an OSC title change
/// (ESC ] 0; ... BEL), a screen clear (ESC [2J) and a CSI (U+009B): `log`, `show` and
/// `resume` print them as visible escapes (they reached the terminal raw before), errors
/// too, while `--json` keeps the exact strings.
#[test]
fn control_sequences_never_reach_the_terminal_raw() {
    let env = Env::new();
    env.init();
    let osc = "\u{1b}]0;owned\u{7}";
    let clear = "\u{1b}[2J";
    let name = format!("notes{osc}.txt");
    let ws = env.write_tree("ws", &[(name.as_str(), b"x\n")]);
    let brief = env.path().join("brief.md");
    fs::write(
        &brief,
        format!(
            "# Handoff\n\n## Objective\n\nShip {clear}it{osc} now.\n\n## Current State\n\n\
             Half done\u{9b}31m.\n\n## Next Steps\n\n1. Finish {osc}.\n"
        ),
    )
    .expect("write");
    let from = format!("alice{osc}");
    let to = format!("bob{clear}");
    let summary = format!("fix{osc}{clear}\r\u{7f}");
    ok(
        baton_in(
            &env,
            &ws,
            &[
                "save",
                "--brief",
                &s(&brief),
                "--from",
                &from,
                "--to",
                &to,
                "--summary",
                &summary,
                "--attach",
                &s(&ws.join(&name)),
            ],
        ),
        "save",
    );
    let raw = |bytes: &[u8]| {
        bytes.iter().any(|b| matches!(b, 0x1b | 0x07 | 0x0d | 0x7f))
            || String::from_utf8_lossy(bytes).contains('\u{9b}')
    };
    for args in [
        &["log"][..],
        &["show", "current"],
        &["resume", "current"],
        &["log", "--audit"],
    ] {
        let out = baton_in(&env, &ws, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(
            !raw(&out.stdout),
            "{args:?} printed raw: {:?}",
            stdout(&out)
        );
        assert!(!raw(&out.stderr), "{args:?} stderr raw: {:?}", stderr(&out));
        let text = stdout(&out);
        if args[0] != "log" || args.len() == 1 {
            assert!(text.contains("\\x1b]0;owned\\x07"), "{args:?}: {text}");
        }
    }
    let out = baton_in(&env, &ws, &["show", "current"]);
    assert!(stdout(&out).contains("notes\\x1b]0;owned\\x07.txt"));
    // An error quoting the input escapes it too.
    let out = baton_in(&env, &ws, &["cat", &format!("current:{name}x")]);
    assert_ne!(code(&out), 0);
    assert!(!raw(&out.stderr), "error printed raw: {:?}", stderr(&out));

    // --json is exact.
    for args in [&["log"][..], &["show", "current"], &["resume", "current"]] {
        let mut strings = Vec::new();
        json_strings(&json_in(&env, &ws, args), &mut strings);
        for exact in [&from, &to, &summary] {
            assert!(
                strings.iter().any(|s| s.contains(exact.as_str())),
                "{args:?} lacks {exact:?}: {strings:?}"
            );
        }
        if args[0] == "show" {
            assert!(
                strings.iter().any(|s| s.ends_with(&name)),
                "{args:?} lacks the file name"
            );
        }
        if args[0] == "resume" {
            assert!(
                strings
                    .iter()
                    .any(|s| s.contains(&format!("Ship {clear}it{osc}"))),
                "resume --json lacks the exact briefing"
            );
        }
    }
}
