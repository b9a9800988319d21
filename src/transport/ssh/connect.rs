//! Opening an authenticated SSH session: `~/.ssh/config` (through ssh2-config), TCP with
//! timeouts, host key verification against known_hosts (`host_keys`: accept-new on
//! request, never a changed or `@revoked` key, under `HostKeyAlias` when set), and
//! public-key authentication (every ssh-agent key, then key files, asking for a
//! passphrase only on a terminal).
//!
//! libssh2 reads neither the ssh config nor known_hosts by itself: everything here that
//! OpenSSH would do on its own is done explicitly, and its quirks (see the design notes)
//! are handled where they bite.

use std::fs;
use std::io::{BufReader, IsTerminal};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ssh2::{ErrorCode, Session};
use ssh2_config::{HostParams, ParseRule, SshConfig};

use crate::error::{Error, ErrorKind, Result};

mod host_keys;
mod revoked;

pub use host_keys::{fingerprint_sha256, known_hosts_name};
use host_keys::{known_key_types, load_known_hosts, prefer_host_key_types, verify_host_key};

/// Connect timeout when neither the caller nor `ConnectTimeout` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Key files tried when the config names no `IdentityFile` (as OpenSSH does).
const DEFAULT_KEY_FILES: [&str; 3] = ["id_ed25519", "id_ecdsa", "id_rsa"];

/// How many times a passphrase is asked for before giving up on a key.
const PASSPHRASE_TRIES: usize = 3;

// libssh2 error codes (include/libssh2.h) that the logic below tells apart.
const LIBSSH2_ERROR_SOCKET_SEND: i32 = -7;
const LIBSSH2_ERROR_TIMEOUT: i32 = -9;
const LIBSSH2_ERROR_SOCKET_DISCONNECT: i32 = -13;
const LIBSSH2_ERROR_FILE: i32 = -16;
const LIBSSH2_ERROR_SOCKET_TIMEOUT: i32 = -30;
const LIBSSH2_ERROR_SOCKET_RECV: i32 = -43;
const LIBSSH2_ERROR_BAD_SOCKET: i32 = -45;

/// Where to connect: a host (or `Host` alias of `~/.ssh/config`), with an optional user
/// and port that override the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshTarget {
    pub host: String,
    pub user: Option<String>,
    pub port: Option<u16>,
}

#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    /// Record an unknown host key instead of refusing it (StrictHostKeyChecking=accept-new).
    /// A changed key is refused whatever this says.
    pub accept_new_host_key: bool,
    /// Overrides `ConnectTimeout` from the config; the default is 30 s. Also the limit of
    /// every later blocking libssh2 call on the session.
    pub timeout: Option<Duration>,
    /// The HOME whose `.ssh` is read; `None` means `$HOME`.
    pub home: Option<PathBuf>,
    /// The ssh-agent socket; `None` means `IdentityAgent` from the config, else
    /// `$SSH_AUTH_SOCK`.
    pub agent_socket: Option<PathBuf>,
}

