//! Target URLs: `ssh://[user@]host[:port]/path`, scp-like `[user@]host:path`,
//! `/abs/path`, `file:///abs/path` and `s3://BUCKET[/PREFIX]`, strictly validated; an
//! `ssh://` URL may name jump hosts (`?jump=HOP[,HOP...]`, OpenSSH's `-J`).

mod jump;

pub use jump::{SshHop, display_hops, parse_hops};

use std::fmt;
use std::path::PathBuf;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use baton_error::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetUrl {
    Local {
        path: PathBuf,
    },
    Ssh {
        user: Option<String>,
        host: String,
        port: Option<u16>,
        path: String,
        /// `?jump=`: the hosts to go through, in order (`Some(empty)` is `jump=none`:
        /// directly, whatever `ProxyJump` the config sets); `None`: as the config says.
        jump: Option<Vec<SshHop>>,
    },
    /// An S3-compatible bucket; the store's keys sit under `PREFIX/` (none: the bucket's
    /// top). The endpoint and region are not part of the URL (target settings, AWS_*).
    S3 {
        bucket: String,
        prefix: String,
    },
}

fn malformed(text: &str, why: &str) -> Error {
    Error::usage(format!(
        "malformed target URL '{}': {why}",
        without_password(text).escape_debug()
    ))
    .with_hint("use ssh://[user@]host[:port]/path[?jump=HOP,...], [user@]host:path, /abs/path, file:///abs/path or s3://BUCKET[/PREFIX]")
}

/// The URL as it may be shown: a password in it is replaced, never echoed into logs.
fn without_password(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some("***"));
            url.to_string()
        }
        Ok(_) => text.to_string(),
        // Unparsable: hide everything between "://" and the last '@' of the authority.
        Err(_) => match (text.find("://"), text.rfind('@')) {
            (Some(start), Some(at)) if at > start => {
                format!("{}***{}", &text[..start + 3], &text[at..])
            }
            _ => text.to_string(),
        },
    }
}

/// Host names: letters, digits, '.', '-', '_' (IPv6 literals only inside ssh://[...]),
/// never starting with '-' so that no host can be read as an option.
fn check_host(text: &str, host: &str) -> Result<()> {
    if valid_host(host, b"[]") {
        Ok(())
    } else {
        Err(malformed(text, "bad host name"))
    }
}

/// A host name as target URLs and jump hosts take it: letters, digits, `.-_:` and the
/// bytes of `also`, never empty nor starting with '-'.
fn valid_host(host: &str, also: &[u8]) -> bool {
    !host.is_empty()
        && !host.starts_with('-')
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(&b) || also.contains(&b))
}

fn check_user(text: &str, user: &str) -> Result<()> {
    if valid_user(user) {
        Ok(())
    } else {
        Err(malformed(text, "bad user name"))
    }
}

/// A user name: nothing that could be read as an option or a second argument.
fn valid_user(user: &str) -> bool {
    !user.is_empty()
        && !user.starts_with('-')
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn check_path(text: &str, path: &str) -> Result<()> {
    if path.is_empty() || path.trim_end_matches('/').is_empty() {
        return Err(malformed(
            text,
            "no path (a store cannot be the file system root)",
        ));
    }
    if path.chars().any(char::is_control) {
        return Err(malformed(text, "control character in path"));
    }
    Ok(())
}

/// S3 bucket naming rules (general purpose buckets): 3 to 63 lowercase letters, digits,
/// '.' and '-', starting and ending with a letter or digit, no "..", not an IPv4
/// address, none of the reserved prefixes and suffixes.
fn check_bucket(text: &str, bucket: &str) -> Result<()> {
    let bytes = bucket.as_bytes();
    let edge = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let ok = (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b".-".contains(b))
        && edge(bytes.first())
        && edge(bytes.last())
        && !bucket.contains("..")
        && !bucket.contains(".-")
        && !bucket.contains("-.")
        && bucket.parse::<std::net::Ipv4Addr>().is_err()
        && !["xn--", "sthree-", "amzn-s3-demo-"]
            .iter()
            .any(|p| bucket.starts_with(p))
        && !["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"]
            .iter()
            .any(|s| bucket.ends_with(s));
    if ok {
        Ok(())
    } else {
        Err(malformed(
            text,
            "bad bucket name (3-63 lowercase letters, digits, '.' and '-')",
        ))
    }
}

/// A key prefix: '/'-separated components of S3's safe characters (letters, digits and
/// `!-_.*'()`), none empty, '.' or '..': no leading, trailing or doubled '/'.
fn check_prefix(text: &str, prefix: &str) -> Result<()> {
    for part in prefix.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(malformed(
                text,
                "empty, '.' or '..' component in the prefix (no leading, trailing or doubled '/')",
            ));
        }
        if !part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!-_.*'()".contains(&b))
        {
            return Err(malformed(
                text,
                "the prefix may hold only letters, digits, '/' and !-_.*'()",
            ));
        }
    }
    if prefix.len() > 512 {
        return Err(malformed(text, "prefix longer than 512 bytes"));
    }
    Ok(())
}

