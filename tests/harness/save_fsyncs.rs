//! Durability in batches (issue 14): a save makes a bounded number of fsyncs whatever the
//! number of files (its new objects go into one pack), counted with strace on the real
//! binary, and the store verifies afterwards.

use crate::common;

use std::fs;

use common::{Env, pack_files, text};

/// fsync and fdatasync calls of one traced `baton save work` in `env`.
fn traced_save_syncs(env: &Env) -> Vec<String> {
    let trace = env.path().join("trace.txt");
    let out = env
        .strace(&["-f", "-qq", "-y"], &trace, "fsync,fdatasync")
        .args(["save", "work"])
        .output()
        .unwrap();
    assert!(out.status.success(), "traced save\n{}", text(&out));
    let lines: Vec<String> = fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter(|l| l.contains("fsync(") || l.contains("fdatasync("))
        .map(str::to_string)
        .collect();
    fs::remove_file(&trace).unwrap();
    lines
}

#[test]
fn a_500_file_save_makes_at_most_10_fsyncs() {
    if !common::precondition(
        common::strace_usable(),
        "strace that can trace here (apt-get install -y strace)",
    ) {
        return;
    }
    let env = Env::new();
    env.init();
    let files: Vec<(String, Vec<u8>)> = (0..500)
        .map(|i| {
            (
                format!("d{}/s{}/f{i}.txt", i % 10, i % 7),
                format!("small file {i}\n").repeat(1 + i % 40).into_bytes(),
            )
        })
        .collect();
    env.write_files("work", &files);
    let syncs = traced_save_syncs(&env);
    assert!(
        syncs.len() <= 10,
        "a 500-file save made {} fsyncs:\n{}",
        syncs.len(),
        syncs.join("\n")
    );
    assert_eq!(pack_files(&env.store()).len(), 1);
    env.ok(&["verify"]);

    // A second save of 500 changed files into the same store: the same bound.
    let changed: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(p, c)| (p.clone(), [c.as_slice(), b"more\n"].concat()))
        .collect();
    env.write_files("work", &changed);
    let syncs = traced_save_syncs(&env);
    assert!(
        syncs.len() <= 10,
        "a second 500-file save made {} fsyncs:\n{}",
        syncs.len(),
        syncs.join("\n")
    );
    assert_eq!(pack_files(&env.store()).len(), 2);
    env.ok(&["verify"]);
    println!(
        "[save_fsyncs] 500-file save into an existing store: {} fsyncs",
        syncs.len()
    );
}
