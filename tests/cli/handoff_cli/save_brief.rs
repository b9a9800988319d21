//! Handoff CLI: save --brief against a real repository with every kind of change.

use super::*;

// ---------------------------------------------------------------------------------------
// 1. save --brief against a real repository with every kind of change
// ---------------------------------------------------------------------------------------

/// A bare origin, a workspace clone on `feature` that is one commit ahead of and one
/// behind `origin/feature`, in the middle of a conflicted merge, with staged, unstaged and
/// untracked files. Returns (origin, workspace, root commit).
fn messy_workspace(root: &Path) -> (PathBuf, PathBuf, String) {
    let origin = root.join("origin.git");
    fs::create_dir_all(root).expect("mkdir");
    git(root, &["init", "-q", "--bare", "origin.git"]);
    let seed = git_init(&root.join("seed"));
    git(&seed, &["remote", "add", "origin", &s(&origin)]);
    let first = commit(&seed, "README.md", "# project\n", "first");
    commit(&seed, "tracked.txt", "tracked\n", "add tracked");
    commit(&seed, "conflict.txt", "base\n", "add conflict.txt");
    git(&seed, &["push", "-q", "-u", "origin", "main"]);
    git(&seed, &["checkout", "-q", "-b", "feature"]);
    commit(&seed, "feature.txt", "feature\n", "start feature");
    git(&seed, &["push", "-q", "-u", "origin", "feature"]);

    let work = git_clone(&origin, &root.join("work"));
    git(&work, &["checkout", "-q", "feature"]);
    // Someone else pushes to origin/feature; the workspace fetches: behind by 1.
    commit(&seed, "upstream.txt", "upstream\n", "upstream change");
    git(&seed, &["push", "-q", "origin", "feature"]);
    // A side branch that conflicts with the workspace's own commit.
    git(&work, &["checkout", "-q", "-b", "other"]);
    commit(&work, "conflict.txt", "theirs\n", "theirs");
    commit(&work, "merged-clean.txt", "clean\n", "clean addition");
    git(&work, &["checkout", "-q", "feature"]);
    // A local commit whose subject holds a token: evidence carries commit subjects.
    commit(
        &work,
        "conflict.txt",
        "ours\n",
        "ours (rotated ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789)",
    );
    git(&work, &["fetch", "-q", "origin"]);
    git_fails(&work, &["merge", "-q", "--no-edit", "other"]);
    // During the conflicted merge: a staged new file, an unstaged edit, an untracked file.
    fs::write(work.join("staged.txt"), "staged content\n").expect("write");
    git(&work, &["add", "staged.txt"]);
    fs::write(work.join("tracked.txt"), "tracked changed\n").expect("write");
    fs::create_dir_all(work.join("notes")).expect("mkdir");
    fs::write(work.join("notes/todo.txt"), "remember the milk\n").expect("write");
    (origin, work, first)
}