/// An authenticated session and what it was resolved to.
pub struct Connection {
    pub session: ssh2::Session,
    /// The host actually connected to (`HostName` of the config, else the target host).
    pub host: String,
    pub port: u16,
    pub user: String,
    /// `ServerAliveInterval`, when configured (set on the session with want_reply).
    pub keepalive_secs: Option<u32>,
    /// The timeout in force for connecting and for each blocking call on the session.
    pub timeout: Duration,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("keepalive_secs", &self.keepalive_secs)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// OpenSSH's default `ServerAliveCountMax`.
const SERVER_ALIVE_COUNT_MAX: u64 = 3;

/// Resolve `target` through the ssh config, connect, verify the host key and
/// authenticate. Errors: `Transport` (7) for anything on the way to the server (refused,
/// unreachable, timed out, handshake), `Security` (6) for host keys and authentication,
/// `Usage` (2) for an unreadable ssh config.
pub fn connect(target: &SshTarget, opts: &ConnectOptions) -> Result<Connection> {
    let res = resolve(target, opts)?;
    let stream = tcp_connect(&res.host, res.port, res.timeout)?;
    // A second descriptor of the socket, only to tell a closed link from a refused key
    // during authentication (libssh2 reports both as a failed USERAUTH).
    let link = stream.try_clone().ok();
    let where_ = host_port(&res.host, res.port);

    let mut session = Session::new().map_err(|e| {
        Error::other(format!("cannot create an SSH session: {}", e.message()))
            .with_hint("libssh2 could not initialize; this is a bug or an out-of-memory condition")
    })?;
    session.set_timeout(millis(res.timeout));
    session.set_tcp_stream(stream);

    let known_hosts = load_known_hosts(&session, &res.known_hosts_files)?;
    // `HostKeyAlias` replaces the host name (and port) in known_hosts, as in OpenSSH.
    let kh_name = match &res.host_key_alias {
        Some(alias) => alias.clone(),
        None => known_hosts_name(&res.host, res.port),
    };
    let known_types = known_key_types(&known_hosts, &kh_name);
    prefer_host_key_types(&session, &known_types)?;

    session.handshake().map_err(|e| {
        if is_timeout(&e) && session.banner().is_some() {
            // It did answer as an SSH server, then went silent mid-handshake: a stalled
            // link or server, not a wrong port.
            Error::new(
                ErrorKind::Transport,
                format!(
                    "timed out after {} in the SSH handshake with {where_}: the server stopped answering",
                    secs(res.timeout)
                ),
            )
            .with_hint("check the network and the server, then run the command again, or raise ConnectTimeout")
        } else if is_timeout(&e) {
            Error::new(
                ErrorKind::Transport,
                format!(
                    "timed out after {} waiting for the SSH server at {where_} to answer",
                    secs(res.timeout)
                ),
            )
            .with_hint("the port accepts connections but no SSH server answers; check host and port, or raise ConnectTimeout")
        } else {
            Error::new(ErrorKind::Transport, format!("SSH handshake with {where_} failed: {}", e.message()))
                .with_hint("check that this is an SSH server and that it is reachable")
        }
    })?;

    verify_host_key(&session, &known_hosts, &kh_name, &known_types, &res)?;
    drop(known_hosts);

    // libssh2 cannot keep a blocking session alive the OpenSSH way: with a keepalive
    // interval set, a wait that sees no data until the next keepalive is due fails as a
    // timeout, so one slow server reply (a long fsync) would end the transfer after
    // ServerAliveInterval - 1 seconds. ServerAliveInterval x ServerAliveCountMax (3) is
    // how long OpenSSH tolerates silence; that becomes the per-call timeout instead,
    // unless --timeout says otherwise.
    if let (None, Some(secs)) = (opts.timeout.filter(|t| !t.is_zero()), res.keepalive_secs) {
        session.set_timeout(millis(Duration::from_secs(
            u64::from(secs) * SERVER_ALIVE_COUNT_MAX,
        )));
    }
    authenticate(&session, &res, link.as_ref())?;
    drop(link);

    Ok(Connection {
        session,
        host: res.host,
        port: res.port,
        user: res.user,
        keepalive_secs: res.keepalive_secs,
        timeout: res.timeout,
    })
}

// ---------------------------------------------------------------------------------------
// Configuration

/// How to treat a host key that known_hosts does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NewHostKeys {
    Refuse,
    Accept,
}

