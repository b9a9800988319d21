//! Round trips after connect, as `BATON_TRACE=json` counts them (its `summary` event), for the everyday syncs over both transports: over SSH the SFTP
//! client counts each wait for replies after sending (streaming windows aside), over a
//! local path each call that waits counts one. The counts are deterministic.

use crate::common;
use crate::transport::Transport;

use std::fs;
use std::time::{Duration, Instant};

use common::{Env, Via, text};

/// The trace events of a `BATON_TRACE=json` run's stderr (one JSON object a line).
pub(crate) fn trace_events(stderr: &str) -> Vec<serde_json::Value> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("kind").is_some())
        .collect()
}

/// The trace events of `kind` whose `call` is `call` (any, when `None`).
pub(crate) fn calls<'a>(
    events: &'a [serde_json::Value],
    call: Option<&str>,
) -> Vec<&'a serde_json::Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "call" || e["kind"] == "upload")
        .filter(|e| call.is_none_or(|c| e["call"] == c))
        .collect()
}

/// `baton --json ARGS` with `BATON_TRACE=json`: the round trips it reported, and its
/// stderr (the trace events).
pub(crate) fn traced(t: &Transport, env: &Env, args: &[&str]) -> (u64, String) {
    // The previous command's staging removals are not waited for: let the server carry
    // them out, so that this command finds no leftover to sweep (which costs a round
    // trip or two) and the count stays the same from run to run.
    let staging = t.remote().join("staging");
    let deadline = Instant::now() + Duration::from_secs(3);
    while fs::read_dir(&staging).is_ok_and(|mut d| d.next().is_some()) && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    // OpenSSH's server can drop the last requests of a client that disconnects right
    // after sending them (seen for 3 of 30 pushes of an unchanged baton on a loaded
    // machine): the staging removal that was not waited for then never happens. The next
    // push sweeps such a leftover (its process is gone) at a cost of round trips; it is
    // removed here, so that the count is the protocol's.
    if let Ok(dir) = fs::read_dir(&staging) {
        for entry in dir.flatten() {
            eprintln!(
                "removing a leftover staging directory {:?}",
                entry.file_name()
            );
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    let out = t
        .cmd(env)
        .arg("--json")
        .args(args)
        .env("BATON_TRACE", "json")
        .output()
        .expect("run baton");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "baton {args:?}: {}", text(&out));
    let counts: Vec<u64> = trace_events(&stderr)
        .iter()
        .filter(|e| e["kind"] == "summary")
        .filter_map(|e| e["round_trips"].as_u64())
        .collect();
    assert_eq!(counts.len(), 1, "one summary event expected: {stderr}");
    (counts[0], stderr)
}

pub(crate) fn store_with_target(t: &Transport) -> Env {
    let env = Env::new();
    env.init();
    env.write_tree(
        "work",
        &[
            ("handoff.md", b"# handoff\n"),
            ("src/a.rs", b"fn a() {}\n"),
            ("src/b.rs", b"fn b() {}\n"),
        ],
    );
    env.save("work", &["--summary", "base"]);
    env.ok(&["target", "add", "r", &t.url()]);
    env
}

pub(crate) fn save_change(env: &Env, n: u32) {
    env.write_tree(
        "work",
        &[("src/a.rs", format!("fn a() {{ {n} }}\n").as_bytes())],
    );
    env.save("work", &["--summary", &format!("change {n}")]);
}

/// The counts of one transport: (first push, incremental push, no-op push, pull, clone
/// of a remote of 4 packs).
fn counts(t: &Transport) -> [u64; 5] {
    let a = store_with_target(t);
    let (first, e1) = traced(t, &a, &["push"]);
    // A few generations, so that the remote ref is not at a power of two.
    for n in 0..2 {
        save_change(&a, n);
        traced(t, &a, &["push"]);
    }
    save_change(&a, 7);
    let (incremental, e2) = traced(t, &a, &["push"]);
    let (noop, e3) = traced(t, &a, &["push"]);
    let b = Env::new();
    let (clone, e5) = traced(t, &b, &["clone", &t.clone_url()]);
    save_change(&a, 8);
    traced(t, &a, &["push"]);
    let (pull, e4) = traced(t, &b, &["pull"]);
    eprintln!(
        "first push:\n{e1}\nincremental push:\n{e2}\nno-op push:\n{e3}\npull:\n{e4}\nclone:\n{e5}"
    );
    [first, incremental, noop, pull, clone]
}

/// (first push, incremental push, no-op push, pull, clone) may cost at most `limits`.
fn assert_counts(t: &Transport, limits: [u64; 5]) {
    let got = counts(t);
    eprintln!("round trips (first push, incremental push, no-op push, pull, clone): {got:?}");
    let names = [
        "first push (creates the store)",
        "incremental push",
        "no-op push",
        "pull of one new bundle",
        "clone of 4 packs",
    ];
    for ((name, got), limit) in names.iter().zip(got).zip(limits) {
        assert!(
            got <= limit,
            "{name}: {got} round trips, at most {limit} expected"
        );
    }
}

/// Each call that waits is one batch: read the state, open, finish, publish.
#[test]
fn local_syncs_stay_within_their_round_trips() {
    assert_counts(&Transport::local(), [4, 4, 1, 2, 5]);
}

/// SFTP, with every request on a file sent with its open (on the handle OpenSSH will
/// give it, `sftp/handle_guess.rs`): the state 1; the staged files created, written, fsynced
/// and read back 1; publish 1. An incremental push with its target hint (the generation
/// the last push saw) reads the state with the upload: 2; a no-op push reads the state:
/// 1; a pull reads the state, then the pack's tail (all of a small pack): 2; a clone
/// of 4 packs reads the state, the first pack with the other packs' opens, then those
/// packs (`sftp/read_ahead.rs`): 3.
#[test]
fn ssh_syncs_stay_within_their_round_trips() {
    assert_counts(&Transport::ssh(), [3, 2, 1, 2, 3]);
}

/// `BATON_TRACE=1` prints what the JSON events count: a line a call, and one
/// `trace summary: round trips: N after connect` line with the same N.
#[test]
fn the_text_trace_ends_with_the_round_trip_summary() {
    let t = Transport::local();
    let a = store_with_target(&t);
    traced(&t, &a, &["push"]);
    save_change(&a, 1);
    let (n, events) = traced(&t, &a, &["push"]);
    save_change(&a, 2);
    let out = t
        .cmd(&a)
        .args(["--json", "push"])
        .env("BATON_TRACE", "1")
        .output()
        .expect("run baton");
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summaries: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("trace summary: round trips: "))
        .collect();
    assert_eq!(
        summaries,
        [format!("trace summary: round trips: {n} after connect")],
        "{stderr}\n{events}"
    );
    let lines = stderr.lines().filter(|l| l.starts_with("trace: ")).count();
    // The calls, and the connected line.
    assert_eq!(
        lines,
        calls(&trace_events(&events), None).len() + 1,
        "{stderr}"
    );
}
