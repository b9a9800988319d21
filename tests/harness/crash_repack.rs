//! Crash consistency of pack merging (SPEC 7, 12.3): `gc` merging many packs, killed
//! with SIGKILL at a random instant. After every kill the store verifies clean, every
//! object of every pack it started with (unreachable ones included) is still readable,
//! the whole history verifies, and the next gc completes the merge into one pack and
//! removes the killed run's temp file.
//!
//! `BATON_CRASH_KILLS` sets the number of kills (default 8), as for `crash.rs`.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::common::many_packs::{many_packs_sized, missing};
use crate::common::{Env, pack_files};

const PACKS: usize = 30;

fn kills() -> usize {
    std::env::var("BATON_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

/// Bytes of the big file of each bundle: a merge takes a noticeable time (an eighth in
/// debug builds, which are slower).
fn big() -> usize {
    if cfg!(debug_assertions) {
        64 << 10
    } else {
        512 << 10
    }
}

/// splitmix64, for the kill instants.
fn next(state: &mut u64) -> u64 {
    crate::common::splitmix64(state)
}

fn world() -> (Env, Vec<baton::format::ObjectId>) {
    let env = Env::new();
    env.init();
    let made = many_packs_sized(&env.store(), PACKS, big());
    let mut all = made.objects;
    all.extend(made.garbage);
    (env, all)
}

fn gc(env: &Env) -> Command {
    let mut cmd = env.cmd();
    cmd.args(["gc", "--grace", "0s"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

#[test]
fn crash_gc_during_a_pack_merge() {
    // One uninterrupted run, for the range of kill instants.
    let (env, all) = world();
    let started = Instant::now();
    assert!(gc(&env).status().unwrap().success());
    let mut took = started.elapsed();
    assert_eq!(pack_files(&env.store()).len(), 1);
    assert_eq!(missing(&env.store(), &all), Vec::new());
    drop(env);

    let mut seed = 0x7e9a_c400_u64;
    let (mut mid, mut in_merge, mut problems) = (0usize, 0usize, Vec::new());
    let n = kills();
    for k in 0..n {
        let (env, all) = world();
        let delay = took.mul_f64((next(&mut seed) % 1200) as f64 / 1000.0);
        let child = gc(&env).spawn().unwrap();
        let (out, finished) = crate::common::kill::kill_at(child, delay);
        let status = out.status;
        let killed = status.signal() == Some(libc::SIGKILL);
        if let Some(ran) = finished {
            // An uninterrupted run: the next kill instants follow its duration (the
            // first, timed run may have been slowed by a cold cache or a loaded machine).
            took = ran;
        }
        let packs = pack_files(&env.store()).len();
        let temps = std::fs::read_dir(env.store().join("packs"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
            })
            .count();
        mid += usize::from(killed);
        in_merge += usize::from(killed && (temps > 0 || packs != PACKS));
        let label = format!("kill {k} after {delay:?} (packs {packs}, temps {temps})");
        let lost = missing(&env.store(), &all);
        if !lost.is_empty() {
            problems.push(format!("{label}: {} objects lost", lost.len()));
        }
        for args in [&["verify"][..], &["verify", "current", "--history"]] {
            let (code, doc) = env.json(args);
            if code != 0 {
                problems.push(format!("{label}: {args:?} exit {code}: {doc}"));
            }
        }
        // The next gc completes the merge and cleans up.
        if !gc(&env).status().unwrap().success() {
            problems.push(format!("{label}: recovery gc failed"));
            continue;
        }
        if pack_files(&env.store()).len() != 1 {
            problems.push(format!("{label}: recovery gc left several packs"));
        }
        let (code, doc) = env.json(&["verify"]);
        if code != 0 || doc["report"]["temp_files"] != 0 {
            problems.push(format!("{label}: after recovery gc: {doc}"));
        }
        if !missing(&env.store(), &all).is_empty() {
            problems.push(format!("{label}: objects lost after recovery gc"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    eprintln!(
        "crash_gc_during_a_pack_merge: {mid} of {n} kills landed while gc ran, {in_merge} of them in the merge"
    );
    assert!(
        n < 8 || mid * 4 >= n,
        "only {mid} of {n} kills landed while gc was running (uninterrupted: {took:?})"
    );
}
