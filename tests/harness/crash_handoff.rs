//! Crash consistency of a handoff whose manifest goes into its own pack (issue 14): a
//! handoff with many attached files, killed with SIGKILL at a random instant. After every
//! kill the store verifies clean, `current` is the old bundle or a complete new one, and
//! the next handoff succeeds; at the end `gc --grace 0s` leaves no pack temp file.
//! `BATON_CRASH_KILLS` sets the kills (default 8), as in `crash`.

use crate::common;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use common::{Env, disk_current, text};

fn kills() -> usize {
    std::env::var("BATON_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

/// Rewrite the 400 attached files with content unique to `round`.
fn write_round(att: &Path, round: u64) {
    for i in 0..400u64 {
        let dir = att.join(format!("d{}", i % 20));
        fs::create_dir_all(&dir).unwrap();
        let body = format!("round {round} attachment {i} ").repeat(40 + (i % 50) as usize);
        fs::write(dir.join(format!("f{i}")), body).unwrap();
    }
}

fn pack_temps(store: &Path) -> usize {
    fs::read_dir(store.join("packs"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn crash_handoff_while_its_pack_is_written() {
    let env = Env::new();
    let ws = env.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    fs::write(ws.join("a.txt"), "one\n").unwrap();
    common::git(&ws, &["init", "-q"]);
    common::git(&ws, &["add", "-A"]);
    common::git(&ws, &["commit", "-q", "-m", "base"]);
    let store = ws.join(".baton");
    let att = env.path().join("att");
    let run = |args: &[&str]| env.cmd().current_dir(&ws).args(args).output().unwrap();
    let handoff = ["handoff", "--to", "codex", "--no-brief", "--attach"];
    let mut args: Vec<String> = handoff.iter().map(|s| s.to_string()).collect();
    args.push(common::s(&att).to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(run(&["init"]).status.success());
    write_round(&att, 0);
    let t = Instant::now();
    let out = run(&args);
    assert!(out.status.success(), "first handoff\n{}", text(&out));
    let mut duration = t.elapsed();
    let mut seed = 0x7a11_0001u64;
    let mut mid = 0;
    let mut problems = Vec::new();
    // Past `kills()` rounds, more (up to twice as many) while too few kills landed
    // before the commit point: where a kill lands is chance (see crash_pack.rs).
    let mut round = 0u64;
    while round < kills() as u64 || (mid * 4 < kills() && round < 2 * kills() as u64) {
        round += 1;
        fs::write(ws.join("a.txt"), format!("round {round}\n")).unwrap();
        write_round(&att, round);
        let unit = (common::splitmix64(&mut seed) >> 11) as f64 / (1u64 << 53) as f64;
        let delay = duration.mul_f64(1.2 * unit);
        let before = disk_current(&store);
        let child = env
            .cmd()
            .current_dir(&ws)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (out, finished) = common::kill::kill_at(child, delay);
        if let Some(took) = finished {
            // The shortest run seen: one slowed by other tests running alongside
            // would stretch the kill window past the next run's end, so that few
            // kills land before the commit point.
            duration = duration.min(took);
        }
        let killed = out.status.signal() == Some(libc::SIGKILL);
        if !killed && !out.status.success() {
            problems.push(format!("round {round}: handoff failed\n{}", text(&out)));
        }
        if killed && disk_current(&store) == before {
            mid += 1;
        }
        for check in [
            &["verify"][..],
            &["verify", "current"],
            &["show", "current"],
        ] {
            let out = run(check);
            if !out.status.success() {
                problems.push(format!("round {round}: {check:?}\n{}", text(&out)));
            }
        }
        let out = run(&args);
        if !out.status.success() {
            problems.push(format!("round {round}: recovery handoff\n{}", text(&out)));
        }
        let attached = run(&["cat", "current:attachments/att/d1/f1"]);
        let want = format!("round {round} attachment 1 ").repeat(41);
        if attached.stdout != want.as_bytes() {
            problems.push(format!("round {round}: the recovery handoff's attachment"));
        }
    }
    let out = run(&["gc", "--grace", "0s"]);
    assert!(out.status.success(), "gc\n{}", text(&out));
    assert_eq!(
        pack_temps(&store),
        0,
        "gc --grace 0s removes pack temp files"
    );
    let verify = run(&["verify"]);
    assert!(
        verify.status.success(),
        "verify at the end\n{}",
        text(&verify)
    );
    println!("[crash_handoff] {round} kills: {mid} before the commit point");
    assert!(problems.is_empty(), "{}", problems.join("\n---\n"));
    assert!(
        kills() == 0 || mid * 4 >= kills(),
        "only {mid} of {} kills landed before the commit point: the test proved little",
        kills()
    );
}
