//! Bad input, through the real binary: every refusal is one `error: ` line on stderr (or
//! one JSON document with --json), the documented exit code, and a store left exactly as
//! it was, byte for byte and mode for mode.

use crate::common;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{Env, object_path, snapshot_files};
use serde_json::{Value, json};

/// Long enough for a debug build on a loaded machine, short enough to catch a hang.
const LIMIT: Duration = Duration::from_secs(60);

/// Run with a time limit; a child still running after it is killed and the test fails.
fn run_limited(cmd: Command) -> Output {
    let shown = format!("{cmd:?}");
    let out = assert_cmd::Command::from_std(cmd)
        .timeout(LIMIT)
        .output()
        .expect("run baton");
    assert!(
        out.status.signal().is_none(),
        "{shown} was killed by signal {:?} (hung past {LIMIT:?}?)",
        out.status.signal()
    );
    out
}

/// Everything observable about a store: each file's bytes and each entry's mode.
type StoreState = Option<(Vec<(PathBuf, Vec<u8>)>, Vec<(PathBuf, u32)>)>;

fn state(store: &Path) -> StoreState {
    if fs::symlink_metadata(store).is_err() {
        return None;
    }
    if !store.is_dir() {
        return Some((vec![(PathBuf::new(), fs::read(store).unwrap())], vec![]));
    }
    let mut modes = Vec::new();
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, u32)>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let meta = fs::symlink_metadata(&path).unwrap();
            out.push((
                path.strip_prefix(root).unwrap().to_path_buf(),
                meta.permissions().mode(),
            ));
            if meta.is_dir() {
                walk(&path, root, out);
            }
        }
    }
    modes.push((
        PathBuf::new(),
        fs::symlink_metadata(store).unwrap().permissions().mode(),
    ));
    walk(store, store, &mut modes);
    Some((snapshot_files(store), modes))
}

/// One refusal: `args` must fail with `exit` / `code`, saying `needle`, and change nothing
/// in `store`; both as text (one `error: ` line on stderr, nothing on stdout) and with
/// --json (one document on stdout, nothing on stderr). `make` builds the command.
fn refuse_with(
    make: &dyn Fn() -> Command,
    store: &Path,
    args: &[&str],
    exit: i32,
    code: &str,
    needle: &str,
) {
    let before = state(store);

    let mut cmd = make();
    cmd.args(args);
    let out = run_limited(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(exit), "{args:?}: stderr {stderr:?}");
    assert!(
        out.stdout.is_empty(),
        "{args:?}: stdout {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.starts_with("error: ")
            && stderr.ends_with('\n')
            && stderr.matches('\n').count() == 1,
        "{args:?}: stderr must be one 'error: ' line, got {stderr:?}"
    );
    assert!(
        stderr.contains(needle),
        "{args:?}: stderr should mention {needle:?}: {stderr:?}"
    );
    assert!(state(store) == before, "{args:?} changed the store");

    let mut cmd = make();
    cmd.arg("--json").args(args);
    let out = run_limited(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(exit), "--json {args:?}: {stdout}");
    assert!(
        out.stderr.is_empty(),
        "--json {args:?}: stderr {:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.ends_with('\n') && stdout.matches('\n').count() == 1,
        "--json {args:?}: {stdout:?}"
    );
    let doc: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("--json {args:?}: {e}: {stdout:?}"));
    assert_eq!(doc["ok"], json!(false), "--json {args:?}: {doc}");
    assert_eq!(doc["error"]["code"], json!(code), "--json {args:?}: {doc}");
    assert_eq!(
        doc["error"]["exit_code"],
        json!(exit),
        "--json {args:?}: {doc}"
    );
    assert!(
        doc["error"]["message"].as_str().unwrap().contains(needle),
        "--json {args:?}: {doc}"
    );
    assert!(state(store) == before, "--json {args:?} changed the store");
}

fn refuse(env: &Env, args: &[&str], exit: i32, code: &str, needle: &str) {
    refuse_with(&|| env.cmd(), &env.store(), args, exit, code, needle);
}

