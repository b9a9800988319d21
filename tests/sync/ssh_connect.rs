//! `connect()` against a real OpenSSH sshd on loopback: key files, agent, known_hosts
//! (unknown, accept-new, hashed, changed, unparsable), passphrases, wrong user, dead and
//! silent ports, an SFTP-only account. Nothing here touches the process environment:
//! HOME and the agent socket are passed through `ConnectOptions`.

use crate::sshd;

use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

use baton::error::{Error, ErrorKind};
use baton::transport::ssh::connect::{ConnectOptions, Connection, SshTarget, connect};
use sshd::{KnownHostsMode, Sshd};

pub(crate) fn target(server: &Sshd) -> SshTarget {
    SshTarget {
        host: server.alias().to_string(),
        user: None,
        port: None,
        jump: None,
    }
}

pub(crate) fn options(server: &Sshd) -> ConnectOptions {
    ConnectOptions {
        accept_new_host_key: false,
        timeout: Some(Duration::from_secs(10)),
        home: Some(server.home()),
        agent_socket: Some(server.agent_socket()),
        key_passphrase: None,
    }
}

pub(crate) fn connect_ok(server: &Sshd, opts: &ConnectOptions) -> Connection {
    match connect(&target(server), opts) {
        Ok(c) => c,
        Err(e) => panic!("connect failed: {e}\nsshd log:\n{}", server.log()),
    }
}

pub(crate) fn connect_err(server: &Sshd, target: &SshTarget, opts: &ConnectOptions) -> Error {
    match connect(target, opts) {
        Ok(c) => panic!(
            "connect to {}:{} should have failed\nsshd log:\n{}",
            c.host,
            c.port,
            server.log()
        ),
        Err(e) => {
            eprintln!("connect error (expected): [{}] {e}", e.kind.code());
            e
        }
    }
}

/// The session works: SFTP can stat "/".
pub(crate) fn assert_sftp_works(conn: &Connection) {
    let sftp = conn.session.sftp().expect("sftp subsystem");
    let stat = sftp.stat(Path::new("/")).expect("stat /");
    assert!(stat.is_dir());
}

pub(crate) fn one_line(e: &Error) {
    let text = e.to_string();
    assert!(!text.contains('\n'), "error should be one line: {text:?}");
}

#[test]
fn key_file_auth_succeeds_and_sftp_works() {
    let server = Sshd::start();
    let conn = connect_ok(&server, &options(&server));
    assert_eq!(conn.host, "127.0.0.1");
    assert_eq!(conn.port, server.port());
    assert_eq!(conn.user, server.user());
    assert_eq!(conn.timeout, Duration::from_secs(10));
    assert!(conn.session.authenticated());
    assert_sftp_works(&conn);
}

#[test]
fn config_values_are_applied_and_target_overrides_them() {
    let server = Sshd::start();
    let config = std::fs::read_to_string(server.config_path()).unwrap();
    std::fs::write(
        server.config_path(),
        format!("{config}  ConnectTimeout 7\n  ServerAliveInterval 15\n  Port 1\n"),
    )
    .unwrap();
    let mut opts = options(&server);
    opts.timeout = None;
    let mut t = target(&server);
    // The config's first Port wins over the later `Port 1`; an explicit port wins over both.
    t.port = Some(server.port());
    t.user = Some(server.user().to_string());
    let conn = connect(&t, &opts).unwrap_or_else(|e| panic!("{e}\n{}", server.log()));
    assert_eq!(conn.timeout, Duration::from_secs(7));
    assert_eq!(conn.keepalive_secs, Some(15));
    assert_sftp_works(&conn);
}

#[test]
fn agent_auth_succeeds_without_identity_file() {
    let server = Sshd::builder().agent().no_identity_in_config().start();
    let conn = connect_ok(&server, &options(&server));
    assert_sftp_works(&conn);

    // Without the agent nothing can work: proves the agent did it.
    let mut opts = options(&server);
    opts.agent_socket = Some(server.scratch().join("no-agent.sock"));
    let e = connect_err(&server, &target(&server), &opts);
    assert_eq!(e.kind, ErrorKind::Security, "{e}");
    assert!(e.message.contains("authentication failed"), "{e}");
}

