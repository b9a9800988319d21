//! Round trips of clones and pulls of packs larger than the tail read first (footer and
//! index): the pack is read on one open, its body on the handle its tail was read on,
//! and when the body is most likely wanted (a clone; a pack this store did not push)
//! asked for with the tail. Counts from `BATON_TRACE=json`, deterministic.

use crate::common;
use crate::round_trips::{calls, save_change, store_with_target, trace_events, traced};
use crate::transport::Transport;

use common::{Env, Via, disk_current, random_bytes};

/// Incompressible, so that the pack is well past the 64 KiB tail read first.
const BIG: usize = 400 << 10;

/// A store with target `r` whose `current` holds a file of `BIG` random bytes.
fn store_with_big_file(t: &Transport, seed: u64) -> Env {
    let env = store_with_target(t);
    let big = random_bytes(seed, BIG);
    env.write_tree("work", &[("data/big.bin", big.as_slice())]);
    env.save("work", &["--summary", "big"]);
    env
}

fn save_big_change(env: &Env, seed: u64) {
    let big = random_bytes(seed, BIG);
    env.write_tree("work", &[("data/big.bin", big.as_slice())]);
    env.save("work", &["--summary", &format!("big {seed}")]);
}

/// The open_tail calls of a trace that asked for the body with the tail.
fn speculative_opens(stderr: &str) -> usize {
    let events = trace_events(stderr);
    calls(&events, Some("open_tail"))
        .iter()
        .filter(|e| {
            e["what"]
                .as_str()
                .is_some_and(|w| w.contains("and the body"))
        })
        .count()
}

/// SFTP: the state 1 (opens, reads and closes on guessed handles), the pack 1 (open,
/// fstat, tail and body reads in one stream, on a guessed handle): 2 (it was 6, then 4).
#[test]
fn a_clone_reads_a_large_pack_on_one_open() {
    let t = Transport::ssh();
    let a = store_with_big_file(&t, 1);
    t.json_ok(&a, &["push"]);
    let b = Env::new();
    let (n, stderr) = traced(&t, &b, &["clone", &t.clone_url()]);
    assert!(
        n <= 2,
        "clone: {n} round trips, at most 2 expected:\n{stderr}"
    );
    assert_eq!(speculative_opens(&stderr), 1, "{stderr}");
    assert_eq!(disk_current(&b.store()), disk_current(&a.store()));
    b.ok(&["verify"]);
}

/// A pull of a new large pack pushed by another store: 2 round trips (it was 6, then 4), the
/// body asked for with the tail. The pusher's own pull of the same remote then reads
/// the two packs it pushed by their index only (it holds their objects: no body asked
/// for), and the third, pushed by the other store, with its body.
#[test]
fn a_pull_of_a_large_pack_reads_it_on_one_open() {
    let t = Transport::ssh();
    let a = store_with_big_file(&t, 2);
    t.json_ok(&a, &["push"]);
    let b = Env::new();
    t.json_ok(&b, &["clone", &t.clone_url()]);
    save_big_change(&a, 3);
    t.json_ok(&a, &["push"]);
    let (n, stderr) = traced(&t, &b, &["pull"]);
    assert!(
        n <= 2,
        "pull: {n} round trips, at most 2 expected:\n{stderr}"
    );
    assert_eq!(speculative_opens(&stderr), 1, "{stderr}");
    assert_eq!(disk_current(&b.store()), disk_current(&a.store()));
    b.ok(&["verify"]);
    // The pusher pulls the other store's change.
    save_change(&b, 4);
    t.json_ok(&b, &["push"]);
    let (_, stderr) = traced(&t, &a, &["pull"]);
    let opens = calls(&trace_events(&stderr), Some("open_tail")).len();
    assert_eq!((opens, speculative_opens(&stderr)), (3, 1), "{stderr}");
    assert_eq!(disk_current(&b.store()), disk_current(&a.store()));
    a.ok(&["verify"]);
}

/// A local path reads the same way (one call for the tail, one for the rest), and a
/// pack whose body came early but is not needed is dropped cleanly.
#[test]
fn local_clone_and_pull_of_large_packs_stay_correct() {
    let t = Transport::local();
    let a = store_with_big_file(&t, 5);
    t.json_ok(&a, &["push"]);
    let b = Env::new();
    let (n, _) = traced(&t, &b, &["clone", &t.clone_url()]);
    assert!(n <= 3, "local clone: {n} calls, at most 3 expected");
    save_big_change(&a, 6);
    t.json_ok(&a, &["push"]);
    let (n, _) = traced(&t, &b, &["pull"]);
    assert!(n <= 3, "local pull: {n} calls, at most 3 expected");
    assert_eq!(disk_current(&b.store()), disk_current(&a.store()));
    b.ok(&["verify"]);
}

/// A body longer than the read window (64 reads of 255 KiB): the fstat after the last
/// reads goes out while earlier ones are in flight, so its reply trails their data and
/// costs no round trip of its own (it was counted as one).
#[test]
fn a_clone_past_the_read_window_costs_no_extra_round_trip() {
    let t = Transport::ssh();
    let a = store_with_target(&t);
    let big = random_bytes(7, 20 << 20);
    a.write_tree("work", &[("data/big.bin", big.as_slice())]);
    a.save("work", &["--summary", "past the window"]);
    t.json_ok(&a, &["push"]);
    let b = Env::new();
    let (n, stderr) = traced(&t, &b, &["clone", &t.clone_url()]);
    assert!(
        n <= 2,
        "clone: {n} round trips, at most 2 expected:\n{stderr}"
    );
    assert_eq!(disk_current(&b.store()), disk_current(&a.store()));
    b.ok(&["verify"]);
}
