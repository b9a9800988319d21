//! Handoff CLI: the transcript limits (docs/reliability.md, "Transcript limits"). Large
//! inputs are made here, cheaply (sparse files, streamed compression), and baton runs
//! under an address-space limit, so that an unbounded allocation fails at once instead
//! of needing gigabytes; every run has a deadline, so that a hang fails too.

use super::transcripts::claude_project_dir;
use super::*;

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};

use std::time::{Duration, Instant};

use baton::format::names::RefName;
use baton::format::{Bundle, EntryKind, ObjectId, Tree, TreeEntry};
use baton::store::Store;
use baton::store::refs::{Expect, MoveReason};

/// The address space baton gets: its own needs (a debug build, two malloc arenas) and a
/// few times the largest line the tests hand it; far less than what reading any of these
/// inputs whole, or building a `Value` of one of their lines, takes.
const ADDRESS_SPACE: u64 = 512 << 20;
/// Long enough for a debug build on a loaded machine; a hang takes forever.
const DEADLINE: Duration = Duration::from_secs(120);

/// How one limited run of baton ended.
struct Run {
    /// The exit code; `None` when a signal ended it (an abort) or the deadline did.
    code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    peak_rss_kib: i64,
}

impl Run {
    fn doc(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "not one JSON document ({e}): {:?} / {:?}",
                self.stdout, self.stderr
            )
        })
    }

    /// The error message of a `--json` run.
    fn message(&self) -> String {
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

    fn expect(&self, code: i32, what: &str) {
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
fn run_limited(env: &Env, dir: &Path, args: &[&str], address_space: u64) -> Run {
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
    let has_sdk = std::process::Command::new("python3")
        .args(["-c", "import mcp.client.stdio"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "needs python3 with the MCP SDK: pip install mcp==2.3.0 (.ci/run installs it)"
    );
    let env = Env::new();
    let ws = git_init(&env.path().join("ws"));
    let ws = fs::canonicalize(&ws).unwrap();
    ok(baton_in(&env, &ws, &["init"]), "init");
    let fifo = ws.join("session.jsonl");
    mkfifo(&fifo);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_call.py");
    let args = json!({"brief": VALID_BRIEF, "transcript": "session.jsonl"}).to_string();
    let start = Instant::now();
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_baton"))
        .arg(&ws)
        .args(["save_handoff", &args, "20"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", env.path())
        .current_dir(&ws)
        .output()
        .expect("run the MCP client");
    release_fifo(&fifo);
    assert!(
        out.status.success(),
        "MCP client failed: {}",
        common::text(&out)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
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

// ---------------------------------------------------------------------------------------
// Stored transcripts: a small store whose transcript decompresses to hundreds of MiB
// ---------------------------------------------------------------------------------------

/// Content made on the fly: `head`, then `repeat` for `len` bytes in all, then `tail`.
struct Generated {
    parts: Vec<(Vec<u8>, u64)>,
    part: usize,
    offset: u64,
}

impl Generated {
    /// `head`, `body` repeated until `body_len` bytes, `tail`.
    fn new(head: &str, body: &str, body_len: u64, tail: &str) -> Generated {
        Generated {
            parts: vec![
                (head.as_bytes().to_vec(), head.len() as u64),
                (body.as_bytes().to_vec(), body_len),
                (tail.as_bytes().to_vec(), tail.len() as u64),
            ],
            part: 0,
            offset: 0,
        }
    }

    fn len(&self) -> u64 {
        self.parts.iter().map(|(_, n)| n).sum()
    }
}

impl Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while let Some((pattern, len)) = self.parts.get(self.part) {
            if self.offset == *len {
                self.part += 1;
                self.offset = 0;
                continue;
            }
            let mut n = 0;
            while n < buf.len() && self.offset < *len {
                buf[n] = pattern[(self.offset % pattern.len() as u64) as usize];
                n += 1;
                self.offset += 1;
            }
            return Ok(n);
        }
        Ok(0)
    }
}

/// Store `content` as a loose object of the plain store at `store`, compressed as it is
/// generated (never whole in memory): its id and size.
fn put_streamed(store: &Path, mut content: Generated) -> (ObjectId, u64, u64) {
    let size = content.len();
    let mut hasher = blake3::Hasher::new();
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = content.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        std::io::Write::write_all(&mut encoder, &buf[..n]).unwrap();
    }
    let stored = encoder.finish().unwrap();
    let id = ObjectId::from_hash(hasher.finalize());
    let path = common::object_path(store, &id.to_hex());
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, &stored).unwrap();
    (id, size, stored.len() as u64)
}

/// Make `current` a bundle whose tree holds `transcript.jsonl` = the object `id` of
/// `size` bytes: a hostile store, as a pull from a forged remote could leave it.
fn plant_transcript(store: &Path, id: ObjectId, size: u64) {
    let store = Store::open(store).unwrap();
    let tree = Tree::new(vec![TreeEntry {
        name: "transcript.jsonl".into(),
        kind: EntryKind::File,
        size,
        id,
    }])
    .unwrap()
    .encode();
    let bundle = Bundle::new(ObjectId::of(&tree), vec![], SystemTime::now()).encode();
    let mut pack: Vec<(ObjectId, Vec<u8>)> = [&tree, &bundle]
        .iter()
        .map(|bytes| {
            let (_, name, stored) = store.objects.encode_stored(bytes).unwrap();
            (name, stored)
        })
        .collect();
    pack.sort_by_key(|(name, _)| *name);
    store.objects.write_pack(&pack).unwrap();
    let reason = MoveReason {
        action: "save".into(),
        ..MoveReason::default()
    };
    store
        .update_ref(
            &RefName::Current,
            Expect::Any,
            Some(ObjectId::of(&bundle)),
            &reason,
        )
        .unwrap();
}

/// The stored bytes of a store, all files: what a pull of it moves.
fn store_bytes(store: &Path) -> u64 {
    snapshot_files(store)
        .iter()
        .map(|(_, bytes)| bytes.len() as u64)
        .sum()
}

#[test]
fn search_and_resume_of_a_decompression_bomb_transcript_are_refused_in_bounded_memory() {
    // (a) one line of 200 MiB; (b) a line of 40 MiB holding 20 million values: a store of
    // kilobytes either way. Read whole and built as a `Value` a line, either aborted.
    let cases = [
        (
            "a 200 MiB line",
            Generated::new("{\"text\":\"", "needle ", 200 << 20, "\"}\n"),
            "over the limit of 64 MiB for one line",
            4,
        ),
        (
            "a line of 20 million values",
            Generated::new("{\"text\":\"needle\",\"junk\":[", "0,", 40 << 20, "0]}\n"),
            "more than 100000 JSON values",
            0,
        ),
    ];
    for (what, content, refusal, resume_exit) in cases {
        let env = Env::new();
        env.init();
        let (id, size, stored) = put_streamed(&env.store(), content);
        plant_transcript(&env.store(), id, size);
        let pulled = store_bytes(&env.store());
        println!("[limits] {what}: {size} bytes stored in {stored} ({pulled} bytes of store)");
        assert!(
            pulled < 1 << 20,
            "{what}: the store is small ({pulled} bytes)"
        );
        let run = run_limited(
            &env,
            env.path(),
            &["search", "current", "needle"],
            ADDRESS_SPACE,
        );
        run.expect(4, &format!("{what}: search"));
        let message = run.message();
        assert!(
            message.contains("transcript.jsonl line 1") && message.contains(refusal),
            "{what}: search: {message}"
        );
        println!("[limits] {what}: search refused in {:.1?}", run.elapsed);
        // Resume reads events typed, building nothing else of a line: only a line it
        // cannot hold is refused; a line that is no event is passed over.
        let run = run_limited(&env, env.path(), &["resume"], ADDRESS_SPACE);
        run.expect(resume_exit, &format!("{what}: resume"));
        if resume_exit == 4 {
            assert!(
                run.message().contains(refusal),
                "{what}: resume: {}",
                run.message()
            );
        } else {
            assert!(
                !run.stdout.contains("Recent turns"),
                "{what}: {}",
                run.stdout
            );
        }
        println!(
            "[limits] {what}: resume exit {resume_exit} in {:.1?}",
            run.elapsed
        );
    }
}

#[test]
fn a_stored_transcript_declared_over_the_size_limit_is_refused_before_it_is_read() {
    // A tree entry may declare any size: 2 GiB, over MAX_TRANSCRIPT_BYTES, is refused from
    // the declaration, nothing decompressed. (Also exit 4 before the limit, later: as a
    // size mismatch once the object was read.)
    let env = Env::new();
    env.init();
    let (id, _, _) = put_streamed(
        &env.store(),
        Generated::new("{\"text\":\"needle\"}\n", "", 0, ""),
    );
    plant_transcript(&env.store(), id, 2 << 30);
    let run = run_limited(
        &env,
        env.path(),
        &["search", "current", "needle"],
        ADDRESS_SPACE,
    );
    run.expect(4, "search");
    assert!(
        run.message()
            .contains("transcript.jsonl is 2048 MiB, over the limit of 1024 MiB"),
        "{}",
        run.message()
    );
    // Resume verifies the bundle first, which finds the object shorter than declared.
    let run = run_limited(&env, env.path(), &["resume"], ADDRESS_SPACE);
    run.expect(4, "resume");
}

#[test]
fn a_stored_transcript_is_searched_and_resumed_line_by_line() {
    // 160 MiB of ordinary events: whole in memory it did not fit the address space.
    let env = Env::new();
    env.init();
    let event = |seq: u64, role: &str, text: &str| {
        json!({
            "v": 1, "seq": seq, "time": "2026-01-01T00:00:00Z",
            "source": {"harness": "claude-code", "session": "s-big"},
            "role": role, "kind": "message", "text": text,
        })
        .to_string()
            + "\n"
    };
    let filler = event(1, "assistant", &"lorem ipsum ".repeat(5000));
    let head = event(1, "user", "the first question");
    let tail =
        event(2, "user", "the last needle question") + &event(3, "assistant", "the last answer");
    let body_len = (160u64 << 20) / filler.len() as u64 * filler.len() as u64;
    let (id, size, _) = put_streamed(
        &env.store(),
        Generated::new(&head, &filler, body_len, &tail),
    );
    plant_transcript(&env.store(), id, size);
    let run = run_limited(
        &env,
        env.path(),
        &["search", "current", "needle"],
        256 << 20,
    );
    run.expect(0, "search of a 160 MiB transcript");
    let doc = run.doc();
    assert_eq!(doc["total_matches"], 1, "{doc}");
    assert_eq!(doc["hits"][0]["event"]["text"], "the last needle question");
    println!("[limits] search of {size} bytes in {:.1?}", run.elapsed);
    let run = run_limited(
        &env,
        env.path(),
        &["resume", "--budget", "20000"],
        256 << 20,
    );
    run.expect(0, "resume of a 160 MiB transcript");
    let kickoff = run.doc()["prompt"].as_str().unwrap_or_default().to_string();
    assert!(
        kickoff.contains("Last 2 of 2 turns") && kickoff.contains("- assistant: the last answer"),
        "{kickoff}"
    );
}
