//! Local-path targets: `gc --target` against a hub in use (SPEC 17.1): merges racing a
//! pusher, a puller and each other, and merges killed at random instants, leave every
//! bundle readable and every command that ran successful.

use super::*;

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

/// `baton --json ARGS` in `env`, to completion: exit code and output.
fn run(env: &Env, args: &[&str]) -> (Option<i32>, String) {
    let out = env.cmd().arg("--json").args(args).output().unwrap();
    (out.status.code(), text(&out))
}

/// A pusher (saves and pushes in a loop), a puller (pulls into a clone in a loop) and
/// two merge loops, all at once against one hub: every push, pull and merge succeeds,
/// and at the end a clone holds every bundle pushed.
#[test]
fn merges_racing_a_pusher_a_puller_and_each_other_lose_nothing() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, base) = store_with_target(&remote, 71);
    json_ok(&a, &["push"]);
    let b = clone_env(&remote);
    let merger = Env::new();
    merger.init();
    merger.ok(&["target", "add", "r", s(&remote)]);
    let done = AtomicBool::new(false);
    let (pushed, failures) = thread::scope(|scope| {
        let pusher = scope.spawn(|| {
            let mut pushed = vec![base.clone()];
            let mut failures = Vec::new();
            for i in 0..30u64 {
                pushed.push(save_change(&a, &format!("n/{i}"), &random_bytes(i, 3_000)));
                let (code, out) = run(&a, &["push"]);
                if code != Some(0) {
                    failures.push(format!("push {i}: {out}"));
                }
            }
            done.store(true, Ordering::SeqCst);
            (pushed, failures)
        });
        let puller = scope.spawn(|| {
            let mut failures = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let (code, out) = run(&b, &["pull"]);
                if code != Some(0) {
                    failures.push(format!("pull: {out}"));
                }
            }
            failures
        });
        let merge_loop = |all: bool| {
            let merger = &merger;
            let done = &done;
            scope.spawn(move || {
                let mut failures = Vec::new();
                let mut merges = 0;
                while !done.load(Ordering::SeqCst) {
                    let mut args = vec!["gc", "--target", "r"];
                    if all {
                        args.push("--all");
                    }
                    let (code, out) = run(merger, &args);
                    match code {
                        Some(0) => merges += 1,
                        _ => failures.push(format!("gc --target: {out}")),
                    }
                    // Far more often than a hub is merged, and still a pull may take
                    // as many looks as merges ran under it.
                    thread::sleep(Duration::from_millis(20));
                }
                (merges, failures)
            })
        };
        let (m1, m2) = (merge_loop(true), merge_loop(false));
        let (pushed, mut failures) = pusher.join().unwrap();
        failures.extend(puller.join().unwrap());
        for m in [m1, m2] {
            let (merges, more) = m.join().unwrap();
            assert!(merges > 0, "a merge loop never ran");
            failures.extend(more);
        }
        (pushed, failures)
    });
    assert!(failures.is_empty(), "{failures:#?}");
    json_ok(&merger, &["gc", "--target", "r", "--all"]);
    assert_eq!(pack_files(&remote).len(), 1);
    verify(&holder, &remote);
    let c = clone_env(&remote);
    for id in &pushed {
        json_ok(&c, &["verify", id]);
    }
    let pulled = json_ok(&b, &["pull"]);
    assert_eq!(
        pulled["report"]["current_after"],
        pushed.last().unwrap().as_str()
    );
}

/// `gc --target --all` killed at instants spread over its run: after each kill the hub
/// verifies and a clone of it holds every bundle; the merge run again completes.
#[test]
fn a_merge_killed_at_any_instant_leaves_a_hub_that_verifies() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, base) = store_with_target(&remote, 72);
    json_ok(&a, &["push"]);
    let mut pushed = vec![base];
    for i in 0..12u64 {
        pushed.push(save_change(
            &a,
            &format!("big/{i}"),
            &random_bytes(100 + i, 400_000),
        ));
        json_ok(&a, &["push"]);
    }
    // How long a whole merge takes here, on a copy.
    let copy = holder.path().join("copy");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(&remote)
            .arg(&copy)
            .status()
            .unwrap()
            .success()
    );
    let timer = Env::new();
    timer.init();
    timer.ok(&["target", "add", "c", s(&copy)]);
    let started = Instant::now();
    json_ok(&timer, &["gc", "--target", "c", "--all"]);
    let whole = started.elapsed();
    for step in 1..=6u32 {
        let mut child = a
            .cmd()
            .args(["gc", "--target", "r", "--all"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        thread::sleep(whole * step / 6);
        let _ = child.kill();
        let _ = child.wait();
        verify(&holder, &remote);
        let c = clone_env(&remote);
        for id in &pushed {
            json_ok(&c, &["verify", id]);
        }
    }
    let report = json_ok(&a, &["gc", "--target", "r", "--all"]);
    assert!(
        report["report"]["packs_after"].as_u64() <= Some(1),
        "{report}"
    );
    verify(&holder, &remote);
}

/// A hub whose newest pack is gone (deleted by hand, say) holds a generation naming a
/// bundle it lacks: a pull onto a long history here refuses it as incomplete, exit 4,
/// and leaves the local store as it was.
#[test]
fn a_pull_of_a_bundle_the_hub_lacks_is_refused_as_incomplete() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 73);
    json_ok(&a, &["push"]);
    for i in 0..5u64 {
        save_change(&a, &format!("h/{i}"), &random_bytes(i, 500));
        json_ok(&a, &["push"]);
    }
    let b = clone_env(&remote);
    let before_packs = pack_files(&remote);
    save_change(&a, "lost.txt", b"in the lost pack\n");
    json_ok(&a, &["push"]);
    let lost: Vec<PathBuf> = pack_files(&remote)
        .into_iter()
        .filter(|p| !before_packs.contains(p))
        .collect();
    assert_eq!(lost.len(), 1);
    fs::remove_file(&lost[0]).unwrap();
    let before = snapshot_files(&b.store());
    let err = json_err(&b, &["pull"], 4);
    assert!(
        err["message"]
            .as_str()
            .unwrap_or("")
            .contains("is incomplete"),
        "{err}"
    );
    assert_eq!(snapshot_files(&b.store()), before);
}
