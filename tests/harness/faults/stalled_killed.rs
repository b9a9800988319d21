//! Faults: a stalled link (exit 7 within the timeout), and the server killed mid-transfer then restarted.

use super::dropped::pull_world;
use super::*;

// ---------------------------------------------------------------------------------------
// 2. A stalled link: exit 7 within the timeout, never a hang
// ---------------------------------------------------------------------------------------

/// One stall case: which command, where the link goes silent, which timeout applies.
struct StallCase {
    op: &'static str,
    dir: Dir,
    after: u64,
    /// `Some(secs)`: `--timeout secs`; `None`: the ALIVE alias (ServerAliveInterval 1,
    /// so 3 s of silence).
    timeout: Option<u64>,
}

fn stall_case(case: StallCase) -> String {
    let bytes = 1 << 20;
    let (w, a, b) = pull_world(bytes);
    let remote = w.remote();
    let alias = if case.timeout.is_some() { FAULT } else { ALIVE };
    let limit_secs = case.timeout.unwrap_or(3);
    let timeout_arg = limit_secs.to_string();
    let mut args: Vec<String> = Vec::new();
    let c = Env::new();
    let dest = c.path().join("clone");
    let (env, before_remote, before_local) = match case.op {
        "push" => {
            a.ok(&["target", "add", "f", &w.url(alias)]);
            save_big(&a, 3000, bytes);
            args.extend(["push", "f"].map(String::from));
            (&a, disk_current(&remote), None)
        }
        "pull" => {
            save_big(&a, 3001, bytes);
            w.ok(&a, &["push", "r"]);
            b.ok(&["target", "add", "f", &w.url(alias)]);
            args.extend(["pull", "f"].map(String::from));
            (&b, None, Some(refs_and_log(&b.store())))
        }
        _ => {
            args.extend(["clone".to_string(), w.url(alias), s(&dest).to_string()]);
            (&c, None, None)
        }
    };
    if case.timeout.is_some() {
        args.extend(["--timeout".to_string(), timeout_arg]);
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = w.run_faulted(
        env,
        &argv,
        Fault::Stall {
            dir: case.dir,
            after: case.after,
        },
        Duration::from_secs(limit_secs + 10),
    );
    run.assert_one_error_line(7);
    assert!(run.fired, "the stall never happened: {}", text(&run.out));
    assert!(
        run.elapsed < Duration::from_secs(limit_secs + 10),
        "took {:?}",
        run.elapsed
    );
    assert!(
        run.elapsed + Duration::from_millis(300) >= Duration::from_secs(limit_secs),
        "gave up before the timeout: {:?}: {}",
        run.elapsed,
        text(&run.out)
    );
    let how = match case.timeout {
        Some(t) => format!("--timeout {t}"),
        None => "ServerAliveInterval 1".to_string(),
    };
    // Nothing published half-way; then the same command without the fault succeeds.
    match case.op {
        "push" => {
            assert_eq!(disk_current(&remote), before_remote);
            verify(&remote);
            w.wait_sessions_gone();
            w.ok(env, &argv);
            assert_eq!(disk_current(&remote), disk_current(&a.store()));
            assert_staging_cleaned(&remote, run.pid);
        }
        "pull" => {
            assert_eq!(Some(refs_and_log(&b.store())), before_local);
            verify(&b.store());
            assert_no_local_temps(&b.store());
            w.ok(env, &argv);
            assert_eq!(disk_current(&b.store()), disk_current(&remote));
        }
        _ => {
            assert!(!dest.exists(), "a failed clone left {}", dest.display());
            w.ok(env, &argv);
            verify(&dest);
        }
    }
    verify(&remote);
    format!(
        "| {} | {} | stall after {} B | {how} | exit {} after {:.2} s | {} |",
        case.op,
        label(case.dir),
        case.after,
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    )
}

#[test]
fn stalled_link_ends_in_exit_7_within_the_timeout() {
    // The cases mostly wait, so they run side by side (each with its own server).
    let cases = [
        StallCase {
            op: "push",
            dir: Dir::Up,
            after: 512 << 10,
            timeout: Some(2),
        },
        StallCase {
            op: "push",
            dir: Dir::Down,
            after: 1500,
            timeout: Some(2),
        },
        StallCase {
            op: "pull",
            dir: Dir::Down,
            after: 512 << 10,
            timeout: Some(2),
        },
        StallCase {
            op: "pull",
            dir: Dir::Up,
            after: 4000,
            timeout: None,
        },
        StallCase {
            op: "clone",
            dir: Dir::Down,
            after: 512 << 10,
            timeout: None,
        },
        StallCase {
            op: "clone",
            dir: Dir::Up,
            after: 2500,
            timeout: Some(2),
        },
    ];
    let handles: Vec<_> = cases
        .into_iter()
        .map(|case| std::thread::spawn(move || stall_case(case)))
        .collect();
    let mut failed = 0;
    for h in handles {
        match h.join() {
            Ok(line) => eprintln!("{line}"),
            Err(_) => failed += 1,
        }
    }
    assert_eq!(
        failed, 0,
        "{failed} stall cases failed (see their panics above)"
    );
}

// ---------------------------------------------------------------------------------------
// 3. The server killed mid-transfer, then restarted
// ---------------------------------------------------------------------------------------

/// Start `args` through the proxy, stall it after `after` bytes in `dir` so that it is
/// caught mid-transfer, SIGKILL the sshd with every session process, let the link go on
/// (the client then sees the dead server) and return the run.
fn kill_mid_transfer(w: &mut World, env: &Env, args: &[&str], dir: Dir, after: u64) -> Run {
    w.proxy.reset();
    w.proxy.set_fault(Fault::Stall { dir, after });
    let started = Instant::now();
    let child = w
        .cmd(env)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let conn = w
        .proxy
        .wait_fired(Duration::from_secs(30))
        .expect("the transfer never reached the stall point");
    let sessions = w.server.session_pids();
    assert!(!sessions.is_empty(), "no session process to kill");
    w.server.kill();
    // SIGKILL takes effect asynchronously; a killed process lingers as a zombie until
    // reaped.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let alive: Vec<i32> = sessions.iter().copied().filter(|p| !gone(*p)).collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "session processes survived the kill: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    w.proxy.set_fault(Fault::Pass);
    w.proxy.release();
    let out = wait_bounded(child, Duration::from_secs(20));
    conn.wait_done(Duration::from_secs(5));
    Run {
        out,
        elapsed: started.elapsed(),
        fired: conn.fired(),
        pid,
    }
}

/// The process is dead: no longer in /proc, or a zombie.
fn gone(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
        })
        .unwrap_or(true)
}

