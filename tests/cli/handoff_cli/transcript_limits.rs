//! Handoff CLI: the transcript limits on local input (docs/reliability.md, "Transcript
//! limits"); `transcript_stored.rs` has those on stored transcripts. Large inputs are
//! made here, cheaply (sparse files, streamed compression), and baton runs
//! under an address-space limit, so that an unbounded allocation fails at once instead
//! of needing gigabytes; every run has a deadline, so that a hang fails too.

use super::transcripts::claude_project_dir;
use super::*;

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};

use std::time::{Duration, Instant};

/// The address space baton gets: its own needs (a debug build, two malloc arenas) and a
/// few times the largest line the tests hand it; far less than what reading any of these
/// inputs whole, or building a `Value` of one of their lines, takes.
pub(super) const ADDRESS_SPACE: u64 = 512 << 20;
/// Long enough for a debug build on a loaded machine; a hang takes forever.
const DEADLINE: Duration = Duration::from_secs(120);

/// How one limited run of baton ended.
pub(super) struct Run {
    /// The exit code; `None` when a signal ended it (an abort) or the deadline did.
    code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    pub(super) stdout: String,
    stderr: String,
    pub(super) elapsed: Duration,
    peak_rss_kib: i64,
}

impl Run {
    pub(super) fn doc(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "not one JSON document ({e}): {:?} / {:?}",
                self.stdout, self.stderr
            )
        })
    }

    /// The error message of a `--json` run.
    pub(super) fn message(&self) -> String {
        self.doc()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn hint(&self) -> String {
        self.doc()["error"]["hint"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub(super) fn expect(&self, code: i32, what: &str) {
        println!(
            "[limits] {what}: exit {:?} in {:.1?}, peak RSS at most {} KiB",
            self.code, self.elapsed, self.peak_rss_kib
        );
        assert!(!self.timed_out, "{what}: still running after {DEADLINE:?}");
        assert_eq!(
            self.code,
            Some(code),
            "{what}: ended by signal {:?} after {:.1?}\nstdout: {}\nstderr: {}",
            self.signal,
            self.elapsed,
            self.stdout,
            &self.stderr[..self.stderr.len().min(2000)]
        );
    }
}

/// `baton --json ARGS` in `dir` with at most `address_space` bytes of address space
/// (`RLIMIT_AS`, set between fork and exec), killed at [`DEADLINE`].
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, for its resource usage"
)]
pub(super) fn run_limited(env: &Env, dir: &Path, args: &[&str], address_space: u64) -> Run {
    let out_path = env.path().join(".limited-stdout");
    let err_path = env.path().join(".limited-stderr");
    let mut cmd = env.cmd();
    cmd.current_dir(dir)
        .arg("--json")
        .args(args)
        // Each malloc arena reserves 64 MiB of address space up front: two are plenty.
        .env("MALLOC_ARENA_MAX", "2")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap());
    let limit = libc::rlimit {
        rlim_cur: address_space,
        rlim_max: address_space,
    };
    // SAFETY: setrlimit is async-signal-safe and touches nothing of the parent.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn baton");
    let pid = child.id() as libc::pid_t;
    let mut timed_out = false;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut raw_status = 0;
    loop {
        // SAFETY: `pid` is our child, not yet reaped; the pointers are valid.
        let reaped = unsafe { libc::wait4(pid, &mut raw_status, libc::WNOHANG, &mut usage) };
        if reaped == pid {
            break;
        }
        assert_eq!(reaped, 0, "wait4: {}", std::io::Error::last_os_error());
        if start.elapsed() > DEADLINE && !timed_out {
            timed_out = true;
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = std::process::ExitStatus::from_raw(raw_status);
    Run {
        code: if timed_out { None } else { status.code() },
        signal: status.signal(),
        timed_out,
        // At most: a forked child starts with this process's pages counted too.
        peak_rss_kib: usage.ru_maxrss,
        stdout: fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: String::from_utf8_lossy(&fs::read(&err_path).unwrap_or_default()).into_owned(),
        elapsed: start.elapsed(),
    }
}

/// A workspace `ws` (canonical) in a fresh environment with a store.
fn workspace(env: &Env) -> PathBuf {
    env.init();
    let ws = env.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    fs::canonicalize(&ws).unwrap()
}

/// The first line of a Claude Code session recorded in `ws`.
fn claude_line(ws: &Path, session: &str, text: &str) -> String {
    json!({
        "type": "user", "sessionId": session, "uuid": "u1", "parentUuid": null,
        "cwd": s(ws), "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "content": text},
    })
    .to_string()
}

/// The session_meta line of a Codex rollout recorded in `ws`.
fn codex_meta(ws: &Path, id: &str) -> String {
    json!({
        "timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
        "payload": {"id": id, "cwd": s(ws), "timestamp": "2026-01-01T00:00:00Z"},
    })
    .to_string()
}

/// Write `head` (complete lines) at `path`, then make the file `size` bytes long with a
/// hole: a large session that costs no disk.
fn sparse_session(path: &Path, head: &str, size: u64, hours_old: u64) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, head).unwrap();
    let file = fs::File::options().write(true).open(path).unwrap();
    file.set_len(size).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(hours_old * 3600))
        .unwrap();
}

