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

mod checkout_targets;
mod damage;
mod papercuts;
mod revisions;
mod save_binary;
mod save_input;