/// Everything `connect` needs, resolved from the target, the options and the config.
#[derive(Debug)]
struct Resolved {
    home: PathBuf,
    host: String,
    port: u16,
    user: String,
    /// `IdentityFile`s of the config (empty: try the default key files).
    identity_files: Vec<PathBuf>,
    /// `UserKnownHostsFile`s: all are read, new keys go to the first.
    known_hosts_files: Vec<PathBuf>,
    /// `HostKeyAlias`: the name to look up and record the host key under.
    host_key_alias: Option<String>,
    new_host_keys: NewHostKeys,
    timeout: Duration,
    keepalive_secs: Option<u32>,
    agent: AgentSource,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum AgentSource {
    /// `IdentityAgent none`.
    Disabled,
    /// libssh2 reads `$SSH_AUTH_SOCK` itself.
    Environment,
    Socket(PathBuf),
}

fn resolve(target: &SshTarget, opts: &ConnectOptions) -> Result<Resolved> {
    validate_host(&target.host)?;
    let home = match &opts.home {
        Some(home) => home.clone(),
        None => match std::env::var_os("HOME") {
            Some(h) if !h.is_empty() => PathBuf::from(h),
            _ => {
                return Err(Error::usage(
                    "HOME is not set: cannot find ~/.ssh/config and ~/.ssh/known_hosts",
                )
                .with_hint("set HOME to the directory that holds .ssh"));
            }
        },
    };
    let config_path = home.join(".ssh").join("config");
    let params = read_config(&config_path, &home, &target.host)?;
    let ssh_home = home.join(".ssh");

    if params
        .proxy_jump
        .as_ref()
        .is_some_and(|p| p.iter().any(|j| !j.eq_ignore_ascii_case("none")))
        || unsupported(&params, "proxycommand").is_some_and(|v| !v.eq_ignore_ascii_case("none"))
    {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "{} sets ProxyJump or ProxyCommand for host {}, which baton cannot follow",
                config_path.display(),
                target.host
            ),
        )
        .with_hint("connect to a host baton can reach directly, or forward a local port (ssh -L) and target that"));
    }

    let host = match &params.host_name {
        Some(name) => expand_host_tokens(name, &target.host),
        None => target.host.clone(),
    }
    .to_ascii_lowercase();
    validate_host(&host)?;
    let port = target.port.or(params.port).unwrap_or(22);
    if port == 0 {
        return Err(Error::usage(format!(
            "invalid port 0 for host {}",
            target.host
        )));
    }
    let user = match target.user.clone().or_else(|| params.user.clone()) {
        Some(u) => u,
        None => local_user().ok_or_else(|| {
            Error::usage("cannot tell which user to log in as")
                .with_hint("give USER@HOST, or set User in ~/.ssh/config")
        })?,
    };
    if user.is_empty() || user.contains('\0') {
        return Err(Error::usage(format!("invalid user name {user:?}")));
    }

    let identity_files = params.identity_file.clone().unwrap_or_default();

    let known_hosts_files = match params.unsupported_fields.get("userknownhostsfile") {
        Some(args) if args.len() == 1 && args[0].eq_ignore_ascii_case("none") => Vec::new(),
        Some(args) if !args.is_empty() => args.iter().map(|a| expand_path(a, &home)).collect(),
        _ => vec![ssh_home.join("known_hosts")],
    };

    let host_key_alias = match unsupported(&params, "hostkeyalias") {
        None => None,
        Some(alias) if alias.eq_ignore_ascii_case("none") => None,
        Some(alias) => {
            // It is written into known_hosts as the first field of a line.
            if alias.chars().any(|c| c.is_whitespace() || c.is_control())
                || alias.starts_with('@')
                || alias.starts_with('#')
            {
                return Err(Error::usage(format!(
                    "{}: invalid HostKeyAlias {alias:?} for host {}",
                    config_path.display(),
                    target.host
                ))
                .with_hint("use a plain name without spaces, such as the host's canonical name"));
            }
            Some(alias.to_string())
        }
    };

    let strict = match unsupported(&params, "stricthostkeychecking") {
        None => NewHostKeys::Refuse,
        Some(v) => match v.to_ascii_lowercase().as_str() {
            "yes" | "true" | "ask" => NewHostKeys::Refuse,
            // `no` is treated as accept-new: a changed key is never accepted silently.
            "accept-new" | "no" | "false" | "off" => NewHostKeys::Accept,
            other => {
                return Err(Error::usage(format!(
                    "{}: invalid StrictHostKeyChecking value {other:?}",
                    config_path.display()
                ))
                .with_hint("use yes, accept-new or no"));
            }
        },
    };
    let new_host_keys = if opts.accept_new_host_key {
        NewHostKeys::Accept
    } else {
        strict
    };

    let timeout = opts
        .timeout
        .filter(|t| !t.is_zero())
        .or(params.connect_timeout.filter(|t| !t.is_zero()))
        .unwrap_or(DEFAULT_TIMEOUT);
    let keepalive_secs = params
        .server_alive_interval
        .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
        .filter(|&s| s > 0);

    let agent = match &opts.agent_socket {
        Some(path) => AgentSource::Socket(path.clone()),
        None => match unsupported(&params, "identityagent") {
            Some(v) if v.eq_ignore_ascii_case("none") => AgentSource::Disabled,
            Some(v) if v == "SSH_AUTH_SOCK" || v == "$SSH_AUTH_SOCK" => AgentSource::Environment,
            Some(v) => AgentSource::Socket(expand_path(v, &home)),
            None => AgentSource::Environment,
        },
    };

    Ok(Resolved {
        home,
        host,
        port,
        user,
        identity_files,
        known_hosts_files,
        host_key_alias,
        new_host_keys,
        timeout,
        keepalive_secs,
        agent,
    })
}