#[test]
fn a_session_line_that_is_a_large_array_is_read_in_bounded_memory() {
    // One Claude Code line whose field nobody reads is 24 MiB of `[0,0,...]`: 12 million
    // values. Built as a `Value` that was 32 bytes a value (more than the whole address
    // space here); skipped unbuilt, it costs nothing but the line.
    let env = Env::new();
    let ws = workspace(&env);
    let session = "5e551011-aaaa-4bbb-8ccc-00000000a11a";
    let array = format!("[{}0]", "0,".repeat(12 << 20));
    let big = format!(
        "{{\"type\":\"assistant\",\"sessionId\":\"{session}\",\"timestamp\":\"2026-01-01T00:00:01Z\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"the needle answer\"}}]}},\"toolUseResult\":{array}}}"
    );
    let path = env
        .path()
        .join(".claude/projects")
        .join(claude_project_dir(&ws))
        .join(format!("{session}.jsonl"));
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(
        &path,
        format!("{}\n{big}\n", claude_line(&ws, session, "the question")),
    )
    .unwrap();
    drop((array, big));
    let run = run_limited(
        &env,
        &ws,
        &["save", "--no-brief", "--transcript", "claude-code:latest"],
        ADDRESS_SPACE,
    );
    run.expect(0, "save of a session with a 24 MiB array line");
    println!("[limits] 24 MiB array line: saved in {:.1?}", run.elapsed);
    let found = json_in(&env, &ws, &["search", "current", "needle"]);
    assert_eq!(found["total_matches"], 1, "{found}");
    assert_eq!(found["hits"][0]["event"]["text"], "the needle answer");
}

#[test]
fn a_transcript_line_of_too_many_values_is_refused_and_nothing_is_written() {
    let env = Env::new();
    let ws = workspace(&env);
    let before = snapshot_files(&env.store());
    let line = format!("{{\"text\":\"x\",\"junk\":[{}0]}}\n", "0,".repeat(150_000));
    let path = ws.join("t.jsonl");
    fs::write(&path, format!("{{\"text\":\"fine\"}}\n{line}")).unwrap();
    let run = run_limited(
        &env,
        &ws,
        &["save", "--no-brief", "--transcript", "t.jsonl"],
        ADDRESS_SPACE,
    );
    run.expect(2, "a line of 150,001 values");
    let message = run.message();
    assert!(
        message.contains("line 2") && message.contains("more than 100000 JSON values"),
        "{message}"
    );
    assert!(run.hint().contains("--attach"), "{}", run.hint());
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "the store is unchanged"
    );
}

