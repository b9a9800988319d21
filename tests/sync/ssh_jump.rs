//! Reaching a server through another (issue 32): `ProxyJump` and `ProxyCommand` of
//! `~/.ssh/config` and a target URL's `?jump=`, against two real sshd's on loopback: an
//! outer one (the bastion) and an inner one reached through it. Host keys are checked on
//! every hop; the route is shown by the bastion's own log and by what breaks without it.

use crate::common;
use crate::sshd;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use baton::error::ErrorKind;
use baton::transport::ssh::connect::{ConnectOptions, SshTarget, Via, connect};
use common::{Env, Via as _, random_bytes, s};
use sshd::Sshd;

/// A bastion and the host behind it; the client is the bastion's HOME, its config and
/// known_hosts rewritten to name both (`Host outer`, `Host inner`).
struct Bastion {
    outer: Sshd,
    inner: Sshd,
}

impl Bastion {
    fn start() -> Bastion {
        Bastion {
            outer: Sshd::start(),
            inner: Sshd::start(),
        }
    }

    fn home(&self) -> PathBuf {
        self.outer.home()
    }

    /// `~/.ssh/config` with both hosts; `inner_lines` go into `Host inner`.
    fn config(&self, inner_lines: &str) {
        let kh = self.outer.known_hosts_path();
        let block = |name: &str, server: &Sshd, extra: &str| {
            format!(
                "Host {name}\n  HostName 127.0.0.1\n  Port {}\n  User {}\n  IdentityFile {}\n  UserKnownHostsFile {}\n  BatchMode yes\n{extra}",
                server.port(),
                server.user(),
                server.user_key().display(),
                kh.display(),
            )
        };
        let text = block("outer", &self.outer, "") + &block("inner", &self.inner, inner_lines);
        fs::write(self.outer.config_path(), text).expect("write ssh config");
    }

    /// known_hosts knowing the outer and/or the inner host's key.
    fn known(&self, outer: bool, inner: bool) {
        let mut text = String::new();
        for (yes, server) in [(outer, &self.outer), (inner, &self.inner)] {
            if yes {
                text.push_str(server.host_key_line());
                text.push('\n');
            }
        }
        self.outer.write_known_hosts(&text);
    }

    fn options(&self) -> ConnectOptions {
        ConnectOptions {
            timeout: Some(Duration::from_secs(10)),
            home: Some(self.home()),
            agent_socket: Some(self.outer.agent_socket()),
            ..Default::default()
        }
    }

    /// How often the bastion let us in so far.
    fn outer_logins(&self) -> usize {
        self.outer.log().matches("Accepted publickey").count()
    }

    fn logs(&self) -> String {
        format!(
            "\nouter sshd log:\n{}\ninner sshd log:\n{}",
            self.outer.log(),
            self.inner.log()
        )
    }
}

fn inner() -> SshTarget {
    SshTarget {
        host: "inner".to_string(),
        user: None,
        port: None,
        jump: None,
    }
}

#[test]
fn proxy_jump_goes_through_the_bastion_and_checks_both_host_keys() {
    let b = Bastion::start();
    b.config("  ProxyJump outer\n");
    b.known(true, true);
    let before = b.outer_logins();
    let conn = connect(&inner(), &b.options()).unwrap_or_else(|e| panic!("{e}{}", b.logs()));
    assert!(matches!(conn.via, Via::Jump { .. }));
    assert_eq!(conn.port, b.inner.port());
    // Real work over the relayed link: SFTP, and a file larger than any one buffer.
    let sftp = conn.session.sftp().expect("sftp");
    let path = b.inner.scratch().join("relayed");
    let data = random_bytes(7, 3 << 20);
    std::io::Write::write_all(&mut sftp.create(&path).expect("create"), &data).expect("write");
    assert_eq!(fs::read(&path).expect("read back"), data);
    drop(sftp);
    drop(conn);
    assert_eq!(b.outer_logins(), before + 1, "{}", b.logs());

    // Each hop's host key is checked under its own name.
    for (knows_outer, knows_inner, port) in
        [(false, true, b.outer.port()), (true, false, b.inner.port())]
    {
        b.known(knows_outer, knows_inner);
        let err = connect(&inner(), &b.options()).expect_err("an unknown host key");
        assert_eq!(err.kind, ErrorKind::Security, "{err}");
        assert!(
            err.to_string().contains(&format!("[127.0.0.1]:{port}")),
            "{err}"
        );
    }
    // Accepting new keys records both.
    b.known(false, false);
    let opts = ConnectOptions {
        accept_new_host_key: true,
        ..b.options()
    };
    connect(&inner(), &opts).unwrap_or_else(|e| panic!("{e}{}", b.logs()));
    let known = fs::read_to_string(b.outer.known_hosts_path()).expect("known_hosts");
    for server in [&b.outer, &b.inner] {
        assert!(known.contains(server.host_key_line()), "{known}");
    }
}

