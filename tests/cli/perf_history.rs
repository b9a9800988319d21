//! History-independent everyday commands (issue 14): packs are merged so that a store
//! made by many saves and pulls keeps few packs, every object stays readable, and a
//! command like `show current` opens a bounded number of pack files; a save decodes
//! only the end of the log.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::many_packs::{many_packs, missing};
use crate::common::{Env, pack_files, precondition, s};

/// `store::repack::AUTO_MAX_PACKS`: a save or pull leaves at most this many packs.
const AUTO_MAX_PACKS: usize = 16;
const PACKS: usize = 40;

fn verify_clean(env: &Env, args: &[&str]) {
    let mut full = vec!["verify"];
    full.extend_from_slice(args);
    let (code, doc) = env.json(&full);
    assert_eq!(code, 0, "verify {args:?}: {doc}");
}

#[test]
fn a_save_rolls_many_packs_up_and_gc_merges_them_into_one() {
    let env = Env::new();
    env.init();
    let made = many_packs(&env.store(), PACKS);
    assert_eq!(pack_files(&env.store()).len(), PACKS);
    env.write_tree("ws", &[("a.txt", b"a small change\n")]);
    env.save("ws", &[]);
    let after_save = pack_files(&env.store()).len();
    assert!(
        after_save <= AUTO_MAX_PACKS,
        "{after_save} packs after a save that found {PACKS}"
    );
    // Every object is still here, unreachable ones included (a concurrent writer may
    // have deduplicated against them), and the store verifies clean.
    assert_eq!(missing(&env.store(), &made.objects), Vec::new());
    verify_clean(&env, &[]);
    verify_clean(&env, &["current", "--history"]);

    // More packs on top (as pulls leave them), then gc merges them all into one.
    let more = many_packs(&env.store(), 5);
    let before_gc = pack_files(&env.store()).len();
    assert!(before_gc >= 6, "{before_gc}");
    let (code, doc) = env.json(&["gc", "--grace", "0s"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(pack_files(&env.store()).len(), 1, "{doc}");
    assert_eq!(doc["report"]["repack"]["packs_merged"], before_gc, "{doc}");
    assert_eq!(doc["report"]["repack"]["packs_after"], 1, "{doc}");
    for ids in [&made.objects, &made.garbage, &more.objects] {
        assert_eq!(missing(&env.store(), ids), Vec::new());
    }
    verify_clean(&env, &[]);
    verify_clean(&env, &["current", "--history"]);
    // A second gc has nothing to merge.
    let (code, doc) = env.json(&["gc", "--grace", "0s"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["report"]["repack"]["packs_merged"], 0, "{doc}");
    assert_eq!(pack_files(&env.store()).len(), 1);
    // Old bundles still read.
    let first = &made.bundles[0];
    let out = env.ok(&["show", first]);
    assert!(out.contains("step 0"), "{out}");
}

#[test]
fn a_dry_run_gc_merges_nothing() {
    let env = Env::new();
    env.init();
    many_packs(&env.store(), 5);
    let (code, doc) = env.json(&["gc", "--grace", "0s", "--dry-run"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(pack_files(&env.store()).len(), 5);
}

/// The distinct pack files a `baton` run opened (successful `openat` calls).
fn packs_opened(env: &Env, args: &[&str]) -> BTreeSet<PathBuf> {
    let trace = env.path().join("trace.txt");
    let cmd = env.cmd();
    let bin = cmd.get_program().to_owned();
    let mut traced = Command::new("strace");
    traced
        .args(["-f", "-qq", "-e", "trace=openat", "-o"])
        .arg(&trace)
        .arg(bin)
        .args(args)
        .current_dir(env.path())
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))));
    let out = traced.output().expect("run strace");
    assert!(out.status.success(), "{:?}", out);
    let text = std::fs::read_to_string(&trace).unwrap();
    text.lines()
        .filter(|l| !l.contains("= -1"))
        .filter_map(|l| {
            let start = l.find('"')? + 1;
            let end = start + l[start..].find('"')?;
            let path = Path::new(&l[start..end]);
            (path.extension().is_some_and(|x| x == "pack")
                && path
                    .parent()
                    .and_then(|p| p.file_name())
                    .is_some_and(|n| n == "packs"))
            .then(|| path.to_path_buf())
        })
        .collect()
}

#[test]
fn show_opens_a_bounded_number_of_packs() {
    if !precondition(
        crate::common::strace_usable(),
        "strace that can trace here (apt-get install -y strace)",
    ) {
        return;
    }
    let env = Env::new();
    env.init();
    let made = many_packs(&env.store(), PACKS);
    let store = env.store();
    // The newest packed bundle (`current` until the save below) names a subtree that
    // only the oldest pack holds.
    let newest = made.bundles.last().unwrap();
    let args = ["--store", s(&store), "show", newest];
    let before = packs_opened(&env, &args);
    assert!(before.len() > 1, "{before:?}");
    env.write_tree("ws", &[("a.txt", b"a small change\n")]);
    env.save("ws", &[]);
    let opened = packs_opened(&env, &args);
    assert!(
        opened.len() <= AUTO_MAX_PACKS,
        "show opened {} packs: {opened:?}",
        opened.len()
    );
    env.ok(&["gc", "--grace", "0s"]);
    assert_eq!(packs_opened(&env, &args).len(), 1);
}

/// Replace line `n` (1-based) of the log with `with`.
fn damage_log_line(store: &Path, n: usize, with: &str) {
    let path = store.join("log");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[n - 1] = with;
    std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
}

#[test]
fn a_save_decodes_only_the_end_of_a_long_log() {
    let env = Env::new();
    env.init();
    many_packs(&env.store(), 100);
    // A line deep in the history is full verify's to report, not every save's to decode.
    damage_log_line(&env.store(), 1, "{\"this is\": \"not a log line\"}");
    env.write_tree("ws", &[("a.txt", b"one\n")]);
    env.save("ws", &[]);
    let (code, doc) = env.json(&["verify"]);
    assert_eq!(code, 4, "{doc}");
    assert!(doc.to_string().contains("log line 1 is damaged"), "{doc}");
    // A damaged line at the end of the log, which the save's own line follows, still
    // stops it before anything is written (the error names the first damaged line).
    damage_log_line(&env.store(), 95, "garbage");
    let current = crate::common::disk_current(&env.store());
    env.write_tree("ws", &[("a.txt", b"two\n")]);
    let out = env.run(&["save", "ws"]);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is damaged"), "{err}");
    assert_eq!(crate::common::disk_current(&env.store()), current);
}
