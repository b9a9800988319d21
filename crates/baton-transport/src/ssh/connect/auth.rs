//! Public-key authentication: every ssh-agent key, then key files (asking for a passphrase
//! only on a terminal), and the errors that say which step failed and why.

use super::*;

/// What happened to one key file.
pub(super) enum KeyOutcome {
    Accepted,
    Rejected,
    /// Passphrase needed and no terminal to ask on.
    Locked,
    WrongPassphrase,
}

pub(super) fn authenticate(
    session: &Session,
    res: &Resolved,
    link: Option<&std::os::fd::OwnedFd>,
) -> Result<()> {
    let who = format!("{}@{}", res.user, host_port(&res.host, res.port));
    // Keys straight away: asking the server for its methods first (a "none" request)
    // would cost a round trip on every connection; it is asked only when no key was
    // accepted, to say why.
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
        match key_file_auth(session, res, &path, &who, rejected, link)? {
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

    // A server that closed the connection after the refused keys has no methods to
    // tell: what was tried is the message then.
    let methods = session.auth_methods(&res.user).ok();
    if session.authenticated() {
        return Ok(());
    }
    if let Some(methods) = methods.filter(|m| !m.split(',').any(|m| m == "publickey")) {
        return Err(Error::new(
            ErrorKind::Security,
            format!("the server refuses public-key authentication for {who} (it offers: {methods})"),
        )
        .with_hint("baton authenticates with keys only (ssh-agent or key files); enable PubkeyAuthentication on the server"));
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

pub(super) enum AgentOutcome {
    Accepted,
    /// What to report in the "tried" list.
    Tried(String),
}

pub(super) fn agent_auth(
    session: &Session,
    res: &Resolved,
    who: &str,
    rejected: &mut usize,
    link: Option<&std::os::fd::OwnedFd>,
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

pub(super) fn key_file_auth(
    session: &Session,
    res: &Resolved,
    path: &Path,
    who: &str,
    rejected: usize,
    link: Option<&std::os::fd::OwnedFd>,
) -> Result<KeyOutcome> {
    let user = res.user.as_str();
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
    let Some(KeyPassphrasePrompt(ask)) = &res.key_passphrase else {
        return Ok(KeyOutcome::Locked);
    };
    for attempt in 0..PASSPHRASE_TRIES {
        let Some(passphrase) = ask(path, attempt)? else {
            return Ok(KeyOutcome::Locked);
        };
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
            // The prompt's next attempt says the last passphrase was wrong.
            Err(e) if is_key_file_error(&e) => {}
            Err(_) => return Ok(KeyOutcome::Rejected),
        }
    }
    Ok(KeyOutcome::WrongPassphrase)
}

/// Overwrite a passphrase before freeing it.
pub(super) fn wipe(secret: String) {
    let mut bytes = secret.into_bytes();
    bytes.fill(0);
    std::hint::black_box(&bytes);
}

pub(super) fn session_code(e: &ssh2::Error) -> Option<i32> {
    match e.code() {
        ErrorCode::Session(code) => Some(code),
        _ => None,
    }
}

pub(super) fn is_timeout(e: &ssh2::Error) -> bool {
    matches!(
        session_code(e),
        Some(LIBSSH2_ERROR_TIMEOUT | LIBSSH2_ERROR_SOCKET_TIMEOUT)
    )
}

/// The connection itself failed (as opposed to a key being refused).
pub(super) fn is_connection_error(e: &ssh2::Error) -> bool {
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
pub(super) fn link_closed(link: Option<&std::os::fd::OwnedFd>) -> bool {
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

pub(super) fn is_key_file_error(e: &ssh2::Error) -> bool {
    session_code(e) == Some(LIBSSH2_ERROR_FILE)
}

pub(super) fn auth_transport_error(e: &ssh2::Error, who: &str) -> Error {
    if is_timeout(e) {
        Error::new(
            ErrorKind::Transport,
            format!("timed out authenticating {who}"),
        )
        .with_hint("the server stopped answering; try again, or raise ConnectTimeout")
        .with_source(TransportError::Ssh { code: e.code() })
    } else {
        Error::new(
            ErrorKind::Transport,
            format!(
                "connection to {who} failed during authentication: {}",
                e.message()
            ),
        )
        .with_hint("the connection was closed; check the network and the server, then run the command again")
        .with_source(TransportError::Ssh { code: e.code() })
    }
}

/// The connection broke while keys were being tried: after refusals, most likely the
/// server's MaxAuthTries.
pub(super) fn auth_connection_lost(e: &ssh2::Error, who: &str, rejected: usize) -> Error {
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
