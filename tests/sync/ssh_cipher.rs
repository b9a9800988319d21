//! The SSH cipher: AES-GCM (AES-NI through OpenSSL) by default rather than libssh2's
//! portable ChaCha20-Poly1305, and a `Ciphers` line of `~/.ssh/config` still honoured.
//! `BATON_TRACE` names the negotiated cipher in its `connected` event.

use crate::common;
use crate::sshd::Sshd;

use std::fs;

use common::{Env, Via, text};

/// Push to the server with `BATON_TRACE=json`; the cipher its `connected` event names.
fn negotiated(server: &Sshd) -> String {
    let env = Env::new();
    env.init();
    env.write_tree("work", &[("handoff.md", b"# h\n")]);
    env.save("work", &[]);
    let url = format!(
        "{}:{}",
        server.alias(),
        server.scratch().join("r").display()
    );
    env.ok(&["target", "add", "r", &url]);
    let out = server
        .cmd(&env)
        .args(["--json", "push"])
        .env("BATON_TRACE", "json")
        .output()
        .expect("run baton");
    assert!(out.status.success(), "{}\n{}", text(&out), server.log());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let events = crate::round_trips::trace_events(&stderr);
    let connected: Vec<_> = events.iter().filter(|e| e["kind"] == "connected").collect();
    assert_eq!(connected.len(), 1, "one connected event expected: {stderr}");
    connected[0]["cipher"]
        .as_str()
        .unwrap_or_else(|| panic!("no cipher named: {stderr}"))
        .to_string()
}

fn add_to_client_config(server: &Sshd, line: &str) {
    let path = server.home().join(".ssh").join("config");
    let mut config = fs::read_to_string(&path).unwrap();
    config.push_str(&format!("  {line}\n"));
    fs::write(&path, config).unwrap();
}

#[test]
fn aes_gcm_is_negotiated_by_default() {
    let server = Sshd::start();
    assert_eq!(negotiated(&server), "aes128-gcm@openssh.com");
}

#[test]
fn a_ciphers_line_of_the_ssh_config_is_honoured() {
    let server = Sshd::start();
    add_to_client_config(&server, "Ciphers chacha20-poly1305@openssh.com");
    assert_eq!(negotiated(&server), "chacha20-poly1305@openssh.com");
    let server = Sshd::start();
    add_to_client_config(&server, "Ciphers aes256-ctr,aes128-ctr");
    assert_eq!(negotiated(&server), "aes256-ctr");
}

#[test]
fn a_ciphers_line_naming_no_supported_cipher_is_a_usage_error() {
    let server = Sshd::start();
    add_to_client_config(&server, "Ciphers twofish128-cbc");
    let env = Env::new();
    env.init();
    env.write_tree("work", &[("handoff.md", b"# h\n")]);
    env.save("work", &[]);
    let url = format!(
        "{}:{}",
        server.alias(),
        server.scratch().join("r").display()
    );
    env.ok(&["target", "add", "r", &url]);
    let out = server.cmd(&env).arg("push").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Ciphers twofish128-cbc names no cipher"),
        "{stderr}"
    );
    assert!(!server.scratch().join("r").exists(), "nothing is created");
}
