//! How SSH targets are named in messages, against a real sshd: a home-relative store
//! path (`host:work/.baton`) stays home-relative, never shown as an absolute one; a failed
//! request on the store's own directory is named once, with the server's reason once.

use crate::common::{Env, text};
use crate::sshd::Sshd;

#[test]
fn a_home_relative_path_is_reported_as_given() {
    let server = Sshd::start();
    let env = Env::new();
    env.init();
    // Under the login directory: nothing is there, so the pull names the store.
    let rel = format!("baton-nosuch-{}/.baton", std::process::id());
    env.ok(&[
        "target",
        "add",
        "devbox",
        &format!("{}:{rel}", server.alias()),
    ]);
    let out = env
        .cmd()
        .envs(server.env())
        .args(["--json", "pull"])
        .output()
        .expect("run baton");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one document");
    let message = doc["error"]["message"].as_str().unwrap_or("");
    // Off port 22 the URL form of "under the login directory": `/~/`.
    assert!(message.contains(&format!("/~/{rel}")), "{message}");
    assert!(
        !message.contains(&format!(":{}/{rel}", server.port())),
        "shown as an absolute path: {message}"
    );
}

#[test]
fn a_store_path_under_a_file_names_the_mkdir_and_the_server_reason_once() {
    let server = Sshd::start();
    let env = Env::new();
    env.init();
    env.ok(&["save", "."]);
    let file = server.scratch().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write the file");
    let store = file.join(".baton");
    env.ok(&[
        "target",
        "add",
        "devbox",
        &format!("{}:{}", server.alias(), store.display()),
    ]);
    let out = env
        .cmd()
        .envs(server.env())
        .args(["--json", "push"])
        .output()
        .expect("run baton");
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one document");
    let message = doc["error"]["message"].as_str().unwrap_or("");
    // Was "mkdir  on ssh://.../a-file/.baton failed: No such file (No such file)".
    assert!(
        message.starts_with(&format!("mkdir on ssh://{}@127.0.0.1:", server.user())),
        "{message}"
    );
    assert!(
        message.ends_with(&format!("{} failed: No such file", store.display())),
        "{message}"
    );
}
