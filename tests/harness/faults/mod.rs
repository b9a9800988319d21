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

use common::{Env, Via, disk_current, random_bytes, s, snapshot_files, text};
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
        self.server.cmd(env)
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
    // A push that trusts its target hint reads less of the remote's state than a no-op
    // push (3 files instead of 29 probes), so its replies can be fewer bytes than the
    // no-op's: keep the last tenth of the transfer to spread the cuts over.
    let fixed = fixed.min(total / 10 * 9);
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

/// Replace the content of `work/big.bin` and save: a new bundle of `bytes` fresh bytes
/// (random bytes may look like a secret to the scan: they are stored as they are).
fn save_big(env: &Env, seed: u64, bytes: usize) -> String {
    env.write_tree("work", &[("big.bin", &random_bytes(seed, bytes))]);
    env.save(
        "work",
        &["--summary", &format!("big {seed}"), "--secrets", "allow"],
    )
}

fn drop_bytes() -> usize {
    (env_u64("BATON_FAULT_MIB", 1) as usize) << 20
}

fn rounds() -> usize {
    env_u64("BATON_FAULT_ROUNDS", 4) as usize
}

const TIMEOUT: &str = "5";
const RUN_LIMIT: Duration = Duration::from_secs(30);

mod dropped;
mod full_disk;
mod stalled_killed;