/// The parameters that apply to `alias`; a missing file gives the defaults.
fn read_config(path: &Path, home: &Path, alias: &str) -> Result<HostParams> {
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(SshConfig::default().query(alias));
        }
        Err(e) => return Err(Error::io("cannot read ssh config", path, e)),
    };
    let rules = ParseRule::ALLOW_UNKNOWN_FIELDS | ParseRule::ALLOW_UNSUPPORTED_FIELDS;
    let config = SshConfig::default()
        .home_dir(home)
        .parse(&mut BufReader::new(file), rules)
        .map_err(|e| {
            Error::usage(format!("cannot parse ssh config {}: {e}", path.display()))
                .with_hint("fix that line (baton reads the file with the ssh2-config crate)")
        })?;
    let params = config.query(alias);
    // ssh2-config does not know `Match`: it files the line under the enclosing `Host`
    // block and keeps applying the following lines to that block. When that block
    // applies to us, those lines would be misread as ours.
    if params
        .ignored_fields
        .keys()
        .any(|k| k.eq_ignore_ascii_case("match"))
    {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "{} has a Match block where settings for host {alias} are read; baton cannot evaluate Match",
                path.display()
            ),
        )
        .with_hint(format!("put the settings for {alias} in a `Host {alias}` block before the first Match line")));
    }
    Ok(params)
}

/// The first argument of a field ssh2-config parses but does not interpret.
fn unsupported<'a>(params: &'a HostParams, field: &str) -> Option<&'a str> {
    params
        .unsupported_fields
        .get(field)
        .and_then(|args| args.first())
        .map(String::as_str)
}

/// `~` and `%d` are the home; `%%` is `%`. (ssh2-config expands `~` only in the fields it
/// interprets.)
fn expand_path(arg: &str, home: &Path) -> PathBuf {
    let home_str = home.to_string_lossy();
    let mut text = if arg == "~" {
        home_str.to_string()
    } else if let Some(rest) = arg.strip_prefix("~/") {
        format!("{}/{rest}", home_str.trim_end_matches('/'))
    } else {
        arg.to_string()
    };
    if text.contains('%') {
        text = text
            .replace("%%", "\u{0}")
            .replace("%d", &home_str)
            .replace('\u{0}', "%");
    }
    let path = PathBuf::from(text);
    if path.is_relative() {
        home.join(".ssh").join(path)
    } else {
        path
    }
}

/// `%h` in HostName is the name given on the command line; `%%` is `%`.
fn expand_host_tokens(name: &str, alias: &str) -> String {
    name.replace("%%", "\u{0}")
        .replace("%h", alias)
        .replace('\u{0}', "%")
}

fn validate_host(host: &str) -> Result<()> {
    if host.is_empty()
        || host.starts_with('-')
        || host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '\0')
    {
        return Err(Error::usage(format!("invalid host name {host:?}")));
    }
    Ok(())
}