fn parse_s3(text: &str) -> Result<TargetUrl> {
    let rest = &text["s3://".len()..];
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.contains(['@', ':']) {
        return Err(malformed(
            text,
            "no credentials or port in an s3:// URL; the endpoint is set with --endpoint or AWS_ENDPOINT_URL",
        ));
    }
    check_bucket(text, bucket)?;
    if rest.contains('/') {
        check_prefix(text, prefix)?;
    }
    Ok(TargetUrl::S3 {
        bucket: bucket.to_string(),
        prefix: prefix.to_string(),
    })
}

impl TargetUrl {
    pub fn parse(text: &str) -> Result<TargetUrl> {
        if text.chars().any(|c| c.is_control() || c == ' ') && !text.starts_with('/') {
            return Err(malformed(text, "whitespace or control character"));
        }
        if text.starts_with("s3://") {
            return parse_s3(text);
        }
        if text.starts_with("ssh://") || text.starts_with("file://") {
            let url = url::Url::parse(text).map_err(|e| malformed(text, &e.to_string()))?;
            if url.password().is_some() {
                return Err(malformed(
                    text,
                    "credentials are never stored; use ssh-agent or a key file",
                ));
            }
            if url.fragment().is_some() || (url.query().is_some() && url.scheme() == "file") {
                return Err(malformed(text, "no query or fragment allowed"));
            }
            if url.scheme() == "file" {
                if !matches!(url.host_str(), None | Some("") | Some("localhost")) {
                    return Err(malformed(text, "file:// URLs name a local path"));
                }
                let path = url
                    .to_file_path()
                    .map_err(|_| malformed(text, "bad file path"))?;
                // Display (and so the config file) shows the path as text.
                if path.to_str().is_none() {
                    return Err(malformed(text, "path is not UTF-8"));
                }
                check_path(text, &path.to_string_lossy())?;
                return Ok(TargetUrl::Local { path });
            }
            let host = url
                .host_str()
                .ok_or_else(|| malformed(text, "no host"))?
                .to_string();
            check_host(text, &host)?;
            if url.port() == Some(0) {
                return Err(malformed(text, "port 0"));
            }
            if text["ssh://".len()..].starts_with('@') {
                return Err(malformed(text, "empty user name"));
            }
            let user = match url.username() {
                "" => None,
                u => {
                    check_user(text, u)?;
                    Some(u.to_string())
                }
            };
            // ssh://host/~/dir means `dir` under the login directory, as in git. Checked
            // before decoding, so that `%7E` is a literal `~` (how Display writes one).
            let encoded = url.path();
            let encoded = encoded.strip_prefix("/~/").unwrap_or(encoded);
            let path =
                percent_decode(encoded).ok_or_else(|| malformed(text, "path is not UTF-8"))?;
            check_path(text, &path)?;
            return Ok(TargetUrl::Ssh {
                user,
                host,
                port: url.port(),
                path,
                jump: parse_jump_query(text, &url)?,
            });
        }
        if text.starts_with('/') {
            check_path(text, text)?;
            return Ok(TargetUrl::Local {
                path: PathBuf::from(text),
            });
        }
        if text.contains("://") {
            return Err(malformed(text, "unsupported scheme"));
        }
        // scp-like: the colon must come before any slash, as git decides.
        let Some((authority, path)) = text.split_once(':') else {
            return Err(malformed(text, "a local target must be an absolute path"));
        };
        if authority.contains('/') {
            return Err(malformed(text, "a local target must be an absolute path"));
        }
        let (user, host) = match authority.rsplit_once('@') {
            Some((u, h)) => {
                check_user(text, u)?;
                (Some(u.to_string()), h.to_string())
            }
            None => (None, authority.to_string()),
        };
        if host.contains([':', '[', ']']) {
            return Err(malformed(
                text,
                "use ssh://[host]:port/path for IPv6 or ports",
            ));
        }
        check_host(text, &host)?;
        check_path(text, path)?;
        // The URL form (Display, and so the config file) cannot hold them: URL parsing
        // resolves them, which would turn `../x` beside the login directory into `/x`.
        if path.split('/').any(|c| c == "." || c == "..") {
            return Err(malformed(text, "'.' or '..' in the path"));
        }
        Ok(TargetUrl::Ssh {
            user,
            host,
            port: None,
            path: path.to_string(),
            jump: None,
        })
    }
}

