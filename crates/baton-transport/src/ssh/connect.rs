//! Opening an authenticated SSH session: `~/.ssh/config` (through ssh2-config), TCP with
//! timeouts (directly, through jump hosts or a proxy command: `proxy`), host key verification against known_hosts (`host_keys`: accept-new on
//! request, never a changed or `@revoked` key, under `HostKeyAlias` when set), and
//! public-key authentication (every ssh-agent key, then key files, asking for a
//! passphrase only on a terminal).
//!
//! libssh2 reads neither the ssh config nor known_hosts by itself: everything here that
//! OpenSSH would do on its own is done explicitly, and its quirks (see the design notes)
//! are handled where they bite.

use std::fs;
use std::io::BufReader;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ssh2::{ErrorCode, Session};
use ssh2_config::{HostParams, ParseRule, SshConfig};

use crate::error::TransportError;
use baton_error::{Error, ErrorKind, Result};

mod auth;
mod ciphers;
mod config;
mod host_keys;
mod known_hosts_files;
mod proxy;
mod revoked;

use auth::{authenticate, is_timeout};
use config::*;
pub use proxy::Via;
use proxy::open_link;

pub use crate::url::SshHop;

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
const LIBSSH2_ERROR_EAGAIN: i32 = -37;
const LIBSSH2_ERROR_SOCKET_RECV: i32 = -43;
const LIBSSH2_ERROR_BAD_SOCKET: i32 = -45;
/// `LIBSSH2_CHANNEL_WINDOW_DEFAULT`: the receive window libssh2 opens a channel with.
const LIBSSH2_CHANNEL_WINDOW_DEFAULT: u64 = 2 << 20;

/// Where to connect: a host (or `Host` alias of `~/.ssh/config`), with an optional user
/// and port that override the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshTarget {
    pub host: String,
    pub user: Option<String>,
    pub port: Option<u16>,
    /// Jump hosts that override the config's `ProxyJump`/`ProxyCommand` (`-J`; empty:
    /// connect directly); `None`: as the config says.
    pub jump: Option<Vec<SshHop>>,
}

/// Asks for the passphrase of a key file: given the key's path and the attempt (0, 1, ...;
/// a later attempt follows a wrong passphrase), returns the passphrase, or `None` to skip
/// the key. The command layer supplies it (only on a terminal): below it nothing talks to
/// the terminal.
#[derive(Clone)]
pub struct KeyPassphrasePrompt(pub std::sync::Arc<AskKeyPassphrase>);

/// The question itself: (key path, attempt) -> passphrase, or `None` to skip the key.
pub type AskKeyPassphrase = dyn Fn(&Path, usize) -> Result<Option<String>> + Send + Sync;

impl std::fmt::Debug for KeyPassphrasePrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyPassphrasePrompt")
    }
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
    /// How to ask for a key file's passphrase; `None`: a key that needs one is skipped.
    pub key_passphrase: Option<KeyPassphrasePrompt>,
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
    /// The negotiated cipher (`cs/sc` when the directions differ), for `BATON_TRACE`.
    pub cipher: String,
    /// What carries the session's bytes besides its socket (a jump host's relay, a proxy
    /// command); declared after `session`, so dropped after it.
    pub via: Via,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("keepalive_secs", &self.keepalive_secs)
            .field("timeout", &self.timeout)
            .field("cipher", &self.cipher)
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
    connect_hop(target, opts, 0)
}

/// `connect`, `hops` jump hosts away from here.
fn connect_hop(target: &SshTarget, opts: &ConnectOptions, hops: usize) -> Result<Connection> {
    let res = resolve(target, opts)?;
    let proxy::Link {
        stream,
        // A second descriptor of the socket, only to tell a closed link from a refused
        // key during authentication (libssh2 reports both as a failed USERAUTH).
        peek: link,
        mut via,
    } = open_link(&res, opts, hops)?;
    let where_ = format!("{}{}", host_port(&res.host, res.port), via.describe());

    let mut session = Session::new().map_err(|e| {
        Error::other(format!("cannot create an SSH session: {}", e.message()))
            .with_hint("libssh2 could not initialize; this is a bug or an out-of-memory condition")
    })?;
    session.set_timeout(millis(res.timeout));
    session.set_tcp_stream(stream);

    let known_hosts = load_known_hosts(&session, &res.all_known_hosts())?;
    // `HostKeyAlias` replaces the host name (and port) in known_hosts, as in OpenSSH.
    let kh_name = match &res.host_key_alias {
        Some(alias) => alias.clone(),
        None => known_hosts_name(&res.host, res.port),
    };
    let known_types = known_key_types(&known_hosts, &kh_name);
    prefer_host_key_types(&session, &known_types)?;
    ciphers::prefer_ciphers(&session, res.ciphers.as_deref(), &res.config_path)?;

    session.handshake().map_err(|e| {
        let error = if is_timeout(&e) && session.banner().is_some() {
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
        } else if let Some(ended) = via.command_exit() {
            Error::new(ErrorKind::Transport, format!("SSH handshake with {where_} failed: {ended}"))
                .with_hint(format!("check ProxyCommand in {} (its messages are above)", res.config_path.display()))
        } else {
            Error::new(ErrorKind::Transport, format!("SSH handshake with {where_} failed: {}", e.message()))
                .with_hint("check that this is an SSH server and that it is reachable")
        };
        error.with_source(TransportError::from(e))
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

    let cipher = ciphers::negotiated(&session);
    Ok(Connection {
        cipher,
        session,
        host: res.host,
        port: res.port,
        user: res.user,
        keepalive_secs: res.keepalive_secs,
        timeout: res.timeout,
        via,
    })
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
            .with_source(e)
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
                    .with_source(e)
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
    Err(err.with_source(e))
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
