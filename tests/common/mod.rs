//! Shared test harness: run the real `baton` binary in an isolated temporary environment.
#![allow(dead_code)]

pub mod kill;
pub mod many_packs;
pub mod snapshot;
pub mod via;

pub use via::{Here, Via};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;

/// A temporary world: its own HOME, working directory and store, no inherited BATON_*.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Env {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn store(&self) -> PathBuf {
        self.path().join(".baton")
    }

    /// A `baton` command running in the environment's directory.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::cargo_bin("baton").expect("baton binary");
        cmd.current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("USER", "tester")
            .env("TZ", "UTC");
        cmd
    }

    /// `strace FLAGS -o TRACE -e trace=FILTER baton`, with the environment `cmd` gives
    /// (the same directory, variables and HOME); the caller adds baton's arguments.
    pub fn strace(&self, flags: &[&str], trace: &Path, filter: &str) -> Command {
        let mut cmd = Command::new("strace");
        cmd.args(flags)
            .arg("-o")
            .arg(trace)
            .arg("-e")
            .arg(format!("trace={filter}"))
            .arg(env!("CARGO_BIN_EXE_baton"))
            .current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("USER", "tester")
            .env("TZ", "UTC");
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run baton")
    }

    /// Run and require success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "baton {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Run with --json and parse the one document on stdout.
    pub fn json(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let (code, doc, _) = Here.json(self, args);
        (code, doc)
    }

    pub fn init(&self) {
        self.ok(&["init"]);
    }

    /// Write `files` (path, content) under `dir`, creating parents.
    pub fn write_tree(&self, dir: &str, files: &[(&str, &[u8])]) -> PathBuf {
        let root = self.path().join(dir);
        for (rel, content) in files {
            let path = root.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, content).unwrap();
        }
        fs::create_dir_all(&root).unwrap();
        root
    }

    /// [`Env::write_tree`] of generated files (path, content).
    pub fn write_files(&self, dir: &str, files: &[(String, Vec<u8>)]) -> PathBuf {
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_slice()))
            .collect();
        self.write_tree(dir, &refs)
    }

    /// Save `dir` and return the new bundle id.
    pub fn save(&self, dir: &str, extra: &[&str]) -> String {
        let mut args = vec!["save", dir];
        args.extend_from_slice(extra);
        let out = self.ok(&args);
        let id = out.trim().to_string();
        assert_eq!(id.len(), 64, "save prints one 64-hex id: {out:?}");
        id
    }
}

/// Every file under `root` with its bytes, sorted: compare whole stores byte for byte.
pub fn snapshot_files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let meta = fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if meta.is_dir() {
                out.push((rel, b"<dir>".to_vec()));
                walk(&path, root, out);
            } else if meta.file_type().is_symlink() {
                out.push((
                    rel,
                    fs::read_link(&path)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            } else {
                out.push((rel, fs::read(&path).unwrap()));
            }
        }
    }
    walk(root, root, &mut out);
    out
}

/// Decompress a stored object file (zstd) to its content.
pub fn read_object_file(path: &Path) -> Vec<u8> {
    zstd::decode_all(fs::File::open(path).unwrap()).unwrap()
}

/// The path of object `id` in a store.
pub fn object_path(store: &Path, id: &str) -> PathBuf {
    store.join("objects").join(&id[..2]).join(&id[2..])
}

/// Where storage name `id` (hex) is packed in a store: pack path, offset, length.
pub fn packed_at(store: &Path, id: &str) -> Option<(PathBuf, u64, u64)> {
    let name = baton::format::ObjectId::parse(id).ok()?;
    baton::store::packs::load_all(&store.join("packs"))
        .ok()?
        .into_iter()
        .find_map(|p| p.find(&name).map(|e| (p.path.clone(), e.offset, e.length)))
}