#[test]
fn agent_holding_a_passphrase_protected_key_is_used() {
    let server = Sshd::builder().agent().passphrase("correct horse").start();
    let conn = connect_ok(&server, &options(&server));
    assert_sftp_works(&conn);
}

#[test]
fn unknown_host_is_refused_with_fingerprint_and_ways_to_accept() {
    let server = Sshd::builder().known_hosts(KnownHostsMode::Empty).start();
    let e = connect_err(&server, &target(&server), &options(&server));
    assert_eq!(e.kind, ErrorKind::Security, "{e}");
    assert_eq!(e.kind.exit_code(), 6);
    let text = e.to_string();
    one_line(&e);
    assert!(text.contains("SHA256:"), "{text}");
    assert!(text.contains("ssh-ed25519"), "{text}");
    assert!(text.contains("--accept-new-host-key"), "{text}");
    assert!(
        text.contains(&format!("ssh-keyscan -p {} 127.0.0.1", server.port())),
        "{text}"
    );
    // The fingerprint is OpenSSH's.
    let out = std::process::Command::new("ssh-keygen")
        .arg("-lf")
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(server.host_key_line().as_bytes())?;
            child.wait_with_output()
        })
        .expect("ssh-keygen -lf -");
    let listing = String::from_utf8_lossy(&out.stdout);
    let fp = listing.split_whitespace().nth(1).expect("fingerprint");
    assert!(fp.starts_with("SHA256:"));
    assert!(text.contains(fp), "{text} should contain {fp}");
    // Nothing was written.
    assert_eq!(
        std::fs::read_to_string(server.known_hosts_path()).unwrap(),
        ""
    );
}

#[test]
fn accept_new_records_the_key_then_plain_connect_succeeds() {
    let server = Sshd::builder().known_hosts(KnownHostsMode::Missing).start();
    let mut opts = options(&server);
    opts.accept_new_host_key = true;
    let conn = connect_ok(&server, &opts);
    assert_sftp_works(&conn);
    drop(conn);

    let path = server.known_hosts_path();
    let recorded = std::fs::read_to_string(&path).unwrap();
    assert_eq!(recorded, format!("{}\n", server.host_key_line()));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let conn = connect_ok(&server, &options(&server));
    assert_sftp_works(&conn);
    // And OpenSSH agrees with what was written.
    let out = std::process::Command::new("ssh-keygen")
        .arg("-F")
        .arg(format!("[127.0.0.1]:{}", server.port()))
        .arg("-f")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ssh-keygen -F does not find the entry"
    );
}

#[test]
fn accept_new_from_config_appends_after_a_line_without_newline() {
    let server = Sshd::builder().known_hosts(KnownHostsMode::Empty).start();
    let other = "other.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
    server.write_known_hosts(other);
    let config = std::fs::read_to_string(server.config_path()).unwrap();
    std::fs::write(
        server.config_path(),
        format!("{config}  StrictHostKeyChecking accept-new\n"),
    )
    .unwrap();
    let conn = connect_ok(&server, &options(&server));
    assert_sftp_works(&conn);
    let recorded = std::fs::read_to_string(server.known_hosts_path()).unwrap();
    assert_eq!(recorded, format!("{other}\n{}\n", server.host_key_line()));
}

#[test]
fn hashed_known_hosts_entry_matches() {
    let server = Sshd::builder().known_hosts(KnownHostsMode::Hashed).start();
    let conn = connect_ok(&server, &options(&server));
    assert_sftp_works(&conn);
}

#[test]
fn known_key_type_is_preferred_over_the_servers_default() {
    // The server has an ECDSA and an ed25519 key and would pick ed25519 first; only the
    // ECDSA one is known. Without preferring known types, libssh2 says Mismatch.
    let keys = tempfile::tempdir().unwrap();
    let ecdsa = keys.path().join("ssh_host_ecdsa_key");
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ecdsa", "-N", "", "-f"])
        .arg(&ecdsa)
        .status()
        .unwrap();
    assert!(status.success());
    let server = Sshd::builder()
        .sshd_config(&format!("HostKey {}", ecdsa.display()))
        .start();
    let ecdsa_pub = std::fs::read_to_string(ecdsa.with_extension("pub")).unwrap();
    let mut fields = ecdsa_pub.split_whitespace();
    let (t, k) = (fields.next().unwrap(), fields.next().unwrap());
    server.write_known_hosts(&format!("[127.0.0.1]:{} {t} {k}\n", server.port()));
    let conn = connect_ok(&server, &options(&server));
    assert_sftp_works(&conn);
}