#[test]
fn without_the_bastion_the_inner_host_is_not_reached() {
    let mut b = Bastion::start();
    b.config("  ProxyJump outer\n");
    b.known(true, true);
    b.outer.stop();
    let err = connect(&inner(), &b.options()).expect_err("the bastion is down");
    assert_eq!(err.kind, ErrorKind::Transport, "{err}");
    assert!(
        err.to_string().contains(&b.outer.port().to_string()),
        "{err}"
    );
}

#[test]
fn a_jump_host_list_and_the_targets_own_jump_override_the_config() {
    let b = Bastion::start();
    // The config would go through a command that fails at once.
    b.config("  ProxyCommand false\n");
    b.known(true, true);
    let err = connect(&inner(), &b.options()).expect_err("ProxyCommand false");
    assert_eq!(err.kind, ErrorKind::Transport, "{err}");
    assert!(
        err.to_string().contains("ProxyCommand `false` ended"),
        "{err}"
    );

    let through = |jump: &str| SshTarget {
        jump: Some(baton::transport::url::parse_hops(jump).expect("hops")),
        ..inner()
    };
    let before = b.outer_logins();
    connect(&through("outer"), &b.options()).unwrap_or_else(|e| panic!("{e}{}", b.logs()));
    // Two hops, the bastion twice: the second reached through the first.
    let conn = connect(&through("outer,outer"), &b.options())
        .unwrap_or_else(|e| panic!("{e}{}", b.logs()));
    assert!(matches!(conn.via, Via::Jump { .. }));
    drop(conn);
    assert_eq!(b.outer_logins(), before + 3, "{}", b.logs());
    // `none`: directly, whatever the config says.
    let conn = connect(&through("none"), &b.options()).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(conn.via, Via::Direct));
}

#[test]
fn push_and_clone_through_a_url_jump() {
    let b = Bastion::start();
    b.config("  ProxyCommand false\n");
    b.known(true, true);
    let env = Env::new();
    env.init();
    env.write_tree(
        "work",
        &[
            ("handoff.md", b"# through the bastion\n".as_slice()),
            ("data/big.bin", &random_bytes(3, 2 << 20)),
        ],
    );
    let id = env.save("work", &["--summary", "jump"]);
    let remote = b.inner.scratch().join("remote");
    let url = format!("ssh://inner{}?jump=outer", s(&remote));
    b.outer.json_ok(&env, &["target", "add", "r", &url]);
    let doc = b.outer.json_ok(&env, &["push", "r"]);
    assert_eq!(doc["report"]["created_remote"], true, "{doc}");
    // Without the URL's jump the config's failing command is used: exit 7, named.
    let direct = format!("ssh://inner{}", s(&remote));
    let err = b.outer.json_err(&Env::new(), &["clone", &direct], 7);
    assert!(
        err["message"]
            .as_str()
            .unwrap_or("")
            .contains("ProxyCommand"),
        "{err}"
    );

    let other = Env::new();
    let doc = b.outer.json_ok(&other, &["clone", &url]);
    assert_eq!(doc["report"]["outcome"], "initial", "{doc}");
    let shown = b.outer.json_ok(&other, &["show", "current"]);
    assert!(shown.to_string().contains(&id), "{shown}");
    b.outer.json_ok(&other, &["verify"]);
    // The clone remembers the route with its origin.
    let targets = b.outer.json_ok(&other, &["target", "list"]);
    assert!(targets.to_string().contains("?jump=outer"), "{targets}");
}

#[test]
fn proxy_command_runs_with_its_tokens_and_carries_the_session() {
    let b = Bastion::start();
    let config = b.outer.config_path();
    b.config(&format!(
        "  ProxyCommand ssh -F {} -o BatchMode=yes -W %h:%p outer\n",
        config.display()
    ));
    b.known(true, true);
    let conn = connect(&inner(), &b.options()).unwrap_or_else(|e| panic!("{e}{}", b.logs()));
    assert!(matches!(conn.via, Via::Command(_)));
    let sftp = conn.session.sftp().expect("sftp");
    assert!(sftp.stat(&b.inner.scratch()).expect("stat").is_dir());
    drop(sftp);
    drop(conn);
    assert!(b.outer.log().contains("Accepted publickey"), "{}", b.logs());
}

#[test]
fn jump_loops_and_two_routes_are_refused() {
    let b = Bastion::start();
    b.known(true, true);
    b.config("  ProxyJump inner\n");
    let err = connect(&inner(), &b.options()).expect_err("a loop");
    assert_eq!(err.kind, ErrorKind::Usage, "{err}");
    assert!(err.to_string().contains("more than 8 jump hosts"), "{err}");

    b.config("  ProxyJump outer\n  ProxyCommand nc %h %p\n");
    let err = connect(&inner(), &b.options()).expect_err("two routes");
    assert_eq!(err.kind, ErrorKind::Usage, "{err}");
    assert!(
        err.to_string().contains("both ProxyJump and ProxyCommand"),
        "{err}"
    );

    b.config("  ProxyJump -oProxyCommand=x\n");
    let err = connect(&inner(), &b.options()).expect_err("a bad hop");
    assert_eq!(err.kind, ErrorKind::Usage, "{err}");
}