/// The login name of the current user (from the password database, as OpenSSH does).
fn local_user() -> Option<String> {
    // SAFETY: getpwuid_r writes into `pwd` and `buf`, which outlive the call, and sets
    // `result` to null or to `&pwd`; `pw_name` points into `buf`, still alive when read.
    unsafe {
        let uid = libc::getuid();
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result);
        if rc == 0
            && !result.is_null()
            && !pwd.pw_name.is_null()
            && let Ok(name) = std::ffi::CStr::from_ptr(pwd.pw_name).to_str()
            && !name.is_empty()
        {
            return Some(name.to_string());
        }
    }
    std::env::var("USER")
        .ok()
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|u| !u.is_empty())
}

// ---------------------------------------------------------------------------------------
// TCP

fn tcp_connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream> {
    let where_ = host_port(host, port);
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| {
            Error::new(
                ErrorKind::Transport,
                format!("cannot resolve host {host}: {e}"),
            )
            .with_hint("check the host name (and HostName in ~/.ssh/config)")
        })?
        .collect();
    let mut last_err = None;
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, timeout) {
            Ok(stream) => {
                stream.set_nodelay(true).map_err(|e| {
                    Error::new(
                        ErrorKind::Transport,
                        format!("cannot configure the connection to {where_}: {e}"),
                    )
                })?;
                return Ok(stream);
            }
            Err(e) => last_err = Some(e),
        }
    }
    let Some(e) = last_err else {
        return Err(Error::new(
            ErrorKind::Transport,
            format!("host {host} has no address"),
        ));
    };
    let err = if matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    ) {
        Error::new(
            ErrorKind::Transport,
            format!("timed out after {} connecting to {where_}", secs(timeout)),
        )
        .with_hint("check that the host is up and the port is open, or raise ConnectTimeout")
    } else {
        Error::new(
            ErrorKind::Transport,
            format!("cannot connect to {where_}: {e}"),
        )
        .with_hint("check that an SSH server runs there and is reachable")
    };
    Err(err)
}

// ---------------------------------------------------------------------------------------
// Authentication

/// What happened to one key file.
enum KeyOutcome {
    Accepted,
    Rejected,
    /// Passphrase needed and no terminal to ask on.
    Locked,
    WrongPassphrase,
}

