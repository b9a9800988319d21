//! How many git processes a handoff's evidence costs (issue 14): each costs about a
//! millisecond of start-up here, so the evidence asks each question once, in as few
//! rounds as it can, and reads in this process what it can read as git would (the work
//! tree's root and state files, remotes, recent commits, an index with nothing staged).
//! Counted with a logging `git` first on `PATH`; the evidence itself is judged by
//! handoff_evidence (its `inprocess` module against git's own answers).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::{self, Env, git, s};

use baton::handoff::evidence;

/// The real git on `PATH`.
fn real_git() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH")
}

/// A directory holding a `git` that logs its arguments, one line a call, to `log`, then
/// runs the real git.
fn logging_git(env: &Env, log: &Path) -> PathBuf {
    let bin = env.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
        s(log),
        s(&real_git())
    );
    let wrapper = bin.join("git");
    fs::write(&wrapper, script).unwrap();
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// The subcommand of a logged call (after `-C DIR` and the `-c` settings).
fn subcommand(line: &str) -> String {
    let mut words = line.split(' ');
    while let Some(word) = words.next() {
        match word {
            "-C" | "-c" => {
                words.next();
            }
            w => return w.to_string(),
        }
    }
    String::new()
}

/// The git calls of a handoff in a fresh store at the root of a work tree with nothing
/// staged, sorted: status, diff-files (the unstaged patch), rev-list twice (root commits;
/// first parents). The root, the state files, the remotes, the recent commits and the
/// empty staged patch are read in this process.
const FOUR_CALLS: [&str; 4] = ["diff-files", "rev-list", "rev-list", "status"];

/// What git is asked when nothing can be read in this process (from a subdirectory, or
/// with `git -c` settings inherited): rev-parse (work tree, root and the operation state
/// files at once), status, config (remotes), diff-index and diff-files (patches), log
/// (recent commits), rev-list twice.
const EIGHT_CALLS: [&str; 8] = [
    "config",
    "diff-files",
    "diff-index",
    "log",
    "rev-list",
    "rev-list",
    "rev-parse",
    "status",
];

#[test]
fn a_handoff_asks_git_four_times() {
    let env = Env::new();
    let ws = env.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let ws = fs::canonicalize(&ws).unwrap();
    fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "base"]);
    fs::write(ws.join("a.txt"), "two\n").unwrap();
    let out = env.cmd().current_dir(&ws).arg("init").output().unwrap();
    assert!(out.status.success(), "{}", common::text(&out));

    let log = env.path().join("git.log");
    let bin = logging_git(&env, &log);
    let path = format!("{}:{}", s(&bin), std::env::var("PATH").unwrap_or_default());
    let handoff = |inherited: Option<&str>| {
        let _ = fs::remove_file(&log);
        let mut cmd = env.cmd();
        cmd.current_dir(&ws).env("PATH", &path);
        if let Some(parameters) = inherited {
            cmd.env("GIT_CONFIG_PARAMETERS", parameters);
        }
        let out = cmd
            .args(["--json", "handoff", "--to", "codex", "--no-brief"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::text(&out));
        let calls = fs::read_to_string(&log).unwrap();
        let calls: Vec<String> = calls.lines().map(str::to_string).collect();
        let mut names: Vec<String> = calls.iter().map(|l| subcommand(l)).collect();
        names.sort();
        (names, calls)
    };
    let (names, calls) = handoff(None);
    assert_eq!(names, FOUR_CALLS, "{calls:#?}");

    // Under `git -c` (a hook, an alias), settings this process cannot see: git answers
    // everything, the first question in one process (and no rev-list: the history the
    // first handoff recorded still holds, see below).
    let (names, calls) = handoff(Some("'color.ui'='false'"));
    let six: Vec<&str> = EIGHT_CALLS
        .into_iter()
        .filter(|n| *n != "rev-list")
        .collect();
    assert_eq!(names, six, "{calls:#?}");
    let rev_parse = calls.iter().find(|l| subcommand(l) == "rev-parse").unwrap();
    assert!(
        rev_parse.contains("--show-toplevel") && rev_parse.contains("--git-path MERGE_HEAD"),
        "{rev_parse}"
    );
}

