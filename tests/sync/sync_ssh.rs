//! Sync over SSH only: host keys, agent and key-file authentication, an SFTP-only
//! account, failures mid-push (a cut connection, a frozen server, a killed server),
//! fan-out directories and the one-command handoff. The scenarios both transports share are in `scenarios.rs`.
//!
//! The server runs on this machine, so the remote store is inspected directly on disk.

use crate::common;
use crate::sshd;

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{
    Env, Via, disk_current, pack_files, random_bytes, s, snapshot_files, staged_pack_size, text,
};
use serde_json::Value;
use sshd::{KnownHostsMode, Sshd};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn run(env: &Env, server: &Sshd, args: &[&str]) -> Output {
    server.cmd(env).args(args).output().expect("run baton")
}

/// The store directory the server side uses.
fn remote_dir(server: &Sshd) -> PathBuf {
    server.scratch().join("remote")
}

fn scp_url(server: &Sshd) -> String {
    format!("{}:{}", server.alias(), s(&remote_dir(server)))
}

fn ssh_url(server: &Sshd) -> String {
    format!("ssh://{}{}", server.alias(), s(&remote_dir(server)))
}

fn rich_tree(env: &Env, seed: u64) {
    let bin: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    env.write_tree(
        "work",
        &[
            ("handoff.md", format!("# handoff {seed}\n").as_bytes()),
            ("empty", b""),
            ("data/blob.bin", &bin),
            ("data/deep/big.bin", &random_bytes(seed, 600_000)),
        ],
    );
}

/// A store with one bundle and target `r` at `url`.
fn store_with_target(url: &str, seed: u64) -> (Env, String) {
    let env = Env::new();
    env.init();
    rich_tree(&env, seed);
    let id = env.save("work", &["--summary", "base"]);
    env.ok(&["target", "add", "r", url]);
    (env, id)
}

fn save_change(env: &Env, name: &str, content: &[u8]) -> String {
    env.write_tree("work", &[(name, content)]);
    env.save("work", &["--summary", name])
}

fn clone_env(server: &Sshd, url: &str) -> Env {
    let env = Env::new();
    let doc = server.json_ok(&env, &["clone", url]);
    assert_eq!(doc["report"]["outcome"], "initial", "{doc}");
    env.write_tree("work", &[]);
    env
}

fn checkout(env: &Env, rev: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = env.path().join(format!("co-{}", rev.replace('/', "_")));
    let _ = fs::remove_dir_all(&dir);
    env.ok(&["checkout", rev, s(&dir)]);
    snapshot_files(&dir)
}

/// `baton verify` of a store directory (the remote one is on this machine).
fn verify(store: &Path) {
    let env = Env::new();
    let (code, doc) = env.json(&["--store", s(store), "verify"]);
    assert_eq!(code, 0, "verify {}: {doc}", store.display());
    assert_eq!(doc["report"]["problems"], serde_json::json!([]), "{doc}");
}

fn refs_snapshot(remote: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    snapshot_files(&remote.join("refs"))
}

/// Start `baton push ARGS` and wait until it is uploading the pack (between `low` bytes
/// and `total - low` staged on the server), then run `act`. `None` when the push ended
/// before it could be caught.
fn catch_mid_upload(
    env: &Env,
    server: &Sshd,
    args: &[&str],
    total: u64,
    low: u64,
    act: impl FnOnce(),
) -> Option<Child> {
    let remote = remote_dir(server);
    let mut child = server
        .cmd(env)
        .arg("--json")
        .args(args)
        .env("BATON_TRACE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let staged = staged_pack_size(&remote).unwrap_or(0);
        if staged >= low && staged < total - low {
            act();
            return Some(child);
        }
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "push failed early: {}", text(&out));
            return None;
        }
        assert!(Instant::now() < deadline, "push took over 60 s");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Wait for `child` at most `limit`; kill it if it takes longer (and fail).
