//! Network faults during push, pull and clone over SSH: connections dropped at byte
//! offsets spread over a measured transfer (both directions), stalled links against the
//! timeout, a server killed mid-transfer and restarted, and a full disk on either side.
//!
//! baton talks to a fault proxy (`common/faultproxy.rs`) on loopback, which forwards to a
//! real sshd (`common/sshd.rs`). Every fault must end in one clear error line (exit 7 for
//! the transport, a documented code for a full disk), publish nothing half-way (the
//! remote is on this machine and is verified directly), and the next run without the
//! fault must succeed and clean up after the failed one.
//!
//! Knobs: `BATON_FAULT_ROUNDS=N` drop offsets per direction and operation (default 4),
//! `BATON_FAULT_SEED=S` to replay the offsets of an earlier run (each test prints its
//! seed; offsets are relative to the measured transfer, which varies by a few bytes),
//! `BATON_FAULT_MIB=M` the size of the bundle moved in the drop rounds (default 1),
//! `BATON_FAULT_TAIL=STEP` also cut at every STEP-th byte of the last kilobyte of each
//! transfer, `BATON_FAULT_SWEEP=STEP` cut a clone at every STEP-th byte of its handshake.
//! `cargo test --test harness faults:: -- --nocapture` prints one table row per faulted run.

use crate::common;
use crate::faultproxy;
use crate::sshd;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Env, disk_current, random_bytes, s, snapshot_files, text};
use faultproxy::{Dir, Fault, FaultProxy};
use sshd::Sshd;

// ---------------------------------------------------------------------------------------
// The world: a server, a proxy in front of it, client aliases for both
// ---------------------------------------------------------------------------------------

/// Alias through the proxy, with `--timeout` from the command line.
const FAULT: &str = "faultbox";
/// Alias through the proxy whose ssh config sets `ServerAliveInterval 1` (3 s of silence).
const ALIVE: &str = "alivebox";

struct World {
    server: Sshd,
    proxy: FaultProxy,
}

impl World {
    fn new() -> World {
        let server = Sshd::start();
        let proxy = FaultProxy::start(server.port());
        // Two more aliases that reach the server through the proxy, and the server's key
        // known at the proxy's port (the client checks `[127.0.0.1]:PROXYPORT`).
        let config = fs::read_to_string(server.config_path()).unwrap();
        let via_proxy = config.replace(
            &format!("Port {}", server.port()),
            &format!("Port {}", proxy.port()),
        );
        let fault_block = via_proxy.replace("Host testbox", &format!("Host {FAULT}"));
        let alive_block = format!(
            "{}  ServerAliveInterval 1\n",
            via_proxy.replace("Host testbox", &format!("Host {ALIVE}"))
        );
        fs::write(
            server.config_path(),
            format!("{config}{fault_block}{alive_block}"),
        )
        .unwrap();
        let key = server
            .host_key_line()
            .split_once(' ')
            .unwrap()
            .1
            .to_string();
        server.write_known_hosts(&format!(
            "{}\n[127.0.0.1]:{} {key}\n",
            server.host_key_line(),
            proxy.port()
        ));
        World { server, proxy }
    }

    fn remote(&self) -> PathBuf {
        self.server.scratch().join("remote")
    }

    /// The remote store's URL through `alias`.
    fn url(&self, alias: &str) -> String {
        format!("{alias}:{}", s(&self.remote()))
    }

    fn cmd(&self, env: &Env) -> Command {
        let mut cmd = env.cmd();
        for (k, v) in self.server.env() {
            cmd.env(k, v);
        }
        cmd
    }

    fn run(&self, env: &Env, args: &[&str]) -> Output {
        self.cmd(env).args(args).output().expect("run baton")
    }

