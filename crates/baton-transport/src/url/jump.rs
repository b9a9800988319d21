//! Jump hosts: one hop of a `ProxyJump` list or of a target URL's `?jump=` query,
//! `[ssh://][user@]host[:port]` (an IPv6 address as `[addr]`), as OpenSSH's `-J` takes it.

use std::fmt;

use super::{valid_host, valid_user};

/// One jump host. Its user and port, when absent, come from its own `Host` block of
/// `~/.ssh/config`, as for any other host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshHop {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

/// A hop list, `HOP[,HOP...]`, or `none` (connect directly, whatever the config says:
/// an empty list). The error says what is wrong with which hop.
pub fn parse_hops(text: &str) -> Result<Vec<SshHop>, String> {
    if text.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    text.split(',').map(SshHop::parse).collect()
}

/// How a hop list is written back (`none` for the empty one): `parse_hops` reads it again.
pub fn display_hops(hops: &[SshHop]) -> String {
    if hops.is_empty() {
        return "none".to_string();
    }
    hops.iter()
        .map(SshHop::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl SshHop {
    pub fn parse(text: &str) -> Result<SshHop, String> {
        let bad = |why: &str| format!("jump host {:?}: {why}", text.escape_debug().to_string());
        let rest = text.strip_prefix("ssh://").unwrap_or(text);
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (user, authority) = match rest.rsplit_once('@') {
            Some((user, authority)) => (Some(user), authority),
            None => (None, rest),
        };
        if let Some(user) = user
            && !valid_user(user)
        {
            return Err(bad("bad user name"));
        }
        let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
            let (host, after) = inner
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 address needs its closing ']'"))?;
            match after {
                "" => (host, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(bad("only :PORT may follow [address]")),
                },
            }
        } else {
            match authority.split_once(':') {
                Some((_, port)) if port.contains(':') => {
                    return Err(bad("write an IPv6 address as [address] or [address]:port"));
                }
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if !valid_host(host, b"") {
            return Err(bad("bad host name"));
        }
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(0) | Err(_) => return Err(bad("the port must be a number from 1 to 65535")),
                Ok(p) => Some(p),
            },
        };
        Ok(SshHop {
            user: user.map(str::to_string),
            host: host.to_string(),
            port,
        })
    }
}

impl fmt::Display for SshHop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(user) = &self.user {
            write!(f, "{user}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            write!(f, "{}", self.host)?;
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(user: Option<&str>, host: &str, port: Option<u16>) -> SshHop {
        SshHop {
            user: user.map(Into::into),
            host: host.into(),
            port,
        }
    }

    #[test]
    fn hops_in_the_forms_openssh_takes() {
        assert_eq!(SshHop::parse("bastion"), Ok(hop(None, "bastion", None)));
        assert_eq!(
            SshHop::parse("me@bastion:2222"),
            Ok(hop(Some("me"), "bastion", Some(2222)))
        );
        assert_eq!(
            SshHop::parse("ssh://me@10.0.0.1:22"),
            Ok(hop(Some("me"), "10.0.0.1", Some(22)))
        );
        assert_eq!(SshHop::parse("[::1]:22"), Ok(hop(None, "::1", Some(22))));
        assert_eq!(SshHop::parse("[fe80::1]"), Ok(hop(None, "fe80::1", None)));
        assert_eq!(
            parse_hops("a,me@b:2"),
            Ok(vec![hop(None, "a", None), hop(Some("me"), "b", Some(2))])
        );
        assert_eq!(parse_hops("none"), Ok(vec![]));
    }

    #[test]
    fn bad_hops_are_refused_with_the_reason() {
        for (text, why) in [
            ("", "bad host name"),
            ("-oProxyCommand=x", "bad host name"),
            ("-u@h", "bad user name"),
            ("@h", "bad user name"),
            ("h:0", "port"),
            ("h:x", "port"),
            ("h:70000", "port"),
            ("::1", "IPv6"),
            ("[::1", "closing"),
            ("[::1]x", "[address]"),
            ("a b", "bad host name"),
        ] {
            let err = SshHop::parse(text).expect_err(text);
            assert!(err.contains(why), "{text:?}: {err}");
        }
        assert!(parse_hops("a,,b").is_err());
    }

    #[test]
    fn hop_lists_display_as_they_parse() {
        for text in ["none", "bastion", "me@b:2222,[::1]:22,c"] {
            let hops = parse_hops(text).unwrap();
            assert_eq!(display_hops(&hops), text);
        }
    }
}
