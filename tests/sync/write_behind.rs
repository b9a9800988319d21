//! A clone writes what it receives behind the download: the write-back of a large pack or
//! loose object is started every 8 MiB (`sync_file_range`), so that the fsync before it is
//! published (still there: durability is unchanged) has little left to write. Counted with
//! strace over a local-path clone.

use crate::common;

use std::collections::HashMap;
use std::fs;

use common::{Env, random_bytes, text};

#[test]
fn a_clone_starts_write_back_early_and_still_fsyncs_before_publishing() {
    if !common::precondition(
        common::strace_usable(),
        "strace that can trace here (apt-get install -y strace)",
    ) {
        return;
    }
    let a = Env::new();
    a.init();
    // A pack of about 10 MiB (600 incompressible files of 16 KiB) and one loose object of
    // 20 MiB (past the 4 MiB of a batched read, so it is streamed).
    let files: Vec<(String, Vec<u8>)> = (0..600u64)
        .map(|i| (format!("d{}/f{i}.bin", i % 8), random_bytes(i, 16 << 10)))
        .chain([("big.bin".to_string(), random_bytes(9_999, 20 << 20))])
        .collect();
    a.write_files("work", &files);
    a.ok(&["save", "--secrets", "allow", "work"]);

    let b = Env::new();
    let dest = b.path().join("clone");
    let trace = b.path().join("trace.txt");
    let out = b
        .strace(
            &["-f", "-qq"],
            &trace,
            "sync_file_range,fsync,fdatasync,close",
        )
        .arg("clone")
        .arg(a.store())
        .arg(&dest)
        .output()
        .unwrap();
    assert!(out.status.success(), "traced clone\n{}", text(&out));
    let trace = fs::read_to_string(&trace).unwrap();

    // Per file descriptor, in order: each file whose write-back was started must be
    // fsynced after the last start and before it is closed.
    let mut started: HashMap<String, usize> = HashMap::new();
    let mut files_started = 0;
    for line in trace.lines() {
        let call = line
            .split_once(' ')
            .map_or(line, |(_, rest)| rest.trim_start());
        let fd = |name: &str| {
            call.strip_prefix(name)
                .and_then(|r| r.strip_prefix('('))
                .and_then(|r| r.split([',', ')']).next())
                .map(str::to_string)
        };
        if let Some(fd) = fd("sync_file_range") {
            *started.entry(fd).or_insert(0) += 1;
        } else if let Some(fd) = fd("fsync").or_else(|| fd("fdatasync")) {
            if started.remove(&fd).is_some() {
                files_started += 1;
            }
        } else if let Some(fd) = fd("close") {
            assert!(
                !started.contains_key(&fd),
                "fd {fd} was closed after its write-back was started but before an fsync:\n{trace}"
            );
        }
    }
    assert!(started.is_empty(), "never fsynced: {started:?}\n{trace}");
    // The pack and the large object each.
    assert_eq!(files_started, 2, "{trace}");
    b.ok(&["--store", dest.to_str().unwrap(), "verify"]);
}
