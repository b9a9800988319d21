//! Load: 16 concurrent writers on one local store, and 4 concurrent pushers to one remote
//! (a real sshd on loopback, and a local path), all through the real `baton` binary.
//! Afterwards nothing is lost: every save or push that exited 0 is in the one chain of
//! `current`, every failure is a clean `store_conflict`, and the stores verify clean.
//!
//! `BATON_LOAD_SECS` sets how long each test keeps writing (default 6 s, so the whole
//! file stays within a minute in a debug build on two cores). The full run:
//! `BATON_LOAD_SECS=180 cargo test --release --test harness load:: -- --nocapture`.

use crate::common;
use crate::sshd;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{Env, Via, random_bytes, s, snapshot_files};
use serde_json::Value;
use sshd::Sshd;

/// A round that keeps losing the race this often means starvation, not bad luck.
const MAX_RETRIES: u32 = 200;

fn load_duration() -> Duration {
    let secs: f64 = std::env::var("BATON_LOAD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6.0);
    Duration::from_secs_f64(secs)
}

// ---------------------------------------------------------------------------------------
// Content: a pure function of (who, round), so nothing needs to be kept to check it later
// ---------------------------------------------------------------------------------------

/// The files (relative path, bytes) that `who` saves in `round`. Every round changes the
/// marker and the worker's own data; `shared/round.bin` is the same for every worker in
/// a round, so identical objects are written (and pushed) by several processes at once;
/// some files come and go, so deletions are saved too.
fn round_files(who: &str, seed: u64, round: u64) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![
        (
            "marker.txt".to_string(),
            format!("{who} round {round}\n").into_bytes(),
        ),
        (
            "static/readme.md".to_string(),
            b"# load test\n\nThe same bytes in every bundle.\n".to_vec(),
        ),
        (
            "shared/round.bin".to_string(),
            random_bytes(0x5eed_0000 + round, 16 << 10),
        ),
        (
            "own/data.bin".to_string(),
            random_bytes(
                (seed << 32) | round,
                (4 << 10) + (round as usize * 7919) % (60 << 10),
            ),
        ),
    ];
    if round % 2 == 1 {
        files.push((
            "odd.txt".to_string(),
            format!("odd round {round} of {who}\n").into_bytes(),
        ));
    }
    if round.is_multiple_of(3) {
        files.push((
            "own/nested/deep.txt".to_string(),
            format!("{who}/{round}: every third round\n").into_bytes(),
        ));
    }
    files.sort();
    files
}

