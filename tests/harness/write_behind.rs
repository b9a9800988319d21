//! A large object received by a clone (or pull) has its write-back started while it
//! streams in (`store::write_behind`), so the fsync that publishes it waits for a window
//! or two, not for all of it: counted with strace as `sync_file_range` calls, and the
//! clone still verifies.

use crate::common;

use std::fs;
use std::process::Command;

use common::{Env, text};

#[test]
fn a_cloned_large_object_is_written_back_while_it_arrives() {
    if !common::precondition(
        common::strace_usable(),
        "strace that can trace here (apt-get install -y strace)",
    ) {
        return;
    }
    let env = Env::new();
    env.init();
    // 40 MiB that zstd cannot shrink: five windows of write-back.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let big: Vec<u8> = (0..40 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    env.write_tree("work", &[("big.bin", &big)]);
    env.ok(&["save", "--secrets", "allow", "work"]);

    let trace = env.path().join("trace.txt");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&trace)
        .args(["-e", "trace=sync_file_range,fsync"])
        .arg(env!("CARGO_BIN_EXE_baton"))
        .arg("clone")
        .arg(env.store())
        .arg("copy")
        .current_dir(env.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", env.path())
        .env("USER", "tester")
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(out.status.success(), "traced clone\n{}", text(&out));
    let calls = fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter(|l| l.contains("sync_file_range("))
        .count();
    // Each of the five whole windows is started, and all but the first waited for.
    assert!(
        calls >= 9,
        "{calls} sync_file_range calls for a 40 MiB object"
    );
    env.ok(&["--store", "copy", "verify"]);
}
