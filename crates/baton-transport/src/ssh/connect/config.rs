//! Resolving a target into connection parameters: `~/.ssh/config` through ssh2-config, with
//! the options OpenSSH would apply (user, port, identity files, known_hosts files, agent,
//! timeouts).

use super::*;

/// How to treat a host key that known_hosts does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NewHostKeys {
    Refuse,
    Accept,
}

/// Everything `connect` needs, resolved from the target, the options and the config.
#[derive(Debug)]
pub(super) struct Resolved {
    pub(super) home: PathBuf,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) user: String,
    /// `IdentityFile`s of the config (empty: try the default key files).
    pub(super) identity_files: Vec<PathBuf>,
    /// `UserKnownHostsFile`s: all are read, new keys go to the first.
    pub(super) known_hosts_files: Vec<PathBuf>,
    /// `GlobalKnownHostsFile`s: read as well, never written.
    pub(super) global_known_hosts_files: Vec<PathBuf>,
    /// `HostKeyAlias`: the name to look up and record the host key under.
    pub(super) host_key_alias: Option<String>,
    pub(super) new_host_keys: NewHostKeys,
    pub(super) timeout: Duration,
    pub(super) keepalive_secs: Option<u32>,
    pub(super) agent: AgentSource,
    pub(super) key_passphrase: Option<KeyPassphrasePrompt>,
    /// The `Ciphers` line's list (after its `+`/`-`/`^` rule), when the config has one.
    pub(super) ciphers: Option<Vec<String>>,
    /// How the server is reached: directly, through jump hosts or a proxy command.
    pub(super) route: Route,
    /// The ssh config file read (for messages).
    pub(super) config_path: PathBuf,
}

impl Resolved {
    /// Every known_hosts file, as OpenSSH loads them into one set: user files first.
    pub(super) fn all_known_hosts(&self) -> Vec<PathBuf> {
        let mut all = self.known_hosts_files.clone();
        all.extend(self.global_known_hosts_files.iter().cloned());
        all
    }
}

/// How the TCP stream to the server is had (`ProxyJump`, `ProxyCommand`, OpenSSH's `-J`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    Direct,
    /// Through these hosts, in order: an SSH connection to the last, itself reached
    /// through the ones before it, forwards a TCP connection to the server.
    Jump(Vec<SshHop>),
    /// The standard input and output of this command (`%` tokens expanded) are the link.
    Command(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AgentSource {
    /// `IdentityAgent none`.
    Disabled,
    /// libssh2 reads `$SSH_AUTH_SOCK` itself.
    Environment,
    Socket(PathBuf),
}

pub(super) fn resolve(target: &SshTarget, opts: &ConnectOptions) -> Result<Resolved> {
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

    let route = route(target, &params, &host, port, &user, &config_path)?;
    let jump_token = match &route {
        Route::Jump(hops) => crate::url::display_hops(hops),
        _ => String::new(),
    };
    let tokens = super::known_hosts_files::Tokens {
        home: &home,
        host: &host,
        original: &target.host,
        port,
        remote_user: &user,
        alias: host_key_alias.as_deref(),
        jump: &jump_token,
    };
    let known_hosts_files =
        super::known_hosts_files::known_hosts_files(&params, false, &tokens, &config_path)?;
    let global_known_hosts_files =
        super::known_hosts_files::known_hosts_files(&params, true, &tokens, &config_path)?;

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
        global_known_hosts_files,
        host_key_alias,
        new_host_keys,
        timeout,
        keepalive_secs,
        agent,
        key_passphrase: opts.key_passphrase.clone(),
        ciphers: (!params.ciphers.is_default()).then(|| params.ciphers.algorithms().to_vec()),
        route,
        config_path,
    })
}

/// The target's own jump list (a URL's `?jump=`) wins over the config, as `-J` does in
/// OpenSSH; else `ProxyJump` or `ProxyCommand`, of which a host may set only one (OpenSSH
/// lets the first line win; which came first is lost by ssh2-config, so both is refused).
fn route(
    target: &SshTarget,
    params: &HostParams,
    host: &str,
    port: u16,
    user: &str,
    config_path: &Path,
) -> Result<Route> {
    if let Some(hops) = &target.jump {
        return Ok(match hops.is_empty() {
            true => Route::Direct,
            false => Route::Jump(hops.clone()),
        });
    }
    let jump = match &params.proxy_jump {
        Some(list) if !(list.len() == 1 && list[0].eq_ignore_ascii_case("none")) => Some(
            list.iter()
                .map(|hop| SshHop::parse(hop))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|why| {
                    Error::usage(format!(
                        "{}: ProxyJump for host {}: {why}",
                        config_path.display(),
                        target.host
                    ))
                    .with_hint("write ProxyJump [user@]host[:port][,...] or ProxyJump none")
                })?,
        ),
        _ => None,
    };
    let command = match params.unsupported_fields.get("proxycommand") {
        Some(args) if !(args.len() == 1 && args[0].eq_ignore_ascii_case("none")) => {
            Some(args.join(" "))
        }
        _ => None,
    };
    match (jump, command) {
        (Some(_), Some(_)) => Err(Error::usage(format!(
            "{} sets both ProxyJump and ProxyCommand for host {}",
            config_path.display(),
            target.host
        ))
        .with_hint("keep one of them for that host")),
        (Some(hops), None) => Ok(Route::Jump(hops)),
        (None, Some(command)) => Ok(Route::Command(expand_command_tokens(
            &command,
            host,
            &target.host,
            port,
            user,
        ))),
        (None, None) => Ok(Route::Direct),
    }
}

/// ProxyCommand's tokens (ssh_config(5)): `%h` host, `%n` the name as given, `%p` port,
/// `%r` remote user, `%%`. Any other token is left as written.
fn expand_command_tokens(command: &str, host: &str, given: &str, port: u16, user: &str) -> String {
    let mut out = String::with_capacity(command.len());
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('h') => out.push_str(host),
            Some('n') => out.push_str(given),
            Some('p') => out.push_str(&port.to_string()),
            Some('r') => out.push_str(user),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// The parameters that apply to `alias`; a missing file gives the defaults.
pub(super) fn read_config(path: &Path, home: &Path, alias: &str) -> Result<HostParams> {
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
pub(super) fn unsupported<'a>(params: &'a HostParams, field: &str) -> Option<&'a str> {
    params
        .unsupported_fields
        .get(field)
        .and_then(|args| args.first())
        .map(String::as_str)
}

/// `~` and `%d` are the home; `%%` is `%`. (ssh2-config expands `~` only in the fields it
/// interprets.)
pub(super) fn expand_path(arg: &str, home: &Path) -> PathBuf {
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
pub(super) fn expand_host_tokens(name: &str, alias: &str) -> String {
    name.replace("%%", "\u{0}")
        .replace("%h", alias)
        .replace('\u{0}', "%")
}

pub(super) fn validate_host(host: &str) -> Result<()> {
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
pub(super) fn local_user() -> Option<String> {
    use baton_store::login_name;
    login_name::from_passwd().or_else(login_name::from_env)
}