/// The stored bytes of storage name `id`: its loose file, else its pack entry.
pub fn stored_bytes(store: &Path, id: &str) -> Option<Vec<u8>> {
    if let Ok(bytes) = fs::read(object_path(store, id)) {
        return Some(bytes);
    }
    let (pack, offset, length) = packed_at(store, id)?;
    let bytes = fs::read(pack).ok()?;
    Some(bytes[offset as usize..(offset + length) as usize].to_vec())
}

/// Whether a store holds storage name `id`, loose or packed.
pub fn has_object(store: &Path, id: &str) -> bool {
    stored_bytes(store, id).is_some()
}

/// The content of object `id` of a plain store (zstd-decompressed), loose or packed.
pub fn read_stored(store: &Path, id: &str) -> Vec<u8> {
    let stored = stored_bytes(store, id).unwrap_or_else(|| panic!("object {id} not stored"));
    zstd::decode_all(&stored[..]).unwrap()
}

/// Every storage name a store holds: loose files (not temp files) and pack entries.
pub fn stored_ids(store: &Path) -> std::collections::BTreeSet<String> {
    let mut ids = std::collections::BTreeSet::new();
    if let Ok(fanouts) = fs::read_dir(store.join("objects")) {
        for fanout in fanouts.flatten().filter(|f| f.path().is_dir()) {
            let prefix = fanout.file_name().into_string().unwrap();
            for file in fs::read_dir(fanout.path()).unwrap().flatten() {
                let name = file.file_name().into_string().unwrap();
                if !name.starts_with(".tmp-") {
                    ids.insert(format!("{prefix}{name}"));
                }
            }
        }
    }
    for pack in baton::store::packs::load_all(&store.join("packs")).unwrap() {
        ids.extend(pack.entries.iter().map(|e| e.id.to_hex()));
    }
    ids
}

/// Turn every pack of a store into loose objects (each entry's stored bytes as its loose
/// file, mode 0600 in a 0700 fan-out) and remove the packs: the layout a save made before
/// saves wrote packs, for tests that damage one object file.
pub fn unpack_to_loose(store: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for pack in baton::store::packs::load_all(&store.join("packs")).unwrap() {
        let bytes = fs::read(&pack.path).unwrap();
        for e in &pack.entries {
            let path = object_path(store, &e.id.to_hex());
            if path.exists() {
                continue;
            }
            let fanout = path.parent().unwrap();
            fs::create_dir_all(fanout).unwrap();
            fs::set_permissions(fanout, fs::Permissions::from_mode(0o700)).unwrap();
            fs::write(
                &path,
                &bytes[e.offset as usize..(e.offset + e.length) as usize],
            )
            .unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        }
        fs::remove_file(&pack.path).unwrap();
    }
}

/// Flip the last stored byte of object `id`, loose or packed, so it no longer decodes
/// (a packed one also makes its pack's bytes differ from its name).
pub fn damage_object(store: &Path, id: &str) {
    use std::os::unix::fs::PermissionsExt;
    let (path, at) = match fs::metadata(object_path(store, id)) {
        Ok(meta) => (object_path(store, id), meta.len() - 1),
        Err(_) => {
            let (pack, offset, length) =
                packed_at(store, id).unwrap_or_else(|| panic!("object {id} not stored"));
            (pack, offset + length - 1)
        }
    };
    let mut bytes = fs::read(&path).unwrap();
    bytes[at as usize] ^= 0x55;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(&path, &bytes).unwrap();
}

// ---------------------------------------------------------------------------------------
// Sync helpers (tests/sync_local.rs, tests/sync_ssh.rs)
// ---------------------------------------------------------------------------------------

/// One step of splitmix64: a tiny deterministic PRNG, so seeded tests reproduce.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `len` incompressible bytes from a seeded splitmix64 (deterministic per seed).
pub fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The `current` of a store directory read straight from disk (`refs/current/<gen>`:
/// the highest generation's JSON log line, its `new`), without running baton.
pub fn disk_current(store: &Path) -> Option<String> {
    let dir = store.join("refs").join("current");
    let newest = fs::read_dir(&dir)
        .ok()?
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.len() == 20 && n.bytes().all(|b| b.is_ascii_digit()))
        .max()?;
    let text = fs::read_to_string(dir.join(&newest)).unwrap();
    let entry: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    entry["new"].as_str().map(str::to_string)
}

