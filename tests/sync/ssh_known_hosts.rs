//! known_hosts files as OpenSSH reads them (issue 28, "Secrets and trust"), against the
//! real sshd: `UserKnownHostsFile` and `GlobalKnownHostsFile` from the ssh config, several
//! files an option, quoted names, `~`, `%` tokens and `${VAR}`, `none`, the defaults
//! (`~/.ssh/known_hosts2` and `/etc/ssh/ssh_known_hosts` too); a key known only from a
//! global file is trusted, an `@revoked` line in any of them refuses (exit 6), a missing
//! file is no file, and a line longer than libssh2's 4 KiB line buffer loads.
//!
//! Before: only the user files were read, `UserKnownHostsFile` lost its quoted and `%`
//! names (looked up under the literal text, found missing, skipped with their `@revoked`
//! lines), and one long line made the whole file unreadable.

use crate::ssh_connect::{
    assert_sftp_works, connect_err, connect_ok, host_key_fields, one_line, options, target,
};
use crate::sshd::{KnownHostsMode, Sshd};

use std::fs;
use std::path::Path;

use baton::error::ErrorKind;

/// The client config with its `UserKnownHostsFile` line replaced by `lines` (each
/// indented into the host block).
fn configure(server: &Sshd, lines: &[&str]) {
    let config = fs::read_to_string(server.config_path()).unwrap();
    let mut out: String = config
        .lines()
        .filter(|l| !l.trim_start().starts_with("UserKnownHostsFile"))
        .map(|l| format!("{l}\n"))
        .collect();
    for line in lines {
        out.push_str(&format!("  {line}\n"));
    }
    fs::write(server.config_path(), out).unwrap();
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A refusal for the revoked key: exit 6, naming the file and line.
fn assert_revoked_in(server: &Sshd, file: &Path, line: usize) {
    for accept_new in [false, true] {
        let mut opts = options(server);
        opts.accept_new_host_key = accept_new;
        let e = connect_err(server, &target(server), &opts);
        assert_eq!(e.kind, ErrorKind::Security, "{e}");
        assert_eq!(e.kind.exit_code(), 6);
        one_line(&e);
        assert!(e.message.contains("REVOKED"), "{e}");
        assert!(
            e.message.contains(&format!("{}:{line}", file.display())),
            "{e}"
        );
    }
}

#[test]
fn a_host_key_only_in_a_global_known_hosts_file_is_trusted() {
    let server = Sshd::builder().known_hosts(KnownHostsMode::Empty).start();
    let global = server.scratch().join("global_known_hosts");
    let absent = server.scratch().join("absent");
    configure(
        &server,
        &[
            &format!("UserKnownHostsFile {}", server.known_hosts_path().display()),
            &format!(
                "GlobalKnownHostsFile {} {}",
                absent.display(),
                global.display()
            ),
        ],
    );
    write(&global, &format!("{}\n", server.host_key_line()));
    assert_sftp_works(&connect_ok(&server, &options(&server)));
    // Nothing recorded in the user file: the key was known.
    assert_eq!(fs::read_to_string(server.known_hosts_path()).unwrap(), "");

    // No user file at all (`none`): the global one still answers.
    configure(
        &server,
        &[
            "UserKnownHostsFile none",
            &format!("GlobalKnownHostsFile {}", global.display()),
        ],
    );
    assert_sftp_works(&connect_ok(&server, &options(&server)));

    // `GlobalKnownHostsFile none`: unknown again.
    configure(
        &server,
        &[
            &format!("UserKnownHostsFile {}", server.known_hosts_path().display()),
            "GlobalKnownHostsFile none",
        ],
    );
    let e = connect_err(&server, &target(&server), &options(&server));
    assert!(e.message.contains("is not known"), "{e}");
}

#[test]
fn revoked_in_a_global_known_hosts_file_is_refused() {
    let server = Sshd::start();
    let global = server.scratch().join("ssh_known_hosts");
    configure(
        &server,
        &[
            &format!("UserKnownHostsFile {}", server.known_hosts_path().display()),
            &format!("GlobalKnownHostsFile {}", global.display()),
        ],
    );
    // The user file trusts the key; the global file revokes it.
    write(
        &global,
        &format!("# site-wide\n@revoked {}\n", server.host_key_line()),
    );
    assert_revoked_in(&server, &global, 2);
    // A missing global file is no file (as for OpenSSH).
    fs::remove_file(&global).unwrap();
    assert_sftp_works(&connect_ok(&server, &options(&server)));
}

#[test]
fn every_user_known_hosts_file_is_read_with_quotes_tokens_and_variables() {
    let server = Sshd::builder().known_hosts(KnownHostsMode::Empty).start();
    let no_global = format!(
        "GlobalKnownHostsFile {}",
        server.scratch().join("none").display()
    );
    // A quoted name with a space, %d (home), %h (the host) and %p (the port), and a
    // ${HOME} one: three files, new keys go to the first.
    configure(
        &server,
        &[
            "UserKnownHostsFile ~/.ssh/known_hosts \"%d/.ssh/known hosts/%h-%p\" ${HOME}/.ssh/third",
            &no_global,
        ],
    );
    let second = server
        .home()
        .join(".ssh/known hosts")
        .join(format!("127.0.0.1-{}", server.port()));
    let third = server.home().join(".ssh/third");
    let plain = server.host_key_line().to_string();
    for file in [&second, &third] {
        write(&second, "");
        write(&third, "");
        write(file, &format!("{plain}\n"));
        assert_sftp_works(&connect_ok(&server, &options(&server)));
        assert_eq!(fs::read_to_string(server.known_hosts_path()).unwrap(), "");
    }
    // Revoked in the second file, trusted in the first: refused.
    write(&third, "");
    server.write_known_hosts(&format!("{plain}\n"));
    write(&second, &format!("@revoked {plain}\n"));
    assert_revoked_in(&server, &second, 1);
    assert_eq!(
        fs::read_to_string(server.known_hosts_path()).unwrap(),
        format!("{plain}\n"),
        "known_hosts was changed"
    );
}

#[test]
fn the_default_files_include_known_hosts2() {
    let server = Sshd::builder().known_hosts(KnownHostsMode::Missing).start();
    configure(&server, &[]);
    let second = server.home().join(".ssh/known_hosts2");
    write(&second, &format!("{}\n", server.host_key_line()));
    assert_sftp_works(&connect_ok(&server, &options(&server)));
    write(&second, &format!("@revoked {}\n", server.host_key_line()));
    server.write_known_hosts(&format!("{}\n", server.host_key_line()));
    assert_revoked_in(&server, &second, 1);
}

#[test]
fn markers_and_long_lines_do_not_break_loading() {
    let server = Sshd::start();
    let plain = server.host_key_line().to_string();
    let fields = host_key_fields(&server);
    // OpenSSH reads lines of any length; libssh2's file reader splits them at 4 KiB
    // and then rejected the whole file.
    let many: Vec<String> = (0..400).map(|i| format!("h{i}.example.com")).collect();
    let long = format!("{} {fields}", many.join(","));
    assert!(long.len() > 4096);
    server.write_known_hosts(&format!(
        "@cert-authority *.example.com {fields}\n{long}\n{plain}\n"
    ));
    assert_sftp_works(&connect_ok(&server, &options(&server)));
    // A CA line is no trust in a plain host key.
    server.write_known_hosts(&format!("@cert-authority * {fields}\n"));
    let e = connect_err(&server, &target(&server), &options(&server));
    assert!(e.message.contains("is not known"), "{e}");
    // `@revoked` after a long line is still seen.
    server.write_known_hosts(&format!("{long}\n{plain}\n@revoked {plain}\n"));
    assert_revoked_in(&server, &server.known_hosts_path(), 3);
}