/// The query of an `ssh://` URL: nothing, or exactly `jump=HOP[,HOP...]` (or `jump=none`).
fn parse_jump_query(text: &str, url: &url::Url) -> Result<Option<Vec<SshHop>>> {
    let Some(query) = url.query() else {
        return Ok(None);
    };
    let Some(list) = query.strip_prefix("jump=") else {
        return Err(malformed(
            text,
            "the only query an ssh:// URL takes is ?jump=HOP[,HOP...]",
        ));
    };
    let list = percent_decode(list).ok_or_else(|| malformed(text, "jump hosts are not UTF-8"))?;
    parse_hops(&list)
        .map(Some)
        .map_err(|why| malformed(text, &why))
}

/// What Display percent-encodes in a path so that `parse` reads the same path back: `%`
/// (else decoded), `?` and `#` (else a query or fragment), and what URL parsing encodes.
const PATH_ENCODE: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

fn percent_decode(path: &str) -> Option<String> {
    percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

impl fmt::Display for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetUrl::Local { path } => write!(f, "{}", path.display()),
            TargetUrl::Ssh {
                user,
                host,
                port,
                path,
                jump,
            } => {
                write!(f, "ssh://")?;
                if let Some(u) = user {
                    write!(f, "{u}@")?;
                }
                write!(f, "{host}")?;
                if let Some(p) = port {
                    write!(f, ":{p}")?;
                }
                let encoded = utf8_percent_encode(path, PATH_ENCODE).to_string();
                match encoded.strip_prefix("/~/") {
                    // An absolute path under a directory named `~`, not the login one.
                    Some(rest) => write!(f, "/%7E/{rest}"),
                    None if encoded.starts_with('/') => write!(f, "{encoded}"),
                    None => write!(f, "/~/{encoded}"),
                }?;
                match jump {
                    Some(hops) => write!(f, "?jump={}", display_hops(hops)),
                    None => Ok(()),
                }
            }
            TargetUrl::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            TargetUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssh(user: Option<&str>, host: &str, port: Option<u16>, path: &str) -> TargetUrl {
        TargetUrl::Ssh {
            user: user.map(Into::into),
            host: host.into(),
            port,
            path: path.into(),
            jump: None,
        }
    }

    #[test]
    fn accepted_forms() {
        assert_eq!(
            TargetUrl::parse("ssh://me@box:2222/srv/b").unwrap(),
            ssh(Some("me"), "box", Some(2222), "/srv/b")
        );
        assert_eq!(
            TargetUrl::parse("ssh://box/~/work/.baton").unwrap(),
            ssh(None, "box", None, "work/.baton")
        );
        assert_eq!(
            TargetUrl::parse("me@box:work").unwrap(),
            ssh(Some("me"), "box", None, "work")
        );
        assert_eq!(
            TargetUrl::parse("box:/abs").unwrap(),
            ssh(None, "box", None, "/abs")
        );
        assert_eq!(
            TargetUrl::parse("/mnt/disk/s").unwrap(),
            TargetUrl::Local {
                path: "/mnt/disk/s".into()
            }
        );
        assert_eq!(
            TargetUrl::parse("file:///mnt/x%20y").unwrap(),
            TargetUrl::Local {
                path: "/mnt/x y".into()
            }
        );
        assert_eq!(
            TargetUrl::parse("ssh://h/a%20b").unwrap(),
            ssh(None, "h", None, "/a b")
        );
    }

    #[test]
    fn refused_forms() {
        for bad in [
            "ssh://-oProxyCommand=x/p",
            "-oProxyCommand=x:p",
            "ssh://-u@host/p",
            "-u@host:p",
            "ssh://u:secret@host/p",
            "http://host/p",
            "relative/path",
            "host:",
            "ssh://host",
            "ssh://host/p?q=1",
            "ssh://host/p?jump=",
            "ssh://host/p?jump=-oProxyCommand=x",
            "ssh://host/p?jump=a&jump=b",
            "ssh://host/p?jump=a#f",
            "file:///p?jump=a",
            "ssh://host:0/x",
            "ssh://@host/x",
            "ssh://host/",
            "/",
            "file:///",
            "file://otherhost/p",
            "a b:path",
            "host:pa\nth",
            "host:../beside",
            "host:/a/./b",
            "file:///a/%ff",
            "",
            "s3://",
            "s3://ab",
            "s3://Team",
            "s3://-team/p",
            "s3://team-/p",
            "s3://te..am",
            "s3://192.168.1.1",
            "s3://xn--team",
            "s3://team/",
            "s3://team//p",
            "s3://team/p/",
            "s3://team/a/../b",
            "s3://team/./b",
            "s3://team/a b",
            "s3://team/a?b",
            "s3://key:secret@team/p",
            "s3://team:9000/p",
            "s3://team/%2e%2e",
        ] {
            assert!(TargetUrl::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn jump_hosts_in_the_query() {
        let url = TargetUrl::parse("ssh://dev@box/srv/b?jump=me@bastion:2222,inner").unwrap();
        let TargetUrl::Ssh { jump, path, .. } = &url else {
            panic!("{url:?}");
        };
        assert_eq!(path, "/srv/b");
        assert_eq!(
            jump.as_deref(),
            Some(
                &[
                    SshHop {
                        user: Some("me".into()),
                        host: "bastion".into(),
                        port: Some(2222)
                    },
                    SshHop {
                        user: None,
                        host: "inner".into(),
                        port: None
                    }
                ][..]
            )
        );
        assert_eq!(
            url.to_string(),
            "ssh://dev@box/srv/b?jump=me@bastion:2222,inner"
        );
        // A `?` of the path itself is encoded, so it is never read as the query.
        let url = TargetUrl::parse("box:/srv/a?jump=x").unwrap();
        assert!(matches!(&url, TargetUrl::Ssh { jump: None, path, .. } if path == "/srv/a?jump=x"));
    }

    #[test]
    fn s3_urls() {
        assert_eq!(
            TargetUrl::parse("s3://team-handoffs/baton/main").unwrap(),
            TargetUrl::S3 {
                bucket: "team-handoffs".into(),
                prefix: "baton/main".into()
            }
        );
        let top = TargetUrl::parse("s3://abc").unwrap();
        assert_eq!(
            top,
            TargetUrl::S3 {
                bucket: "abc".into(),
                prefix: String::new()
            }
        );
        assert_eq!(top.to_string(), "s3://abc");
        let long = format!("s3://{}", "a".repeat(64));
        assert!(TargetUrl::parse(&long).is_err());
        assert!(TargetUrl::parse(&format!("s3://{}", "a".repeat(63))).is_ok());
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "ssh://me@box:2222/srv/b",
            "ssh://box/~/w",
            "/mnt/d",
            "box:/srv/a?b#c",
            "box:/srv/100%41",
            "box:/~/abs",
            "box:~/rel",
            "ssh://box/%7E/abs",
            "ssh://box/srv?jump=me@bastion:2222,[::1]:22",
            "ssh://box/srv?jump=none",
            "s3://team-handoffs",
            "s3://team.handoffs/a/b-c_d",
        ] {
            let url = TargetUrl::parse(text).unwrap();
            assert_eq!(TargetUrl::parse(&url.to_string()).unwrap(), url);
        }
    }
}
