//! How SSH targets are named in messages, against a real sshd: a home-relative store
//! path (`host:work/.baton`) stays home-relative, never shown as an absolute one.

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