/// Replace the whole content of `dir` with `files`.
fn write_round(dir: &Path, files: &[(String, Vec<u8>)]) {
    if dir.exists() {
        fs::remove_dir_all(dir).unwrap();
    }
    for (rel, bytes) in files {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
}

/// The regular files under `dir` as (relative path, bytes), sorted.
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    snapshot_files(dir)
        .into_iter()
        .filter(|(_, bytes)| bytes.as_slice() != b"<dir>")
        .map(|(p, bytes)| (p.to_str().unwrap().to_string(), bytes))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Running baton and judging its output
// ---------------------------------------------------------------------------------------

/// One finished `baton --json ...`: everything needed to judge and report it.
#[derive(Clone, Debug)]
struct Run {
    args: String,
    code: i32,
    pid: u32,
    doc: Value,
    stdout: String,
    stderr: String,
    /// When it finished, from the start of the process running the tests.
    done: Instant,
    took: Duration,
}

impl Run {
    fn describe(&self) -> String {
        format!(
            "baton --json {} (pid {}): exit {}\nstdout: {}\nstderr: {}",
            self.args, self.pid, self.code, self.stdout, self.stderr
        )
    }

    fn ok(&self) -> bool {
        self.code == 0 && self.doc["ok"] == true
    }
}

fn run_json(mut cmd: Command, args: &[&str]) -> Run {
    let child = cmd
        .arg("--json")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn baton");
    let pid = child.id();
    let started = Instant::now();
    let out = child.wait_with_output().expect("wait for baton");
    let done = Instant::now();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Run {
        args: args.join(" "),
        code: out.status.code().unwrap_or(-1),
        pid,
        doc: serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        done,
        took: done - started,
    }
}

/// Latency and throughput of the successful runs among `runs` over a load that started
/// at `start` and wrote until `end`: median and slowest, and successes per second in the
/// first and the last third (a store that slows down as its history grows shows here).
fn rates(runs: &[&Run], start: Instant, end: Instant) -> String {
    let mut took: Vec<Duration> = runs.iter().filter(|r| r.ok()).map(|r| r.took).collect();
    took.sort();
    let third = (end - start) / 3;
    let per_sec = |from: Instant, to: Instant| {
        let n = runs
            .iter()
            .filter(|r| r.ok() && r.done >= from && r.done < to)
            .count();
        n as f64 / (to - from).as_secs_f64().max(1e-3)
    };
    format!(
        "latency of a success p50 {:.0?} max {:.0?}; successes/s first third {:.1}, last third {:.1}",
        took.get(took.len() / 2).copied().unwrap_or_default(),
        took.last().copied().unwrap_or_default(),
        per_sec(start, start + third),
        per_sec(end - third, end),
    )
}

/// Whether a failed run is a clean compare-and-swap refusal: exit 5, exactly one JSON
/// line on stdout naming `store_conflict`, a one-line message, nothing on stderr.
fn is_clean_conflict(run: &Run) -> bool {
    let error = &run.doc["error"];
    run.code == 5
        && run.stdout.ends_with('\n')
        && run.stdout.trim_end().lines().count() == 1
        && run.doc["ok"] == false
        && error["code"] == "store_conflict"
        && error["exit_code"] == 5
        && error["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty() && !m.contains('\n'))
        && run.stderr.is_empty()
}

/// The generation files of `current` in a store directory, oldest first, as parsed log
/// lines; requires the numbers to run 1, 2, ... without a gap or a stray file.
fn generations(store: &Path) -> Vec<Value> {
    let dir = store.join("refs").join("current");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            assert_eq!(
                name,
                &format!("{:020}", i + 1),
                "generations of current in {} are not 1..N: {names:?}",
                store.display()
            );
            let text = fs::read_to_string(dir.join(name)).unwrap();
            serde_json::from_str(text.trim()).unwrap()
        })
        .collect()
}

/// The generations of `current` form one chain (each `old` is the previous `new`);
/// returns the ids it moved to, oldest first.
fn generation_chain(store: &Path) -> Vec<String> {
    let gens = generations(store);
    let mut prev = Value::Null;
    for (i, g) in gens.iter().enumerate() {
        assert_eq!(
            g["old"],
            prev,
            "generation {} of {}: old is not the previous new (lost update): {g}",
            i + 1,
            store.display()
        );
        prev = g["new"].clone();
    }
    gens.iter()
        .map(|g| g["new"].as_str().unwrap().to_string())
        .collect()
}

/// `baton log --json` from `current`: the bundles newest first, required to be one linear
/// chain (each bundle's one parent is the next; the oldest has none).
fn log_chain(cmd: Command) -> Vec<Value> {
    let run = run_json(cmd, &["log"]);
    assert!(run.ok(), "{}", run.describe());
    let bundles = run.doc["bundles"].as_array().unwrap().clone();
    for (i, b) in bundles.iter().enumerate() {
        let parents = b["parents"].as_array().unwrap();
        match bundles.get(i + 1) {
            Some(next) => assert_eq!(
                parents.as_slice(),
                std::slice::from_ref(&next["id"]),
                "the history of current is not one chain at {}",
                b["id"]
            ),
            None => assert!(parents.is_empty(), "the oldest bundle has parents: {b}"),
        }
    }
    bundles
}