fn authenticate(session: &Session, res: &Resolved, link: Option<&TcpStream>) -> Result<()> {
    let who = format!("{}@{}", res.user, host_port(&res.host, res.port));
    let methods = session
        .auth_methods(&res.user)
        .map_err(|e| auth_transport_error(&e, &who))?;
    if session.authenticated() {
        return Ok(());
    }
    if !methods.split(',').any(|m| m == "publickey") {
        return Err(Error::new(
            ErrorKind::Security,
            format!("the server refuses public-key authentication for {who} (it offers: {methods})"),
        )
        .with_hint("baton authenticates with keys only (ssh-agent or key files); enable PubkeyAuthentication on the server"));
    }

    let mut tried: Vec<String> = Vec::new();
    let mut rejected = 0usize;

    // 1. Every agent identity (userauth_agent would try only the first).
    match agent_auth(session, res, &who, &mut rejected, link)? {
        AgentOutcome::Accepted => return Ok(()),
        AgentOutcome::Tried(note) => tried.push(note),
    }

    // 2. IdentityFile(s) of the config, else the default key files that exist.
    let files: Vec<(PathBuf, bool)> = if res.identity_files.is_empty() {
        DEFAULT_KEY_FILES
            .iter()
            .map(|f| res.home.join(".ssh").join(f))
            .filter(|p| p.exists())
            .map(|p| (p, false))
            .collect()
    } else {
        res.identity_files
            .iter()
            .map(|p| (p.clone(), true))
            .collect()
    };
    if files.is_empty() {
        tried.push("no key file (~/.ssh/id_ed25519, id_ecdsa, id_rsa)".to_string());
    }
    let mut locked: Vec<PathBuf> = Vec::new();
    let mut wrong_passphrase: Vec<PathBuf> = Vec::new();
    for (path, configured) in files {
        let shown = path.display().to_string();
        if let Err(e) = fs::File::open(&path) {
            if configured {
                let why = if e.kind() == std::io::ErrorKind::NotFound {
                    "missing".to_string()
                } else {
                    e.to_string()
                };
                tried.push(format!("{shown} ({why})"));
            }
            continue;
        }
        match key_file_auth(session, &res.user, &path, &who, rejected, link)? {
            KeyOutcome::Accepted => return Ok(()),
            KeyOutcome::Rejected => {
                rejected += 1;
                tried.push(shown);
            }
            KeyOutcome::Locked => {
                tried.push(format!("{shown} (passphrase-protected)"));
                locked.push(path);
            }
            KeyOutcome::WrongPassphrase => {
                tried.push(format!("{shown} (wrong passphrase)"));
                wrong_passphrase.push(path);
            }
        }
    }

    let tried = tried.join(", ");
    if let Some(path) = locked.first() {
        return Err(Error::new(
            ErrorKind::Security,
            format!(
                "key {} is passphrase-protected and no ssh-agent holds it (authentication failed for {who}; tried: {tried})",
                path.display()
            ),
        )
        .with_hint("add it with ssh-add, or run from a terminal to be asked for the passphrase"));
    }
    if let Some(path) = wrong_passphrase.first() {
        return Err(Error::new(
            ErrorKind::Security,
            format!(
                "wrong passphrase for key {} (authentication failed for {who}; tried: {tried})",
                path.display()
            ),
        )
        .with_hint("try again, or add the key to ssh-agent with ssh-add"));
    }
    Err(Error::new(ErrorKind::Security, format!("authentication failed for {who} (tried: {tried})")).with_hint(
        "check the user name (USER@HOST or User in ~/.ssh/config) and that the server's authorized_keys holds one of these keys",
    ))
}

enum AgentOutcome {
    Accepted,
    /// What to report in the "tried" list.
    Tried(String),
}

fn agent_auth(
    session: &Session,
    res: &Resolved,
    who: &str,
    rejected: &mut usize,
    link: Option<&TcpStream>,
) -> Result<AgentOutcome> {
    let socket_note = match &res.agent {
        AgentSource::Disabled => {
            return Ok(AgentOutcome::Tried(
                "agent (IdentityAgent none)".to_string(),
            ));
        }
        AgentSource::Environment => match std::env::var_os("SSH_AUTH_SOCK") {
            Some(s) if !s.is_empty() => None,
            _ => {
                return Ok(AgentOutcome::Tried(
                    "agent (SSH_AUTH_SOCK not set)".to_string(),
                ));
            }
        },
        AgentSource::Socket(path) => Some(path.clone()),
    };
    let Ok(mut agent) = session.agent() else {
        return Ok(AgentOutcome::Tried("agent (unavailable)".to_string()));
    };
    if let Some(path) = &socket_note {
        if !path.exists() {
            return Ok(AgentOutcome::Tried(format!(
                "agent (no socket at {})",
                path.display()
            )));
        }
        if agent.set_identity_path(path).is_err() {
            return Ok(AgentOutcome::Tried(format!(
                "agent (bad socket path {})",
                path.display()
            )));
        }
    }
    if agent.connect().is_err() {
        return Ok(AgentOutcome::Tried("agent (cannot connect)".to_string()));
    }
    let identities = match agent.list_identities().and_then(|_| agent.identities()) {
        Ok(ids) => ids,
        Err(_) => {
            let _ = agent.disconnect();
            return Ok(AgentOutcome::Tried("agent (cannot list keys)".to_string()));
        }
    };
    for identity in &identities {
        match agent.userauth(&res.user, identity) {
            Ok(()) if session.authenticated() => {
                let _ = agent.disconnect();
                return Ok(AgentOutcome::Accepted);
            }
            Ok(()) => *rejected += 1,
            Err(e) if is_connection_error(&e) || link_closed(link) => {
                let _ = agent.disconnect();
                return Err(auth_connection_lost(&e, who, *rejected));
            }
            Err(_) => *rejected += 1,
        }
    }
    let _ = agent.disconnect();
    let n = identities.len();
    Ok(AgentOutcome::Tried(format!(
        "agent ({n} key{})",
        if n == 1 { "" } else { "s" }
    )))
}