/// A store with two bundles and a work directory `d`.
fn populated() -> Env {
    let env = Env::new();
    env.init();
    env.write_tree("d", &[("handoff.md", b"one\n"), ("sub/x", b"x")]);
    env.save("d", &[]);
    fs::remove_dir_all(env.path().join("d/sub")).unwrap();
    env.write_tree("d", &[("handoff.md", b"two\n")]);
    env.save("d", &[]);
    env
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {}",
        path.display()
    );
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

// ---------------------------------------------------------------------------------------
// save: bad DIR and bad entries inside it
// ---------------------------------------------------------------------------------------

#[test]
fn save_of_a_missing_dir() {
    let env = populated();
    refuse(
        &env,
        &["save", "no-such-dir"],
        3,
        "not_found",
        "no-such-dir",
    );
}

#[test]
fn save_of_a_regular_file() {
    let env = populated();
    refuse(
        &env,
        &["save", "d/handoff.md"],
        2,
        "usage",
        "is not a directory",
    );
}

#[test]
fn save_of_a_dir_holding_a_fifo_does_not_hang() {
    let env = populated();
    fs::create_dir_all(env.path().join("d/deeper")).unwrap();
    mkfifo(&env.path().join("d/deeper/pipe"));
    refuse(&env, &["save", "d"], 2, "usage", "is a FIFO");
    // A FIFO given as DIR itself.
    refuse(
        &env,
        &["save", "d/deeper/pipe"],
        2,
        "usage",
        "is not a directory",
    );
}

#[test]
fn save_of_a_dir_holding_a_socket() {
    let env = populated();
    let path = env.path().join("d/sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    refuse(&env, &["save", "d"], 2, "usage", "is a socket");
    drop(listener);
}

#[test]
fn save_of_a_dir_holding_a_device_file() {
    let env = populated();
    let path = env.path().join("d/null");
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path; makedev only computes a number.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
    if !common::precondition(made == 0, "mknod(2) of a device file (root)") {
        return;
    }
    refuse(&env, &["save", "d"], 2, "usage", "is a device file");
}

#[test]
fn save_of_a_dir_holding_a_non_utf8_name() {
    let env = populated();
    let name = OsStr::from_bytes(b"bad-\xff-name");
    fs::create_dir_all(env.path().join("d/sub")).unwrap();
    fs::write(env.path().join("d/sub").join(name), b"x").unwrap();
    refuse(&env, &["save", "d"], 2, "usage", "is not valid UTF-8");
}

/// Run the binary as an unprivileged user: as root permission bits are not enforced, so
/// drop to `nobody` (giving it the environment); as any other user, run as is.
fn unprivileged(env: &Env) -> Option<Box<dyn Fn() -> Command + '_>> {
    if !is_root() {
        return Some(Box::new(|| env.cmd()));
    }
    const NOBODY: u32 = 65534;
    fn chown_all(path: &Path) {
        std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).unwrap();
        if fs::symlink_metadata(path).unwrap().is_dir() {
            for entry in fs::read_dir(path).unwrap() {
                chown_all(&entry.unwrap().path());
            }
        }
    }
    chown_all(env.path());
    let make = move || {
        let mut cmd = env.cmd();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(NOBODY) != 0
                    || libc::setuid(NOBODY) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    };
    // The unprivileged user must be able to run baton and read the store.
    match make().args(["log", "-n", "1"]).output() {
        Ok(out) if out.status.success() => Some(Box::new(make)),
        other => {
            // Only root can switch users; CI runs as root, so there it must work.
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "cannot run baton as an unprivileged user: {other:?}"
            );
            None
        }
    }
}