/// The pack files (`packs/<64hex>.pack`) of a store directory, sorted.
pub fn pack_files(store: &Path) -> Vec<PathBuf> {
    let mut packs: Vec<PathBuf> = match fs::read_dir(store.join("packs")) {
        Ok(rd) => rd
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "pack"))
            .collect(),
        Err(_) => Vec::new(),
    };
    packs.sort();
    packs
}

/// Flip one byte in the middle of a pack's object data (between the header and the
/// index), so the pack no longer hashes to its name and an object in it is damaged.
pub fn corrupt_pack_data(pack: &Path) {
    let mut bytes = fs::read(pack).unwrap();
    let len = bytes.len();
    assert!(len > 16 + 32, "pack too short: {}", pack.display());
    let index_offset = u64::from_be_bytes(bytes[len - 24..len - 16].try_into().unwrap()) as usize;
    assert!(index_offset > 16, "pack holds no object data");
    let at = 16 + (index_offset - 16) / 2;
    bytes[at] ^= 0x5a;
    fs::write(pack, bytes).unwrap();
}

/// Every directory under `root` (itself included) must be 0700, every file 0600.
pub fn assert_private_tree(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut bad = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0;
    while let Some(path) = stack.pop() {
        let meta = fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        let want = if meta.is_dir() { 0o700 } else { 0o600 };
        if mode != want {
            bad.push(format!("{} {mode:o} (want {want:o})", path.display()));
        }
        seen += 1;
        if meta.is_dir() {
            for entry in fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        }
    }
    assert!(seen > 1, "{} is empty", root.display());
    assert!(bad.is_empty(), "entries with wrong modes: {bad:#?}");
}

/// Size of the pack being uploaded into a staging directory of a store, if any.
pub fn staged_pack_size(store: &Path) -> Option<u64> {
    // A push streams its pack into one file of its own staging directory.
    let rd = fs::read_dir(store.join("staging")).ok()?;
    rd.filter_map(|e| e.ok())
        .filter_map(|d| fs::read_dir(d.path()).ok())
        .flat_map(|files| files.filter_map(|f| f.ok()))
        .filter_map(|f| f.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .max()
}

/// Exit code, stdout and stderr of a finished command, for assertion messages.
pub fn text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `--json ARGS`, required to succeed; the document.
pub fn json_ok(env: &Env, args: &[&str]) -> serde_json::Value {
    Here.json_ok(env, args)
}

/// `--json ARGS`, required to fail with `exit`; the document's `error`.
pub fn json_err(env: &Env, args: &[&str], exit: i32) -> serde_json::Value {
    Here.json_err(env, args, exit)
}

/// A path as the `&str` an argument list wants (test paths are UTF-8).
pub fn s(path: &Path) -> &str {
    path.to_str().expect("UTF-8 test path")
}

/// A git command for test setup, isolated from the user's and the system's configuration.
pub fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args([
        "-c",
        "user.name=Test Author",
        "-c",
        "user.email=test@example.com",
        "-c",
        "init.defaultBranch=main",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "tag.gpgsign=false",
        "-c",
        "advice.detachedHead=false",
        "-c",
        "core.autocrlf=false",
        "-c",
        "protocol.file.allow=always",
        "-c",
        "merge.conflictStyle=merge",
    ]);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_COMMON_DIR",
    ] {
        cmd.env_remove(var);
    }
    cmd.args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C");
    cmd
}

/// Run git and require success; returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    git_checked(git_cmd(dir, args), dir, args)
}

