//! Handoff CLI: transcript search.

use super::*;

// ---------------------------------------------------------------------------------------
// 6. Transcript search
// ---------------------------------------------------------------------------------------

#[test]
fn transcript_search_pages_follow_the_cursor() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    // 130 matching events between non-matching ones, and a blank line.
    let mut transcript = String::new();
    let mut matching_lines = Vec::new();
    let mut line = 0;
    for i in 0..130 {
        if i % 3 == 0 {
            transcript.push_str(
                &json!({ "role": "assistant", "content": format!("nothing to see {i}") })
                    .to_string(),
            );
            transcript.push('\n');
            line += 1;
        }
        if i == 64 {
            transcript.push('\n');
            line += 1;
        }
        let event = json!({
            "role": "tool",
            "tool": "cargo",
            "content": format!("cargo test: Needle failure number {i} in parser::tests"),
        });
        transcript.push_str(&event.to_string());
        transcript.push('\n');
        line += 1;
        matching_lines.push(line);
    }
    let path = env.path().join("t.jsonl");
    fs::write(&path, &transcript).expect("write");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let with = ok(
        baton_in(
            &env,
            &ws,
            &["save", "--brief", &s(&brief), "--transcript", &s(&path)],
        ),
        "save",
    )
    .trim()
    .to_string();

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut sizes = Vec::new();
    loop {
        let mut args = vec!["search", with.as_str(), "needle PARSER"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let page = json_ok(&env, &args);
        assert_eq!(page["total_matches"], 130);
        assert_eq!(page["truncated_events"], 0);
        let hits = page["hits"].as_array().expect("hits");
        sizes.push(hits.len());
        for hit in hits {
            let content = hit["event"]["content"].as_str().expect("content");
            assert!(content.contains("Needle failure number"), "{hit}");
            seen.push(hit["line"].as_u64().expect("line") as usize);
        }
        let tokens: u64 = hits.iter().map(|h| h["tokens"].as_u64().unwrap()).sum();
        assert!(tokens <= 8000);
        // The same cursor gives the same page, and the text output names the cursor.
        assert_eq!(page, json_ok(&env, &args));
        // Without the total: the same page and cursor, the total left out.
        let mut uncounted = json_ok(&env, &[args.as_slice(), &["--no-total"]].concat());
        assert_eq!(uncounted["total_matches"], Value::Null, "{uncounted}");
        uncounted["total_matches"] = page["total_matches"].clone();
        assert_eq!(uncounted, page);
        let human = env.ok(&args);
        match page["next_cursor"].as_str() {
            Some(next) => {
                assert!(
                    human.contains(&format!("more with --cursor {next}")),
                    "{human}"
                );
                cursor = Some(next.to_string());
            }
            None => {
                assert!(!human.contains("--cursor"), "{human}");
                break;
            }
        }
        assert!(sizes.len() < 10, "the cursor does not advance");
    }
    assert_eq!(sizes, [50, 50, 30]);
    assert_eq!(seen, matching_lines, "every match once, in order");

    // Malformed cursors: usage errors.
    for bad in ["garbage", "c1.", "c1.0", "c1.-5", "c2.10", "c1.12x"] {
        let out = baton_in(
            &env,
            env.path(),
            &["search", &with, "needle", "--cursor", bad],
        );
        assert_eq!(code(&out), 2, "cursor {bad:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("malformed cursor"),
            "{}",
            stderr(&out)
        );
    }
    // A handoff without transcript: not found.
    ok(baton_in(&env, &ws, &["save", "--no-brief"]), "save");
    let out = baton_in(&env, env.path(), &["search", "current", "needle"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("has no transcript"),
        "{}",
        stderr(&out)
    );
    // The older handoff still answers by its id; an unknown revision is not found.
    assert_eq!(
        json_ok(&env, &["search", &with, "needle"])["total_matches"],
        130
    );
    let out = baton_in(&env, env.path(), &["search", &"ab".repeat(32), "needle"]);
    assert_eq!(code(&out), 3);
}

#[test]
fn invalid_transcripts_are_refused_before_anything_is_written() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let before = snapshot_files(&env.store());
    for (bad, line) in [
        ("{\"a\":1}\n[1,2]\n", 2),
        ("{\"a\":1}\n\n{not json\n", 3),
        ("\"just a string\"\n", 1),
    ] {
        let path = env.path().join("t.jsonl");
        fs::write(&path, bad).expect("write");
        let out = baton_in(
            &env,
            &ws,
            &["save", "--brief", &s(&brief), "--transcript", &s(&path)],
        );
        assert_eq!(code(&out), 2, "{bad:?}");
        assert!(
            stderr(&out).contains(&format!("transcript.jsonl line {line}:")),
            "{}",
            stderr(&out)
        );
        assert_eq!(snapshot_files(&env.store()), before);
    }
}
