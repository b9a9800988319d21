//! A re-save whose files all come from the stat cache (issue 14) looks each cached blob up
//! in the pack indexes it already holds in memory: no `stat` of a loose-object path per
//! file (2,000 failed ones for a 2,000-file tree before), counted with strace.
//! `%stat` does not include `statx` in strace 6.1, so both are named.

use crate::common;

use common::{Env, text};

#[test]
fn a_cached_resave_stats_no_loose_object_paths() {
    if !common::precondition(
        common::strace_usable(),
        "strace that can trace here (apt-get install -y strace)",
    ) {
        return;
    }
    let env = Env::new();
    env.init();
    let files: Vec<(String, Vec<u8>)> = (0..300)
        .map(|i| {
            (
                format!("d{}/f{i}.txt", i % 6),
                format!("cached file {i}\n").repeat(1 + i % 30).into_bytes(),
            )
        })
        .collect();
    env.write_files("work", &files);
    // Older than the racy-clean window, so the first save's cache entries are trusted.
    std::thread::sleep(std::time::Duration::from_millis(200));
    env.ok(&["save", "work"]);

    let trace = env.path().join("trace.txt");
    let out = env
        .strace(&["-ff", "-qq"], &trace, "%stat,statx")
        .args(["--json", "save", "work"])
        .output()
        .unwrap();
    assert!(out.status.success(), "traced re-save\n{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["files_cached"], 300, "{report}");
    let loose_stats: Vec<String> = common::strace_per_thread(&trace)
        .lines()
        .filter(|l| l.contains("/objects/") && l.contains("ENOENT"))
        .map(str::to_string)
        .collect();
    // The new manifest (and a tree whose id is new) may still be looked for loose: a
    // handful, never one per file.
    assert!(
        loose_stats.len() <= 10,
        "{} failed stats of loose-object paths for 300 cached files, e.g. {:?}",
        loose_stats.len(),
        loose_stats.first()
    );
    env.ok(&["verify"]);
}