#[test]
fn changed_host_key_is_refused_even_with_accept_new() {
    let server = Sshd::builder()
        .known_hosts(KnownHostsMode::WrongKey)
        .start();
    let before = std::fs::read_to_string(server.known_hosts_path()).unwrap();
    for accept_new in [false, true] {
        let mut opts = options(&server);
        opts.accept_new_host_key = accept_new;
        let e = connect_err(&server, &target(&server), &opts);
        assert_eq!(e.kind, ErrorKind::Security, "{e}");
        one_line(&e);
        let text = e.to_string();
        assert!(text.contains("CHANGED"), "{text}");
        assert!(text.contains("SHA256:"), "{text}");
        assert!(
            text.contains(&format!("{}:1", server.known_hosts_path().display())),
            "{text}"
        );
        assert!(
            text.contains(&format!("-R '[127.0.0.1]:{}'", server.port())),
            "{text}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(server.known_hosts_path()).unwrap(),
        before
    );
}

#[test]
fn unparsable_known_hosts_is_a_clear_error() {
    let server = Sshd::start();
    server.write_known_hosts(&format!(
        "# comment\n{}\nbroken-line-without-key\n",
        server.host_key_line()
    ));
    let e = connect_err(&server, &target(&server), &options(&server));
    one_line(&e);
    let text = e.to_string();
    assert!(
        text.contains(&format!("{}:3", server.known_hosts_path().display())),
        "{text}"
    );
}

#[test]
fn unparsable_ssh_config_is_a_usage_error_naming_the_file() {
    let server = Sshd::start();
    std::fs::write(server.config_path(), "Host testbox\n  Port notanumber\n").unwrap();
    let e = connect_err(&server, &target(&server), &options(&server));
    assert_eq!(e.kind, ErrorKind::Usage, "{e}");
    assert!(
        e.to_string()
            .contains(&server.config_path().display().to_string()),
        "{e}"
    );
}

#[test]
fn passphrase_protected_key_without_agent_or_terminal_fails_clearly() {
    // The test runner has no terminal on stdin (cargo test captures; CI has none).
    let server = Sshd::builder().passphrase("secret words").start();
    if std::io::IsTerminal::is_terminal(&std::io::stdin())
        && std::io::IsTerminal::is_terminal(&std::io::stderr())
    {
        // Only a developer's interactive shell gets here (CI has no terminal); the
        // terminal case is passphrase_is_asked_on_a_terminal.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI has a terminal?"
        );
        return;
    }
    let e = connect_err(&server, &target(&server), &options(&server));
    assert_eq!(e.kind, ErrorKind::Security, "{e}");
    one_line(&e);
    let text = e.to_string();
    assert!(text.contains("passphrase"), "{text}");
    assert!(
        text.contains(&server.user_key().display().to_string()),
        "{text}"
    );
    assert!(text.contains("ssh-add"), "{text}");
    assert!(!text.contains("secret words"));
}

#[test]
fn wrong_user_is_an_authentication_failure() {
    let server = Sshd::start();
    let mut t = target(&server);
    t.user = Some("nosuchuser".to_string());
    let e = connect_err(&server, &t, &options(&server));
    assert_eq!(e.kind, ErrorKind::Security, "{e}");
    one_line(&e);
    let text = e.to_string();
    assert!(
        text.contains(&format!(
            "authentication failed for nosuchuser@127.0.0.1:{}",
            server.port()
        )),
        "{text}"
    );
    assert!(
        text.contains(&server.user_key().display().to_string()),
        "{text}"
    );
}