fn key_file_auth(
    session: &Session,
    user: &str,
    path: &Path,
    who: &str,
    rejected: usize,
    link: Option<&TcpStream>,
) -> Result<KeyOutcome> {
    match session.userauth_pubkey_file(user, None, path, None) {
        Ok(()) if session.authenticated() => return Ok(KeyOutcome::Accepted),
        Ok(()) => return Ok(KeyOutcome::Rejected),
        Err(e) if is_connection_error(&e) || link_closed(link) => {
            return Err(auth_connection_lost(&e, who, rejected));
        }
        Err(e) if !is_key_file_error(&e) => return Ok(KeyOutcome::Rejected),
        Err(_) => {}
    }
    // libssh2 could not use the file without a passphrase (it cannot tell an encrypted
    // key from an unreadable one: both are LIBSSH2_ERROR_FILE).
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(KeyOutcome::Locked);
    }
    for attempt in 0..PASSPHRASE_TRIES {
        let passphrase =
            rpassword::prompt_password(format!("Enter passphrase for key {}: ", path.display()))
                .map_err(|e| {
                    Error::other(format!("cannot read the passphrase from the terminal: {e}"))
                })?;
        if passphrase.is_empty() {
            // An empty answer skips the key, as with OpenSSH.
            return Ok(KeyOutcome::Locked);
        }
        let result = session.userauth_pubkey_file(user, None, path, Some(&passphrase));
        wipe(passphrase);
        match result {
            Ok(()) if session.authenticated() => return Ok(KeyOutcome::Accepted),
            Ok(()) => return Ok(KeyOutcome::Rejected),
            Err(e) if is_connection_error(&e) || link_closed(link) => {
                return Err(auth_connection_lost(&e, who, rejected));
            }
            Err(e) if is_key_file_error(&e) => {
                if attempt + 1 < PASSPHRASE_TRIES {
                    eprintln!("wrong passphrase for key {}", path.display());
                }
            }
            Err(_) => return Ok(KeyOutcome::Rejected),
        }
    }
    Ok(KeyOutcome::WrongPassphrase)
}

/// Overwrite a passphrase before freeing it.
fn wipe(secret: String) {
    let mut bytes = secret.into_bytes();
    bytes.fill(0);
    std::hint::black_box(&bytes);
}

fn session_code(e: &ssh2::Error) -> Option<i32> {
    match e.code() {
        ErrorCode::Session(code) => Some(code),
        _ => None,
    }
}

fn is_timeout(e: &ssh2::Error) -> bool {
    matches!(
        session_code(e),
        Some(LIBSSH2_ERROR_TIMEOUT | LIBSSH2_ERROR_SOCKET_TIMEOUT)
    )
}

/// The connection itself failed (as opposed to a key being refused).
fn is_connection_error(e: &ssh2::Error) -> bool {
    matches!(
        session_code(e),
        Some(
            LIBSSH2_ERROR_TIMEOUT
                | LIBSSH2_ERROR_SOCKET_TIMEOUT
                | LIBSSH2_ERROR_SOCKET_SEND
                | LIBSSH2_ERROR_SOCKET_RECV
                | LIBSSH2_ERROR_SOCKET_DISCONNECT
                | LIBSSH2_ERROR_BAD_SOCKET
        )
    )
}

