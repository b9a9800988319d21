//! Local-path targets: diverged lines converge through merge.

use super::*;

// ---------------------------------------------------------------------------------------
// Merge: diverged lines converge
// ---------------------------------------------------------------------------------------

/// A briefing whose Next Steps is `step`.
fn briefing_text(objective: &str, step: &str) -> String {
    format!(
        "# Handoff\n\n## Objective\n\n{objective}\n\n## Current State\n\nState of {objective}\n\n## Next Steps\n\n1. {step}\n"
    )
}

/// Save a handoff of the env's `work` directory with `step` as its Next Steps.
pub(crate) fn save_handoff(env: &Env, objective: &str, step: &str, from: &str, to: &str) -> String {
    fs::write(env.path().join("brief.md"), briefing_text(objective, step)).unwrap();
    let doc = json_ok(
        env,
        &[
            "save", "work", "--brief", "brief.md", "--from", from, "--to", to,
        ],
    );
    doc["bundle"].as_str().unwrap().to_string()
}

/// Two clones of one local remote, each with a handoff saved on the same parent, and A
/// has pushed. Returns (holder, remote, a, b, A's bundle, B's bundle).
fn two_lines() -> (Env, PathBuf, Env, Env, String, String) {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let seed = Env::new();
    seed.init();
    seed.write_tree("work", &[("notes.txt", b"base\n")]);
    save_handoff(&seed, "Base", "Start", "seed", "");
    seed.ok(&["target", "add", "origin", s(&remote)]);
    json_ok(&seed, &["push"]);
    let a = clone_env(&remote);
    let b = clone_env(&remote);
    let a_id = save_handoff(&a, "Ship the parser", "Write the grammar", "alice", "bob");
    let b_id = save_handoff(&b, "Ship the docs", "Publish the manual", "carol", "dave");
    json_ok(&a, &["push"]);
    (holder, remote, a, b, a_id, b_id)
}

/// `two_lines`, then B has pulled (diverged, exit 5): `targets/origin` is A's bundle.
fn diverged_pair() -> (Env, PathBuf, Env, Env, String, String) {
    let (holder, remote, a, b, a_id, b_id) = two_lines();
    let err = json_err(&b, &["pull"], 5);
    assert_eq!(err["code"], "store_conflict", "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("store_conflict"),
        "{err}"
    );
    let hint = err["hint"].as_str().unwrap_or("");
    assert!(hint.contains("baton merge targets/origin"), "{err}");
    assert!(hint.contains("baton reset targets/origin"), "{err}");
    assert_eq!(
        json_ok(&b, &["show", "targets/origin"])["id"],
        a_id.as_str()
    );
    (holder, remote, a, b, a_id, b_id)
}

fn short(id: &str) -> &str {
    &id[..12]
}