/// `baton verify --json` on the whole store: required clean; a one-line description.
fn verify_clean(cmd: Command, what: &str) -> String {
    let run = run_json(cmd, &["verify"]);
    let report = &run.doc["report"];
    assert!(
        run.ok() && report["problems"].as_array().is_some_and(|p| p.is_empty()),
        "{what} does not verify: {}",
        run.describe()
    );
    format!(
        "clean ({} objects, {} bundles, {} log entries, {} temp files)",
        report["objects_checked"],
        report["bundles_checked"],
        report["log_entries"],
        report["temp_files"]
    )
}

/// Check out every `(bundle, who, seed, round)` from a store (two at a time) and compare
/// the files byte for byte with what was saved; panics naming the first mismatch.
fn check_checkouts(make_cmd: &(dyn Fn() -> Command + Sync), scratch: &Path, saved: &[Saved]) {
    let next = Mutex::new(0usize);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for worker in 0..2 {
            let (next, failures) = (&next, &failures);
            scope.spawn(move || {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        *n += 1;
                        *n - 1
                    };
                    let Some(item) = saved.get(i) else { break };
                    let dir = scratch.join(format!("checkout-{worker}"));
                    let run = run_json(make_cmd(), &["checkout", &item.bundle, s(&dir)]);
                    let problem = if !run.ok() {
                        Some(run.describe())
                    } else if files_of(&dir) != round_files(&item.who, item.seed, item.round) {
                        Some("checkout differs from the saved files".to_string())
                    } else {
                        None
                    };
                    if let Some(p) = problem {
                        failures.lock().unwrap().push(format!(
                            "{} round {} bundle {}: {p}",
                            item.who, item.round, item.bundle
                        ));
                    }
                    let _ = fs::remove_dir_all(&dir);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} checkouts wrong, first: {}",
        failures.len(),
        saved.len(),
        failures[0]
    );
}

/// A round that ended in success: who saved what.
#[derive(Clone, Debug)]
struct Saved {
    who: String,
    seed: u64,
    round: u64,
    bundle: String,
    /// Attempts that lost the race before this one won.
    retries: u32,
}

/// One line of figures per test, for the report.
struct Summary {
    attempts: usize,
    successes: usize,
    conflicts: usize,
    retries: u64,
    max_retries: u32,
    verify: String,
    elapsed: Duration,
}

fn print_summary(name: &str, s: &Summary, extra: &str) {
    println!(
        "[load] {name}: attempts {}, successes {}, conflicts {}, retries {}, max retries for one round {}, verify {}, duration {:.1?}{extra}",
        s.attempts, s.successes, s.conflicts, s.retries, s.max_retries, s.verify, s.elapsed
    );
}

// ---------------------------------------------------------------------------------------
// 1. Sixteen writers on one store
// ---------------------------------------------------------------------------------------

/// What one writer did: every attempt, in order, and its rounds that succeeded.
#[derive(Default)]
struct WriterLog {
    attempts: Vec<Run>,
    saved: Vec<Saved>,
    unexpected: Vec<String>,
}

fn writer(env: &Env, w: usize, deadline: Instant) -> WriterLog {
    let who = format!("writer{w:02}");
    let dir = env.path().join(&who);
    let mut log = WriterLog::default();
    let mut round = 0u64;
    while Instant::now() < deadline {
        let files = round_files(&who, w as u64, round);
        write_round(&dir, &files);
        let summary = format!("{who} round {round}");
        let mut retries = 0;
        loop {
            let run = run_json(
                env.cmd(),
                &["save", &who, "--from", &who, "--summary", &summary],
            );
            log.attempts.push(run.clone());
            if run.ok() {
                let bundle = run.doc["bundle"].as_str().unwrap_or_default().to_string();
                if bundle.len() != 64 {
                    log.unexpected
                        .push(format!("save printed no bundle id: {}", run.describe()));
                    return log;
                }
                log.saved.push(Saved {
                    who: who.clone(),
                    seed: w as u64,
                    round,
                    bundle,
                    retries,
                });
                break;
            }
            if !is_clean_conflict(&run) {
                log.unexpected.push(run.describe());
                return log;
            }
            retries += 1;
            if retries > MAX_RETRIES {
                log.unexpected
                    .push(format!("{who} round {round}: {retries} conflicts in a row"));
                return log;
            }
        }
        round += 1;
    }
    log
}

