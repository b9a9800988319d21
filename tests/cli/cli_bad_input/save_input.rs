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