    fn ok(&self, env: &Env, args: &[&str]) -> String {
        let out = self.run(env, args);
        assert!(
            out.status.success(),
            "baton {args:?}: {}\nsshd log:\n{}",
            text(&out),
            self.server.log()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Run `args` (without `--json`: the human error line is what is checked) with the
    /// proxy applying `fault` to the connection; kill it after `limit`.
    fn run_faulted(&self, env: &Env, args: &[&str], fault: Fault, limit: Duration) -> Run {
        self.proxy.reset();
        self.proxy.set_fault(fault);
        let started = Instant::now();
        let child = self
            .cmd(env)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let out = wait_bounded(child, limit);
        let elapsed = started.elapsed();
        self.proxy.set_fault(Fault::Pass);
        let conn = self.proxy.last();
        // The proxy threads may still be passing the last bytes (or the close) on.
        let fired = conn.as_ref().is_some_and(|c| {
            c.wait_done(Duration::from_secs(5));
            c.fired()
        });
        Run {
            out,
            elapsed,
            fired,
            pid,
        }
    }

    /// Wait until sshd has noticed that the faulted connection is gone (its session
    /// processes exited): until then the server may still act on requests it received
    /// before the cut, racing with the next run's cleanup.
    fn wait_sessions_gone(&self) {
        // A stalled link never passes the client's close on: the client is gone now, so
        // close what the proxy still holds (as a link that comes back would).
        self.proxy.reset();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.server.session_pids().is_empty() {
            assert!(
                Instant::now() < deadline,
                "sshd sessions still open 10 s after the client left: {:?}",
                self.server.session_pids()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Bytes (up, down) of one uninterrupted run of `args` through the proxy.
    fn measure(&self, env: &Env, args: &[&str]) -> (u64, u64) {
        self.proxy.reset();
        self.proxy.set_fault(Fault::Pass);
        self.ok(env, args);
        let conns = self.proxy.connections();
        assert_eq!(conns.len(), 1, "one connection per command");
        assert!(conns[0].wait_done(Duration::from_secs(5)));
        (conns[0].up(), conns[0].down())
    }
}

struct Run {
    out: Output,
    elapsed: Duration,
    fired: bool,
    /// The baton process (its staging directories are named after it).
    pid: u32,
}

impl Run {
    fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    /// A failure must be one `error: ...; hint` line on stderr and nothing on stdout.
    fn assert_one_error_line(&self, want_exit: i32) {
        assert_eq!(self.code(), want_exit, "{}", text(&self.out));
        let stderr = self.stderr();
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "not one error line: {}", text(&self.out));
        assert!(lines[0].starts_with("error: "), "{}", text(&self.out));
        assert!(self.out.stdout.is_empty(), "{}", text(&self.out));
    }
}

/// Wait for `child` at most `limit`; kill it if it takes longer (and fail).
fn wait_bounded(mut child: std::process::Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("baton hung for over {limit:?}: {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `baton verify` of a store directory must find nothing wrong.
fn verify(store: &Path) {
    let env = Env::new();
    let (code, doc) = env.json(&["--store", s(store), "verify"]);
    assert_eq!(code, 0, "verify {}: {doc}", store.display());
    assert_eq!(doc["report"]["problems"], serde_json::json!([]), "{doc}");
}

/// Staging directories in the remote `staging/` (names `<host>-<pid>-<nanos>`).
fn staging_dirs(remote: &Path) -> Vec<String> {
    fs::read_dir(remote.join("staging"))
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Wait until no staging directory of the failed baton process `pid` is left on the
/// remote: the next push removes those (docs/sync.md). A successful push's own staging
/// directory is removed without waiting for the reply, so a leftover of it is allowed
/// here; the next push removes it (see `assert_staging_empty`).
fn assert_staging_cleaned(remote: &Path, pid: u32) {
    let mark = format!("-{pid}-");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<String> = staging_dirs(remote)
            .into_iter()
            .filter(|d| d.contains(&mark))
            .collect();
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            let inside: Vec<_> = left
                .iter()
                .map(|d| snapshot_files(&remote.join("staging").join(d)))
                .map(|files| {
                    files
                        .into_iter()
                        .map(|(p, b)| (p, b.len()))
                        .collect::<Vec<_>>()
                })
                .collect();
            panic!(
                "staging of the failed push (pid {pid}) left on the remote: {left:?}: {inside:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Nothing at all in the remote `staging/` (after a final push with no baton running).
fn assert_staging_empty(remote: &Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !staging_dirs(remote).is_empty() {
        assert!(
            Instant::now() < deadline,
            "staging directories left on the remote: {:?}",
            staging_dirs(remote)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// No temp files of interrupted downloads in a local store's `packs/`.
fn assert_no_local_temps(store: &Path) {
    let left: Vec<String> = fs::read_dir(store.join("packs"))
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.ends_with(".pack"))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "temp files left in packs/: {left:?}");
}

/// A local store's refs and log: what a pull may move only to a complete bundle.
fn refs_and_log(store: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = snapshot_files(&store.join("refs"));
    out.push((PathBuf::from("log"), fs::read(store.join("log")).unwrap()));
    out
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// splitmix64, seeded from `BATON_FAULT_SEED` or the clock (and printed, to replay).
struct Rng(u64);

impl Rng {
    fn new(test: &str) -> Rng {
        let seed = env_u64(
            "BATON_FAULT_SEED",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64,
        );
        eprintln!("{test}: BATON_FAULT_SEED={seed}");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        common::splitmix64(&mut self.0)
    }

    /// In `lo..hi` (`lo` when the range is empty).
    fn within(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next() % (hi - lo)
        }
    }
}

/// Offsets at which to cut a transfer of `total` bytes in one direction whose fixed part
/// (handshake, authentication, state reads: what a run with nothing to send costs) is
/// `fixed`: one inside the handshake, one among the last bytes (the publish and the
/// goodbye), the rest spread over the bulk in equal strata, each at a random point.
fn offsets(rng: &mut Rng, total: u64, fixed: u64, n: usize) -> Vec<(&'static str, u64)> {
    let n = n.max(2);
    let tail = ((total.saturating_sub(fixed)) / 4).clamp(1, 1500);
    // Key exchange and authentication take the first 2-3 KB each way.
    let mut out = vec![("handshake", rng.within(1, (fixed / 2).clamp(2, 2500)))];
    let (lo, hi) = (fixed, total.saturating_sub(tail));
    let strata = (n - 2) as u64;
    for i in 0..strata {
        let a = lo + (hi - lo) * i / strata;
        let b = lo + (hi - lo) * (i + 1) / strata;
        out.push(("bulk", rng.within(a, b)));
    }
    out.push(("publish/end", rng.within(total - tail, total)));
    // Heavier: every STEP-th byte of the last kilobyte (the publish and the goodbye).
    let step = env_u64("BATON_FAULT_TAIL", 0);
    if step > 0 {
        let mut at = total.saturating_sub(1000).max(fixed);
        while at < total {
            out.push(("tail sweep", at));
            at += step;
        }
    }
    out
}

fn label(dir: Dir) -> &'static str {
    match dir {
        Dir::Up => "client->server",
        Dir::Down => "server->client",
    }
}

/// One row of the summary the tests print (`cargo test --test harness faults:: -- --nocapture`).
fn row(op: &str, dir: Dir, what: &str, at: u64, total: u64, run: &Run, result: &str) {
    eprintln!(
        "| {op} | {} | {what} | {at} / {total} | {} | {:.2} s | {result} | {} |",
        label(dir),
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    );
}

/// Replace the content of `work/big.bin` and save: a new bundle of `bytes` fresh bytes.
fn save_big(env: &Env, seed: u64, bytes: usize) -> String {
    env.write_tree("work", &[("big.bin", &random_bytes(seed, bytes))]);
    env.save("work", &["--summary", &format!("big {seed}")])
}

fn drop_bytes() -> usize {
    (env_u64("BATON_FAULT_MIB", 1) as usize) << 20
}

fn rounds() -> usize {
    env_u64("BATON_FAULT_ROUNDS", 4) as usize
}

const TIMEOUT: &str = "5";
const RUN_LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------
// 1. Connections dropped at offsets spread over the transfer
// ---------------------------------------------------------------------------------------

/// Copy of a store directory, to put it back before every round: each round then moves
/// exactly the same bytes as the measured run, so offsets near the end land on the
/// publish (a growing remote would shift them by a few hundred bytes per round).
struct Pristine {
    copy: PathBuf,
    _dir: tempfile::TempDir,
}

impl Pristine {
    fn of(store: &Path) -> Pristine {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("store");
        copy_tree(store, &copy);
        Pristine { copy, _dir: dir }
    }

    fn restore(&self, store: &Path) {
        fs::remove_dir_all(store).unwrap();
        copy_tree(&self.copy, store);
    }
}

fn copy_tree(from: &Path, to: &Path) {
    let out = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .output()
        .unwrap();
    assert!(out.status.success(), "cp -a: {}", text(&out));
}

#[test]
fn push_survives_drops_at_offsets_in_both_directions() {
    let mut rng = Rng::new("push drops");
    let w = World::new();
    let remote = w.remote();
    let a = Env::new();
    a.init();
    a.write_tree("work", &[("handoff.md", b"# base\n")]);
    let base = a.save("work", &["--summary", "base"]);
    a.ok(&["target", "add", "f", &w.url(FAULT)]);
    w.ok(&a, &["push", "f"]);
    w.wait_sessions_gone();
    let remote_base = Pristine::of(&remote);
    let next = save_big(&a, 1000, drop_bytes());
    let local_next = Pristine::of(&a.store());

    // The shape of the push every round repeats, then of a push with nothing to send.
    let (up, down) = w.measure(&a, &["push", "f"]);
    let (up0, down0) = w.measure(&a, &["push", "f"]);
    eprintln!(
        "push of {} B: {up} B up, {down} B down; no-op push: {up0} B up, {down0} B down",
        drop_bytes()
    );

    let mut runs = 0;
    for (dir, total, fixed) in [(Dir::Up, up, up0), (Dir::Down, down, down0)] {
        for (what, at) in offsets(&mut rng, total, fixed, rounds()) {
            w.wait_sessions_gone();
            remote_base.restore(&remote);
            local_next.restore(&a.store());
            let refs_before = snapshot_files(&remote.join("refs"));
            let run = w.run_faulted(
                &a,
                &["push", "f", "--timeout", TIMEOUT],
                Fault::Drop { dir, after: at },
                RUN_LIMIT,
            );
            runs += 1;
            let now = disk_current(&remote).unwrap();
            let result = match run.code() {
                0 => {
                    assert_eq!(now, next, "push said ok: {}", text(&run.out));
                    "ok (the cut came after the last reply)"
                }
                _ => {
                    run.assert_one_error_line(7);
                    assert!(run.fired, "failed without the fault: {}", text(&run.out));
                    if now == base {
                        assert_eq!(snapshot_files(&remote.join("refs")), refs_before);
                        "exit 7, remote unchanged"
                    } else {
                        // The ref rename reached the server, its reply did not reach us.
                        assert_eq!(now, next, "the remote moved to something else");
                        "exit 7, remote has the complete new bundle"
                    }
                }
            };
            verify(&remote);
            row("push", dir, what, at, total, &run, result);
            // Without the fault: done (or already done), staging left behind removed.
            w.wait_sessions_gone();
            let doc = w.ok(&a, &["--json", "push", "f"]);
            assert!(doc.contains("\"ok\":true"), "{doc}");
            assert_eq!(disk_current(&remote).as_deref(), Some(next.as_str()));
            assert_staging_cleaned(&remote, run.pid);
            verify(&remote);
        }
    }
    w.wait_sessions_gone();
    w.ok(&a, &["push", "f"]);
    w.wait_sessions_gone();
    assert_staging_empty(&remote);
    verify(&a.store());
    eprintln!("push drops: {runs} faulted runs");
}

/// A remote with a base bundle and a local clone of it, both reached through the proxy.
fn pull_world(bytes: usize) -> (World, Env, Env) {
    let w = World::new();
    let a = Env::new();
    a.init();
    a.write_tree("work", &[("handoff.md", b"# base\n")]);
    save_big(&a, 1, bytes);
    a.ok(&["target", "add", "r", &w.url("testbox")]);
    w.ok(&a, &["push", "r"]);
    let b = Env::new();
    w.ok(&b, &["clone", &w.url(FAULT), s(&b.store())]);
    (w, a, b)
}

#[test]
fn pull_survives_drops_at_offsets_in_both_directions() {
    let mut rng = Rng::new("pull drops");
    let bytes = drop_bytes();
    let (w, a, b) = pull_world(bytes);
    let before = disk_current(&b.store()).unwrap();
    let local_base = Pristine::of(&b.store());
    let next = save_big(&a, 2000, bytes);
    w.ok(&a, &["push", "r"]);
    let (up, down) = w.measure(&b, &["pull"]);
    let (up0, down0) = w.measure(&b, &["pull"]);
    eprintln!(
        "pull of {bytes} B: {up} B up, {down} B down; no-op pull: {up0} B up, {down0} B down"
    );

    let mut runs = 0;
    for (dir, total, fixed) in [(Dir::Down, down, down0), (Dir::Up, up, up0)] {
        for (what, at) in offsets(&mut rng, total, fixed, rounds()) {
            local_base.restore(&b.store());
            let refs_before = refs_and_log(&b.store());
            let run = w.run_faulted(
                &b,
                &["pull", "--timeout", TIMEOUT],
                Fault::Drop { dir, after: at },
                RUN_LIMIT,
            );
            runs += 1;
            let now = disk_current(&b.store()).unwrap();
            let result = match run.code() {
                0 => {
                    assert_eq!(now, next, "pull said ok: {}", text(&run.out));
                    "ok (the cut came after the last reply)"
                }
                _ => {
                    run.assert_one_error_line(7);
                    assert!(run.fired, "failed without the fault: {}", text(&run.out));
                    assert_eq!(now, before, "current moved on a failed pull");
                    assert_eq!(refs_and_log(&b.store()), refs_before, "refs moved");
                    "exit 7, local store unchanged"
                }
            };
            verify(&b.store());
            assert_no_local_temps(&b.store());
            row("pull", dir, what, at, total, &run, result);
            w.ok(&b, &["pull"]);
            assert_eq!(disk_current(&b.store()).as_deref(), Some(next.as_str()));
            verify(&b.store());
        }
    }
    eprintln!("pull drops: {runs} faulted runs");
}

#[test]
fn clone_survives_drops_at_offsets_in_both_directions() {
    let mut rng = Rng::new("clone drops");
    let bytes = drop_bytes();
    let (w, _a, b) = pull_world(bytes);
    let c = Env::new();
    let dest = c.path().join("clone");
    let head = disk_current(&w.remote()).unwrap();
    let (up, down) = w.measure(&c, &["clone", &w.url(FAULT), s(&dest)]);
    fs::remove_dir_all(&dest).unwrap();
    // The fixed part of a clone: what a pull with nothing to fetch costs.
    let (up0, down0) = w.measure(&b, &["pull"]);
    eprintln!(
        "clone of {bytes} B: {up} B up, {down} B down; no-op pull: {up0} B up, {down0} B down"
    );

    let mut runs = 0;
    for (dir, total, fixed) in [(Dir::Down, down, down0), (Dir::Up, up, up0)] {
        for (what, at) in offsets(&mut rng, total, fixed, rounds()) {
            let run = w.run_faulted(
                &c,
                &["clone", &w.url(FAULT), s(&dest), "--timeout", TIMEOUT],
                Fault::Drop { dir, after: at },
                RUN_LIMIT,
            );
            runs += 1;
            let result = match run.code() {
                0 => {
                    assert_eq!(disk_current(&dest).as_deref(), Some(head.as_str()));
                    verify(&dest);
                    "ok (the cut came after the last reply)"
                }
                _ => {
                    run.assert_one_error_line(7);
                    assert!(run.fired, "failed without the fault: {}", text(&run.out));
                    assert!(!dest.exists(), "a failed clone left {}", dest.display());
                    "exit 7, nothing left behind"
                }
            };
            row("clone", dir, what, at, total, &run, result);
            let _ = fs::remove_dir_all(&dest);
        }
    }
    w.ok(&c, &["clone", &w.url(FAULT), s(&dest)]);
    assert_eq!(disk_current(&dest).as_deref(), Some(head.as_str()));
    verify(&dest);
    eprintln!("clone drops: {runs} faulted runs");
}

/// Heavier: `BATON_FAULT_SWEEP=STEP` drops a clone's connection at every STEP-th byte of
/// its handshake (both directions): every cut must be exit 7, never a misleading
/// authentication or host-key error.
#[test]
#[ignore = "long: a thousand connections; BATON_FAULT_SWEEP=STEP sets the step (default 9)"]
fn handshake_drop_sweep() {
    let step = env_u64("BATON_FAULT_SWEEP", 9).max(1);
    let (w, _a, b) = pull_world(64 << 10);
    let (up0, down0) = w.measure(&b, &["pull"]);
    let c = Env::new();
    let dest = c.path().join("clone");
    let mut bad = Vec::new();
    let mut runs = 0;
    for (dir, fixed) in [(Dir::Up, up0), (Dir::Down, down0)] {
        let mut at = 0;
        while at < fixed {
            let run = w.run_faulted(
                &c,
                &["clone", &w.url(FAULT), s(&dest), "--timeout", TIMEOUT],
                Fault::Drop { dir, after: at },
                RUN_LIMIT,
            );
            runs += 1;
            if run.code() != 7 || dest.exists() {
                bad.push(format!("{} at {at}: {}", label(dir), text(&run.out)));
            }
            let _ = fs::remove_dir_all(&dest);
            at += step;
        }
    }
    eprintln!("handshake sweep: {runs} cuts, {} wrong", bad.len());
    assert!(bad.is_empty(), "{bad:#?}");
}

// ---------------------------------------------------------------------------------------
// 2. A stalled link: exit 7 within the timeout, never a hang
// ---------------------------------------------------------------------------------------

/// One stall case: which command, where the link goes silent, which timeout applies.
struct StallCase {
    op: &'static str,
    dir: Dir,
    after: u64,
    /// `Some(secs)`: `--timeout secs`; `None`: the ALIVE alias (ServerAliveInterval 1,
    /// so 3 s of silence).
    timeout: Option<u64>,
}

fn stall_case(case: StallCase) -> String {
    let bytes = 1 << 20;
    let (w, a, b) = pull_world(bytes);
    let remote = w.remote();
    let alias = if case.timeout.is_some() { FAULT } else { ALIVE };
    let limit_secs = case.timeout.unwrap_or(3);
    let timeout_arg = limit_secs.to_string();
    let mut args: Vec<String> = Vec::new();
    let c = Env::new();
    let dest = c.path().join("clone");
    let (env, before_remote, before_local) = match case.op {
        "push" => {
            a.ok(&["target", "add", "f", &w.url(alias)]);
            save_big(&a, 3000, bytes);
            args.extend(["push", "f"].map(String::from));
            (&a, disk_current(&remote), None)
        }
        "pull" => {
            save_big(&a, 3001, bytes);
            w.ok(&a, &["push", "r"]);
            b.ok(&["target", "add", "f", &w.url(alias)]);
            args.extend(["pull", "f"].map(String::from));
            (&b, None, Some(refs_and_log(&b.store())))
        }
        _ => {
            args.extend(["clone".to_string(), w.url(alias), s(&dest).to_string()]);
            (&c, None, None)
        }
    };
    if case.timeout.is_some() {
        args.extend(["--timeout".to_string(), timeout_arg]);
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = w.run_faulted(
        env,
        &argv,
        Fault::Stall {
            dir: case.dir,
            after: case.after,
        },
        Duration::from_secs(limit_secs + 10),
    );
    run.assert_one_error_line(7);
    assert!(run.fired, "the stall never happened: {}", text(&run.out));
    assert!(
        run.elapsed < Duration::from_secs(limit_secs + 10),
        "took {:?}",
        run.elapsed
    );
    assert!(
        run.elapsed + Duration::from_millis(300) >= Duration::from_secs(limit_secs),
        "gave up before the timeout: {:?}: {}",
        run.elapsed,
        text(&run.out)
    );
    let how = match case.timeout {
        Some(t) => format!("--timeout {t}"),
        None => "ServerAliveInterval 1".to_string(),
    };
    // Nothing published half-way; then the same command without the fault succeeds.
    match case.op {
        "push" => {
            assert_eq!(disk_current(&remote), before_remote);
            verify(&remote);
            w.wait_sessions_gone();
            w.ok(env, &argv);
            assert_eq!(disk_current(&remote), disk_current(&a.store()));
            assert_staging_cleaned(&remote, run.pid);
        }
        "pull" => {
            assert_eq!(Some(refs_and_log(&b.store())), before_local);
            verify(&b.store());
            assert_no_local_temps(&b.store());
            w.ok(env, &argv);
            assert_eq!(disk_current(&b.store()), disk_current(&remote));
        }
        _ => {
            assert!(!dest.exists(), "a failed clone left {}", dest.display());
            w.ok(env, &argv);
            verify(&dest);
        }
    }
    verify(&remote);
    format!(
        "| {} | {} | stall after {} B | {how} | exit {} after {:.2} s | {} |",
        case.op,
        label(case.dir),
        case.after,
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    )
}

#[test]
fn stalled_link_ends_in_exit_7_within_the_timeout() {
    // The cases mostly wait, so they run side by side (each with its own server).
    let cases = [
        StallCase {
            op: "push",
            dir: Dir::Up,
            after: 512 << 10,
            timeout: Some(2),
        },
        StallCase {
            op: "push",
            dir: Dir::Down,
            after: 1500,
            timeout: Some(2),
        },
        StallCase {
            op: "pull",
            dir: Dir::Down,
            after: 512 << 10,
            timeout: Some(2),
        },
        StallCase {
            op: "pull",
            dir: Dir::Up,
            after: 4000,
            timeout: None,
        },
        StallCase {
            op: "clone",
            dir: Dir::Down,
            after: 512 << 10,
            timeout: None,
        },
        StallCase {
            op: "clone",
            dir: Dir::Up,
            after: 2500,
            timeout: Some(2),
        },
    ];
    let handles: Vec<_> = cases
        .into_iter()
        .map(|case| std::thread::spawn(move || stall_case(case)))
        .collect();
    let mut failed = 0;
    for h in handles {
        match h.join() {
            Ok(line) => eprintln!("{line}"),
            Err(_) => failed += 1,
        }
    }
    assert_eq!(
        failed, 0,
        "{failed} stall cases failed (see their panics above)"
    );
}

// ---------------------------------------------------------------------------------------
// 3. The server killed mid-transfer, then restarted
// ---------------------------------------------------------------------------------------

/// Start `args` through the proxy, stall it after `after` bytes in `dir` so that it is
/// caught mid-transfer, SIGKILL the sshd with every session process, let the link go on
/// (the client then sees the dead server) and return the run.
fn kill_mid_transfer(w: &mut World, env: &Env, args: &[&str], dir: Dir, after: u64) -> Run {
    w.proxy.reset();
    w.proxy.set_fault(Fault::Stall { dir, after });
    let started = Instant::now();
    let child = w
        .cmd(env)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let conn = w
        .proxy
        .wait_fired(Duration::from_secs(30))
        .expect("the transfer never reached the stall point");
    let sessions = w.server.session_pids();
    assert!(!sessions.is_empty(), "no session process to kill");
    w.server.kill();
    // SIGKILL takes effect asynchronously; a killed process lingers as a zombie until
    // reaped.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let alive: Vec<i32> = sessions.iter().copied().filter(|p| !gone(*p)).collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "session processes survived the kill: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    w.proxy.set_fault(Fault::Pass);
    w.proxy.release();
    let out = wait_bounded(child, Duration::from_secs(20));
    conn.wait_done(Duration::from_secs(5));
    Run {
        out,
        elapsed: started.elapsed(),
        fired: conn.fired(),
        pid,
    }
}

/// The process is dead: no longer in /proc, or a zombie.
fn gone(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
        })
        .unwrap_or(true)
}

#[test]
fn killed_server_mid_transfer_then_restarted() {
    let bytes = 4 << 20;
    let (mut w, a, b) = pull_world(64 << 10);
    let remote = w.remote();
    a.ok(&["target", "add", "f", &w.url(FAULT)]);
    let mut lines = Vec::new();

    // Push, killed while the pack streams.
    let before = disk_current(&remote);
    let big = save_big(&a, 4000, bytes);
    let run = kill_mid_transfer(
        &mut w,
        &a,
        &["push", "f", "--timeout", "5"],
        Dir::Up,
        1 << 20,
    );
    run.assert_one_error_line(7);
    assert_eq!(
        disk_current(&remote),
        before,
        "a killed push moved the remote"
    );
    verify(&remote);
    lines.push(format!(
        "| push | killed after 1 MiB up | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    ));
    w.server.restart();
    w.ok(&a, &["push", "f"]);
    assert_eq!(disk_current(&remote).as_deref(), Some(big.as_str()));
    assert_staging_cleaned(&remote, run.pid);
    verify(&remote);

    // Pull, killed while the pack downloads.
    let local_before = refs_and_log(&b.store());
    let run = kill_mid_transfer(&mut w, &b, &["pull", "--timeout", "5"], Dir::Down, 1 << 20);
    run.assert_one_error_line(7);
    assert_eq!(
        refs_and_log(&b.store()),
        local_before,
        "a killed pull moved refs"
    );
    verify(&b.store());
    assert_no_local_temps(&b.store());
    lines.push(format!(
        "| pull | killed after 1 MiB down | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    ));
    w.server.restart();
    w.ok(&b, &["pull"]);
    assert_eq!(disk_current(&b.store()).as_deref(), Some(big.as_str()));
    verify(&b.store());

    // Clone, killed while the pack downloads.
    let c = Env::new();
    let dest = c.path().join("clone");
    let url = w.url(FAULT);
    let run = kill_mid_transfer(
        &mut w,
        &c,
        &["clone", &url, s(&dest), "--timeout", "5"],
        Dir::Down,
        1 << 20,
    );
    run.assert_one_error_line(7);
    assert!(!dest.exists(), "a killed clone left {}", dest.display());
    lines.push(format!(
        "| clone | killed after 1 MiB down | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    ));
    w.server.restart();
    w.ok(&c, &["clone", &url, s(&dest)]);
    assert_eq!(disk_current(&dest).as_deref(), Some(big.as_str()));
    verify(&dest);
    for line in lines {
        eprintln!("{line}");
    }
}

// ---------------------------------------------------------------------------------------
// 4. A full disk, remote and local
// ---------------------------------------------------------------------------------------

/// A tmpfs mounted for one test (needs root), unmounted on drop.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// `None` (after saying so) when mounting is refused.
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output();
        match out {
            Ok(out) if out.status.success() => Some(Tmpfs {
                dir: dir.to_path_buf(),
            }),
            other => {
                // CI runs as root: there a failed mount is a failure, not a skip.
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "cannot mount tmpfs: {other:?}"
                );
                None
            }
        }
    }

    fn resize(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "remount: {}", text(&out));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            // Busy (a server process not yet gone): detach it now, freed when unused.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).output();
        }
    }
}

/// The error of a run that hit a full disk: a documented exit code, one line that says
/// the disk is full and what to do.
fn assert_disk_full_error(run: &Run, side: &str) {
    // docs/exit-codes.md: a full disk is exit 1 (`other`), on either side.
    run.assert_one_error_line(1);
    let line = run.stderr().to_lowercase();
    assert!(
        line.contains("disk is full") || line.contains("no space left"),
        "the error does not say the {side} disk is full: {}",
        text(&run.out)
    );
    assert!(
        line.contains("free"),
        "the error does not say what to do: {}",
        text(&run.out)
    );
}

#[test]
fn full_remote_disk_fails_push_cleanly() {
    let w = World::new();
    let mount = w.server.scratch().join("small");
    // Declared after the world: dropped (unmounted) before the server's temp dir goes.
    let Some(tmpfs) = Tmpfs::mount(&mount, "2m") else {
        return;
    };
    let remote = mount.join("store");
    let a = Env::new();
    a.init();
    a.write_tree("work", &[("handoff.md", b"# base\n")]);
    let base = a.save("work", &["--summary", "base"]);
    a.ok(&["target", "add", "r", &format!("{FAULT}:{}", s(&remote))]);
    w.ok(&a, &["push", "r"]);
    let refs_before = snapshot_files(&remote.join("refs"));

    let big = save_big(&a, 5000, 4 << 20);
    let run = w.run_faulted(
        &a,
        &["push", "r", "--timeout", TIMEOUT],
        Fault::Pass,
        RUN_LIMIT,
    );
    eprintln!(
        "| push | remote tmpfs 2 MiB, 4 MiB bundle | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    );
    assert_disk_full_error(&run, "remote");
    assert_eq!(disk_current(&remote).as_deref(), Some(base.as_str()));
    assert_eq!(snapshot_files(&remote.join("refs")), refs_before);
    // The failed push removed its partial upload itself, as its error line says.
    assert_staging_cleaned(&remote, run.pid);
    verify(&remote);

    // Room again: the same push succeeds and leaves no staging behind.
    tmpfs.resize("64m");
    w.ok(&a, &["push", "r"]);
    assert_eq!(disk_current(&remote).as_deref(), Some(big.as_str()));
    assert_staging_cleaned(&remote, run.pid);
    verify(&remote);
}

#[test]
fn full_local_disk_fails_pull_and_clone_cleanly() {
    let (w, a, _b) = pull_world(64 << 10);
    let remote = w.remote();
    let local = Env::new();
    let Some(pull_fs) = Tmpfs::mount(&local.path().join("small-pull"), "2m") else {
        return;
    };
    let Some(clone_fs) = Tmpfs::mount(&local.path().join("small-clone"), "2m") else {
        return;
    };
    let store = pull_fs.dir.join("store");
    w.ok(&local, &["clone", &w.url(FAULT), s(&store)]);
    let big = save_big(&a, 6000, 4 << 20);
    w.ok(&a, &["push", "r"]);

    let before = refs_and_log(&store);
    let run = w.run_faulted(
        &local,
        &["--store", s(&store), "pull"],
        Fault::Pass,
        RUN_LIMIT,
    );
    eprintln!(
        "| pull | local tmpfs 2 MiB, 4 MiB bundle | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    );
    assert_disk_full_error(&run, "local");
    assert_eq!(refs_and_log(&store), before);
    verify(&store);
    assert_no_local_temps(&store);
    pull_fs.resize("64m");
    w.ok(&local, &["--store", s(&store), "pull"]);
    assert_eq!(disk_current(&store).as_deref(), Some(big.as_str()));
    verify(&store);

    let dest = clone_fs.dir.join("clone");
    let run = w.run_faulted(
        &local,
        &["clone", &w.url(FAULT), s(&dest)],
        Fault::Pass,
        RUN_LIMIT,
    );
    eprintln!(
        "| clone | local tmpfs 2 MiB, 4 MiB bundle | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    );
    assert_disk_full_error(&run, "local");
    assert!(!dest.exists(), "a failed clone left {}", dest.display());
    clone_fs.resize("64m");
    w.ok(&local, &["clone", &w.url(FAULT), s(&dest)]);
    assert_eq!(disk_current(&dest).as_deref(), Some(big.as_str()));
    verify(&dest);
    verify(&remote);
}
