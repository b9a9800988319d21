//! A real OpenSSH `sshd` on 127.0.0.1 for integration tests, with a matching client HOME
//! (`~/.ssh/config` with a host alias, `known_hosts`, a user key and optionally an
//! ssh-agent). Every instance has its own free port and temporary directories, so tests
//! may run in parallel; everything it started is killed on drop.
//!
//! ```ignore
//! let server = Sshd::builder().known_hosts(KnownHostsMode::Empty).start();
//! // connect to server.alias() with HOME = server.home()
//! ```
#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";

/// What the client's `known_hosts` says about the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnownHostsMode {
    /// `[127.0.0.1]:PORT ssh-ed25519 AAAA...`: the server is known.
    Correct,
    /// The same entry, hashed with `ssh-keygen -H` (`|1|salt|hash ssh-ed25519 ...`).
    Hashed,
    /// An empty file: the server is unknown.
    Empty,
    /// No file at all (nor anything else in `~/.ssh` but the config).
    Missing,
    /// An entry for the server with a different ed25519 key: the host key "changed".
    WrongKey,
}

/// Options for [`Sshd`]; start with [`Sshd::builder`].
#[derive(Clone, Debug)]
pub struct SshdBuilder {
    known_hosts: KnownHostsMode,
    passphrase: Option<String>,
    agent: bool,
    identity_in_config: bool,
    force_sftp: bool,
    sftp_umask: Option<u32>,
    extra_sshd_config: String,
}

impl SshdBuilder {
    pub fn known_hosts(mut self, mode: KnownHostsMode) -> Self {
        self.known_hosts = mode;
        self
    }

    /// Protect the user key with this passphrase.
    pub fn passphrase(mut self, passphrase: &str) -> Self {
        self.passphrase = Some(passphrase.to_string());
        self
    }

    /// Start an ssh-agent holding the user key; its socket is in [`Sshd::agent_socket`]
    /// and [`Sshd::env`].
    pub fn agent(mut self) -> Self {
        self.agent = true;
        self
    }

    /// Leave `IdentityFile` out of the client config (the user key is never in a default
    /// location such as `~/.ssh/id_ed25519`, so only the agent can authenticate).
    pub fn no_identity_in_config(mut self) -> Self {
        self.identity_in_config = false;
        self
    }

    /// Restrict the test user to SFTP: `Match User <user>` + `ForceCommand internal-sftp`.
    pub fn force_sftp(mut self) -> Self {
        self.force_sftp = true;
        self
    }

    /// Run the SFTP server with this umask (`internal-sftp -u 000`).
    pub fn sftp_umask(mut self, umask: u32) -> Self {
        self.sftp_umask = Some(umask);
        self
    }

    /// Extra global lines for `sshd_config` (placed before any `Match` block).
    pub fn sshd_config(mut self, lines: &str) -> Self {
        self.extra_sshd_config.push_str(lines);
        self.extra_sshd_config.push('\n');
        self
    }

    pub fn start(self) -> Sshd {
        Sshd::start_with(self)
    }
}

/// A running sshd and the client-side world that reaches it.
pub struct Sshd {
    dir: tempfile::TempDir,
    child: Option<Child>,
    agent: Option<Child>,
    agent_socket: PathBuf,
    port: u16,
    user: String,
    host_key_line: String,
    user_key: PathBuf,
}

impl Sshd {
    pub fn builder() -> SshdBuilder {
        SshdBuilder {
            known_hosts: KnownHostsMode::Correct,
            passphrase: None,
            agent: false,
            identity_in_config: true,
            force_sftp: false,
            sftp_umask: None,
            extra_sshd_config: String::new(),
        }
    }

    /// A server whose host key the client knows, with key-file authentication.
    pub fn start() -> Sshd {
        Self::builder().start()
    }