fn wait_bounded(mut child: Child, limit: Duration) -> (Output, Duration) {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return (child.wait_with_output().unwrap(), start.elapsed());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("baton hung for over {limit:?}: {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A remote that holds `base`, and a local store with a big new bundle on top of it
/// (`mib` MiB of random data; `seed` varies it between attempts).
fn big_bundle(env: &Env, seed: u64, mib: usize) -> String {
    fs::write(
        env.path().join("work").join("big.bin"),
        random_bytes(seed, mib << 20),
    )
    .unwrap();
    env.save("work", &["--summary", "big", "--secrets", "allow"])
}

// ---------------------------------------------------------------------------------------
// Host keys and authentication
// ---------------------------------------------------------------------------------------

#[test]
fn unknown_host_key_is_refused_then_accepted_with_the_flag() {
    let server = Sshd::builder().known_hosts(KnownHostsMode::Empty).start();
    let remote = remote_dir(&server);
    let (a, id) = store_with_target(&scp_url(&server), 7);
    let err = server.json_err(&a, &["push"], 6);
    assert_eq!(err["code"], "security");
    let all = err.to_string();
    assert!(all.contains("SHA256:"), "no fingerprint: {all}");
    assert!(all.contains("--accept-new-host-key"), "{all}");
    // Without --json too: one error line on stderr naming the way out.
    let out = run(&a, &server, &["push"]);
    assert_eq!(out.status.code(), Some(6), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SHA256:") && stderr.contains("--accept-new-host-key"),
        "{stderr}"
    );
    assert!(!remote.exists(), "a refused connection created the remote");
    assert_eq!(fs::read(server.known_hosts_path()).unwrap(), b"");
    // Pull and clone refuse the same way.
    server.json_err(&a, &["pull"], 6);
    let c = Env::new();
    let dest = c.path().join("clone");
    server.json_err(&c, &["clone", &scp_url(&server), s(&dest)], 6);
    assert!(!dest.exists());

    let doc = server.json_ok(&a, &["push", "--accept-new-host-key"]);
    assert_eq!(doc["report"]["created_remote"], true);
    assert_eq!(disk_current(&remote).as_deref(), Some(id.as_str()));
    let recorded = fs::read_to_string(server.known_hosts_path()).unwrap();
    assert!(recorded.contains(server.host_key_line()), "{recorded}");
    // From now on the key is known.
    let doc = server.json_ok(&a, &["push"]);
    assert_eq!(doc["report"]["up_to_date"], true);
}

#[test]
fn changed_host_key_is_refused_even_with_the_flag() {
    let server = Sshd::builder()
        .known_hosts(KnownHostsMode::WrongKey)
        .start();
    let remote = remote_dir(&server);
    let (a, _) = store_with_target(&scp_url(&server), 8);
    let before = fs::read(server.known_hosts_path()).unwrap();
    for args in [vec!["push"], vec!["push", "--accept-new-host-key"]] {
        let err = server.json_err(&a, &args, 6);
        assert_eq!(err["code"], "security");
        assert!(err.to_string().contains("SHA256:"), "{err}");
    }
    server.json_err(&a, &["pull", "--accept-new-host-key"], 6);
    assert_eq!(fs::read(server.known_hosts_path()).unwrap(), before);
    assert!(!remote.exists());
}

#[test]
fn agent_authentication_pushes_and_pulls() {
    let server = Sshd::builder().agent().no_identity_in_config().start();
    let remote = remote_dir(&server);
    let (a, id) = store_with_target(&scp_url(&server), 9);
    server.json_ok(&a, &["push"]);
    assert_eq!(disk_current(&remote).as_deref(), Some(id.as_str()));
    let b = clone_env(&server, &scp_url(&server));
    assert_eq!(checkout(&a, "current"), checkout(&b, "current"));
    // Without the agent nothing authenticates: the agent did it.
    let out = server
        .cmd(&a)
        .args(["--json", "pull"])
        .env("SSH_AUTH_SOCK", server.scratch().join("no-agent.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", text(&out));
}

#[test]
fn key_file_authentication_pushes_and_pulls() {
    let server = Sshd::start();
    assert!(!server.has_agent());
    let remote = remote_dir(&server);
    let (a, id) = store_with_target(&ssh_url(&server), 10);
    server.json_ok(&a, &["push"]);
    assert_eq!(disk_current(&remote).as_deref(), Some(id.as_str()));
    let b = clone_env(&server, &ssh_url(&server));
    assert_eq!(checkout(&a, "current"), checkout(&b, "current"));
    // Take the key out of the config: authentication fails (exit 6), so the key did it.
    let config = fs::read_to_string(server.config_path()).unwrap();
    let without: String = config
        .lines()
        .filter(|l| !l.trim_start().starts_with("IdentityFile"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(server.config_path(), without).unwrap();
    server.json_err(&b, &["pull"], 6);
}

#[test]
fn sftp_only_account_pushes_and_pulls() {
    let server = Sshd::builder().force_sftp().start();
    let remote = remote_dir(&server);
    let (a, _) = store_with_target(&scp_url(&server), 11);
    server.json_ok(&a, &["push"]);
    let b = clone_env(&server, &scp_url(&server));
    let next = save_change(&a, "x", b"x");
    server.json_ok(&a, &["push"]);
    let doc = server.json_ok(&b, &["pull"]);
    assert_eq!(doc["report"]["current_after"], next.as_str());
    assert_eq!(checkout(&a, "current"), checkout(&b, "current"));
    verify(&remote);
}

// ---------------------------------------------------------------------------------------
// Failures mid-push
// ---------------------------------------------------------------------------------------

/// A loopback TCP proxy to `port` that drops both sockets once `limit` bytes went from
/// the client to the server. Returns its port.
fn start_cutting_proxy(port: u16, limit: u64) -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let proxy_port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
                return;
            };
            let sent = Arc::new(AtomicU64::new(0));
            let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            // Server to client: plain copy until either side goes away.
            std::thread::spawn(move || {
                let (mut from, mut to) = (s2, c2);
                let _ = std::io::copy(&mut from, &mut to);
                let _ = to.shutdown(Shutdown::Both);
            });
            // Client to server: counted, cut at the limit.
            std::thread::spawn(move || {
                let (mut from, mut to) = (client, server);
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let n = match from.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let total = sent.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
                    if total >= limit || to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
            });
        }
    });
    proxy_port
}