#[test]
fn a_session_over_the_size_limit_is_refused_before_it_is_read() {
    // 400 MiB (Claude Code) and 300 MiB (Codex), sparse: read whole, with the copies a
    // handoff makes, either took gigabytes; refused from their size, they cost nothing.
    let env = Env::new();
    let ws = workspace(&env);
    let before = snapshot_files(&env.store());
    let claude = ws.join("big-claude.jsonl");
    let head = format!(
        "{}\n",
        claude_line(&ws, "5e551011-aaaa-4bbb-8ccc-0000000b1600", "hi")
    );
    sparse_session(&claude, &head, 400 << 20, 0);
    let rollout = env
        .path()
        .join(".codex/sessions/2026/01/01/rollout-2026-01-01T00-00-00-big.jsonl");
    sparse_session(
        &rollout,
        &format!("{}\n", codex_meta(&ws, "c-big")),
        300 << 20,
        0,
    );
    for (source, size) in [(s(&claude), 400), ("codex:latest".to_string(), 300)] {
        let run = run_limited(
            &env,
            &ws,
            &["save", "--no-brief", "--transcript", &source],
            ADDRESS_SPACE,
        );
        run.expect(2, &source);
        let message = run.message();
        assert!(
            message.contains(&format!("is {size} MiB")) && message.contains("limit of 256 MiB"),
            "{source}: {message}"
        );
        assert!(
            run.elapsed < Duration::from_secs(30),
            "{source}: {:?}",
            run.elapsed
        );
    }
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "the store is unchanged"
    );
}

#[test]
fn latest_refuses_a_newest_session_over_the_limit_instead_of_taking_an_older_one() {
    let env = Env::new();
    let ws = workspace(&env);
    let before = snapshot_files(&env.store());
    let project = env
        .path()
        .join(".claude/projects")
        .join(claude_project_dir(&ws));
    let older = "01de0000-aaaa-4bbb-8ccc-000000000001";
    let newest = "5e551011-aaaa-4bbb-8ccc-000000000002";
    fs::create_dir_all(&project).unwrap();
    let older_path = project.join(format!("{older}.jsonl"));
    fs::write(
        &older_path,
        format!("{}\n", claude_line(&ws, older, "old work")),
    )
    .unwrap();
    fs::File::options()
        .write(true)
        .open(&older_path)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(48 * 3600))
        .unwrap();
    let newest_path = project.join(format!("{newest}.jsonl"));
    let head = format!("{}\n", claude_line(&ws, newest, "new work"));
    sparse_session(&newest_path, &head, 300 << 20, 0);
    let codex_dir = env.path().join(".codex/sessions/2026/01/01");
    let codex_old = codex_dir.join("rollout-2026-01-01T00-00-00-old.jsonl");
    fs::create_dir_all(&codex_dir).unwrap();
    fs::write(&codex_old, format!("{}\n", codex_meta(&ws, "c-old"))).unwrap();
    fs::File::options()
        .write(true)
        .open(&codex_old)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(48 * 3600))
        .unwrap();
    let codex_new = codex_dir.join("rollout-2026-01-01T01-00-00-new.jsonl");
    sparse_session(
        &codex_new,
        &format!("{}\n", codex_meta(&ws, "c-new")),
        300 << 20,
        0,
    );

    for (harness, path) in [("claude-code", &newest_path), ("codex", &codex_new)] {
        let source = format!("{harness}:latest");
        let run = run_limited(
            &env,
            &ws,
            &["save", "--no-brief", "--transcript", &source],
            ADDRESS_SPACE,
        );
        run.expect(2, &source);
        let message = run.message();
        assert!(
            message.contains(&s(path))
                && message.contains("is 300 MiB")
                && message.contains("limit of 256 MiB")
                && message.contains("does not fall back"),
            "{source}: {message}"
        );
        let hint = run.hint();
        assert!(
            hint.contains(&format!("{harness}:SESSION")) && hint.contains("--transcript FILE"),
            "{source}: {hint}"
        );
    }
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "the store is unchanged"
    );

    // Listed, marked too large, never read whole; the older one stays selectable.
    let run = run_limited(&env, &ws, &["transcript", "sources"], ADDRESS_SPACE);
    run.expect(0, "transcript sources");
    let sources = run.doc()["sources"].as_array().unwrap().clone();
    let listed = |id: &str| {
        sources
            .iter()
            .find(|s| s["session"] == id)
            .unwrap_or_else(|| panic!("{id} not listed: {sources:?}"))
            .clone()
    };
    assert_eq!(listed(newest)["bytes"], 300u64 << 20);
    assert_eq!(listed("c-new")["bytes"], 300u64 << 20);
    assert_eq!(listed(older)["lines"], 1);
    let human = env
        .cmd()
        .current_dir(&ws)
        .args(["transcript", "sources"])
        .output()
        .unwrap();
    assert!(
        stdout(&human).contains("too large (300 MiB, the limit is 256 MiB)"),
        "{}",
        stdout(&human)
    );
    let by_id = format!("claude-code:{older}");
    ok(
        baton_in(&env, &ws, &["save", "--no-brief", "--transcript", &by_id]),
        "save of the older session by id",
    );
}