    fn start_with(opts: SshdBuilder) -> Sshd {
        assert!(
            Path::new(SSHD).is_file(),
            "{SSHD} is missing: install openssh-server (.ci/run does)"
        );
        // sshd refuses to start as root without its privilege-separation directory.
        if !Path::new("/run/sshd").is_dir() {
            let _ = fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create("/run/sshd");
        }

        let dir = tempfile::Builder::new()
            .prefix("baton-sshd-")
            .tempdir()
            .expect("tempdir");
        let root = dir.path().to_path_buf();
        let server_dir = root.join("server");
        let keys_dir = root.join("keys");
        let home = root.join("home");
        let ssh_dir = home.join(".ssh");
        for d in [&server_dir, &keys_dir, &ssh_dir] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d)
                .expect("mkdir");
        }

        let user = current_user();
        let host_key = server_dir.join("ssh_host_ed25519_key");
        keygen(&host_key, "baton-test-host");
        let user_key = keys_dir.join("id_user");
        keygen(&user_key, "baton-test-user");
        let user_pub = read(&user_key.with_extension("pub"));
        let authorized_keys = server_dir.join("authorized_keys");
        fs::write(&authorized_keys, &user_pub).expect("write authorized_keys");

        let agent_socket = root.join("agent.sock");
        let agent = if opts.agent {
            Some(start_agent(&agent_socket, &user_key))
        } else {
            None
        };
        if let Some(pass) = &opts.passphrase {
            // After ssh-add, so that the agent holds the key without asking for it.
            run(Command::new("ssh-keygen")
                .args(["-q", "-p", "-P", "", "-N", pass, "-f"])
                .arg(&user_key));
        }

        let host_pub = read(&host_key.with_extension("pub"));
        let mut host_pub_fields = host_pub.split_whitespace();
        let key_type = host_pub_fields.next().expect("host key type").to_string();
        let key_b64 = host_pub_fields.next().expect("host key").to_string();

        let mut last_log = String::new();
        for _attempt in 0..5 {
            let port = free_port();
            let config = server_dir.join("sshd_config");
            fs::write(
                &config,
                sshd_config(&opts, port, &server_dir, &host_key, &authorized_keys, &user),
            )
            .expect("write sshd_config");
            let log_path = server_dir.join("sshd.log");
            let log = fs::File::create(&log_path).expect("create sshd.log");
            let mut child = Command::new(SSHD)
                .arg("-D")
                .arg("-e")
                .arg("-f")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(log))
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {SSHD}: {e}"));
            if wait_listening(&mut child, &log_path, port) {
                let host_key_line = format!("[127.0.0.1]:{port} {key_type} {key_b64}");
                let sshd = Sshd {
                    dir,
                    child: Some(child),
                    agent,
                    agent_socket,
                    port,
                    user,
                    host_key_line,
                    user_key,
                };
                sshd.write_client_home(&opts);
                return sshd;
            }
            let _ = child.kill();
            let _ = child.wait();
            last_log = fs::read_to_string(&log_path).unwrap_or_default();
            if !last_log.contains("Address already in use") {
                break;
            }
        }
        panic!("sshd did not start; its log:\n{last_log}");
    }

    fn write_client_home(&self, opts: &SshdBuilder) {
        let ssh_dir = self.home().join(".ssh");
        let known_hosts = ssh_dir.join("known_hosts");
        let mut config = format!(
            "Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  UserKnownHostsFile {kh}\n",
            alias = self.alias(),
            port = self.port,
            user = self.user,
            kh = known_hosts.display(),
        );
        if opts.identity_in_config {
            config.push_str(&format!("  IdentityFile {}\n", self.user_key.display()));
        }
        write_private(&ssh_dir.join("config"), config.as_bytes());

        match opts.known_hosts {
            KnownHostsMode::Missing => {}
            KnownHostsMode::Empty => write_private(&known_hosts, b""),
            KnownHostsMode::Correct => self.write_known_hosts(&format!("{}\n", self.host_key_line)),
            KnownHostsMode::Hashed => {
                self.write_known_hosts(&format!("{}\n", self.host_key_line));
                run(Command::new("ssh-keygen")
                    .arg("-q")
                    .arg("-H")
                    .arg("-f")
                    .arg(&known_hosts));
                let _ = fs::remove_file(ssh_dir.join("known_hosts.old"));
                let text = read(&known_hosts);
                assert!(
                    text.starts_with("|1|"),
                    "ssh-keygen -H did not hash: {text}"
                );
            }
            KnownHostsMode::WrongKey => {
                let other = self.dir.path().join("keys").join("other_host_key");
                keygen(&other, "impostor");
                let other_pub = read(&other.with_extension("pub"));
                let mut fields = other_pub.split_whitespace();
                let (t, k) = (fields.next().expect("type"), fields.next().expect("key"));
                self.write_known_hosts(&format!("[127.0.0.1]:{} {t} {k}\n", self.port));
            }
        }
    }

    /// Replace the client's known_hosts file with `text`.
    pub fn write_known_hosts(&self, text: &str) {
        write_private(&self.known_hosts_path(), text.as_bytes());
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The client's HOME (holds `.ssh/config` and `.ssh/known_hosts`).
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The host alias of the client config (`Host testbox`).
    pub fn alias(&self) -> &'static str {
        "testbox"
    }

    /// The account the tests log in as (the current user).
    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn known_hosts_path(&self) -> PathBuf {
        self.home().join(".ssh").join("known_hosts")
    }

    pub fn config_path(&self) -> PathBuf {
        self.home().join(".ssh").join("config")
    }

    /// The user's private key (authorized on the server).
    pub fn user_key(&self) -> &Path {
        &self.user_key
    }

    /// The correct known_hosts line for this server: `[127.0.0.1]:PORT ssh-ed25519 AAAA...`.
    pub fn host_key_line(&self) -> &str {
        &self.host_key_line
    }

    /// The agent socket, or a path where no agent listens when none was started: pass
    /// it rather than inherit the developer's own SSH_AUTH_SOCK.
    pub fn agent_socket(&self) -> PathBuf {
        self.agent_socket.clone()
    }

    pub fn has_agent(&self) -> bool {
        self.agent.is_some()
    }

    /// A scratch directory owned by this instance (removed on drop).
    pub fn scratch(&self) -> PathBuf {
        let path = self.dir.path().join("scratch");
        fs::create_dir_all(&path).expect("mkdir scratch");
        path
    }

    /// Environment for a child process that should reach this server: HOME and
    /// SSH_AUTH_SOCK (a dead path when no agent runs).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("HOME".to_string(), self.home().display().to_string()),
            (
                "SSH_AUTH_SOCK".to_string(),
                self.agent_socket.display().to_string(),
            ),
        ]
    }

    /// sshd's log (stderr) so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("server").join("sshd.log")).unwrap_or_default()
    }

    fn listener_pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// Stop accepting new connections (kill the listening sshd); sessions already open
    /// go on.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The server dies: SIGKILL the listener and every session process it forked.
    pub fn kill(&mut self) {
        if let Some(pid) = self.listener_pid() {
            let victims = descendants(pid);
            signal(pid, libc::SIGKILL);
            for p in victims {
                signal(p, libc::SIGKILL);
            }
        }
        self.stop();
    }

    /// The processes sshd forked for open sessions (per-connection sshd, internal-sftp).
    pub fn session_pids(&self) -> Vec<i32> {
        self.listener_pid().map(descendants).unwrap_or_default()
    }

    /// The server comes back after [`Sshd::kill`] or [`Sshd::stop`]: a new sshd with the
    /// same config, keys and port (so the client's config and known_hosts still fit).
    /// The previous log is kept as `sshd.log.1`.
    pub fn restart(&mut self) {
        self.kill();
        let server_dir = self.dir.path().join("server");
        let log_path = server_dir.join("sshd.log");
        let _ = fs::rename(&log_path, server_dir.join("sshd.log.1"));
        // The killed listener's port may linger briefly; sshd sets SO_REUSEADDR, so a
        // few quick retries cover it.
        for _attempt in 0..20 {
            let log = fs::File::create(&log_path).expect("create sshd.log");
            let mut child = Command::new(SSHD)
                .arg("-D")
                .arg("-e")
                .arg("-f")
                .arg(server_dir.join("sshd_config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(log))
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {SSHD}: {e}"));
            if wait_listening(&mut child, &log_path, self.port) {
                self.child = Some(child);
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "sshd did not restart on port {}; log:\n{}",
            self.port,
            self.log()
        );
    }

    /// The server stalls: SIGSTOP the session processes (the TCP connections stay open
    /// but nothing answers). Undo with [`Sshd::resume`].
    pub fn freeze(&self) {
        if let Some(pid) = self.listener_pid() {
            for p in descendants(pid) {
                signal(p, libc::SIGSTOP);
            }
        }
    }

    pub fn resume(&self) {
        if let Some(pid) = self.listener_pid() {
            for p in descendants(pid) {
                signal(p, libc::SIGCONT);
            }
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.resume();
        self.kill();
        if let Some(mut agent) = self.agent.take() {
            let _ = agent.kill();
            let _ = agent.wait();
        }
    }
}

fn sshd_config(
    opts: &SshdBuilder,
    port: u16,
    server_dir: &Path,
    host_key: &Path,
    authorized_keys: &Path,
    user: &str,
) -> String {
    let sftp = match opts.sftp_umask {
        Some(umask) => format!("internal-sftp -u {umask:03o}"),
        None => "internal-sftp".to_string(),
    };
    let mut config = format!(
        "ListenAddress 127.0.0.1\n\
         Port {port}\n\
         HostKey {host_key}\n\
         PidFile {pid}\n\
         AuthorizedKeysFile {authorized_keys}\n\
         StrictModes no\n\
         UsePAM no\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         PubkeyAuthentication yes\n\
         PermitRootLogin prohibit-password\n\
         Subsystem sftp {sftp}\n\
         LogLevel VERBOSE\n\
         MaxStartups 100\n",
        host_key = host_key.display(),
        pid = server_dir.join("sshd.pid").display(),
        authorized_keys = authorized_keys.display(),
    );
    config.push_str(&opts.extra_sshd_config);
    if opts.force_sftp {
        config.push_str(&format!("Match User {user}\n  ForceCommand {sftp}\n"));
    }
    config
}

/// Wait until sshd logs that it listens on `port` (its own log, so a port taken by
/// another test's server cannot fool us); false if it exited first.
fn wait_listening(child: &mut Child, log_path: &Path, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    let needle = format!("Server listening on 127.0.0.1 port {port}");
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        let log = fs::read_to_string(log_path).unwrap_or_default();
        if log.contains(&needle) && TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "sshd did not listen on port {port} within 20 s; log:\n{}",
        fs::read_to_string(log_path).unwrap_or_default()
    );
}

fn start_agent(socket: &Path, key: &Path) -> Child {
    let agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start ssh-agent (install openssh-client): {e}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "ssh-agent did not create {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    run(Command::new("ssh-add")
        .arg("-q")
        .arg(key)
        .env("SSH_AUTH_SOCK", socket));
    agent
}

/// A port that was free a moment ago (bind to port 0 and let the kernel choose).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

pub fn current_user() -> String {
    let out = Command::new("id").arg("-un").output().expect("run id -un");
    assert!(out.status.success(), "id -un failed");
    String::from_utf8(out.stdout)
        .expect("utf-8 user name")
        .trim()
        .to_string()
}

fn keygen(path: &Path, comment: &str) {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path));
}

fn run(cmd: &mut Command) {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn write_private(path: &Path, bytes: &[u8]) {
    let mut f = fs::File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    f.write_all(bytes).expect("write");
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).expect("chmod 600");
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) with a pid we started (or one of its children); no memory involved.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Every process descended from `pid`, found through /proc (sshd's per-connection
/// children call setsid, so a process-group kill would miss them).
fn descendants(pid: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            if let Some(ppid) = after
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse::<i32>().ok())
            {
                parents.push((p, ppid));
            }
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        for &(p, ppid) in &parents {
            if ppid == parent && !found.contains(&p) {
                found.push(p);
            }
        }
        i += 1;
    }
    found.remove(0);
    found
}

/// `baton` reaching this server: its HOME and agent socket; a failure shows sshd's log.
impl crate::common::Via for Sshd {
    fn cmd(&self, env: &crate::common::Env) -> Command {
        let mut cmd = env.cmd();
        cmd.envs(self.env());
        cmd
    }

    fn context(&self) -> String {
        format!("\nsshd log:\n{}", self.log())
    }
}