#[test]
fn connection_cut_mid_push_publishes_nothing() {
    let server = Sshd::start();
    let remote = remote_dir(&server);
    let (a, base) = store_with_target(&scp_url(&server), 12);
    server.json_ok(&a, &["push"]);
    // A second alias through the proxy, with the server's key known at the proxy's port.
    let proxy = start_cutting_proxy(server.port(), 5 << 20);
    let config = fs::read_to_string(server.config_path()).unwrap();
    let cut_block = config
        .replace("Host testbox", "Host cutbox")
        .replace(&format!("Port {}", server.port()), &format!("Port {proxy}"));
    fs::write(server.config_path(), format!("{config}{cut_block}")).unwrap();
    let key = server
        .host_key_line()
        .split_once(' ')
        .map(|(_, key)| key.to_string())
        .unwrap();
    server.write_known_hosts(&format!(
        "{}\n[127.0.0.1]:{proxy} {key}\n",
        server.host_key_line()
    ));
    a.ok(&["target", "add", "cut", &format!("cutbox:{}", s(&remote))]);

    let big = big_bundle(&a, 12, 50);
    let refs_before = refs_snapshot(&remote);
    let packs_before = pack_files(&remote);
    let start = Instant::now();
    let child = server
        .cmd(&a)
        .args(["--json", "push", "cut", "--timeout", "10"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, _) = wait_bounded(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "transport", "{doc}");
    eprintln!("cut push failed after {:?}", start.elapsed());
    // The server notices the cut in its own time; nothing it does may publish.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(refs_snapshot(&remote), refs_before, "the remote ref moved");
    assert_eq!(disk_current(&remote).as_deref(), Some(base.as_str()));
    assert_eq!(
        pack_files(&remote),
        packs_before,
        "a partial pack was published"
    );
    verify(&remote);
    server.json_err(&a, &["show", "targets/cut"], 3);

    // The direct way still works, and publishes the whole bundle.
    let doc = server.json_ok(&a, &["push", "r"]);
    assert_eq!(doc["report"]["remote_before"], base.as_str());
    assert_eq!(disk_current(&remote).as_deref(), Some(big.as_str()));
    verify(&remote);
}

#[test]
fn frozen_server_mid_push_times_out_instead_of_hanging() {
    let server = Sshd::start();
    let remote = remote_dir(&server);
    let (a, mut base) = store_with_target(&scp_url(&server), 13);
    server.json_ok(&a, &["push"]);
    let total: u64 = 50 << 20;
    let mut caught = None;
    for attempt in 0..3 {
        let big = big_bundle(&a, 130 + attempt, 50);
        let refs_before = refs_snapshot(&remote);
        let child = catch_mid_upload(
            &a,
            &server,
            &["push", "--timeout", "3"],
            total,
            2 << 20,
            || server.freeze(),
        );
        match child {
            Some(child) => {
                caught = Some((child, refs_before));
                break;
            }
            None => base = big,
        }
    }
    let (child, refs_before) = caught.expect("could not catch the push mid-upload");
    let (out, elapsed) = wait_bounded(child, Duration::from_secs(60));
    server.resume();
    eprintln!(
        "push against a frozen server ended after {elapsed:?}: {}",
        text(&out)
    );
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
    // Roughly the timeout: not one timeout per later step (cleanup, EOF, channel close).
    assert!(
        elapsed < Duration::from_secs(10),
        "took {elapsed:?} with --timeout 3"
    );
    assert!(
        elapsed >= Duration::from_secs(2),
        "gave up before the timeout: {elapsed:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(refs_snapshot(&remote), refs_before);
    assert_eq!(disk_current(&remote).as_deref(), Some(base.as_str()));
    verify(&remote);
}

#[test]
fn killed_server_mid_push_is_a_transport_error() {
    let mut server = Sshd::start();
    let remote = remote_dir(&server);
    let (a, mut base) = store_with_target(&scp_url(&server), 14);
    server.json_ok(&a, &["push"]);
    let total: u64 = 50 << 20;
    let mut caught = None;
    for attempt in 0..3 {
        let big = big_bundle(&a, 140 + attempt, 50);
        let refs_before = refs_snapshot(&remote);
        let packs_before = pack_files(&remote);
        let child = catch_mid_upload(
            &a,
            &server,
            &["push", "--timeout", "5"],
            total,
            2 << 20,
            || {},
        );
        match child {
            Some(child) => {
                caught = Some((child, refs_before, packs_before));
                break;
            }
            None => base = big,
        }
    }
    let (child, refs_before, packs_before) = caught.expect("could not catch the push mid-upload");
    server.kill(); // right after the upload was seen under way
    let (out, elapsed) = wait_bounded(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "transport", "{doc}");
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    assert_eq!(refs_snapshot(&remote), refs_before);
    assert_eq!(disk_current(&remote).as_deref(), Some(base.as_str()));
    assert_eq!(pack_files(&remote), packs_before);
    verify(&remote);
}

// ---------------------------------------------------------------------------------------
// Stores with many loose objects (every fan-out directory)
// ---------------------------------------------------------------------------------------

/// Write `n` small loose blobs straight into `store` in the store's format (SPEC 6: one
/// zstd frame, named by the BLAKE3 of the content), spread over all 256 fan-out
/// directories; much faster than `save` for 100,000 objects.
fn write_loose_blobs(store: &Path, n: u64, seed: u64) {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    for i in 0..n {
        let content = format!("loose blob {seed} {i}\n");
        let hex = blake3::hash(content.as_bytes()).to_hex();
        let dir = store.join("objects").join(&hex[..2]);
        if !dir.exists() {
            fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        }
        let frame = zstd::encode_all(content.as_bytes(), 1).unwrap();
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dir.join(&hex[2..]))
            .unwrap();
        file.write_all(&frame).unwrap();
    }
}

/// Loose objects written beside a `save` in the fan-out tests: `BATON_FANOUT_OBJECTS=N`
/// (default 3,000; the scale run of issue 10 uses 100,000).
fn fanout_objects() -> u64 {
    std::env::var("BATON_FANOUT_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000)
}

#[test]
fn clone_and_pull_over_ssh_of_a_store_with_every_fanout_directory() {
    let server = Sshd::start();
    // The remote is a store used in place: a plain save of 3,000 files leaves its loose
    // objects in all 256 fan-out directories (the SFTP server has fewer handles).
    let a = Env::new();
    a.init();
    let files: Vec<(String, Vec<u8>)> = (0..3_000)
        .map(|i| {
            (
                format!("f/{}/{i}.txt", i % 37),
                format!("file {i}\n").into_bytes(),
            )
        })
        .collect();
    a.write_files("work", &files);
    let base = a.save("work", &["--summary", "many files"]);
    let extra = fanout_objects();
    write_loose_blobs(&a.store(), extra, 1);
    let fanouts = fs::read_dir(a.store().join("objects")).unwrap().count();
    assert_eq!(fanouts, 256);
    let url = format!("ssh://{}{}", server.alias(), s(&a.store()));

    let b = Env::new();
    let started = Instant::now();
    let doc = server.json_ok(&b, &["clone", &url]);
    let took = started.elapsed();
    eprintln!(
        "clone of {} loose objects over SSH: {took:?}",
        3_000 + extra
    );
    assert_eq!(doc["report"]["outcome"], "initial", "{doc}");
    assert_eq!(doc["report"]["remote_current"], base.as_str());
    let received = doc["report"]["objects_received"].as_u64().unwrap();
    assert!(received >= 3_000 + extra, "{doc}");
    b.write_tree("work", &[]);
    assert_eq!(checkout(&a, "current"), checkout(&b, "current"));

    // A pull lists every fan-out directory again.
    let next = save_change(&a, "f/next.txt", b"next\n");
    write_loose_blobs(&a.store(), 500, 2);
    let started = Instant::now();
    let doc = server.json_ok(&b, &["pull"]);
    eprintln!("pull over SSH: {:?}", started.elapsed());
    assert_eq!(doc["report"]["outcome"], "fast-forward", "{doc}");
    assert_eq!(doc["report"]["current_after"], next.as_str());
    assert!(doc["report"]["objects_received"].as_u64().unwrap() >= 500);
    assert_eq!(checkout(&a, "current"), checkout(&b, "current"));
    verify(&b.store());
}

// ---------------------------------------------------------------------------------------
// One-command handoff: baton handoff --push, then baton resume TARGET elsewhere
// ---------------------------------------------------------------------------------------

const HANDOFF_BRIEF: &str = "# Golden test\n\n## Objective\nMake the parser's golden test pass.\n\n\
## Current State\nDiagnosed: the golden file predates the indentation change.\n\n\
## Next Steps\n1. Regenerate tests/golden/parser.txt.\n2. Rerun `cargo test golden`.\n\n\
## Risks / Watch Out\n- The golden file also seeds the fuzz corpus.\n\n\
## Open Questions\n- Keep 2-space indentation?\n\n\
## Suggested Prompt For Next Agent\nRegenerate the golden file and make the parser tests pass.\n";

/// A git workspace in `env` with a Claude Code session recorded for it in env's HOME.
fn handoff_workspace(env: &Env) -> PathBuf {
    let ws = env.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let ws = fs::canonicalize(&ws).unwrap();
    common::git(&ws, &["init", "-q"]);
    fs::write(ws.join("parser.rs"), "fn parse() {}\n").unwrap();
    common::git(&ws, &["add", "."]);
    common::git(&ws, &["commit", "-qm", "parser"]);
    let encoded: String = s(&ws)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = env.path().join(".claude/projects").join(encoded);
    fs::create_dir_all(&dir).unwrap();
    let session = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/transcripts/claude-code/main.jsonl"),
    )
    .unwrap()
    .replace("{{WORKSPACE}}", s(&ws));
    fs::write(
        dir.join("5e551011-aaaa-4bbb-8ccc-000000000001.jsonl"),
        session,
    )
    .unwrap();
    fs::write(env.path().join("brief.md"), HANDOFF_BRIEF).unwrap();
    ws
}

/// `baton ARGS` in `ws`, reaching `server`.
fn run_in(env: &Env, server: &Sshd, ws: &Path, args: &[&str]) -> Output {
    server
        .cmd(env)
        .current_dir(ws)
        .args(args)
        .output()
        .expect("run baton")
}

fn handoff_in(env: &Env, server: &Sshd, ws: &Path, extra: &[&str]) -> Output {
    let brief = env.path().join("brief.md");
    let mut args = vec![
        "handoff",
        "--from",
        "claude",
        "--to",
        "codex",
        "--brief",
        s(&brief),
        "--transcript",
        "claude-code:latest",
        "--push",
        "devbox",
    ];
    args.extend_from_slice(extra);
    // The server's environment sets HOME to its own: name the sender's Claude config.
    server
        .cmd(env)
        .current_dir(ws)
        .env("CLAUDE_CONFIG_DIR", env.path().join(".claude"))
        .args(&args)
        .output()
        .expect("run baton")
}

#[test]
fn handoff_push_then_resume_target_on_another_home() {
    let server = Sshd::start();
    let sender = Env::new();
    let ws = handoff_workspace(&sender);
    let in_ws = |args: &[&str]| run_in(&sender, &server, &ws, args);
    assert!(in_ws(&["init"]).status.success());
    assert!(
        in_ws(&["target", "add", "devbox", &scp_url(&server)])
            .status
            .success()
    );
    let out = handoff_in(&sender, &server, &ws, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        said.contains("Receiver runs: baton resume devbox"),
        "{said}"
    );

    // Another HOME: clone once, then `resume origin` pulls first and resumes.
    let receiver = Env::new();
    server.json_ok(&receiver, &["clone", &scp_url(&server)]);
    let doc = server.json_ok(&receiver, &["resume", "origin", "--budget", "2000"]);
    let kickoff = &doc["kickoff"];
    assert!(kickoff["tokens"].as_u64().unwrap() <= 2000, "{kickoff}");
    let titles: Vec<&str> = kickoff["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        &titles[..5],
        &[
            "Next Steps",
            "Risks / Watch Out",
            "Open Questions",
            "Suggested Prompt For Next Agent",
            "Recent turns"
        ],
    );
    let page = kickoff["sections"][4]["text"].as_str().unwrap();
    assert!(
        page.contains("Hand this off to codex") && page.contains("call Bash"),
        "{page}"
    );
    assert!(page.contains("baton search"), "{page}");
    assert!(
        !doc["pulled"].is_null(),
        "resume TARGET pulled first: {doc}"
    );

    // A second handoff reaches the receiver through `resume origin` alone.
    fs::write(
        sender.path().join("brief.md"),
        HANDOFF_BRIEF.replace("2-space", "tab"),
    )
    .unwrap();
    let out = handoff_in(&sender, &server, &ws, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let prompt = server
        .cmd(&receiver)
        .args([
            "resume",
            "origin",
            "--format",
            "prompt",
            "--workspace",
            s(receiver.path()),
        ])
        .output()
        .unwrap();
    assert!(prompt.status.success(), "{}", text(&prompt));
    let prompt = String::from_utf8_lossy(&prompt.stdout).to_string();
    assert!(
        prompt.contains("Keep tab indentation?"),
        "the new handoff: {prompt}"
    );
    let head = common::git(&ws, &["rev-parse", "HEAD"]);
    let id = receiver.ok(&["log", "-n", "1", "--json"]);
    let id: Value = serde_json::from_str(&id).unwrap();
    let id = id["bundles"][0]["id"].as_str().unwrap().to_string();
    let created = id_created(&receiver, &id);
    let normalized = prompt
        .replace(
            s(&fs::canonicalize(receiver.path()).unwrap()),
            "<WORKSPACE>",
        )
        .replace(&head[..12], "<HEAD>")
        .replace(&id[..12], "<ID>")
        .replace(&created, "<TIME>");
    common::snapshot::assert_text_snapshot("resume_prompt", &normalized, "resume --format prompt");
    assert!(
        !prompt.contains("evidence.json") && !prompt.contains("## Files"),
        "{prompt}"
    );
}

fn id_created(env: &Env, id: &str) -> String {
    let doc: Value = serde_json::from_str(&env.ok(&["show", id, "--json"])).unwrap();
    doc["created"].as_str().unwrap().to_string()
}

#[test]
fn a_refused_handoff_push_keeps_the_saved_bundle_and_says_how_to_retry() {
    let server = Sshd::start();
    let sender = Env::new();
    let ws = handoff_workspace(&sender);
    let in_ws = |args: &[&str]| run_in(&sender, &server, &ws, args);
    assert!(in_ws(&["init"]).status.success());
    assert!(
        in_ws(&["target", "add", "devbox", &scp_url(&server)])
            .status
            .success()
    );
    assert!(handoff_in(&sender, &server, &ws, &[]).status.success());
    // Someone else pushes on top first.
    let other = Env::new();
    server.json_ok(&other, &["clone", &scp_url(&server)]);
    other.write_tree("w", &[("x", b"their work")]);
    other.save("w", &[]);
    server.json_ok(&other, &["push"]);

    let out = handoff_in(&sender, &server, &ws, &["--json"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("saved handoff "), "{message}");
    let hint = doc["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("baton pull devbox") && hint.contains("saved locally"),
        "{hint}"
    );
    // The saved bundle is current in the sender's store, whole.
    let short = message["saved handoff ".len()..].split(',').next().unwrap();
    let shown = in_ws(&["show", "current", "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert!(shown["id"].as_str().unwrap().starts_with(short), "{shown}");
    assert!(in_ws(&["verify"]).status.success());
}