/// Make a FIFO at `path`.
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(s(path)).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

#[test]
fn a_transcript_that_is_a_fifo_is_refused_at_once_and_never_waited_on() {
    let env = Env::new();
    let ws = workspace(&env);
    let before = snapshot_files(&env.store());
    mkfifo(&ws.join("t.jsonl"));
    let run = run_limited(
        &env,
        &ws,
        &["save", "--no-brief", "--transcript", "t.jsonl"],
        ADDRESS_SPACE,
    );
    release_fifo(&ws.join("t.jsonl"));
    run.expect(2, "a FIFO as --transcript");
    assert!(
        run.message().contains("is not a regular file"),
        "{}",
        run.message()
    );
    assert!(run.elapsed < Duration::from_secs(30), "{:?}", run.elapsed);
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "the store is unchanged"
    );

    // A FIFO among the sessions (newest, named as a session is) and the rollouts: listed
    // never, waited on never; the regular session next to it is the one taken.
    let project = env
        .path()
        .join(".claude/projects")
        .join(claude_project_dir(&ws));
    fs::create_dir_all(&project).unwrap();
    let session = "01de0000-aaaa-4bbb-8ccc-00000000f1f0";
    fs::write(
        project.join(format!("{session}.jsonl")),
        format!("{}\n", claude_line(&ws, session, "regular")),
    )
    .unwrap();
    mkfifo(&project.join("5e551011-aaaa-4bbb-8ccc-00000000f1f1.jsonl"));
    let rollouts = env.path().join(".codex/sessions/2026/01/01");
    fs::create_dir_all(&rollouts).unwrap();
    mkfifo(&rollouts.join("rollout-2026-01-01T00-00-00-fifo.jsonl"));
    let run = run_limited(&env, &ws, &["transcript", "sources"], ADDRESS_SPACE);
    run.expect(0, "transcript sources beside FIFOs");
    let sources = run.doc()["sources"].clone();
    assert_eq!(sources.as_array().map(Vec::len), Some(1), "{sources}");
    let run = run_limited(
        &env,
        &ws,
        &["save", "--no-brief", "--transcript", "claude-code:latest"],
        ADDRESS_SPACE,
    );
    run.expect(0, "claude-code:latest beside a FIFO");
    let run = run_limited(
        &env,
        &ws,
        &["save", "--no-brief", "--transcript", "codex:latest"],
        ADDRESS_SPACE,
    );
    run.expect(3, "codex:latest with only a FIFO");
}

/// Open the FIFO at `path` for writing and close it: a reader blocked in its open() (the
/// code before the fix) goes on and exits, instead of outliving the test.
fn release_fifo(path: &Path) {
    let _ = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
}

#[test]
fn an_mcp_save_of_a_fifo_transcript_is_refused_at_once() {
    let env = Env::new();
    let ws = git_init(&env.path().join("ws"));
    let ws = fs::canonicalize(&ws).unwrap();
    ok(baton_in(&env, &ws, &["init"]), "init");
    let fifo = ws.join("session.jsonl");
    mkfifo(&fifo);
    let args = json!({"brief": VALID_BRIEF, "transcript": "session.jsonl"});
    let start = Instant::now();
    let calls = json!([{"tool": "save_handoff", "args": args, "seconds": 20}]);
    let results = super::mcp_paths::mcp_calls(&env, &ws, &calls);
    release_fifo(&fifo);
    let doc = &results[0];
    assert_ne!(doc["timeout"], true, "save_handoff did not answer in 20 s");
    assert_eq!(doc["error"], true, "{doc}");
    let error = &doc["structured"]["error"];
    assert_eq!(error["exit_code"], 2, "{doc}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("is not a regular file")),
        "{doc}"
    );
    println!(
        "[limits] MCP save_handoff of a FIFO: refused in {:.1?}",
        start.elapsed()
    );
    let log = json_ok(&env, &["--store", &s(&ws.join(".baton")), "log"]);
    assert_eq!(log["bundles"].as_array().map(Vec::len), Some(0), "{log}");
}