#[test]
fn save_of_an_unreadable_file() {
    let env = populated();
    fs::create_dir_all(env.path().join("d/sub")).unwrap();
    let secret = env.path().join("d/sub/secret");
    fs::write(&secret, b"no").unwrap();
    let Some(make) = unprivileged(&env) else {
        return;
    };
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o000)).unwrap();
    refuse_with(
        &*make,
        &env.store(),
        &["save", "d"],
        6,
        "security",
        "secret",
    );
    // Readable again, the same save works (as that user).
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let mut cmd = make();
    let out = run_limited({
        cmd.args(["save", "d"]);
        cmd
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn save_of_an_unreadable_dir() {
    let env = populated();
    let locked = env.path().join("d/locked");
    fs::create_dir(&locked).unwrap();
    fs::write(locked.join("inside"), b"x").unwrap();
    let Some(make) = unprivileged(&env) else {
        return;
    };
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    refuse_with(
        &*make,
        &env.store(),
        &["save", "d"],
        6,
        "security",
        "locked",
    );
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn save_with_meta_lacking_an_equals_sign() {
    let env = populated();
    refuse(
        &env,
        &["save", "d", "--meta", "novalue"],
        2,
        "usage",
        "--meta 'novalue' is not KEY=VALUE",
    );
    refuse(
        &env,
        &["save", "d", "--meta", "=v"],
        2,
        "usage",
        "empty key",
    );
}

// ---------------------------------------------------------------------------------------
// Revisions
// ---------------------------------------------------------------------------------------

#[test]
fn rev_matching_nothing() {
    let env = populated();
    refuse(
        &env,
        &["show", "deadbeef"],
        3,
        "not_found",
        "no bundle matches 'deadbeef'",
    );
    refuse(
        &env,
        &["show", &"0".repeat(64)],
        3,
        "not_found",
        "no bundle matches",
    );
    refuse(&env, &["log", "deadbeef00"], 3, "not_found", "deadbeef00");
    refuse(
        &env,
        &["show", "targets/devbox"],
        3,
        "not_found",
        "targets/devbox",
    );
    refuse(&env, &["show", "current~2"], 3, "not_found", "current~2");
    refuse(
        &env,
        &["cat", "deadbeef:handoff.md"],
        3,
        "not_found",
        "deadbeef",
    );
    refuse(
        &env,
        &["checkout", "deadbeef", "out"],
        3,
        "not_found",
        "deadbeef",
    );
    assert!(!env.path().join("out").exists());
    refuse(
        &env,
        &["diff", "current", "deadbeef"],
        3,
        "not_found",
        "deadbeef",
    );
}

#[test]
fn rev_too_short_or_malformed() {
    let env = populated();
    let id = env.ok(&["show", "current", "--json"]);
    let id = serde_json::from_str::<Value>(&id).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Ambiguity below 8 digits is not even attempted: a 7-digit prefix is a usage error
    // although it matches exactly one bundle here.
    refuse(&env, &["show", &id[..7]], 2, "usage", "too short");
    refuse(&env, &["show", "abc"], 2, "usage", "too short");
    refuse(
        &env,
        &["show", &format!("{id}0")],
        2,
        "usage",
        "longer than an id",
    );
    refuse(&env, &["show", "current~x"], 2, "usage", "not a number");
    refuse(&env, &["show", "HEAD"], 2, "usage", "is not a revision");
    refuse(
        &env,
        &["show", &id.to_uppercase()],
        2,
        "usage",
        "is not a revision",
    );
    refuse(
        &env,
        &["show", "targets/../x"],
        2,
        "usage",
        "invalid target name",
    );
}

/// A bundle manifest in canonical form, as `save` writes it.
fn manifest(tree: &str, summary: &str) -> Vec<u8> {
    format!(
        "{{\"type\":\"bundle\",\"version\":1,\"tree\":\"{tree}\",\"parents\":[],\"created\":\"2020-01-01T00:00:00Z\",\
         \"from\":\"\",\"to\":\"\",\"summary\":\"{summary}\",\"note\":\"\",\"metadata\":{{}}}}"
    )
    .into_bytes()
}

fn plant(store: &Path, content: &[u8]) -> String {
    let id = blake3::hash(content).to_hex().to_string();
    let path = object_path(store, &id);
    let fanout = path.parent().unwrap();
    fs::create_dir_all(fanout).unwrap();
    fs::set_permissions(fanout, fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(&path, zstd::encode_all(content, 3).unwrap()).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    id
}

#[test]
fn rev_prefix_matching_two_bundles_is_ambiguous() {
    let env = Env::new();
    env.init();
    fs::create_dir(env.path().join("empty")).unwrap();
    let id = env.save("empty", &[]);
    let shown: Value = serde_json::from_str(&env.ok(&["--json", "show", &id])).unwrap();
    let tree = shown["tree"].as_str().unwrap().to_string();
    // Our own manifest encoding must match save's byte for byte, or the planted bundles
    // below would be refused as non-canonical rather than found ambiguous.
    assert_eq!(
        common::read_object_file(&object_path(&env.store(), &id)).len(),
        manifest(&tree, "").len()
    );

    // Two valid bundles whose ids share 8 hex digits (32 bits): a birthday search over
    // summaries needs ~2^16 hashes, which takes a moment in-process.
    let mut seen: HashMap<[u8; 4], u32> = HashMap::new();
    let (a, b) = (0u32..)
        .find_map(|i| {
            let hash = blake3::hash(&manifest(&tree, &format!("n{i}")));
            let key: [u8; 4] = hash.as_bytes()[..4].try_into().unwrap();
            seen.insert(key, i).map(|j| (j, i))
        })
        .unwrap();
    let id_a = plant(&env.store(), &manifest(&tree, &format!("n{a}")));
    let id_b = plant(&env.store(), &manifest(&tree, &format!("n{b}")));
    assert_eq!(id_a[..8], id_b[..8]);
    let common_len = id_a
        .bytes()
        .zip(id_b.bytes())
        .take_while(|(x, y)| x == y)
        .count();

    // Both are real bundles: each resolves by its full id and by a long enough prefix.
    for (full, summary) in [(&id_a, format!("n{a}")), (&id_b, format!("n{b}"))] {
        let doc: Value =
            serde_json::from_str(&env.ok(&["--json", "show", &full[..common_len + 1]])).unwrap();
        assert_eq!(doc["id"], json!(full));
        assert_eq!(doc["summary"], json!(summary));
    }
    let prefix = &id_a[..8];
    refuse(
        &env,
        &["show", prefix],
        3,
        "ambiguous",
        &format!("'{prefix}' matches 2 bundles"),
    );
    refuse(
        &env,
        &["cat", &format!("{prefix}:x")],
        3,
        "ambiguous",
        "matches 2 bundles",
    );
    refuse(
        &env,
        &["show", &id_a[..common_len]],
        3,
        "ambiguous",
        "matches 2 bundles",
    );
}

// ---------------------------------------------------------------------------------------
// The store itself: wrong path, wrong version, damage
// ---------------------------------------------------------------------------------------

#[test]
fn store_path_that_is_a_file() {
    let env = populated();
    let file = env.path().join("d/handoff.md");
    refuse_with(
        &|| env.cmd(),
        &file,
        &["--store", "d/handoff.md", "log"],
        2,
        "usage",
        "is not a directory",
    );
    refuse_with(
        &|| env.cmd(),
        &file,
        &["--store", "d/handoff.md", "init"],
        2,
        "usage",
        "is not a directory",
    );
    let with_env = || {
        let mut cmd = env.cmd();
        cmd.env("BATON_STORE", &file);
        cmd
    };
    refuse_with(
        &with_env,
        &file,
        &["save", "d"],
        2,
        "usage",
        "is not a directory",
    );
    refuse(
        &env,
        &["--store", "d/handoff.md", "save", "d"],
        2,
        "usage",
        "is not a directory",
    );
}

#[test]
fn store_path_that_does_not_exist() {
    let env = populated();
    let missing = env.path().join("nowhere");
    for args in [
        &["--store", "nowhere", "log"][..],
        &["--store", "nowhere", "save", "d"],
        &["--store", "nowhere", "gc"],
    ] {
        refuse_with(
            &|| env.cmd(),
            &missing,
            args,
            3,
            "not_found",
            "no baton store at",
        );
    }
    assert!(!missing.exists());
    // A directory that is not a store.
    let empty = env.path().join("not-a-store");
    fs::create_dir(&empty).unwrap();
    refuse_with(
        &|| env.cmd(),
        &empty,
        &["--store", "not-a-store", "log"],
        3,
        "not_found",
        "is not a baton store",
    );
}

#[test]
fn no_store_anywhere_upwards() {
    let env = Env::new();
    env.write_tree("d", &[("a", b"1")]);
    let store_above = env
        .path()
        .ancestors()
        .skip(1)
        .any(|p| p.join(".baton").is_dir());
    if !common::precondition(!store_above, "no .baton store above the temp directory") {
        return;
    }
    refuse(&env, &["save", "d"], 3, "not_found", "no baton store in");
    refuse(&env, &["log"], 3, "not_found", "no baton store in");
    assert!(!env.store().exists());
}

fn rewrite_config(env: &Env, from: &str, to: &str) {
    let path = env.store().join("config");
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{text}");
    fs::write(&path, text.replace(from, to)).unwrap();
}

#[test]
fn store_with_a_newer_format_version() {
    let env = populated();
    rewrite_config(&env, "\"version\": 1", "\"version\": 2");
    for args in [
        &["log"][..],
        &["save", "d"],
        &["show", "current"],
        &["gc", "--grace", "0s"],
        &["verify"],
        &["init"],
    ] {
        if args == ["init"] {
            // init refuses an existing store before reading its config.
            refuse(&env, args, 1, "other", "already a baton store");
        } else {
            refuse(
                &env,
                args,
                1,
                "unsupported",
                "store format version 2 is not supported",
            );
        }
    }
}

#[test]
fn store_requiring_an_unknown_feature() {
    let env = populated();
    rewrite_config(&env, "\"features\": []", "\"features\": [\"packs-v9\"]");
    refuse(&env, &["log"], 1, "unsupported", "feature 'packs-v9'");
    refuse(&env, &["save", "d"], 1, "unsupported", "feature 'packs-v9'");
}

#[test]
fn store_with_a_garbled_config() {
    let env = populated();
    fs::write(env.store().join("config"), b"{not json").unwrap();
    refuse(&env, &["log"], 4, "integrity", "config does not decode");
    refuse(
        &env,
        &["save", "d"],
        4,
        "integrity",
        "config does not decode",
    );
}

/// The file holding `current`'s value: the ref file itself, or (when refs are
/// directories of generations) its newest generation.
fn current_ref_file(store: &Path) -> PathBuf {
    let path = store.join("refs/current");
    if !path.is_dir() {
        return path;
    }
    let mut names: Vec<String> = fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with(".tmp-"))
        .collect();
    names.sort();
    path.join(names.last().expect("current has a value"))
}

#[test]
fn damaged_ref() {
    let env = populated();
    fs::write(current_ref_file(&env.store()), b"garbage\n").unwrap();
    refuse(&env, &["log"], 4, "integrity", "ref 'current' is damaged");
    refuse(
        &env,
        &["show", "current"],
        4,
        "integrity",
        "ref 'current' is damaged",
    );
    refuse(
        &env,
        &["cat", "current:handoff.md"],
        4,
        "integrity",
        "ref 'current' is damaged",
    );
    refuse(
        &env,
        &["checkout", "current", "out"],
        4,
        "integrity",
        "ref 'current' is damaged",
    );
    assert!(!env.path().join("out").exists());
    // save must refuse before writing anything, even objects.
    env.write_tree("d", &[("brand-new.txt", b"never stored")]);
    refuse(
        &env,
        &["save", "d"],
        4,
        "integrity",
        "ref 'current' is damaged",
    );
    refuse(
        &env,
        &["gc", "--grace", "0s"],
        4,
        "integrity",
        "ref 'current' is damaged",
    );
}

/// Replace line `n` (1-based) of the log with `with`.
fn damage_log_line(store: &Path, n: usize, with: &str) {
    let path = store.join("log");
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= n, "log has {} lines", lines.len());
    lines[n - 1] = with;
    fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
}

#[test]
fn damaged_log_line() {
    let env = populated();
    damage_log_line(&env.store(), 1, "{\"this is\": \"not a log line\"}");
    refuse(
        &env,
        &["log", "--audit"],
        4,
        "integrity",
        "log line 1 is damaged",
    );
    env.write_tree("d", &[("brand-new.txt", b"never stored")]);
    refuse(
        &env,
        &["save", "d"],
        4,
        "integrity",
        "log line 1 is damaged",
    );
    refuse(&env, &["gc", "--grace", "0s"], 4, "integrity", "log line 1");
}

#[test]
fn damaged_log_line_that_is_the_last() {
    let env = populated();
    damage_log_line(&env.store(), 2, "garbage");
    refuse(
        &env,
        &["log", "--audit"],
        4,
        "integrity",
        "log line 2 is damaged",
    );
    env.write_tree("d", &[("brand-new.txt", b"never stored")]);
    refuse(
        &env,
        &["save", "d"],
        4,
        "integrity",
        "log line 2 is damaged",
    );
}

#[test]
fn torn_last_log_line_is_an_uncommitted_append() {
    // A crash inside the append of a log line leaves a fragment without its newline. It
    // was never committed: readers leave it out, verify stays clean, and the next ref
    // move cuts it off before appending, never touching a committed line.
    let env = populated();
    let path = env.store().join("log");
    let committed = fs::read(&path).unwrap();
    let mut torn = committed.clone();
    torn.extend_from_slice(b"{\"time\":\"2026-");
    fs::write(&path, &torn).unwrap();
    let (code, doc) = env.json(&["log", "--audit"]);
    assert_eq!(code, 0);
    assert_eq!(doc["entries"].as_array().unwrap().len(), 2);
    let (code, doc) = env.json(&["verify"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["report"]["log_torn_tail"], true);
    env.write_tree("d", &[("brand-new.txt", b"stored")]);
    env.save("d", &[]);
    let after = fs::read(&path).unwrap();
    assert!(after.starts_with(&committed), "committed lines untouched");
    assert_eq!(after.iter().filter(|&&b| b == b'\n').count(), 3);
    assert!(after.ends_with(b"\n"));
    let (code, doc) = env.json(&["verify"]);
    assert_eq!(code, 0);
    assert_eq!(doc["report"]["log_torn_tail"], false);
}

#[test]
fn init_on_an_existing_store() {
    let env = populated();
    refuse(&env, &["init"], 1, "other", "already a baton store");
    let other = env.path().join("other");
    fs::create_dir(&other).unwrap();
    env.ok(&["--store", "other", "init"]);
    refuse_with(
        &|| env.cmd(),
        &other,
        &["--store", "other", "init"],
        1,
        "other",
        "already a baton store",
    );
    // A non-empty directory that is not a store is not taken over either.
    let busy = env.path().join("d");
    refuse_with(
        &|| env.cmd(),
        &busy,
        &["--store", "d", "init"],
        2,
        "usage",
        "is not empty",
    );
}

// ---------------------------------------------------------------------------------------
// checkout and cat
// ---------------------------------------------------------------------------------------

#[test]
fn checkout_into_a_non_empty_dir() {
    let env = populated();
    let target = env.write_tree("busy", &[("mine.txt", b"precious")]);
    let before = snapshot_files(&target);
    refuse(
        &env,
        &["checkout", "current", "busy"],
        2,
        "usage",
        "is not empty",
    );
    assert_eq!(snapshot_files(&target), before);
    // A regular file in the way.
    refuse(
        &env,
        &["checkout", "current", "busy/mine.txt"],
        2,
        "usage",
        "is not a directory",
    );
    assert_eq!(snapshot_files(&target), before);
    // No staging directory left behind in either case.
    let names: Vec<_> = fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn cat_of_a_missing_path() {
    let env = populated();
    refuse(
        &env,
        &["cat", "current:nope.md"],
        3,
        "not_found",
        "'nope.md' is not in the bundle",
    );
    refuse(
        &env,
        &["cat", "current~1:sub/nope"],
        3,
        "not_found",
        "'sub/nope' is not in the bundle",
    );
    refuse(
        &env,
        &["cat", "current~1:handoff.md/deeper"],
        3,
        "not_found",
        "is not a directory",
    );
    // The first bundle had sub/x; the second does not.
    refuse(
        &env,
        &["cat", "current:sub/x"],
        3,
        "not_found",
        "is not in the bundle",
    );
}

#[test]
fn cat_of_a_directory() {
    let env = populated();
    refuse(
        &env,
        &["cat", "current~1:sub"],
        2,
        "usage",
        "'sub' is a directory",
    );
}

#[test]
fn cat_without_a_path() {
    let env = populated();
    refuse(&env, &["cat", "current"], 2, "usage", "is not REV:PATH");
    refuse(&env, &["cat", "current:"], 2, "usage", "empty path");
    refuse(&env, &["cat", "current:/"], 2, "usage", "empty path");
}

#[test]
fn clap_usage_errors_exit_2() {
    let env = populated();
    let before = state(&env.store());
    for args in [
        &["bogus"][..],
        &["save"],
        &["gc", "--grace", "soon"],
        &["log", "-n", "-1"],
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert!(state(&env.store()) == before);
}

#[test]
fn errors_quoting_a_line_break_stay_one_line() {
    let env = populated();
    mkfifo(&env.path().join("d/evil\nname"));
    refuse(&env, &["save", "d"], 2, "usage", "is a FIFO");
    let stderr = String::from_utf8(env.run(&["save", "d"]).stderr).unwrap();
    assert!(stderr.ends_with("evil\\nname is a FIFO; baton saves regular files, directories and symlinks only; move it out of the directory\n"), "{stderr:?}");
    fs::remove_file(env.path().join("d/evil\nname")).unwrap();
    refuse(
        &env,
        &["cat", "current:no\nsuch"],
        3,
        "not_found",
        "is not in the bundle",
    );
    refuse(
        &env,
        &["show", "dead\r\nbeef"],
        2,
        "usage",
        "is not a revision",
    );
    refuse(
        &env,
        &["save", "d", "--meta", "multi\nline"],
        2,
        "usage",
        "is not KEY=VALUE",
    );
}

#[test]
fn a_file_that_looks_like_a_manifest_is_not_a_revision() {
    let env = populated();
    let fake = b"{\"type\":\"bundle\",\"note\":\"just a file that starts like a manifest\"}\n";
    env.write_tree("d", &[("fake.json", fake)]);
    env.save("d", &[]);
    let blob = blake3::hash(fake).to_hex().to_string();
    assert!(common::has_object(&env.store(), &blob));
    // Not a bundle: not found, and certainly not "the store is damaged".
    refuse(&env, &["show", &blob], 3, "not_found", "no bundle matches");
    refuse(
        &env,
        &["show", &blob[..8]],
        3,
        "not_found",
        "no bundle matches",
    );
    let verify = env.ok(&["verify"]);
    assert!(verify.trim_end().ends_with(": ok"), "{verify}");
}

// ---------------------------------------------------------------------------------------
// Targets in an encrypted store; a stored symlink target holding NUL
// ---------------------------------------------------------------------------------------

/// `target add` and `target default` rewrote an encrypted store's config without its
/// keys while `target remove` demanded them. Every change needs the keys now (exit 6,
/// the store untouched); listing still works locked.
#[test]
fn target_changes_in_an_encrypted_store_all_need_the_keys() {
    let env = Env::new();
    let run = |pass: Option<&str>, args: &[&str]| {
        let mut cmd = env.cmd();
        cmd.env_remove("BATON_PASSPHRASE");
        if let Some(pass) = pass {
            cmd.env("BATON_PASSPHRASE", pass);
        }
        cmd.args(args).output().unwrap()
    };
    let pw = Some("right horse");
    assert!(
        run(pw, &["init", "--encrypt", "--passphrase"])
            .status
            .success()
    );
    env.write_tree("w", &[("a.txt", b"a\n")]);
    assert!(run(pw, &["save", "w"]).status.success());
    let remote = env.path().join("remote");
    let remote = remote.to_str().unwrap();
    assert!(run(pw, &["target", "add", "r", remote]).status.success());
    assert!(run(pw, &["push", "r"]).status.success());

    let before = snapshot_files(&env.store());
    for args in [
        &["target", "add", "other", remote][..],
        &["target", "add", "other", remote, "--default"],
        &["target", "default", "r"],
        &["target", "remove", "r"],
    ] {
        let out = run(None, args);
        assert_eq!(out.status.code(), Some(6), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("passphrase"), "{err}");
        assert_eq!(snapshot_files(&env.store()), before, "{args:?} wrote");
    }
    let out = run(None, &["target", "list"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("r* "));
    // With the keys, all of them work.
    for args in [
        &["target", "add", "other", remote][..],
        &["target", "default", "other"],
        &["target", "remove", "r"],
        &["target", "remove", "other"],
    ] {
        let out = run(pw, args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
}

/// A crafted tree whose symlink's stored target holds a NUL byte: checkout exited 1
/// (symlink(2) cannot take it). It is a damaged store, exit 4, and nothing is created.
#[test]
fn stored_symlink_target_with_nul_is_an_integrity_error() {
    use baton::format::{EntryKind, Tree, TreeEntry};
    use baton::store::Store;
    use baton::store::objects::PendingDirs;
    let env = Env::new();
    env.init();
    {
        let store = Store::open(&env.store()).unwrap();
        let pending = PendingDirs::default();
        let link = store.objects.put_bytes(b"../a\0b", &pending).unwrap();
        let file = store.objects.put_bytes(b"x\n", &pending).unwrap();
        let tree = Tree::new(vec![
            TreeEntry {
                name: "f".into(),
                kind: EntryKind::File,
                size: 2,
                id: file.id,
            },
            TreeEntry {
                name: "link".into(),
                kind: EntryKind::Symlink,
                size: 6,
                id: link.id,
            },
        ])
        .unwrap();
        let tree = store.objects.put_bytes(&tree.encode(), &pending).unwrap();
        pending.sync().unwrap();
        store.commit_bundle(tree.id, "save", |_| {}).unwrap();
    }
    let before = snapshot_files(&env.store());
    let out = env.run(&["checkout", "current", "out"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("NUL") && err.contains("link"), "{err}");
    assert!(!env.path().join("out").exists());
    assert_eq!(snapshot_files(&env.store()), before);
}

#[test]
fn target_names_that_shadow_a_rev_are_refused() {
    let env = populated();
    for name in ["current", "targets", "deadbeef00"] {
        refuse(
            &env,
            &["target", "add", name, "/tmp/baton-shadow-target"],
            2,
            "usage",
            "would shadow it",
        );
    }
}

#[test]
fn json_usage_errors_are_one_message_line_and_the_usage_as_hint() {
    let env = populated();
    let (code, doc) = env.json(&["save", "--bogus"]);
    assert_eq!(code, 2, "{doc}");
    let message = doc["error"]["message"].as_str().expect("message");
    assert_eq!(message, "unexpected argument '--bogus' found", "{doc}");
    let hint = doc["error"]["hint"].as_str().expect("hint");
    assert!(hint.starts_with("Usage: baton save "), "{doc}");
    assert!(!hint.contains('\n') && !message.contains('\n'), "{doc}");
}
