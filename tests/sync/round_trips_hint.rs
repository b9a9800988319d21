//! The target hint (`targethints`, SPEC §5.2): an incremental push that trusts the remote
//! generation its last sync saw takes 2 round trips after connect over SFTP, and a hint
//! that is wrong (stale, damaged, for another URL) costs round trips, never correctness.

use crate::common;
use crate::round_trips::{save_change, store_with_target, traced};
use crate::transport::Transport;

use std::fs;

use common::{Env, Via, disk_current, s};

fn hints(env: &Env) -> std::path::PathBuf {
    env.store().join("targethints")
}

/// The generation files of the remote `current`, by number.
fn remote_generations(t: &Transport) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(t.remote().join("refs/current"))
        .expect("remote refs/current")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn an_incremental_push_with_a_hint_takes_two_round_trips() {
    let t = Transport::ssh();
    let a = store_with_target(&t);
    traced(&t, &a, &["push"]);
    assert!(hints(&a).exists(), "the first push records a hint");
    save_change(&a, 1);
    let (n, trace) = traced(&t, &a, &["push"]);
    assert!(
        n <= 2,
        "incremental push: {n} round trips, at most 2 expected:\n{trace}"
    );
    // A pull records the hint too: a push after it is just as short.
    let b = Env::new();
    t.json_ok(&b, &["clone", &t.clone_url()]);
    save_change(&a, 2);
    traced(&t, &a, &["push"]);
    t.json_ok(&b, &["pull"]);
    b.write_tree("work", &[("src/c.rs", b"fn c() {}\n")]);
    b.save("work", &["--summary", "from b"]);
    let (n, trace) = traced(&t, &b, &["push"]);
    assert!(
        n <= 2,
        "push after a pull: {n} round trips, at most 2 expected:\n{trace}"
    );
    assert_eq!(remote_generations(&t).len(), 4);
    t.json_ok(&b, &["verify"]);
}

#[test]
fn a_stale_hint_costs_round_trips_not_correctness() {
    for t in [Transport::local(), Transport::ssh()] {
        let a = store_with_target(&t);
        t.json_ok(&a, &["push"]);
        let stale = fs::read(hints(&a)).expect("hint after the first push");
        for n in 1..=2 {
            save_change(&a, n);
            t.json_ok(&a, &["push"]);
        }
        // The hint says generation 1; the remote is at 3. The push still moves it to 4,
        // naming the new bundle, and leaves nothing staged.
        fs::write(hints(&a), &stale).expect("restore the old hint");
        save_change(&a, 3);
        let (n, trace) = traced(&t, &a, &["push"]);
        // The hinted attempt 1, removing its staging 3, the long way 3: the directories
        // it opened for its publish are let go, so the long way still sends its requests
        // with their opens (it took 10 while they were held).
        assert!(
            !t.is_ssh() || n <= 7,
            "push over a stale hint: {n} round trips, at most 7 expected:\n{trace}"
        );
        let ours = disk_current(&a.store()).expect("local current");
        assert_eq!(remote_generations(&t).len(), 4);
        assert_eq!(disk_current(&t.remote()).as_deref(), Some(ours.as_str()));
        t.json_ok(&a, &["verify"]);
        let b = Env::new();
        t.json_ok(&b, &["clone", &t.clone_url()]);
        assert_eq!(disk_current(&b.store()).as_deref(), Some(ours.as_str()));
    }
}

#[test]
fn a_stale_hint_still_refuses_a_diverged_push() {
    for t in [Transport::local(), Transport::ssh()] {
        let a = store_with_target(&t);
        t.json_ok(&a, &["push"]);
        // Someone else moves the remote on; `a`'s hint still names generation 1.
        let b = Env::new();
        t.json_ok(&b, &["clone", &t.clone_url()]);
        b.write_tree("work", &[("src/b.rs", b"fn b() { 2 }\n")]);
        b.save("work", &["--summary", "theirs"]);
        t.json_ok(&b, &["push"]);
        let theirs = disk_current(&t.remote()).expect("remote current");
        save_change(&a, 1);
        let err = t.json_err(&a, &["push"], 5);
        assert!(
            err["message"].as_str().unwrap_or("").contains("diverged"),
            "{err}"
        );
        assert_eq!(disk_current(&t.remote()).as_deref(), Some(theirs.as_str()));
        assert_eq!(remote_generations(&t).len(), 2);
        let staging = fs::read_dir(t.remote().join("staging"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(staging, 0, "the speculative upload is removed");
    }
}

#[test]
fn a_damaged_or_foreign_hint_is_ignored() {
    let t = Transport::local();
    let a = store_with_target(&t);
    t.json_ok(&a, &["push"]);
    let good = fs::read(hints(&a)).expect("hint");
    // Torn (as a crash could leave it), or edited: the checksum no longer matches.
    fs::write(hints(&a), &good[..good.len() / 2]).expect("tear the hint");
    save_change(&a, 1);
    t.json_ok(&a, &["push"]);
    let mut edited = fs::read(hints(&a)).expect("hint rewritten by the push");
    let at = edited.len() - 10;
    edited[at] = if edited[at] == b'0' { b'1' } else { b'0' };
    fs::write(hints(&a), &edited).expect("edit the hint");
    save_change(&a, 2);
    t.json_ok(&a, &["push"]);
    // A hint for another URL: the target now names another (empty) location.
    let elsewhere = a.path().join("elsewhere");
    a.ok(&["target", "remove", "r"]);
    a.ok(&["target", "add", "r", s(&elsewhere)]);
    save_change(&a, 3);
    t.json_ok(&a, &["push"]);
    let ours = disk_current(&a.store()).expect("local current");
    assert_eq!(disk_current(&elsewhere).as_deref(), Some(ours.as_str()));
    assert_eq!(remote_generations(&t).len(), 3);
    // The hint is a store file like the others (mode 0600), and verify is clean.
    common::assert_private_tree(&a.store());
    t.json_ok(&a, &["verify"]);
}