#[test]
fn sixteen_writers_on_one_store_lose_no_update() {
    const WRITERS: usize = 16;
    let env = Env::new();
    env.init();
    let start = Instant::now();
    let deadline = start + load_duration();
    let logs: Vec<WriterLog> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let env = &env;
                scope.spawn(move || writer(env, w, deadline))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let load_elapsed = start.elapsed();

    let unexpected: Vec<&String> = logs.iter().flat_map(|l| &l.unexpected).collect();
    assert!(
        unexpected.is_empty(),
        "{} failures that are not a clean store_conflict; first:\n{}",
        unexpected.len(),
        unexpected[0]
    );
    let attempts: Vec<&Run> = logs.iter().flat_map(|l| &l.attempts).collect();
    let saved: Vec<Saved> = logs.iter().flat_map(|l| l.saved.clone()).collect();
    let conflicts = attempts.iter().filter(|r| !r.ok()).count();
    assert_eq!(attempts.len(), saved.len() + conflicts);
    assert!(
        logs.iter().all(|l| !l.saved.is_empty()),
        "every writer saved at least once"
    );
    let by_id: BTreeMap<&str, &Saved> = saved.iter().map(|s| (s.bundle.as_str(), s)).collect();
    assert_eq!(by_id.len(), saved.len(), "two saves printed the same id");

    // The ref generations (authoritative for `current`): exactly the successful saves,
    // one chain, each `old` the previous `new`.
    let gens = generation_chain(&env.store());
    assert_eq!(
        gens.len(),
        saved.len(),
        "one generation of current per successful save"
    );
    assert_eq!(
        gens.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        by_id.keys().copied().collect(),
        "the generations of current are exactly the saved bundles"
    );

    // The audit log: a line per successful save. A line may also record a move that lost
    // its compare-and-swap after appending (SPEC section 9), so failures may add lines.
    let audit = run_json(env.cmd(), &["log", "--audit"]);
    assert!(audit.ok(), "{}", audit.describe());
    let lines = audit.doc["entries"].as_array().unwrap();
    assert!(
        lines
            .iter()
            .all(|e| e["ref"] == "current" && e["action"] == "save"),
        "only saves moved refs: {}",
        audit.stdout
    );
    let mut logged: BTreeMap<&str, usize> = BTreeMap::new();
    for e in lines {
        *logged.entry(e["new"].as_str().unwrap()).or_default() += 1;
    }
    for s in &saved {
        assert_eq!(
            logged.get(s.bundle.as_str()),
            Some(&1),
            "{} round {}: bundle {} is not logged exactly once",
            s.who,
            s.round,
            s.bundle
        );
    }
    assert!(
        lines.len() <= saved.len() + conflicts,
        "{} log lines for {} saves and {conflicts} conflicts",
        lines.len(),
        saved.len()
    );

    // The history of current: one chain through every successful save, each bundle
    // with the parent its save reported and the writer and round that saved it.
    let chain = log_chain(env.cmd());
    let history: BTreeSet<&str> = chain.iter().map(|b| b["id"].as_str().unwrap()).collect();
    for s in &saved {
        assert!(
            history.contains(s.bundle.as_str()),
            "lost update: {} round {} saved {} (exit 0), which the history of current misses",
            s.who,
            s.round,
            s.bundle
        );
    }
    assert_eq!(chain.len(), saved.len(), "history length");
    assert_eq!(chain[0]["id"].as_str(), gens.last().map(String::as_str));
    for b in &chain {
        let id = b["id"].as_str().unwrap();
        let s = by_id
            .get(id)
            .unwrap_or_else(|| panic!("{id} is in the history but no save printed it"));
        assert_eq!(b["from"], s.who.as_str(), "{b}");
        assert_eq!(b["summary"], format!("{} round {}", s.who, s.round), "{b}");
    }
    for l in &logs {
        for (s, run) in l.saved.iter().zip(l.attempts.iter().filter(|r| r.ok())) {
            let chain_parent = chain
                .iter()
                .find(|b| b["id"] == s.bundle.as_str())
                .map(|b| b["parents"].clone());
            assert_eq!(
                Some(run.doc["parents"].clone()),
                chain_parent,
                "save reported other parents than it got"
            );
        }
    }

    let scratch = tempfile::tempdir().unwrap();
    check_checkouts(&|| env.cmd(), scratch.path(), &saved);
    let verify = verify_clean(env.cmd(), "the store");
    let retries = saved.iter().map(|s| u64::from(s.retries)).sum();
    print_summary(
        &format!("{WRITERS} writers, one store"),
        &Summary {
            attempts: attempts.len(),
            successes: saved.len(),
            conflicts,
            retries,
            max_retries: saved.iter().map(|s| s.retries).max().unwrap_or(0),
            verify,
            elapsed: start.elapsed(),
        },
        &format!(
            " (saving {load_elapsed:.1?}; {}; {} checkouts compared)",
            rates(&attempts, start, start + load_elapsed),
            saved.len()
        ),
    );
}