#[test]
fn save_captures_git_evidence_and_never_touches_the_workspace() {
    let env = Env::new();
    env.init();
    let (origin, work, first) = messy_workspace(&env.path().join("git"));
    let head = git(&work, &["rev-parse", "HEAD"]);
    fs::write(
        env.path().join("transcript.jsonl"),
        "{\"role\":\"user\",\"content\":\"merge other into feature\"}\n",
    )
    .expect("write");
    fs::write(env.path().join("notes.md"), "attached notes\n").expect("write");

    // Stat-dirty but content-clean: a `git status` that may take locks, or a porcelain
    // `git diff`, would refresh and rewrite the index for this file.
    fs::File::options()
        .write(true)
        .open(work.join("README.md"))
        .expect("open")
        .set_modified(SystemTime::now() - std::time::Duration::from_secs(400 * 86_400))
        .expect("set mtime");
    let index = work.join(".git/index");
    let index_before = fs::read(&index).expect("index");
    let before = dir_state(&work);

    // Briefing on stdin, run inside the workspace; the store is found upwards.
    let objective = "Merge the other branch into feature. Keep both changes.";
    let transcript = s(&env.path().join("transcript.jsonl"));
    let notes = s(&env.path().join("notes.md"));
    let out = baton_stdin(
        &env,
        &work,
        &[
            "--json",
            "save",
            "--brief",
            "-",
            "--from",
            "claude",
            "--to",
            "codex",
            "--transcript",
            &transcript,
            "--attach",
            &notes,
            "--note",
            "mid-merge",
        ],
        chat_briefing(objective).as_bytes(),
    );
    let saved = doc(&out);
    assert!(out.status.success(), "{saved} {}", stderr(&out));
    let id = saved["bundle"].as_str().expect("bundle id").to_string();
    assert_eq!(saved["kind"], "handoff");
    assert_eq!(saved["partial"], json!([]));
    // The token in a commit subject is found twice: evidence.json and context.md.
    assert_eq!(saved["secrets"], json!({ "github_token": 2 }));

    // Baton changed nothing in the workspace, .git/index included.
    assert!(
        fs::read(&index).expect("index") == index_before,
        ".git/index changed"
    );
    assert_same_dir_state(&before, &dir_state(&work), "after save");

    // The manifest.
    let show = json_ok(&env, &["show", &id]);
    assert_eq!(show["from"], "claude");
    assert_eq!(show["to"], "codex");
    assert_eq!(show["note"], "mid-merge");
    assert_eq!(show["summary"], "Merge the other branch into feature.");
    assert_eq!(show["metadata"]["kind"], "handoff");
    assert_eq!(show["metadata"]["workspace"], canonical(&work).as_str());
    assert_eq!(show["metadata"]["secrets.redacted"], "github_token: 2");
    assert!(
        show["metadata"].get("evidence.partial").is_none(),
        "{}",
        show["metadata"]
    );
    let files = bundle_files(&env, &id);
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "attachments/notes.md",
            "context.md",
            "evidence/evidence.json",
            "evidence/staged.patch",
            "evidence/unstaged.patch",
            "handoff.md",
            "transcript.jsonl",
        ]
    );
    assert_eq!(
        cat(&env, "current:handoff.md"),
        normalized_briefing(objective)
    );
    assert_eq!(
        cat(&env, "current:attachments/notes.md"),
        "attached notes\n"
    );

    // evidence.json, field by field.
    let evidence: Value =
        serde_json::from_str(&cat(&env, "current:evidence/evidence.json")).expect("evidence");
    assert_eq!(evidence["version"], 1);
    assert_eq!(evidence["workspace"], canonical(&work).as_str());
    assert_eq!(evidence["partial"], json!([]));
    let g = &evidence["git"];
    assert_eq!(g["root"], canonical(&work).as_str());
    assert_eq!(g["branch"], "feature");
    assert_eq!(g["head"], head.as_str());
    assert_eq!(g["upstream"], "origin/feature");
    assert_eq!(
        (g["ahead"].clone(), g["behind"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(
        g["remotes"],
        json!([{ "name": "origin", "url": s(&origin) }])
    );
    assert_eq!(g["root_commits"], json!([first]));
    let subjects: Vec<&str> = g["recent_commits"]
        .as_array()
        .expect("commits")
        .iter()
        .map(|c| c["subject"].as_str().expect("subject"))
        .collect();
    assert_eq!(
        subjects,
        [
            "ours (rotated [REDACTED:github_token])",
            "start feature",
            "add conflict.txt",
            "add tracked",
            "first"
        ]
    );
    assert_eq!(g["recent_commits"][0]["id"], head.as_str());
    assert_eq!(
        g["recent_commits"][0]["author"],
        "Test Author <test@example.com>"
    );
    assert_eq!(
        g["staged"],
        json!([
            { "path": "merged-clean.txt", "status": "added" },
            { "path": "staged.txt", "status": "added" },
        ])
    );
    assert_eq!(
        g["unstaged"],
        json!([{ "path": "tracked.txt", "status": "modified" }])
    );
    assert_eq!(g["conflicted"], json!(["conflict.txt"]));
    let todo = b"remember the milk\n";
    assert_eq!(
        g["untracked"],
        json!([{
            "path": "notes/todo.txt",
            "size": todo.len(),
            "id": blake3::hash(todo).to_hex().to_string(),
        }])
    );

    // The patches are there, with the right halves of the change in each.
    let staged = cat_bytes(&env, "current:evidence/staged.patch");
    let unstaged = cat_bytes(&env, "current:evidence/unstaged.patch");
    assert_eq!(g["staged_patch_bytes"], staged.len());
    assert_eq!(g["unstaged_patch_bytes"], unstaged.len());
    assert_eq!(files["evidence/staged.patch"]["size"], staged.len());
    let staged = String::from_utf8_lossy(&staged);
    let unstaged = String::from_utf8_lossy(&unstaged);
    assert!(
        staged.contains("diff --git a/staged.txt b/staged.txt"),
        "{staged}"
    );
    assert!(staged.contains("+staged content"), "{staged}");
    assert!(staged.contains("+clean"), "{staged}");
    assert!(!staged.contains("tracked changed"), "{staged}");
    assert!(
        unstaged.contains("diff --git a/tracked.txt b/tracked.txt"),
        "{unstaged}"
    );
    assert!(unstaged.contains("+tracked changed"), "{unstaged}");
    assert!(!unstaged.contains("staged content"), "{unstaged}");

    // context.md says the same in prose.
    let context = cat(&env, "current:context.md");
    for line in [
        format!("Captured read-only from `{}` at ", canonical(&work)),
        "- branch: feature".to_string(),
        format!("- HEAD: {head}"),
        "- upstream: origin/feature (ahead 1, behind 1)".to_string(),
        format!("- remote origin: {}", s(&origin)),
        format!("- root commit(s): {first}"),
        "Staged: 2".to_string(),
        "- merged-clean.txt (added)".to_string(),
        "- staged.txt (added)".to_string(),
        "Unstaged: 1".to_string(),
        "- tracked.txt (modified)".to_string(),
        "Conflicted: 1".to_string(),
        "- conflict.txt".to_string(),
        "Untracked: 1 (18 bytes; contents not saved unless attached)".to_string(),
        "- notes/todo.txt (18 bytes, ".to_string(),
        format!(
            "- staged.patch: {} bytes, in `evidence/staged.patch`",
            staged.len()
        ),
        format!(
            "- unstaged.patch: {} bytes, in `evidence/unstaged.patch`",
            unstaged.len()
        ),
        "ours (rotated [REDACTED:github_token])".to_string(),
    ] {
        assert!(
            context.contains(&line),
            "context.md lacks {line:?}:\n{context}"
        );
    }
    assert!(!context.contains("Partial capture"), "{context}");

    // Resuming in the same workspace: the redacted evidence still parses, HEAD is the
    // same, and resume does not change the workspace either.
    let resume = json_in(&env, &work, &["resume"]);
    assert_eq!(resume["verified"], true);
    assert_eq!(resume["bundle"], id.as_str());
    assert_eq!(resume["workspace"]["head"], "same");
    assert_eq!(resume["workspace"]["same_repository"], true);
    assert_eq!(resume["workspace"]["captured_uncommitted"], true);
    assert!(
        fs::read(&index).expect("index") == index_before,
        ".git/index changed"
    );
    assert_same_dir_state(&before, &dir_state(&work), "after resume");

    // Control: an ordinary `git status` does rewrite the index here, so the checks above
    // would have seen a capture that did the same.
    git(&work, &["status", "--porcelain"]);
    assert!(
        fs::read(&index).expect("index") != index_before,
        "control: git status left the index alone"
    );
}

#[test]
fn large_patches_become_attachments_summarised_in_context() {
    let env = Env::new();
    env.init();
    let repo = git_init(&env.path().join("repo"));
    commit(&repo, "small.txt", "small\n", "base");
    // Over 256 KiB of staged text, and a small unstaged edit.
    let big: String = (0..12_000)
        .map(|i| format!("line {i:06} of a generated file\n"))
        .collect();
    assert!(big.len() > 256 << 10);
    fs::write(repo.join("big.txt"), &big).expect("write");
    git(&repo, &["add", "big.txt"]);
    fs::write(repo.join("small.txt"), "small edited\n").expect("write");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let out = baton_in(&env, &repo, &["save", "--brief", &s(&brief)]);
    ok(out, "save");
    let files = bundle_files(&env, "current");
    assert!(
        files.contains_key("attachments/patches/staged.patch"),
        "{files:?}"
    );
    assert!(!files.contains_key("evidence/staged.patch"), "{files:?}");
    assert!(files.contains_key("evidence/unstaged.patch"), "{files:?}");
    let size = files["attachments/patches/staged.patch"]["size"]
        .as_u64()
        .expect("size");
    assert!(size > 256 << 10);
    let context = cat(&env, "current:context.md");
    assert!(
        context.contains(&format!(
            "- staged.patch: {size} bytes, in `attachments/patches/staged.patch`"
        )),
        "{context}"
    );
    let patch = cat(&env, "current:attachments/patches/staged.patch");
    assert!(patch.contains("+line 011999 of a generated file"));
}