/// From the root of the work tree this process reads what it can and the rest starts at
/// once (four processes); from a subdirectory the reads wait for git to name the root
/// (eight processes, two rounds): the same evidence either way.
#[test]
fn the_evidence_from_the_root_and_from_a_subdirectory_is_the_same() {
    let env = Env::new();
    let repo = env.path().join("r");
    fs::create_dir_all(repo.join("sub")).unwrap();
    let repo = fs::canonicalize(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    fs::write(repo.join("sub/a.txt"), "one\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    fs::write(repo.join("sub/a.txt"), "two\n").unwrap();
    fs::write(repo.join("new.txt"), "new\n").unwrap();
    let log = env.path().join("git.log");
    let wrapper = logging_git(&env, &log).join("git");
    let mut seen = Vec::new();
    for (at, processes) in [(repo.clone(), 4), (repo.join("sub"), 8)] {
        let _ = fs::remove_file(&log);
        let capture = evidence::capture_with_git(&at, &wrapper);
        let calls = fs::read_to_string(&log).unwrap();
        assert_eq!(
            calls.lines().count(),
            processes,
            "from {}: {calls}",
            at.display()
        );
        let mut e = capture.evidence;
        assert!(e.git.is_some(), "{:?}", e.partial);
        e.workspace = String::new();
        seen.push((e, capture.staged_patch, capture.unstaged_patch));
    }
    assert_eq!(seen[0], seen[1]);
}

/// The operation state paths come relative to the directory git ran in: a capture from
/// a subdirectory of the work tree still finds the cherry-pick in progress.
#[test]
fn an_operation_in_progress_is_found_from_a_subdirectory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("r");
    fs::create_dir_all(repo.join("sub/deeper")).unwrap();
    git(&repo, &["init", "-q"]);
    fs::write(repo.join("sub/deeper/keep"), "k\n").unwrap();
    fs::write(repo.join("f.txt"), "base\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    git(&repo, &["checkout", "-q", "-b", "other"]);
    fs::write(repo.join("f.txt"), "theirs\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "theirs"]);
    let theirs = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["checkout", "-q", "main"]);
    fs::write(repo.join("f.txt"), "ours\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "ours"]);
    let picked = common::git_cmd(&repo, &["cherry-pick", "other"])
        .output()
        .unwrap();
    assert!(!picked.status.success(), "the pick conflicts");

    for at in [repo.clone(), repo.join("sub/deeper")] {
        let capture = evidence::capture(&at);
        let g = capture.evidence.git.as_ref().expect("git evidence");
        let op = g.in_progress.as_ref().expect("cherry-pick in progress");
        assert_eq!(
            (op.kind.as_str(), op.target.as_deref()),
            ("cherry-pick", Some(theirs.as_str())),
            "from {}",
            at.display()
        );
        assert_eq!(g.conflicted, vec!["f.txt".to_string()]);
    }
}

/// A workspace `ws` in `env` and the directory Claude Code keeps its sessions in.
fn workspace_and_project(env: &Env) -> (PathBuf, PathBuf) {
    let ws = env.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let ws = fs::canonicalize(&ws).unwrap();
    let dir = common::claude_project_dir(env.path(), &ws);
    (ws, dir)
}

/// A Claude Code session line in `ws`.
fn session_line(ws: &Path, session: &str, n: usize) -> String {
    let line = serde_json::json!({
        "type": "user", "sessionId": session, "cwd": s(ws), "uuid": format!("u{n}"),
        "parentUuid": format!("u{}", n - 1), "timestamp": "2026-11-30T10:00:00.000Z",
        "isSidechain": false,
        "message": {"role": "user", "content": format!("Step {n}: run the tests.")},
    });
    format!("{line}\n")
}

/// A Claude Code session `session` of `lines` lines in the project directory `dir`.
fn write_session(ws: &Path, dir: &Path, session: &str, lines: usize) -> PathBuf {
    let text: String = (1..=lines).map(|n| session_line(ws, session, n)).collect();
    let file = dir.join(format!("{session}.jsonl"));
    fs::write(&file, text).unwrap();
    file
}

/// `--transcript claude-code:latest` reads the newest session whole once: the listing
/// that finds it reads the start of each session (its header), and only the one chosen
/// is read whole (twice before: the listing read every file whole to count its lines).
#[test]
fn the_latest_session_is_read_whole_once() {
    if !common::precondition(
        common::strace_usable(),
        "strace that can trace here (apt-get install -y strace)",
    ) {
        return;
    }
    let env = Env::new();
    let (ws, dir) = workspace_and_project(&env);
    let older = "5e551011-0000-4000-8000-0000000000a1";
    let newer = "5e551011-0000-4000-8000-0000000000a2";
    // More lines than the header is looked for in, so that a head read stops early.
    for session in [older, newer] {
        write_session(&ws, &dir, session, 3000);
        std::thread::sleep(std::time::Duration::from_millis(1100)); // mtime in seconds
    }
    let out = env.cmd().current_dir(&ws).arg("init").output().unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let trace = env.path().join("trace.txt");
    let out = env
        .strace(&["-ff", "-qq", "-y"], &trace, "read")
        .args(["--json", "handoff", "--to", "codex", "--no-brief"])
        .args(["--transcript", "claude-code:latest"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "traced handoff\n{}",
        common::text(&out)
    );
    let trace = common::strace_per_thread(&trace);
    // Bytes read from each file (`-y` names the file of each descriptor).
    let read = |session: &str| -> u64 {
        trace
            .lines()
            .filter(|l| l.contains(&format!("{session}.jsonl>")))
            .filter_map(|l| l.rsplit("= ").next()?.trim().parse::<u64>().ok())
            .sum()
    };
    let size = |session: &str| {
        fs::metadata(dir.join(format!("{session}.jsonl")))
            .unwrap()
            .len()
    };
    // The older one: its head only; the newer: its head, then the whole file once.
    assert!(
        read(older) < size(older) / 2,
        "{} of {}",
        read(older),
        size(older)
    );
    assert!(
        read(newer) >= size(newer) && read(newer) < size(newer) * 3 / 2,
        "{} of {}",
        read(newer),
        size(newer)
    );
    let saved: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shown = env
        .cmd()
        .current_dir(&ws)
        .args(["--json", "show", saved["bundle"].as_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains(&format!("claude-code:{newer}")),
        "{}",
        common::text(&shown)
    );
}

/// A session unchanged since the last handoff (the transcript cache hits) is not read when
/// its metadata proves it unchanged (the stat cache's rule), and otherwise hashed as it is
/// read, in pieces of at most 256 KiB (64 KiB now), never held whole: a 3 MB session was read in one
/// piece into memory only to be hashed. A hash that finds it unchanged once it is older
/// than the racy window remembers its metadata (as git writes back a refreshed index).
#[test]
fn an_unchanged_session_is_not_read_or_hashed_in_pieces() {
    if !common::precondition(
        common::strace_usable(),
        "strace that can trace here (apt-get install -y strace)",
    ) {
        return;
    }
    let env = Env::new();
    let (ws, dir) = workspace_and_project(&env);
    let session = "5e551011-0000-4000-8000-0000000000b1";
    let file = write_session(&ws, &dir, session, 6000);
    let size = fs::metadata(&file).unwrap().len();
    assert!(size > 1 << 20, "a session of {size} bytes");
    let out = env.cmd().current_dir(&ws).arg("init").output().unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let handoff = |traced: Option<&Path>| {
        let mut cmd = match traced {
            Some(trace) => env.strace(&["-ff", "-qq", "-y"], trace, "read"),
            None => env.cmd(),
        };
        let out = cmd
            .args(["--json", "handoff", "--to", "codex", "--no-brief"])
            .args(["--transcript", "claude-code:latest"])
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(out.status.success(), "handoff\n{}", common::text(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let reads_of_session = |trace: &Path| -> Vec<u64> {
        common::strace_per_thread(trace)
            .lines()
            .filter(|l| l.contains(&format!("{session}.jsonl>")))
            .filter_map(|l| l.rsplit("= ").next()?.trim().parse::<u64>().ok())
            .collect()
    };
    // A traced handoff that takes the session from the cache: its reads of the file.
    let cached_reads = |trace: &str| -> Vec<u64> {
        let trace = env.path().join(trace);
        let out = handoff(Some(&trace));
        assert_eq!(out["saved"]["transcript_cached"], true, "{out}");
        reads_of_session(&trace)
    };
    // Older than the racy-clean window when the first handoff stats it.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let first = handoff(None);
    assert_eq!(first["saved"]["transcript_cached"], false, "{first}");

    // Unchanged metadata: not read at all but for the listing's look at its start.
    let total: u64 = cached_reads("trace-stat").iter().sum();
    assert!(total < size / 4, "{total} bytes of {size} read");

    // The same bytes written again (new timestamps): hashed in pieces, then a hit.
    let bytes = fs::read(&file).unwrap();
    fs::write(&file, &bytes).unwrap();
    let reads = cached_reads("trace-hash");
    let largest = reads.iter().copied().max().unwrap_or(0);
    assert!(largest <= 256 << 10, "a read of {largest} bytes: {reads:?}");
    // The head read by the listing, then every byte once.
    let total: u64 = reads.iter().sum();
    assert!(
        total >= size && total < size + (256 << 10),
        "{total} of {size}"
    );

    // That hash was of a file written just before: racy, unless the handoff started
    // later than the window (a loaded machine). Either that hash or, once the file is
    // older, the next one remembers its metadata, so the handoff after that does not
    // read it (before, every hash left the racy metadata in place).
    std::thread::sleep(std::time::Duration::from_millis(200));
    let fourth = handoff(None);
    assert_eq!(fourth["saved"]["transcript_cached"], true, "{fourth}");
    let total: u64 = cached_reads("trace-refreshed").iter().sum();
    assert!(
        total < size / 4,
        "{total} bytes of {size} read after the refresh"
    );

    // Other bytes of the same length: read and normalised again, not taken from the cache.
    let changed = String::from_utf8(bytes)
        .unwrap()
        .replacen("Step 1:", "Step X:", 1);
    assert_eq!(changed.len() as u64, size);
    fs::write(&file, changed).unwrap();
    let sixth = handoff(None);
    assert_eq!(sixth["saved"]["transcript_cached"], false, "{sixth}");
}

/// After commits on top of the HEAD of the last handoff, the root commits and first
/// parents follow from the history that handoff recorded (the stat cache): no rev-list,
/// and the evidence a store that knows nothing records. A rewritten
/// HEAD (an amend) no longer leads back to it: git walks the history again.
#[test]
fn commits_since_the_last_handoff_build_on_its_history() {
    let env = Env::new();
    let ws = env.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let ws = fs::canonicalize(&ws).unwrap();
    let commit = |text: &str| {
        fs::write(ws.join("a.txt"), text).unwrap();
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-q", "-m", text.trim()]);
    };
    git(&ws, &["init", "-q"]);
    commit("base\n");
    let log = env.path().join("git.log");
    let bin = logging_git(&env, &log);
    let path = format!("{}:{}", s(&bin), std::env::var("PATH").unwrap_or_default());
    let handoff = |store: &str| -> (Vec<String>, serde_json::Value) {
        let _ = fs::remove_file(&log);
        let out = env
            .cmd()
            .current_dir(&ws)
            .env("PATH", &path)
            .args([
                "--store",
                store,
                "--json",
                "handoff",
                "--to",
                "codex",
                "--no-brief",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::text(&out));
        let mut names: Vec<String> = fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(subcommand)
            .collect();
        names.sort();
        let shown = env
            .cmd()
            .args(["--store", store, "cat", "current:evidence/evidence.json"])
            .output()
            .unwrap();
        assert!(shown.status.success(), "{}", common::text(&shown));
        let evidence: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
        (names, evidence["git"].clone())
    };
    let store = s(&env.path().join("store")).to_string();
    let cold_store = s(&env.path().join("cold")).to_string();
    for dir in [&store, &cold_store] {
        let out = env.cmd().args(["--store", dir, "init"]).output().unwrap();
        assert!(out.status.success(), "{}", common::text(&out));
    }
    let (names, _) = handoff(&store);
    assert_eq!(
        names.iter().filter(|n| *n == "rev-list").count(),
        2,
        "{names:?}"
    );

    commit("two\n");
    commit("three\n");
    let (names, known) = handoff(&store);
    let two: Vec<&str> = FOUR_CALLS
        .into_iter()
        .filter(|n| *n != "rev-list")
        .collect();
    assert_eq!(names, two, "no rev-list");
    let (_, cold) = handoff(&cold_store);
    for field in ["head", "root_commits", "first_parents", "recent_commits"] {
        assert_eq!(known[field], cold[field], "{field}");
    }
    assert_eq!(known["first_parents"].as_array().map(Vec::len), Some(3));

    git(&ws, &["commit", "-q", "--amend", "-m", "three, amended"]);
    let (names, amended) = handoff(&store);
    assert_eq!(
        names.iter().filter(|n| *n == "rev-list").count(),
        2,
        "{names:?}"
    );
    let (_, cold) = handoff(&cold_store);
    for field in ["head", "root_commits", "first_parents"] {
        assert_eq!(amended[field], cold[field], "{field}");
    }
}