// ---------------------------------------------------------------------------------------
// 2. Four pushers to one remote
// ---------------------------------------------------------------------------------------

/// Where the pushers push: the URL, the store directory behind it (on this machine in
/// both cases, so it can be inspected directly) and the environment that reaches it.
struct Remote<'a> {
    url: String,
    dir: PathBuf,
    server: Option<&'a Sshd>,
}

impl Remote<'_> {
    fn cmd(&self, env: &Env) -> Command {
        match self.server {
            Some(server) => server.cmd(env),
            None => env.cmd(),
        }
    }
}

#[derive(Default)]
struct PusherLog {
    pushes: Vec<Run>,
    saved: Vec<Saved>,
    /// Losing pushes refused before uploading (the remote had moved past our base) and
    /// after (another push took the next generation first).
    lost_before_upload: usize,
    lost_at_publish: usize,
    resets: usize,
    unexpected: Vec<String>,
}

/// The remote is whole after a lost race: its generations still form one chain and the
/// loser left no staging directory behind. Returns a problem, if any.
fn remote_whole_after_loss(remote: &Remote, loser: &Run) -> Option<String> {
    let result = std::panic::catch_unwind(|| generation_chain(&remote.dir));
    if let Err(e) = result {
        let why = e
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| "panic".to_string());
        return Some(format!("after {}: {why}", loser.describe()));
    }
    let marker = format!("-{}-", loser.pid);
    let leftovers: Vec<String> = fs::read_dir(remote.dir.join("staging"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(&marker))
        .collect();
    if leftovers.is_empty() {
        None
    } else {
        Some(format!(
            "the losing push left staging {leftovers:?}: {}",
            loser.describe()
        ))
    }
}

