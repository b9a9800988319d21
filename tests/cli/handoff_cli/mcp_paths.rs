//! Handoff CLI: what `baton mcp` reads is beneath its workspace, whatever a hostile
//! process does to the workspace during the call (a directory and a symlink swapped by
//! `renameat2(RENAME_EXCHANGE)`), the store is never attached, a path outside answers the
//! same whether it exists or not, and the kickoff's text is terminal-safe. Driven by the
//! official Python MCP SDK's stdio client (tests/mcp_calls.py).

use super::*;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes only the file outside the workspace holds.
const MARKER: &str = "OUTSIDE-MARKER-5c1e7a90";

/// Run `calls` (a JSON list of {tool, args, repeat}) on one MCP session in `ws`.
pub(super) fn mcp_calls(env: &Env, ws: &Path, calls: &Value) -> Vec<Value> {
    require_mcp_sdk();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_calls.py");
    let mut child = std::process::Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_baton"))
        .arg(ws)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", env.path())
        .current_dir(ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the MCP client");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(calls.to_string().as_bytes())
        .expect("write the calls");
    let out = child.wait_with_output().expect("wait for the MCP client");
    assert!(
        out.status.success(),
        "MCP client failed: {}",
        common::text(&out)
    );
    match serde_json::from_slice(&out.stdout).expect("one JSON document") {
        Value::Array(results) => results,
        other => panic!("not a list: {other}"),
    }
}

/// Swaps two names with `renameat2(RENAME_EXCHANGE)` in a loop until dropped.
pub(super) struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    pub(super) fn start(a: &Path, b: &Path) -> Swapper {
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path");
        let (a, b) = (c(a), c(b));
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, swaps) = (stop.clone(), swaps.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: both are valid NUL-terminated paths for the whole call.
                    let rc = unsafe {
                        libc::renameat2(
                            libc::AT_FDCWD,
                            a.as_ptr(),
                            libc::AT_FDCWD,
                            b.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    };
                    assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        Swapper {
            stop,
            swaps,
            thread: Some(thread),
        }
    }

    /// Stop (leaving the names as they were before an even number of swaps or after an
    /// odd one) and return how many swaps were made.
    pub(super) fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("swapper");
        }
        self.swaps.load(Ordering::Relaxed)
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Every object of `store` that holds `needle` (decompressed), by where it is.
pub(super) fn objects_holding(store: &Path, needle: &[u8]) -> Vec<String> {
    all_objects(store)
        .into_iter()
        .filter(|(_, content)| contains(content, needle))
        .map(|(at, _)| at)
        .collect()
}

/// A workspace `ws` (a git repository with a store) holding `d/f.txt`, a symlink `l` to
/// a directory outside holding `f.txt` with [`MARKER`], and that directory.
fn raced_workspace(env: &Env) -> (PathBuf, PathBuf) {
    let ws = git_init(&env.path().join("ws"));
    let ws = fs::canonicalize(&ws).expect("canonical");
    fs::create_dir(ws.join("d")).expect("mkdir");
    fs::write(ws.join("d/f.txt"), "inside the workspace\n").expect("write");
    let outside = env.path().join("outside");
    fs::create_dir(&outside).expect("mkdir");
    fs::write(outside.join("f.txt"), format!("{MARKER}\n")).expect("write");
    std::os::unix::fs::symlink(&outside, ws.join("l")).expect("symlink");
    ok(baton_in(env, &ws, &["init"]), "init");
    (ws, outside)
}

#[test]
fn save_handoff_raced_by_a_directory_symlink_swap_never_reads_outside_the_workspace() {
    let env = Env::new();
    let (ws, outside) = raced_workspace(&env);
    // The file's own bytes, and what evidence would record of it (its BLAKE3).
    let outside_hash = blake3::hash(&fs::read(outside.join("f.txt")).expect("read"))
        .to_hex()
        .to_string();
    const ROUNDS: usize = 120;
    let mut calls = Vec::new();
    for _ in 0..ROUNDS {
        for attach in ["d/f.txt", "d"] {
            calls.push(json!({"tool": "save_handoff", "args": {"attachments": [attach]}}));
        }
    }
    let calls = Value::Array(calls);
    let swapper = Swapper::start(&ws.join("d"), &ws.join("l"));
    let started = std::time::Instant::now();
    let results = mcp_calls(&env, &ws, &calls);
    let elapsed = started.elapsed();
    let swaps = swapper.stop();
    let saved = results.iter().filter(|r| r["error"] == false).count();
    let refused: Vec<&Value> = results.iter().filter(|r| r["error"] == true).collect();
    eprintln!(
        "{} calls in {elapsed:?}, {swaps} swaps: {saved} saved, {} refused",
        results.len(),
        refused.len()
    );
    assert!(swaps > 100, "the swapper ran ({swaps} swaps)");
    let store = ws.join(".baton");
    let leaked = objects_holding(&store, MARKER.as_bytes());
    assert!(leaked.is_empty(), "outside bytes in {leaked:?}");
    let hashed = objects_holding(&store, outside_hash.as_bytes());
    assert!(hashed.is_empty(), "the outside file's hash in {hashed:?}");
    // The race was run, not avoided: saves went through while the directory was in
    // place, and what they attached is the workspace's own file.
    assert!(saved > 0, "no save went through: {:?}", refused.first());
    assert!(
        !objects_holding(&store, b"inside the workspace").is_empty(),
        "no bundle holds the workspace's file"
    );
    // A call that met the symlink was refused as outside the workspace, nothing else.
    for r in &refused {
        assert_eq!(r["structured"]["error"]["code"], "security", "{r}");
    }
}

#[test]
fn the_store_itself_is_never_attached() {
    let env = Env::new();
    let ws = git_init(&env.path().join("ws"));
    let ws = fs::canonicalize(&ws).expect("canonical");
    fs::write(ws.join("notes.txt"), "notes\n").expect("write");
    ok(baton_in(&env, &ws, &["init"]), "init");
    let results = mcp_calls(
        &env,
        &ws,
        &json!([
            {"tool": "save_handoff", "args": {"attachments": ["."]}},
            {"tool": "save_handoff", "args": {"attachments": ["./"]}},
        ]),
    );
    for r in &results {
        assert_eq!(r["error"], false, "{r}");
        let files = r["structured"]["files"].to_string();
        assert!(files.contains("attachments/ws/notes.txt"), "{files}");
        assert!(!files.contains(".baton"), "the store was attached: {files}");
    }
    // The CLI's --attach of the workspace leaves the store out the same way, by
    // identity: a store elsewhere under another name too.
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let out = json_in(&env, &ws, &["save", "--brief", &s(&brief), "--attach", "."]);
    let files = out["files"].to_string();
    assert!(files.contains("attachments/ws/notes.txt"), "{files}");
    assert!(!files.contains(".baton"), "the store was attached: {files}");
    let other = env.path().join("elsewhere");
    fs::create_dir(&other).expect("mkdir");
    fs::write(other.join("kept.txt"), "kept\n").expect("write");
    let store = other.join("renamed-store");
    ok(
        baton_in(&env, &ws, &["--store", &s(&store), "init"]),
        "init elsewhere",
    );
    let out = json_in(
        &env,
        &ws,
        &[
            "--store",
            &s(&store),
            "save",
            "--brief",
            &s(&brief),
            "--attach",
            &s(&other),
        ],
    );
    let files = out["files"].to_string();
    assert!(files.contains("attachments/elsewhere/kept.txt"), "{files}");
    assert!(
        !files.contains("renamed-store"),
        "the store was attached: {files}"
    );
}

#[test]
fn a_path_outside_the_workspace_is_refused_the_same_whether_it_exists_or_not() {
    let env = Env::new();
    let ws = git_init(&env.path().join("ws"));
    let ws = fs::canonicalize(&ws).expect("canonical");
    fs::write(env.path().join("exists.txt"), "outside\n").expect("write");
    std::os::unix::fs::symlink(env.path().join("exists.txt"), ws.join("to-existing"))
        .expect("symlink");
    std::os::unix::fs::symlink(env.path().join("missing.txt"), ws.join("to-missing"))
        .expect("symlink");
    fs::create_dir(ws.join("sub")).expect("mkdir");
    ok(baton_in(&env, &ws, &["init"]), "init");
    let outside = s(env.path());
    let pairs = [
        ("../exists.txt", "../missing.txt"),
        ("sub/../../exists.txt", "sub/../../missing.txt"),
        (
            &*format!("{outside}/exists.txt"),
            &*format!("{outside}/missing.txt"),
        ),
        ("to-existing", "to-missing"),
        ("to-existing/x", "to-missing/x"),
    ];
    let mut calls = Vec::new();
    for (existing, missing) in &pairs {
        for path in [existing, missing] {
            calls.push(json!({"tool": "save_handoff", "args": {"attachments": [path]}}));
            calls.push(json!({"tool": "save_handoff", "args": {"transcript": path}}));
        }
    }
    let results = mcp_calls(&env, &ws, &Value::Array(calls));
    let mut at = results.iter();
    for (existing, missing) in &pairs {
        let mut answers = Vec::new();
        for path in [existing, missing] {
            for what in ["attachment", "transcript"] {
                let r = at.next().expect("a result");
                assert_eq!(r["error"], true, "{what} {path}: {r}");
                let error = &r["structured"]["error"];
                assert_eq!(error["code"], "security", "{what} {path}: {r}");
                assert_eq!(error["exit_code"], 6, "{what} {path}: {r}");
                let message = error["message"].as_str().expect("message");
                answers.push((
                    what,
                    message.replace(&**path, "PATH"),
                    error["hint"].clone(),
                ));
            }
        }
        // Existing or missing, the answer is the same but for the name.
        assert_eq!(answers[0], answers[2], "{existing} / {missing}");
        assert_eq!(answers[1], answers[3], "{existing} / {missing}");
    }
    // Inside the workspace, a missing file is still not_found.
    let results = mcp_calls(
        &env,
        &ws,
        &json!([{"tool": "save_handoff", "args": {"attachments": ["sub/nothing.txt"]}}]),
    );
    assert_eq!(
        results[0]["structured"]["error"]["code"], "not_found",
        "{}",
        results[0]
    );
}

#[test]
fn resume_text_is_terminal_safe_and_the_structured_kickoff_exact() {
    let env = Env::new();
    let ws = git_init(&env.path().join("ws"));
    let ws = fs::canonicalize(&ws).expect("canonical");
    ok(baton_in(&env, &ws, &["init"]), "init");
    let hostile = "Ship it.\u{1b}]0;pwned\u{7} \u{1b}[2J then \u{202e}txt.exe";
    let brief = VALID_BRIEF.replace("Ship the thing.", hostile);
    let results = mcp_calls(
        &env,
        &ws,
        &json!([
            {"tool": "save_handoff", "args": {"brief": brief}},
            {"tool": "resume", "args": {}},
        ]),
    );
    assert_eq!(results[0]["error"], false, "{}", results[0]);
    let resume = &results[1];
    assert_eq!(resume["error"], false, "{resume}");
    let text = resume["text"].as_str().expect("text");
    for raw in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!text.contains(raw), "raw {raw:?} in the text: {text:?}");
    }
    assert!(
        text.contains("Ship it.\\x1b]0;pwned\\x07 \\x1b[2J then \\u{202e}txt.exe"),
        "{text:?}"
    );
    // The structured document keeps the briefing's text exactly.
    let structured = resume["structured"].to_string();
    let exact = serde_json::to_string(hostile).expect("json");
    assert!(structured.contains(exact.trim_matches('"')), "{structured}");
}