/// Run `cmd` (a [`git_cmd`] of `dir` and `args`, perhaps with more set on it); require
/// success; its trimmed standard output.
pub fn git_checked(mut cmd: Command, dir: &Path, args: &[&str]) -> String {
    let out = cmd.output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// Files a capped command may write: a write past this fails (RLIMIT_FSIZE, SIGXFSZ).
pub const CAPPED_FILE_SIZE: u64 = 64 << 20;

/// Run `cmd` with every file it writes capped at `CAPPED_FILE_SIZE` and at most `limit`
/// of wall time (killed, and the test failed, past it): for hostile remotes that would
/// make a command write without end or hang.
pub fn capped_output(
    mut cmd: Command,
    limit: std::time::Duration,
) -> (Output, std::time::Duration) {
    use std::os::unix::process::CommandExt;
    use std::time::Instant;
    // SAFETY: setrlimit is async-signal-safe and touches only the struct on the stack.
    unsafe {
        cmd.pre_exec(|| {
            let cap = libc::rlimit {
                rlim_cur: CAPPED_FILE_SIZE as libc::rlim_t,
                rlim_max: CAPPED_FILE_SIZE as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &cap) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn baton");
    loop {
        if child.try_wait().expect("wait").is_some() {
            return (child.wait_with_output().expect("output"), start.elapsed());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("baton ran for over {limit:?}: {}", text(&out));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Whether a test's precondition holds here. When it does not, the test is skipped with a
/// note, except under `CI=true`, where `.ci/run` provides every tool and runs as root: there
/// a missing precondition fails the test instead of letting it pass untested.
pub fn precondition(holds: bool, what: &str) -> bool {
    if !holds {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "this test needs {what}, and CI must provide it"
        );
        eprintln!("not run here: precondition missing ({what}); under CI=true this fails");
    }
    holds
}

/// A key pair from the real age-keygen: (identity file, public key).
pub fn age_keygen(env: &Env, name: &str) -> (PathBuf, String) {
    let path = env.path().join(name);
    let out = Command::new("age-keygen")
        .arg("-o")
        .arg(&path)
        .output()
        .expect("age-keygen (apt package 'age') must be installed");
    assert!(out.status.success(), "age-keygen failed");
    let text = fs::read_to_string(&path).unwrap();
    let public = text
        .lines()
        .find_map(|l| l.strip_prefix("# public key: "))
        .expect("public key line")
        .trim()
        .to_string();
    (path, public)
}

/// Whether strace can trace a child here (it is installed and ptrace is allowed).
/// The trace of an `strace -ff -o PREFIX` run: every thread's file (`PREFIX.<tid>`) in
/// turn. One file per thread keeps each call on one line; with `-f` into one file, a call
/// that overlaps another thread's is split into `<unfinished ...>` and `<... resumed>`
/// halves, and a filter on the file name and the result together misses it.
pub fn strace_per_thread(prefix: &std::path::Path) -> String {
    let dir = prefix.parent().expect("trace prefix in a directory");
    let stem = format!(
        "{}.",
        prefix.file_name().expect("trace prefix").to_string_lossy()
    );
    let mut parts: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .expect("trace directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&stem))
        })
        .collect();
    parts.sort();
    assert!(!parts.is_empty(), "no trace files {}*", prefix.display());
    parts
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("trace file"))
        .collect()
}

/// The directory Claude Code keeps the sessions of workspace `ws` in, under `home`
/// (`~/.claude/projects/<ws with every other character than a letter or digit as ->`),
/// created.
pub fn claude_project_dir(home: &Path, ws: &Path) -> PathBuf {
    let project: String = ws
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = home.join(".claude/projects").join(project);
    std::fs::create_dir_all(&dir).expect("claude project dir");
    dir
}

/// A git workspace `ws` in `env` (its canonical path) with one commit of `a.txt`.
pub fn git_workspace(env: &Env) -> PathBuf {
    let ws = env.path().join("ws");
    std::fs::create_dir_all(&ws).expect("workspace");
    let ws = std::fs::canonicalize(&ws).expect("workspace path");
    std::fs::write(ws.join("a.txt"), "one\n").expect("a.txt");
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "base"]);
    ws
}

pub fn strace_usable() -> bool {
    std::process::Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