fn pusher(remote: &Remote, p: usize, deadline: Instant) -> PusherLog {
    let who = format!("pusher{p}");
    let env = Env::new();
    let mut log = PusherLog::default();
    macro_rules! must {
        ($run:expr) => {{
            let run = $run;
            if !run.ok() {
                log.unexpected.push(run.describe());
                return log;
            }
            run
        }};
    }
    must!(run_json(remote.cmd(&env), &["clone", &remote.url]));
    let mut jitter = 0x5eed_0000 + p as u64;
    let mut round = 0u64;
    while Instant::now() < deadline {
        // Bring the store up to date: after our own last push this is always a
        // fast-forward (or nothing), never a divergence.
        must!(run_json(remote.cmd(&env), &["pull"]));
        write_round(
            &env.path().join("work"),
            &round_files(&who, 100 + p as u64, round),
        );
        let summary = format!("{who} round {round}");
        let save_args = ["save", "work", "--from", &who, "--summary", &summary];
        let mut bundle = must!(run_json(env.cmd(), &save_args)).doc["bundle"]
            .as_str()
            .unwrap()
            .to_string();
        let mut retries = 0;
        loop {
            let run = run_json(remote.cmd(&env), &["push"]);
            log.pushes.push(run.clone());
            if run.ok() {
                assert_eq!(run.doc["report"]["bundle"], bundle.as_str());
                break;
            }
            if !is_clean_conflict(&run) {
                log.unexpected.push(run.describe());
                return log;
            }
            if run.doc["error"]["message"]
                .as_str()
                .unwrap()
                .contains("moved during the push")
            {
                log.lost_at_publish += 1;
            } else {
                log.lost_before_upload += 1;
            }
            if let Some(problem) = remote_whole_after_loss(remote, &run) {
                log.unexpected.push(problem);
                return log;
            }
            retries += 1;
            if retries > MAX_RETRIES {
                log.unexpected.push(format!(
                    "{who} round {round}: {retries} lost pushes in a row"
                ));
                return log;
            }
            // The local history has diverged from the remote's: pull fetches the winner
            // as targets/origin and refuses to move current (a clean conflict), reset
            // moves current onto it, and the same content is saved again on top.
            let pulled = run_json(remote.cmd(&env), &["pull"]);
            if !is_clean_conflict(&pulled) {
                log.unexpected
                    .push(format!("pull after a lost push: {}", pulled.describe()));
                return log;
            }
            must!(run_json(env.cmd(), &["reset", "targets/origin"]));
            log.resets += 1;
            // As any optimistic-concurrency client should: back off with jitter before
            // the next attempt, longer after each loss.
            pause(&mut jitter, 50 << retries.min(4));
            bundle = must!(run_json(env.cmd(), &save_args)).doc["bundle"]
                .as_str()
                .unwrap()
                .to_string();
        }
        log.saved.push(Saved {
            who: who.clone(),
            seed: 100 + p as u64,
            round,
            bundle,
            retries,
        });
        round += 1;
        // Agents work between handoffs; without any pause the pusher that just won
        // (already up to date) would start every race ahead of the others.
        pause(&mut jitter, 200);
    }
    log
}

/// Sleep a pseudo-random time below `max_ms`.
fn pause(state: &mut u64, max_ms: u64) {
    std::thread::sleep(Duration::from_millis(common::splitmix64(state) % max_ms));
}