#[test]
fn merge_keeps_both_lines_and_push_then_fast_forwards() {
    let (_holder, remote, a, b, a_id, b_id) = two_lines();

    // B's push loses the race: store_conflict, and the hint offers merge before reset.
    let before = snapshot_files(&remote);
    let err = json_err(&b, &["push"], 5);
    assert_eq!(err["code"], "store_conflict");
    assert!(
        err["message"].as_str().unwrap().contains("store_conflict"),
        "{err}"
    );
    let hint = err["hint"].as_str().unwrap_or("");
    let merge_at = hint
        .find("baton merge targets/origin")
        .expect("merge in hint");
    let reset_at = hint
        .find("baton reset targets/origin")
        .expect("reset in hint");
    assert!(merge_at < reset_at, "{hint}");
    assert_eq!(snapshot_files(&remote), before);

    // B pulls: diverged (exit 5), A's bundle fetched as targets/origin.
    let err = json_err(&b, &["pull"], 5);
    assert!(
        err["message"].as_str().unwrap().contains("store_conflict"),
        "{err}"
    );
    assert!(
        err["hint"]
            .as_str()
            .unwrap_or("")
            .contains("baton merge targets/origin"),
        "{err}"
    );

    // The merge: parents current then REV, both Next Steps labelled.
    let doc = json_ok(&b, &["merge", "targets/origin"]);
    assert_eq!(doc["merged"], true, "{doc}");
    let merge_id = doc["bundle"].as_str().unwrap().to_string();
    assert_eq!(doc["parents"], serde_json::json!([b_id, a_id]), "{doc}");
    let shown = json_ok(&b, &["show", "current"]);
    assert_eq!(shown["id"], merge_id.as_str());
    let handoff = b.ok(&["cat", "current:handoff.md"]);
    let ours = handoff
        .find(&format!("### From {} (carol -> dave)", short(&b_id)))
        .unwrap_or_else(|| panic!("B's label missing:\n{handoff}"));
    let ours_step = handoff.find("1. Publish the manual").expect("B's step");
    let theirs = handoff
        .find(&format!("### From {} (alice -> bob)", short(&a_id)))
        .unwrap_or_else(|| panic!("A's label missing:\n{handoff}"));
    let theirs_step = handoff.find("1. Write the grammar").expect("A's step");
    assert!(
        ours < ours_step && ours_step < theirs && theirs < theirs_step,
        "{handoff}"
    );
    assert!(
        handoff.contains("Ship the docs"),
        "current's Objective: {handoff}"
    );
    // The rest of the tree is current's.
    assert_eq!(
        b.ok(&["cat", "current:context.md"]),
        b.ok(&["cat", &format!("{b_id}:context.md")])
    );

    // log shows it as a merge, in both forms.
    let log = b.ok(&["log", "-n", "1"]);
    assert!(
        log.contains(&format!("Merge:   {} {}", short(&b_id), short(&a_id))),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "Merge targets/origin ({}) into {}",
            short(&a_id),
            short(&b_id)
        )),
        "{log}"
    );
    let bundles = json_ok(&b, &["log"])["bundles"].clone();
    assert_eq!(bundles[0]["id"], merge_id.as_str());
    assert_eq!(bundles[0]["parents"].as_array().unwrap().len(), 2);
    let ids: Vec<&str> = bundles
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&a_id.as_str()) && ids.contains(&b_id.as_str()));

    // The kickoff names both lines and carries both sides' steps.
    let kickoff = b.ok(&["resume", "--workspace", "work"]);
    assert!(
        kickoff.contains(&format!("Merge of: {} and {}", short(&b_id), short(&a_id))),
        "{kickoff}"
    );
    assert!(
        kickoff.contains("Publish the manual") && kickoff.contains("Write the grammar"),
        "{kickoff}"
    );

    // B's push now fast-forwards; A's pull fast-forwards to the merge.
    let doc = json_ok(&b, &["push"]);
    assert_eq!(doc["report"]["remote_before"], a_id.as_str(), "{doc}");
    assert_eq!(disk_current(&remote).as_deref(), Some(merge_id.as_str()));
    let doc = json_ok(&a, &["pull"]);
    assert_eq!(doc["report"]["outcome"], "fast-forward", "{doc}");
    assert_eq!(doc["report"]["current_after"], merge_id.as_str());
    assert_eq!(
        a.ok(&["cat", "current:handoff.md"]),
        handoff,
        "A reads the same merged briefing"
    );
    verify(&a, &a.store());
    verify(&b, &b.store());
    verify(&b, &remote);
    let audit_line = audit(&b)
        .into_iter()
        .rev()
        .find(|e| e["action"] == "merge")
        .expect("a merge line in the audit log");
    assert_eq!(audit_line["old"], b_id.as_str());
    assert_eq!(audit_line["new"], merge_id.as_str());
}

