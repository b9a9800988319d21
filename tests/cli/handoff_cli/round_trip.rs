//! Handoff CLI: save, push, clone, resume across two stores.

use super::*;

// ---------------------------------------------------------------------------------------
// 2. save, push, clone, resume across two stores
// ---------------------------------------------------------------------------------------

#[test]
fn handoff_round_trip_across_stores_with_every_head_relation() {
    let a = Env::new();
    a.init();
    let root = a.path().join("git");
    fs::create_dir_all(&root).expect("mkdir");
    git(&root, &["init", "-q", "--bare", "origin.git"]);
    let origin = root.join("origin.git");
    let w = git_init(&root.join("w"));
    git(&w, &["remote", "add", "origin", &s(&origin)]);
    commit(&w, "a.txt", "a\n", "one");
    commit(&w, "b.txt", "b\n", "two");
    let captured = commit(&w, "c.txt", "c\n", "three");
    git(&w, &["push", "-q", "-u", "origin", "main"]);
    fs::write(w.join("a.txt"), "work in progress\n").expect("write");

    let brief = a.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let id = ok(
        baton_in(
            &a,
            &w,
            &["save", "--brief", &s(&brief), "--from", "a", "--to", "b"],
        ),
        "save",
    )
    .trim()
    .to_string();
    assert_eq!(id.len(), 64, "{id}");
    let remote = a.path().join("remote-store");
    a.ok(&["target", "add", "r", &s(&remote)]);
    let push = json_ok(&a, &["push"]);
    assert_eq!(push["report"]["bundle"], id.as_str());

    // Store B: a clone, used from elsewhere with --store.
    let b = Env::new();
    let store_b = b.path().join("store-b");
    ok(
        baton_in(&b, b.path(), &["clone", &s(&remote), &s(&store_b)]),
        "clone",
    );
    let sb = s(&store_b);
    let resume_in = |dir: &Path| -> Value {
        let value = json_in(&b, dir, &["--store", &sb, "resume"]);
        assert_eq!(value["bundle"], id.as_str());
        assert_eq!(value["verified"], true);
        value
    };
    let workspace_text = |v: &Value| -> String {
        v["kickoff"]["sections"]
            .as_array()
            .expect("sections")
            .iter()
            .find(|s| s["title"] == "Workspace")
            .map(|s| s["text"].as_str().unwrap_or_default().to_string())
            .expect("a Workspace section")
    };

    // (a) the same repository.
    let same = resume_in(&w);
    assert_eq!(same["workspace"]["head"], "same");
    assert_eq!(same["workspace"]["same_repository"], true);
    assert!(workspace_text(&same).contains("- HEAD: same"), "{same}");
    // The kickoff from B equals the one from A: same bundle, same workspace.
    let human_b = ok(
        baton_in(&b, &w, &["--store", &sb, "resume"]),
        "resume from B",
    );
    let human_a = ok(baton_in(&a, &w, &["resume"]), "resume from A");
    assert_eq!(human_a, human_b);

    // (b) a clone with one more commit: ahead.
    let ahead = git_clone(&origin, &root.join("ahead"));
    commit(&ahead, "d.txt", "d\n", "four");
    let v = resume_in(&ahead);
    assert_eq!(v["workspace"]["head"], "ahead");
    assert_eq!(
        (
            v["workspace"]["commits_ahead"].clone(),
            v["workspace"]["commits_behind"].clone()
        ),
        (json!(1), json!(0))
    );
    assert!(
        workspace_text(&v).contains("- HEAD: ahead (live is 1 ahead, 0 behind the captured HEAD)"),
        "{v}"
    );

    // (c) a clone reset to an older commit: behind.
    let behind = git_clone(&origin, &root.join("behind"));
    git(&behind, &["reset", "-q", "--hard", "HEAD~2"]);
    let v = resume_in(&behind);
    assert_eq!(v["workspace"]["head"], "behind");
    assert_eq!(v["workspace"]["commits_behind"], 2);
    assert!(workspace_text(&v).contains("- HEAD: behind"), "{v}");

    // (d) a clone that went its own way: diverged.
    let diverged = git_clone(&origin, &root.join("diverged"));
    git(&diverged, &["reset", "-q", "--hard", "HEAD~1"]);
    commit(&diverged, "e.txt", "e\n", "elsewhere");
    let v = resume_in(&diverged);
    assert_eq!(v["workspace"]["head"], "diverged");
    assert_eq!(
        (
            v["workspace"]["commits_ahead"].clone(),
            v["workspace"]["commits_behind"].clone()
        ),
        (json!(1), json!(1))
    );
    assert!(workspace_text(&v).contains("- HEAD: diverged"), "{v}");

    // (e) an unrelated repository.
    let unrelated = git_init(&root.join("unrelated"));
    commit(&unrelated, "x.txt", "something else\n", "unrelated root");
    let v = resume_in(&unrelated);
    assert_eq!(v["workspace"]["head"], "unrelated");
    assert_eq!(v["workspace"]["same_repository"], false);
    assert!(workspace_text(&v).contains("- HEAD: unrelated"), "{v}");
    assert!(
        workspace_text(&v).contains("a different repository than the one captured"),
        "{v}"
    );

    // (f) not a git directory at all.
    let plain = root.join("plain");
    fs::create_dir_all(&plain).expect("mkdir");
    let v = resume_in(&plain);
    assert_eq!(v["workspace"]["head"], "unknown");
    assert_eq!(v["workspace"]["same_repository"], Value::Null);
    assert!(workspace_text(&v).contains("- HEAD: unknown"), "{v}");
    assert!(workspace_text(&v).contains("not a git repository"), "{v}");

    // The captured HEAD never moved in any of this.
    assert_eq!(git(&w, &["rev-parse", "HEAD"]), captured);

    // A corrupted object of the bundle in B: resume refuses with exit 4.
    let show = json_in(&b, b.path(), &["--store", &sb, "show", &id]);
    let blob = files_of(&show)["handoff.md"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    corrupt_object(&store_b, &blob);
    let out = baton_in(&b, &w, &["--store", &sb, "resume"]);
    assert_eq!(code(&out), 4, "{} {}", stdout(&out), stderr(&out));
    assert!(stdout(&out).is_empty(), "no kickoff: {}", stdout(&out));
    let out = baton_in(&b, &w, &["--json", "--store", &sb, "resume"]);
    assert_eq!(code(&out), 4);
    assert_eq!(doc(&out)["error"]["code"], "integrity");
    // A still resumes: its copy is intact.
    assert_eq!(json_in(&a, &w, &["resume"])["verified"], true);
}

#[test]
fn resume_refuses_a_bundle_damaged_where_the_kickoff_does_not_read() {
    // The kickoff is prepared while the bundle is verified: damage in a file preparing
    // never reads (the captured patch) must still refuse the resume, with no kickoff.
    let env = Env::new();
    env.init();
    let w = git_init(&env.path().join("w"));
    commit(&w, "a.txt", "a\n", "one");
    fs::write(w.join("a.txt"), "work in progress\n").expect("write");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let id = ok(baton_in(&env, &w, &["save", "--brief", &s(&brief)]), "save")
        .trim()
        .to_string();
    let files = files_of(&json_in(&env, &w, &["show", &id]));
    let (path, entry) = files
        .iter()
        .find(|(p, _)| p.starts_with("evidence/") && p.ends_with(".patch"))
        .unwrap_or_else(|| panic!("a captured patch among {:?}", files.keys()));
    let blob = entry["id"].as_str().expect("id").to_string();
    assert_eq!(json_in(&env, &w, &["resume"])["verified"], true);
    corrupt_object(&env.store(), &blob);
    let out = baton_in(&env, &w, &["resume"]);
    assert_eq!(code(&out), 4, "{path}: {} {}", stdout(&out), stderr(&out));
    assert!(stdout(&out).is_empty(), "no kickoff: {}", stdout(&out));
    assert!(stderr(&out).contains("does not verify"), "{}", stderr(&out));
}

#[test]
fn resume_refuses_a_bundle_whose_transcript_is_damaged() {
    // The verify leaves `transcript.jsonl` to the read of its recent turns, which checks
    // every byte as it reads: damage there refuses the resume as the verify would.
    let env = Env::new();
    env.init();
    let w = git_init(&env.path().join("w"));
    commit(&w, "a.txt", "a\n", "one");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let session = env.path().join("claude-code.jsonl");
    super::transcripts::plant_session(
        "fixtures/transcripts/claude-code/main.jsonl",
        &session,
        &w,
        &env.path().join("elsewhere"),
        1,
    );
    let saved = doc(&baton_in(
        &env,
        &w,
        &[
            "--json",
            "save",
            "--brief",
            &s(&brief),
            "--transcript",
            &s(&session),
        ],
    ));
    let id = saved["bundle"].as_str().expect("bundle id").to_string();
    let resumed = json_in(&env, &w, &["resume"]);
    assert_eq!(resumed["verified"], true);
    assert!(
        resumed["kickoff"].to_string().contains("Recent turns"),
        "{resumed}"
    );
    let files = files_of(&json_in(&env, &w, &["show", &id]));
    let blob = files["transcript.jsonl"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    corrupt_object(&env.store(), &blob);
    let out = baton_in(&env, &w, &["resume"]);
    assert_eq!(code(&out), 4, "{} {}", stdout(&out), stderr(&out));
    assert!(stdout(&out).is_empty(), "no kickoff: {}", stdout(&out));
    assert!(stderr(&out).contains("does not verify"), "{}", stderr(&out));
}
