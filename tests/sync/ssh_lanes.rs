//! A large push over SSH shares its writes between two SFTP channels of one connection
//! (each channel has its own 2 MiB window at sshd), and falls back to one channel when
//! the server allows one session per connection.

use crate::common;
use crate::sshd::Sshd;

use std::fs;
use std::process::Output;

use common::{Env, random_bytes, s, text};

/// A store whose one bundle holds `mib` MiB of random data, with target `r` on `server`.
fn big_store(server: &Sshd, mib: usize) -> (Env, String) {
    let env = Env::new();
    env.init();
    fs::create_dir_all(env.path().join("work")).unwrap();
    fs::write(env.path().join("work/big.bin"), random_bytes(7, mib << 20)).unwrap();
    let id = env.save("work", &["--secrets", "allow"]);
    let url = format!("{}:{}", server.alias(), s(&server.scratch().join("r")));
    env.ok(&["target", "add", "r", &url]);
    (env, id)
}

/// `baton push` with the SFTP trace on.
fn traced_push(env: &Env, server: &Sshd) -> Output {
    let mut cmd = env.cmd();
    for (k, v) in server.env() {
        cmd.env(k, v);
    }
    let out = cmd
        .args(["--json", "push"])
        .env("BATON_TRACE_SFTP", "json")
        .output()
        .expect("run baton");
    assert!(
        out.status.success(),
        "{}\nsshd log:\n{}",
        text(&out),
        server.log()
    );
    out
}

/// The bytes the push's second channel wrote, from its `lane_done` trace event (`None`:
/// no lane).
fn lane_bytes(out: &Output) -> Option<u64> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let events = crate::round_trips::trace_events(&stderr);
    let done = events.iter().find(|e| e["kind"] == "lane_done")?;
    Some(done["bytes"].as_u64().expect("a byte count"))
}

/// The SFTP sessions sshd started (`LogLevel VERBOSE` logs each).
fn sftp_sessions(server: &Sshd) -> usize {
    server
        .log()
        .lines()
        .filter(|l| l.contains("Starting session: subsystem 'sftp'"))
        .count()
}

/// The remote store verifies, and a clone of it checks out the bundle pushed.
fn remote_holds(env: &Env, server: &Sshd, id: &str) {
    let remote = server.scratch().join("r");
    let (code, doc) = Env::new().json(&["--store", s(&remote), "verify"]);
    assert_eq!(code, 0, "verify: {doc}");
    assert_eq!(common::disk_current(&remote).as_deref(), Some(id));
    let out = env.path().join("out");
    let (code, doc) = Env::new().json(&["--store", s(&remote), "checkout", id, s(&out)]);
    assert_eq!(code, 0, "checkout: {doc}");
    assert!(
        fs::read(out.join("big.bin")).unwrap()
            == fs::read(env.path().join("work/big.bin")).unwrap()
    );
}

#[test]
fn a_large_push_writes_on_two_channels() {
    let server = Sshd::start();
    let (env, id) = big_store(&server, 24);
    let out = traced_push(&env, &server);
    let on_lane = lane_bytes(&out).unwrap_or_else(|| panic!("no second channel: {}", text(&out)));
    assert!(
        on_lane > 1 << 20 && on_lane < 23 << 20,
        "the second channel wrote {on_lane} of 24 MiB"
    );
    assert_eq!(sftp_sessions(&server), 2, "{}", server.log());
    remote_holds(&env, &server, &id);
}

#[test]
fn a_small_push_stays_on_one_channel() {
    let server = Sshd::start();
    let (env, id) = big_store(&server, 4);
    let out = traced_push(&env, &server);
    assert_eq!(lane_bytes(&out), None, "{}", text(&out));
    assert_eq!(sftp_sessions(&server), 1, "{}", server.log());
    remote_holds(&env, &server, &id);
}

#[test]
fn a_server_allowing_one_session_gets_the_push_on_one_channel() {
    let server = Sshd::builder().sshd_config("MaxSessions 1").start();
    let (env, id) = big_store(&server, 24);
    let out = traced_push(&env, &server);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let events = crate::round_trips::trace_events(&stderr);
    let refused = events.iter().filter(|e| e["kind"] == "no_lane").count();
    assert_eq!(refused, 1, "{stderr}");
    assert_eq!(lane_bytes(&out), None);
    assert_eq!(sftp_sessions(&server), 1, "{}", server.log());
    remote_holds(&env, &server, &id);
}