#[test]
fn merge_refuses_what_is_already_merged_and_a_fast_forward() {
    let (_holder, _remote, _a, b, a_id, b_id) = diverged_pair();
    // REV is current itself, or one of its ancestors: exit 0, a note, nothing written.
    let audit_before = audit(&b).len();
    for rev in ["current", "current~1", b_id.as_str()] {
        let doc = json_ok(&b, &["merge", rev]);
        assert_eq!(doc["merged"], false, "{doc}");
        assert_eq!(doc["reason"], "already-merged", "{doc}");
        assert_eq!(disk_current(&b.store()).as_deref(), Some(b_id.as_str()));
    }
    let human = b.ok(&["merge", "current~1"]);
    assert!(human.contains("already merged"), "{human}");

    let merge_id = json_ok(&b, &["merge", "targets/origin"])["bundle"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = json_ok(&b, &["merge", "targets/origin"]);
    assert_eq!(doc["reason"], "already-merged", "{doc}");
    assert_eq!(disk_current(&b.store()).as_deref(), Some(merge_id.as_str()));
    assert_eq!(audit(&b).len(), audit_before + 1, "one merge line, no more");

    // current is an ancestor of REV: that is a fast-forward, done with reset (exit 2).
    json_ok(&b, &["reset", &a_id]);
    let audit_before = audit(&b).len();
    let err = json_err(&b, &["merge", &merge_id], 2);
    assert!(
        err["message"].as_str().unwrap().contains("ancestor"),
        "{err}"
    );
    assert!(
        err["hint"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("baton reset {merge_id}")),
        "{err}"
    );
    assert_eq!(disk_current(&b.store()).as_deref(), Some(a_id.as_str()));
    assert_eq!(audit(&b).len(), audit_before);
    // An unknown REV is not found.
    json_err(&b, &["merge", "0123456789abcdef"], 3);
    verify(&b, &b.store());
}

#[test]
fn merge_with_a_new_briefing_replaces_it_redacted_and_refuses_a_bad_one() {
    let (_holder, remote, a, b, a_id, b_id) = diverged_pair();
    // An invalid briefing is refused like save's, before anything is written.
    fs::write(b.path().join("bad.md"), "## Objective\n\nonly this\n").unwrap();
    let err = json_err(&b, &["merge", "targets/origin", "--brief", "bad.md"], 2);
    assert!(
        err["message"].as_str().unwrap().contains("Next Steps"),
        "{err}"
    );
    json_err(&b, &["merge", "targets/origin", "--brief", "missing.md"], 3);
    assert_eq!(disk_current(&b.store()).as_deref(), Some(b_id.as_str()));

    let secret = "AKIA".to_string() + "Q7RZ3K5M2N8P4T6W";
    let text = format!(
        "# Merged\n\n## Objective\n\nShip both, key {secret}\n\n## Current State\n\nParser and docs on two lines.\n\n## Next Steps\n\n1. Reconcile the grammar with the manual.\n"
    );
    fs::write(b.path().join("merged.md"), &text).unwrap();
    json_err(
        &b,
        &[
            "merge",
            "targets/origin",
            "--brief",
            "merged.md",
            "--secrets",
            "block",
        ],
        6,
    );
    assert_eq!(disk_current(&b.store()).as_deref(), Some(b_id.as_str()));

    let doc = json_ok(
        &b,
        &[
            "merge",
            "targets/origin",
            "--brief",
            "merged.md",
            "--summary",
            "one line again",
        ],
    );
    assert_eq!(doc["briefing"], "new", "{doc}");
    assert_eq!(doc["parents"], serde_json::json!([b_id, a_id]), "{doc}");
    assert_eq!(doc["secrets"]["aws_access_key"], 1, "{doc}");
    let handoff = b.ok(&["cat", "current:handoff.md"]);
    assert!(
        handoff.contains("1. Reconcile the grammar with the manual."),
        "{handoff}"
    );
    assert!(!handoff.contains(&secret), "{handoff}");
    assert!(handoff.contains("[REDACTED:aws_access_key]"), "{handoff}");
    assert!(!handoff.contains("### From"), "{handoff}");
    // The workspace handoff is not re-captured: every other file is current's.
    assert_eq!(
        b.ok(&["cat", "current:context.md"]),
        b.ok(&["cat", &format!("{b_id}:context.md")])
    );
    assert_eq!(
        json_ok(&b, &["show", "current"])["summary"],
        "one line again"
    );
    json_ok(&b, &["push"]);
    assert_eq!(json_ok(&a, &["pull"])["report"]["outcome"], "fast-forward");
    verify(&b, &remote);
}

#[test]
fn a_handoff_that_loses_the_push_race_is_offered_merge_and_converges() {
    let (_holder, remote, a, b, a_id, _b_id) = two_lines();
    fs::write(
        b.path().join("brief.md"),
        briefing_text("Ship the docs", "Index the manual"),
    )
    .unwrap();
    let err = json_err(
        &b,
        &[
            "handoff",
            "--to",
            "erin",
            "--brief",
            "brief.md",
            "--workspace",
            "work",
            "--push",
            "origin",
        ],
        5,
    );
    let hint = err["hint"].as_str().unwrap_or("");
    assert!(hint.contains("baton merge targets/origin"), "{err}");
    assert!(hint.contains("baton reset targets/origin"), "{err}");
    let saved = json_ok(&b, &["show", "current"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    json_err(&b, &["pull"], 5);
    let doc = json_ok(&b, &["merge", "targets/origin"]);
    assert_eq!(doc["parents"], serde_json::json!([saved, a_id]), "{doc}");
    let handoff = b.ok(&["cat", "current:handoff.md"]);
    assert!(
        handoff.contains(&format!("### From {} (-> erin)", short(&saved)))
            && handoff.contains("1. Index the manual")
            && handoff.contains("1. Write the grammar"),
        "{handoff}"
    );
    json_ok(&b, &["push", "origin"]);
    assert_eq!(
        disk_current(&remote).as_deref(),
        doc["bundle"].as_str(),
        "the merge fast-forwarded the target"
    );
    assert_eq!(json_ok(&a, &["pull"])["report"]["outcome"], "fast-forward");
}

#[test]
fn push_and_clone_into_a_non_empty_directory_that_is_not_a_store_are_refused() {
    let remote_env = Env::new();
    let full = remote_env.path().join("project");
    fs::create_dir_all(full.join("src")).unwrap();
    fs::write(full.join("notes.txt"), b"mine\n").unwrap();
    fs::write(full.join("src/lib.rs"), b"// mine\n").unwrap();
    let before = snapshot_files(&full);
    let (env, id) = store_with_target(&full, 61);
    let err = json_err(&env, &["push"], 2);
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("not a baton store"), "{err}");
    assert!(message.contains("notes.txt"), "{err}");
    assert!(
        err["hint"]
            .as_str()
            .unwrap()
            .contains("empty or new directory"),
        "{err}"
    );
    assert_eq!(
        snapshot_files(&full),
        before,
        "nothing written beside the files"
    );
    assert_eq!(fs::read_dir(&full).unwrap().count(), 2);

    // An existing empty directory is fine, and so is pushing to it again.
    let empty = remote_env.path().join("empty");
    fs::create_dir(&empty).unwrap();
    env.ok(&["target", "add", "e", s(&empty)]);
    env.ok(&["push", "e"]);
    assert_eq!(disk_current(&empty).as_deref(), Some(id.as_str()));
    env.ok(&["push", "e"]);

    // clone never writes into a non-empty directory either.
    let dest = Env::new();
    fs::write(dest.path().join("keep.txt"), b"keep\n").unwrap();
    let target = dest.path().join("dest");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("keep.txt"), b"keep\n").unwrap();
    let out = dest.run(&["clone", s(&empty), s(&target)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        fs::read_dir(&target).unwrap().count(),
        1,
        "nothing written into the directory"
    );
}
