//! Credentials kept out of evidence: a remote URL's password, and the user name of a web
//! URL (often a token), replaced before the URL is recorded.

use super::REDACTED_URL_CREDENTIALS;

/// Replace credentials in a URL with [`REDACTED_URL_CREDENTIALS`]: a password anywhere,
/// and any user name of an http(s)/ftp(s) URL (tokens are often sent as user names). An
/// ssh user such as `git@` is kept.
pub fn redact_url_credentials(url: &str) -> String {
    if let Some(scheme_end) = url.find("://") {
        let scheme = url[..scheme_end].to_ascii_lowercase();
        let rest = &url[scheme_end + 3..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let Some(at) = rest[..authority_end].rfind('@') else {
            return url.to_string();
        };
        let userinfo = &rest[..at];
        let web = matches!(scheme.as_str(), "http" | "https" | "ftp" | "ftps");
        if userinfo.contains(':') || web {
            return format!(
                "{}://{REDACTED_URL_CREDENTIALS}{}",
                &url[..scheme_end],
                &rest[at..]
            );
        }
        return url.to_string();
    }
    // scp-like `user:password@host:path` (not a real form, but never keep a password).
    if let Some(at) = url.find('@') {
        let userinfo = &url[..at];
        if userinfo.contains(':') && !userinfo.contains('/') {
            return format!("{REDACTED_URL_CREDENTIALS}{}", &url[at..]);
        }
    }
    url.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords_and_web_user_names() {
        assert_eq!(
            redact_url_credentials("https://user:s3cret@example.com/a/b.git"),
            "https://[REDACTED:url_credentials]@example.com/a/b.git"
        );
        assert_eq!(
            redact_url_credentials("https://ghp_token@github.com/a/b"),
            "https://[REDACTED:url_credentials]@github.com/a/b"
        );
        assert_eq!(
            redact_url_credentials("ssh://git:pw@host:22/x"),
            "ssh://[REDACTED:url_credentials]@host:22/x"
        );
        for kept in [
            "ssh://git@host/x.git",
            "git@github.com:a/b.git",
            "https://github.com/a/b.git",
            "/srv/git/origin.git",
            "https://example.com/path/with@at",
            "file:///tmp/x",
        ] {
            assert_eq!(redact_url_credentials(kept), kept);
        }
        assert_eq!(
            redact_url_credentials("user:pw@host:path"),
            "[REDACTED:url_credentials]@host:path"
        );
    }
}