#[test]
fn nothing_listening_is_a_quick_transport_error() {
    let server = Sshd::start();
    let mut t = target(&server);
    t.port = Some(sshd::free_port());
    let start = Instant::now();
    let e = connect_err(&server, &t, &options(&server));
    assert_eq!(e.kind, ErrorKind::Transport, "{e}");
    assert_eq!(e.kind.exit_code(), 7);
    one_line(&e);
    assert!(
        e.message
            .contains(&format!("127.0.0.1:{}", t.port.unwrap())),
        "{e}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn silent_server_times_out_as_transport_error() {
    let server = Sshd::start();
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept and hold connections, never saying a word.
    let holder = std::thread::spawn(move || {
        let mut held = Vec::new();
        if let Ok((stream, _)) = listener.accept() {
            held.push(stream);
            std::thread::sleep(Duration::from_secs(12));
        }
    });
    let mut t = target(&server);
    t.port = Some(port);
    let mut opts = options(&server);
    opts.timeout = Some(Duration::from_secs(2));
    let start = Instant::now();
    let e = connect_err(&server, &t, &opts);
    let elapsed = start.elapsed();
    assert_eq!(e.kind, ErrorKind::Transport, "{e}");
    one_line(&e);
    assert!(e.message.contains("timed out"), "{e}");
    assert!(e.message.contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    assert!(
        elapsed >= Duration::from_millis(1500),
        "returned before the timeout: {elapsed:?}"
    );
    drop(holder);
}

#[test]
fn sftp_only_account_still_allows_sftp() {
    let server = Sshd::builder().force_sftp().sftp_umask(0o000).start();
    let conn = connect_ok(&server, &options(&server));
    assert_sftp_works(&conn);
    // The umask option reaches the SFTP server: 0666 stays 0666.
    let path = server.scratch().join("made-over-sftp");
    let sftp = conn.session.sftp().expect("sftp");
    drop(
        sftp.open_mode(
            &path,
            ssh2::OpenFlags::WRITE | ssh2::OpenFlags::CREATE,
            0o666,
            ssh2::OpenType::File,
        )
        .expect("create"),
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o666
    );
    // No shell: a command gets the SFTP server instead of running.
    let mut channel = conn.session.channel_session().expect("channel");
    channel.exec("echo shell-ran").expect("exec request");
    let mut out = Vec::new();
    let _ = std::io::Read::read_to_end(&mut channel, &mut out);
    assert!(!String::from_utf8_lossy(&out).contains("shell-ran"));
}

#[test]
fn server_that_dies_after_connect_gives_errors_not_hangs() {
    let mut server = Sshd::start();
    let mut opts = options(&server);
    opts.timeout = Some(Duration::from_secs(3));
    let conn = connect_ok(&server, &opts);
    let sftp = conn.session.sftp().expect("sftp");
    server.kill();
    let start = Instant::now();
    assert!(sftp.stat(Path::new("/")).is_err());
    assert!(start.elapsed() < Duration::from_secs(10));
}

/// Run by `passphrase_is_asked_on_a_terminal` inside a pseudo-terminal (`script`); does
/// nothing when run on its own.
#[test]
#[ignore = "driven by passphrase_is_asked_on_a_terminal"]
fn terminal_child() {
    let (Some(home), Some(agent), Some(port)) = (
        std::env::var_os("BATON_TEST_SSH_HOME"),
        std::env::var_os("BATON_TEST_SSH_AGENT"),
        std::env::var("BATON_TEST_SSH_PORT")
            .ok()
            .and_then(|p| p.parse::<u16>().ok()),
    ) else {
        return;
    };
    let t = SshTarget {
        host: "testbox".to_string(),
        user: None,
        port: Some(port),
        jump: None,
    };
    let opts = ConnectOptions {
        accept_new_host_key: false,
        timeout: Some(Duration::from_secs(20)),
        home: Some(home.into()),
        agent_socket: Some(agent.into()),
        // What every command passes: the terminal prompt (present: this runs on one).
        key_passphrase: baton::commands::prompts::key_passphrase_prompt(),
    };
    match connect(&t, &opts) {
        Ok(conn) => {
            assert_sftp_works(&conn);
            println!("RESULT: ok");
        }
        Err(e) => println!("RESULT: err {e}"),
    }
}

#[test]
fn passphrase_is_asked_on_a_terminal() {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    use std::sync::{Arc, Mutex};

    assert!(
        Path::new("/usr/bin/script").exists(),
        "this test needs /usr/bin/script (util-linux) to make a pseudo-terminal"
    );
    let server = Sshd::builder().passphrase("right one").start();
    let exe = std::env::current_exe().unwrap();
    let cmd = format!(
        "'{}' --exact ssh_connect::terminal_child --ignored --nocapture --test-threads=1",
        exe.display()
    );
    let mut child = Command::new("/usr/bin/script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("BATON_TEST_SSH_HOME", server.home())
        .env("BATON_TEST_SSH_AGENT", server.agent_socket())
        .env("BATON_TEST_SSH_PORT", server.port().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run script");
    let output = Arc::new(Mutex::new(String::new()));
    let mut stdout = child.stdout.take().unwrap();
    let sink = Arc::clone(&output);
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let wait_for = |needle: &str, count: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = output.lock().unwrap().clone();
            if text.matches(needle).count() >= count {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} (x{count}) in terminal output:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut stdin = child.stdin.take().unwrap();
    let prompt = format!("Enter passphrase for key {}:", server.user_key().display());
    // Let rpassword switch the terminal to no-echo after printing the prompt.
    let pause = || std::thread::sleep(Duration::from_millis(200));
    wait_for(&prompt, 1);
    pause();
    stdin.write_all(b"not it\r").unwrap();
    stdin.flush().unwrap();
    wait_for("wrong passphrase for key", 1);
    wait_for(&prompt, 2);
    pause();
    stdin.write_all(b"right one\r").unwrap();
    stdin.flush().unwrap();
    wait_for("RESULT:", 1);
    drop(stdin);
    let _ = child.wait();
    let _ = reader.join();
    let text = output.lock().unwrap().clone();
    assert!(text.contains("RESULT: ok"), "terminal session:\n{text}");
}

#[test]
fn stalled_server_surfaces_as_a_timeout() {
    let server = Sshd::start();
    let mut opts = options(&server);
    opts.timeout = Some(Duration::from_secs(2));
    let conn = connect_ok(&server, &opts);
    let sftp = conn.session.sftp().expect("sftp");
    server.freeze();
    let start = Instant::now();
    let result = sftp.stat(Path::new("/"));
    let elapsed = start.elapsed();
    server.resume();
    eprintln!(
        "stat on a frozen server: {:?} after {elapsed:?}",
        result.as_ref().err()
    );
    assert!(result.is_err());
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
}

#[test]
fn match_blocks_are_refused_only_where_they_would_be_misread() {
    let server = Sshd::start();
    let config = std::fs::read_to_string(server.config_path()).unwrap();
    // After an unrelated Host block: harmless for testbox.
    std::fs::write(
        server.config_path(),
        format!("{config}\nHost elsewhere\n  User x\nMatch host elsewhere\n  User y\n"),
    )
    .unwrap();
    assert_sftp_works(&connect_ok(&server, &options(&server)));
    // Inside the testbox block: its lines would be misread as testbox's.
    std::fs::write(
        server.config_path(),
        format!("{config}Match exec true\n  User nobody\n"),
    )
    .unwrap();
    let e = connect_err(&server, &target(&server), &options(&server));
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
    assert!(e.message.contains("Match"), "{e}");
}

/// The `KEYTYPE BASE64` part of the server's known_hosts line.
pub(crate) fn host_key_fields(server: &Sshd) -> String {
    let mut fields = server.host_key_line().split_whitespace().skip(1);
    format!(
        "{} {}",
        fields.next().expect("key type"),
        fields.next().expect("key")
    )
}

/// `line` with its host name hashed by `ssh-keygen -H` (`|1|salt|hmac ...`).
fn hashed_line(line: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kh");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let out = std::process::Command::new("ssh-keygen")
        .arg("-H")
        .arg("-f")
        .arg(&file)
        .output()
        .expect("ssh-keygen -H");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hashed = std::fs::read_to_string(&file).unwrap();
    assert!(hashed.starts_with("|1|"), "{hashed}");
    hashed.trim_end().to_string()
}

/// `@revoked` was ignored: a revoked key beside a plain line for it connected, and a
/// revoked key alone was "unknown" and recorded by accept-new. OpenSSH refuses both.
#[test]
fn revoked_host_key_is_always_refused() {
    let server = Sshd::start();
    let plain = server.host_key_line().to_string();
    let revoked = format!("@revoked {plain}");
    let hashed_revoked = format!("@revoked {}", hashed_line(&plain));
    let elsewhere = format!("@revoked other.example {}", host_key_fields(&server));
    for known in [
        format!("{plain}\n{revoked}\n"),
        format!("{revoked}\n{plain}\n"),
        format!("{revoked}\n"),
        format!("{hashed_revoked}\n{plain}\n"),
        format!("# comment\n{elsewhere}\n{plain}\n"),
    ] {
        server.write_known_hosts(&known);
        for accept_new in [false, true] {
            let mut opts = options(&server);
            opts.accept_new_host_key = accept_new;
            let e = connect_err(&server, &target(&server), &opts);
            assert_eq!(e.kind, ErrorKind::Security, "{known}: {e}");
            assert_eq!(e.kind.exit_code(), 6);
            one_line(&e);
            assert!(e.message.contains("REVOKED"), "{e}");
            assert!(
                e.message
                    .contains(&server.known_hosts_path().display().to_string()),
                "{e}"
            );
            assert_eq!(
                std::fs::read_to_string(server.known_hosts_path()).unwrap(),
                known,
                "known_hosts was changed"
            );
        }
    }
    // A revoked line for another key leaves this one trusted.
    server.write_known_hosts(&format!(
        "@revoked [127.0.0.1]:{} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n{plain}\n",
        server.port()
    ));
    assert_sftp_works(&connect_ok(&server, &options(&server)));
}

/// `HostKeyAlias` was ignored: the key was looked up under the real host and port.
/// It is the name known_hosts uses, for lookups and for accept-new.
#[test]
fn host_key_alias_is_the_known_hosts_name() {
    let server = Sshd::builder().known_hosts(KnownHostsMode::Empty).start();
    let config = std::fs::read_to_string(server.config_path()).unwrap();
    std::fs::write(
        server.config_path(),
        format!("{config}  HostKeyAlias box.alias\n"),
    )
    .unwrap();
    let fields = host_key_fields(&server);

    // Under the alias: trusted, plain or hashed.
    for line in [
        format!("box.alias {fields}"),
        hashed_line(&format!("box.alias {fields}")),
    ] {
        server.write_known_hosts(&format!("{line}\n"));
        assert_sftp_works(&connect_ok(&server, &options(&server)));
    }
    // Under the real name only: unknown, as for OpenSSH.
    server.write_known_hosts(&format!("{}\n", server.host_key_line()));
    let e = connect_err(&server, &target(&server), &options(&server));
    assert_eq!(e.kind, ErrorKind::Security, "{e}");
    assert!(e.message.contains("box.alias is not known"), "{e}");
    // A different key under the alias: changed.
    server.write_known_hosts(
        "box.alias ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n",
    );
    let e = connect_err(&server, &target(&server), &options(&server));
    assert!(e.message.contains("CHANGED"), "{e}");

    // accept-new records it under the alias, and OpenSSH finds it there.
    server.write_known_hosts("");
    let mut opts = options(&server);
    opts.accept_new_host_key = true;
    assert_sftp_works(&connect_ok(&server, &opts));
    let recorded = std::fs::read_to_string(server.known_hosts_path()).unwrap();
    assert_eq!(recorded, format!("box.alias {fields}\n"));
    assert_sftp_works(&connect_ok(&server, &options(&server)));
    let out = std::process::Command::new("ssh-keygen")
        .args(["-F", "box.alias", "-f"])
        .arg(server.known_hosts_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ssh-keygen -F box.alias finds nothing"
    );

    // An alias that cannot be a known_hosts name is a usage error.
    std::fs::write(
        server.config_path(),
        format!("{config}  HostKeyAlias @revoked\n"),
    )
    .unwrap();
    let e = connect_err(&server, &target(&server), &options(&server));
    assert_eq!(e.kind, ErrorKind::Usage, "{e}");
}