#[test]
fn killed_server_mid_transfer_then_restarted() {
    let bytes = 4 << 20;
    let (mut w, a, b) = pull_world(64 << 10);
    let remote = w.remote();
    a.ok(&["target", "add", "f", &w.url(FAULT)]);
    let mut lines = Vec::new();

    // Push, killed while the pack streams.
    let before = disk_current(&remote);
    let big = save_big(&a, 4000, bytes);
    let run = kill_mid_transfer(
        &mut w,
        &a,
        &["push", "f", "--timeout", "5"],
        Dir::Up,
        1 << 20,
    );
    run.assert_one_error_line(7);
    assert_eq!(
        disk_current(&remote),
        before,
        "a killed push moved the remote"
    );
    verify(&remote);
    lines.push(format!(
        "| push | killed after 1 MiB up | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    ));
    w.server.restart();
    w.ok(&a, &["push", "f"]);
    assert_eq!(disk_current(&remote).as_deref(), Some(big.as_str()));
    assert_staging_cleaned(&remote, run.pid);
    verify(&remote);

    // Pull, killed while the pack downloads.
    let local_before = refs_and_log(&b.store());
    let run = kill_mid_transfer(&mut w, &b, &["pull", "--timeout", "5"], Dir::Down, 1 << 20);
    run.assert_one_error_line(7);
    assert_eq!(
        refs_and_log(&b.store()),
        local_before,
        "a killed pull moved refs"
    );
    verify(&b.store());
    assert_no_local_temps(&b.store());
    lines.push(format!(
        "| pull | killed after 1 MiB down | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    ));
    w.server.restart();
    w.ok(&b, &["pull"]);
    assert_eq!(disk_current(&b.store()).as_deref(), Some(big.as_str()));
    verify(&b.store());

    // Clone, killed while the pack downloads.
    let c = Env::new();
    let dest = c.path().join("clone");
    let url = w.url(FAULT);
    let run = kill_mid_transfer(
        &mut w,
        &c,
        &["clone", &url, s(&dest), "--timeout", "5"],
        Dir::Down,
        1 << 20,
    );
    run.assert_one_error_line(7);
    assert!(!dest.exists(), "a killed clone left {}", dest.display());
    lines.push(format!(
        "| clone | killed after 1 MiB down | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    ));
    w.server.restart();
    w.ok(&c, &["clone", &url, s(&dest)]);
    assert_eq!(disk_current(&dest).as_deref(), Some(big.as_str()));
    verify(&dest);
    for line in lines {
        eprintln!("{line}");
    }
}
