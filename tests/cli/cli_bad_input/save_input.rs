//! Bad input: save of a bad DIR and bad entries inside it.

use super::*;

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
// save DIR --secrets block: secrets outside the file contents (issue 28)
// ---------------------------------------------------------------------------------------

const TOKEN: &str = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8";

/// A refused save naming `kind` and `place`, never `value`, leaving the store as it was.
fn refuse_secret(env: &Env, args: &[&str], kind: &str, place: &str, value: &str) {
    refuse(env, args, 6, "security", place);
    let out = run_limited({
        let mut cmd = env.cmd();
        cmd.arg("--json").args(args);
        cmd
    });
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(kind), "{args:?}: {message}");
    assert!(
        !doc.to_string().contains(value),
        "{args:?} shows the value: {doc}"
    );
}

#[test]
fn save_refuses_secrets_in_file_and_directory_names() {
    let env = populated();
    env.write_tree("n", &[(&format!("sub/{TOKEN}.txt"), b"clean\n")]);
    refuse_secret(
        &env,
        &["save", "n"],
        "github_token",
        "the name of sub/[REDACTED:github_token].txt",
        TOKEN,
    );
    env.write_tree("m", &[(&format!("{TOKEN}/inside.txt"), b"clean\n")]);
    refuse_secret(
        &env,
        &["save", "m"],
        "github_token",
        "the name of [REDACTED:github_token]",
        TOKEN,
    );
    // A file whose name and contents both hold one: its path is shown redacted.
    env.write_tree(
        "c",
        &[(&format!("{TOKEN}.env"), format!("T={TOKEN}\n").as_bytes())],
    );
    refuse_secret(
        &env,
        &["save", "c"],
        "github_token",
        "[REDACTED:github_token].env",
        TOKEN,
    );
}

#[test]
fn save_refuses_secrets_in_symlink_targets() {
    let env = populated();
    fs::create_dir_all(env.path().join("l")).unwrap();
    std::os::unix::fs::symlink(format!("/run/keys/{TOKEN}"), env.path().join("l/link")).unwrap();
    refuse_secret(
        &env,
        &["save", "l"],
        "github_token",
        "the target of symlink link",
        TOKEN,
    );
}

#[test]
fn save_refuses_secrets_in_manifest_fields() {
    let env = populated();
    let password = "Corr3ct-H0rse-Battery";
    let summary = format!("rotate {TOKEN}");
    let note = format!("DB_PASSWORD={password}");
    let meta = format!("ci={TOKEN}");
    let meta_key = format!("{TOKEN}=1");
    for (flag, value, kind, place, secret) in [
        (
            "--summary",
            summary.as_str(),
            "github_token",
            "--summary",
            TOKEN,
        ),
        ("--note", &note, "password_assignment", "--note", password),
        ("--meta", &meta, "github_token", "--meta ci", TOKEN),
        (
            "--meta",
            &meta_key,
            "github_token",
            "--meta [REDACTED:github_token]",
            TOKEN,
        ),
        ("--from", TOKEN, "github_token", "--from", TOKEN),
        ("--to", TOKEN, "github_token", "--to", TOKEN),
    ] {
        refuse_secret(&env, &["save", "d", flag, value], kind, place, secret);
        // Block is the default for a snapshot; saying it changes nothing.
        refuse_secret(
            &env,
            &["save", "d", flag, value, "--secrets", "block"],
            kind,
            place,
            secret,
        );
    }
}
