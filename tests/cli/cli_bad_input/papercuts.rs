//! Bad input a new user met first (issue 33): each refusal names the problem and the fix.

use super::*;

/// `populated`, with a target `devbox` (a local path that does not exist yet).
fn with_devbox() -> Env {
    let env = populated();
    let remote = env.path().join("remote-store");
    env.ok(&["target", "add", "devbox", remote.to_str().unwrap()]);
    env
}

#[test]
fn handoff_to_a_mistyped_target_saves_nothing_and_suggests_the_name() {
    let env = with_devbox();
    env.write_tree("ws", &[("brief.md", b"# Objective\nShip it\n")]);
    let before = env.ok(&["log"]);
    refuse(
        &env,
        &[
            "handoff", "--to", "codex", "--brief", "ws/brief.md", "--workspace", "ws", "--push",
            "devbx",
        ],
        3,
        "not_found",
        "no target named 'devbx'",
    );
    assert_eq!(env.ok(&["log"]), before, "nothing was saved");
    let (_, doc) = env.json(&[
        "handoff", "--to", "codex", "--no-brief", "--workspace", "ws", "--push", "devbx",
    ]);
    let hint = doc["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("did you mean 'devbox'?"), "{doc}");
    // A name nothing is close to gets no guess.
    let (_, doc) = env.json(&["push", "elsewhere"]);
    let hint = doc["error"]["hint"].as_str().unwrap();
    assert!(!hint.contains("did you mean"), "{doc}");
}

#[test]
fn resume_and_push_of_a_name_that_is_neither_target_nor_bundle_say_the_same() {
    let env = with_devbox();
    for command in ["resume", "push"] {
        refuse(
            &env,
            &[command, "nosuch"],
            3,
            "not_found",
            "no target or bundle named 'nosuch'",
        );
        let (_, doc) = env.json(&[command, "devbx"]);
        assert!(
            doc["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("did you mean 'devbox'?"),
            "{command}: {doc}"
        );
    }
    // What is not a name keeps its own, more precise, refusal.
    refuse(&env, &["resume", "current~9"], 3, "not_found", "goes past");
    refuse(&env, &["push", "current~9"], 3, "not_found", "goes past");
}