fn four_pushers(name: &str, remote: &Remote) {
    const PUSHERS: usize = 4;
    let start = Instant::now();
    // A first bundle creates the remote store, so that every pusher starts by cloning.
    let seed = Env::new();
    seed.init();
    write_round(&seed.path().join("work"), &round_files("seed", 99, 0));
    let seed_id = seed.save("work", &["--from", "seed", "--summary", "seed round 0"]);
    seed.ok(&["target", "add", "origin", &remote.url]);
    let run = run_json(remote.cmd(&seed), &["push"]);
    assert!(run.ok(), "{}", run.describe());

    let push_start = Instant::now();
    let deadline = push_start + load_duration();
    let logs: Vec<PusherLog> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..PUSHERS)
            .map(|p| scope.spawn(move || pusher(remote, p, deadline)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let load_elapsed = push_start.elapsed();

    let unexpected: Vec<&String> = logs.iter().flat_map(|l| &l.unexpected).collect();
    assert!(
        unexpected.is_empty(),
        "{} failures that are not a clean store_conflict (or a broken remote); first:\n{}",
        unexpected.len(),
        unexpected[0]
    );
    let pushes: Vec<&Run> = logs.iter().flat_map(|l| &l.pushes).collect();
    let saved: Vec<Saved> = logs.iter().flat_map(|l| l.saved.clone()).collect();
    let conflicts = pushes.iter().filter(|r| !r.ok()).count();
    assert_eq!(pushes.len(), saved.len() + conflicts);
    assert!(
        logs.iter().all(|l| !l.saved.is_empty()),
        "every pusher pushed at least once"
    );

    // No lost update, no phantom: the remote's generations of current are the seed and
    // exactly the pushes that exited 0, in one chain.
    let gens = generation_chain(&remote.dir);
    let mut expected: BTreeSet<&str> = saved.iter().map(|s| s.bundle.as_str()).collect();
    assert_eq!(expected.len(), saved.len(), "two pushes of one bundle");
    expected.insert(seed_id.as_str());
    assert_eq!(gens.len(), saved.len() + 1, "one generation per push");
    assert_eq!(
        gens.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        expected,
        "the remote's generations are exactly the successful pushes"
    );
    for g in generations(&remote.dir) {
        assert_eq!(g["action"], "push", "{g}");
    }

    // The remote's own view: history through every push, verified, its log readable,
    // each pushed bundle checking out to exactly what its pusher saved, and no staging
    // left behind.
    let remote_cmd = || {
        let mut cmd = seed.cmd();
        cmd.arg("--store").arg(&remote.dir);
        cmd
    };
    let chain = log_chain(remote_cmd());
    let history: BTreeSet<&str> = chain.iter().map(|b| b["id"].as_str().unwrap()).collect();
    for s in &saved {
        assert!(
            history.contains(s.bundle.as_str()),
            "lost update: {} round {} pushed {} (exit 0), which the history of the remote's current misses",
            s.who,
            s.round,
            s.bundle
        );
    }
    assert_eq!(chain.len(), gens.len(), "the remote's history length");
    assert_eq!(chain[0]["id"].as_str(), gens.last().map(String::as_str));
    let audit = run_json(remote_cmd(), &["log", "--audit"]);
    assert!(audit.ok(), "the remote log: {}", audit.describe());
    let scratch = tempfile::tempdir().unwrap();
    check_checkouts(&remote_cmd, scratch.path(), &saved);
    let verify = verify_clean(remote_cmd(), "the remote");
    let staging: Vec<_> = fs::read_dir(remote.dir.join("staging"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        staging.is_empty(),
        "staging left on the remote: {staging:?}"
    );

    // Each generation brought one pack; a push that lost at the ref publish has already
    // published its pack (unreferenced, harmless), and nothing else adds one.
    let packs = fs::read_dir(remote.dir.join("packs")).unwrap().count();
    let lost_at_publish: usize = logs.iter().map(|l| l.lost_at_publish).sum();
    assert!(
        packs <= gens.len() + lost_at_publish,
        "{packs} packs for {} generations and {lost_at_publish} pushes that lost at publish",
        gens.len()
    );
    let retries = saved.iter().map(|s| u64::from(s.retries)).sum();
    print_summary(
        name,
        &Summary {
            attempts: pushes.len(),
            successes: saved.len(),
            conflicts,
            retries,
            max_retries: saved.iter().map(|s| s.retries).max().unwrap_or(0),
            verify,
            elapsed: start.elapsed(),
        },
        &format!(
            " (pushing {load_elapsed:.1?}; pushes: {}; conflicts before upload {}, at publish {}; \
             {} resets; {} rounds; remote: {} generations, {packs} packs, {} log lines)",
            rates(&pushes, push_start, push_start + load_elapsed),
            logs.iter().map(|l| l.lost_before_upload).sum::<usize>(),
            lost_at_publish,
            logs.iter().map(|l| l.resets).sum::<usize>(),
            saved.len(),
            gens.len(),
            audit.doc["entries"].as_array().map_or(0, Vec::len),
        ),
    );
}

#[test]
fn four_pushers_over_ssh_lose_no_update() {
    let server = Sshd::start();
    let dir = server.scratch().join("remote");
    let remote = Remote {
        url: format!("{}:{}", server.alias(), s(&dir)),
        dir,
        server: Some(&server),
    };
    four_pushers("4 pushers, one remote over SSH", &remote);
}

#[test]
fn four_pushers_to_a_local_path_lose_no_update() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("remote");
    let remote = Remote {
        url: s(&dir).to_string(),
        dir,
        server: None,
    };
    four_pushers("4 pushers, one remote at a local path", &remote);
}