/// Whether the server side of the link is gone (closed or reset). libssh2 reports a
/// connection that dies while it waits for a USERAUTH reply as a refused key
/// (LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED, "Waiting for USERAUTH response"), which would
/// otherwise read as "authentication failed" (exit 6) instead of a broken link (exit 7).
fn link_closed(link: Option<&TcpStream>) -> bool {
    use std::os::fd::AsRawFd;
    let Some(link) = link else {
        return false;
    };
    let mut byte = [0u8; 1];
    // SAFETY: recv(2) into a one-byte buffer we own, on a descriptor we own; MSG_PEEK
    // leaves any pending data for libssh2 and MSG_DONTWAIT never blocks.
    let n = unsafe {
        libc::recv(
            link.as_raw_fd(),
            byte.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match n {
        0 => true,
        n if n > 0 => false,
        _ => !matches!(
            std::io::Error::last_os_error().kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
        ),
    }
}

fn is_key_file_error(e: &ssh2::Error) -> bool {
    session_code(e) == Some(LIBSSH2_ERROR_FILE)
}

fn auth_transport_error(e: &ssh2::Error, who: &str) -> Error {
    if is_timeout(e) {
        Error::new(
            ErrorKind::Transport,
            format!("timed out authenticating {who}"),
        )
        .with_hint("the server stopped answering; try again, or raise ConnectTimeout")
    } else {
        Error::new(
            ErrorKind::Transport,
            format!(
                "connection to {who} failed during authentication: {}",
                e.message()
            ),
        )
        .with_hint("the connection was closed; check the network and the server, then run the command again")
    }
}

/// The connection broke while keys were being tried: after refusals, most likely the
/// server's MaxAuthTries.
fn auth_connection_lost(e: &ssh2::Error, who: &str, rejected: usize) -> Error {
    if rejected > 0 && !is_timeout(e) {
        Error::new(
            ErrorKind::Security,
            format!("authentication failed for {who}: the server closed the connection after {rejected} refused keys"),
        )
        .with_hint("the server limits attempts (MaxAuthTries): remove unneeded keys from ssh-agent or name the right IdentityFile")
    } else {
        auth_transport_error(e, who)
    }
}

// ---------------------------------------------------------------------------------------
// Small helpers

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX).max(1)
}

fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// Quote for a POSIX shell when needed (for commands shown in hints).
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/:@%+=,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::host_keys::blob_key_type;
    use super::*;

    #[test]
    fn known_hosts_names_follow_openssh() {
        assert_eq!(known_hosts_name("example.org", 22), "example.org");
        assert_eq!(known_hosts_name("127.0.0.1", 2222), "[127.0.0.1]:2222");
        assert_eq!(known_hosts_name("::1", 2222), "[::1]:2222");
    }

    #[test]
    fn fingerprint_is_unpadded_base64() {
        let digest = [0u8; 32];
        assert_eq!(
            fingerprint_sha256(&digest),
            "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        );
    }

    #[test]
    fn blob_key_type_reads_the_first_string() {
        let mut blob = vec![0, 0, 0, 11];
        blob.extend_from_slice(b"ssh-ed25519");
        blob.extend_from_slice(&[0, 0, 0, 32]);
        assert_eq!(blob_key_type(&blob), Some("ssh-ed25519"));
        assert_eq!(blob_key_type(&[0, 0, 0, 200, 1]), None);
        assert_eq!(blob_key_type(&[0, 0]), None);
    }

    #[test]
    fn paths_expand_home_tokens() {
        let home = Path::new("/home/a");
        assert_eq!(
            expand_path("~/.ssh/kh", home),
            PathBuf::from("/home/a/.ssh/kh")
        );
        assert_eq!(expand_path("%d/kh", home), PathBuf::from("/home/a/kh"));
        assert_eq!(expand_path("/etc/kh", home), PathBuf::from("/etc/kh"));
        assert_eq!(expand_path("kh", home), PathBuf::from("/home/a/.ssh/kh"));
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("host.example"), "host.example");
        assert_eq!(shell_quote("[h]:22"), "'[h]:22'");
        assert_eq!(shell_quote("a'b"), "'a'\\''b'");
    }

    #[test]
    fn hosts_are_validated() {
        assert!(validate_host("-oProxyCommand=x").is_err());
        assert!(validate_host("a b").is_err());
        assert!(validate_host("").is_err());
        assert!(validate_host("host.example").is_ok());
    }
}
