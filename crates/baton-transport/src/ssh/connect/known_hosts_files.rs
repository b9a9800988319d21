//! Which known_hosts files OpenSSH reads for a host: `UserKnownHostsFile` and
//! `GlobalKnownHostsFile` of the ssh config (several files an option, quoted names,
//! `none`) or their defaults, with the expansions `ssh` applies: `~` in both, and in user
//! files the `%` tokens and `${VAR}` environment variables (ssh_config(5), TOKENS).
//! ssh2-config hands both options over as raw words, quotes included, so the rest is
//! done here.

use std::path::{Path, PathBuf};

use ssh2_config::HostParams;

use baton_error::{Error, Result};

/// OpenSSH's defaults (ssh_config(5)).
const DEFAULT_USER_FILES: [&str; 2] = ["~/.ssh/known_hosts", "~/.ssh/known_hosts2"];
const DEFAULT_GLOBAL_FILES: [&str; 2] = ["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"];

/// What the `%` tokens of a user known_hosts file name stand for.
pub(super) struct Tokens<'a> {
    pub home: &'a Path,
    /// `%h`: the host connected to (after `HostName`).
    pub host: &'a str,
    /// `%n`: the host as given.
    pub original: &'a str,
    pub port: u16,
    /// `%r`: the remote user.
    pub remote_user: &'a str,
    /// `%k`: `HostKeyAlias`, else the host as given.
    pub alias: Option<&'a str>,
    /// `%j`: the jump hosts (`ProxyJump`'s list), or nothing.
    pub jump: &'a str,
}

/// The files of `UserKnownHostsFile` (`global` false) or `GlobalKnownHostsFile`.
pub(super) fn known_hosts_files(
    params: &HostParams,
    global: bool,
    tokens: &Tokens,
    config_path: &Path,
) -> Result<Vec<PathBuf>> {
    let option = if global {
        "GlobalKnownHostsFile"
    } else {
        "UserKnownHostsFile"
    };
    let words: Vec<String> = match params.unsupported_fields.get(&option.to_ascii_lowercase()) {
        Some(words) if !words.is_empty() => words.iter().map(|w| unquote(w)).collect(),
        _ => {
            let defaults = if global {
                &DEFAULT_GLOBAL_FILES
            } else {
                &DEFAULT_USER_FILES
            };
            defaults.iter().map(|d| d.to_string()).collect()
        }
    };
    if let [only] = words.as_slice()
        && only.eq_ignore_ascii_case("none")
    {
        return Ok(Vec::new());
    }
    let bad = |why: String| {
        Error::usage(format!("{}: {option} {why}", config_path.display()))
            .with_hint("write the file name out, or use the tokens ssh_config(5) lists for it")
    };
    words
        .iter()
        .map(|word| {
            let tilde = expand_tilde(word, tokens.home).map_err(&bad)?;
            let text = if global {
                tilde
            } else {
                expand_tokens(&tilde, tokens).map_err(&bad)?
            };
            let path = PathBuf::from(text);
            Ok(if path.is_relative() {
                tokens.home.join(".ssh").join(path)
            } else {
                path
            })
        })
        .collect()
}

/// A word as ssh2-config splits it (quoted spans kept whole, quotes included) without
/// its quotes; `\"` and `\\` inside quotes are the characters.
fn unquote(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut quoted = false;
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' if quoted => match chars.next() {
                Some(next @ ('"' | '\\')) => out.push(next),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

/// `~` and `~/...`: the home.
fn expand_tilde(word: &str, home: &Path) -> std::result::Result<String, String> {
    let home = home.to_string_lossy();
    if word == "~" {
        return Ok(home.to_string());
    }
    if let Some(rest) = word.strip_prefix("~/") {
        return Ok(format!("{}/{rest}", home.trim_end_matches('/')));
    }
    if word.starts_with('~') {
        return Err(format!(
            "names {word:?}: another user's home (~user) is not expanded by baton"
        ));
    }
    Ok(word.to_string())
}

/// The `%` tokens and `${VAR}` variables of a user known_hosts file name.
fn expand_tokens(text: &str, tokens: &Tokens) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '%' => {
                let Some(token) = chars.next() else {
                    return Err(format!("{text:?} ends in a lone %"));
                };
                match token {
                    '%' => out.push('%'),
                    'd' => out.push_str(&tokens.home.to_string_lossy()),
                    'h' => out.push_str(tokens.host),
                    'n' => out.push_str(tokens.original),
                    'p' => out.push_str(&tokens.port.to_string()),
                    'r' => out.push_str(tokens.remote_user),
                    'k' => out.push_str(tokens.alias.unwrap_or(tokens.original)),
                    'u' => out.push_str(&super::local_user().unwrap_or_default()),
                    'i' => out.push_str(&baton_store::login_name::uid().to_string()),
                    'l' | 'L' => {
                        let name = hostname::get()
                            .map(|h| h.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        let name = match token {
                            'L' => name.split('.').next().unwrap_or_default().to_string(),
                            _ => name,
                        };
                        out.push_str(&name);
                    }
                    'j' => out.push_str(tokens.jump),
                    other => {
                        return Err(format!(
                            "{text:?} has the token %{other}, which baton does not expand here"
                        ));
                    }
                }
            }
            '$' if chars.peek() == Some(&'{') => {
                chars.next();
                let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
                if name == "HOME" {
                    out.push_str(&tokens.home.to_string_lossy());
                    continue;
                }
                match std::env::var(&name) {
                    Ok(value) => out.push_str(&value),
                    Err(_) => {
                        return Err(format!(
                            "{text:?} names the environment variable {name}, which is not set"
                        ));
                    }
                }
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// A known_hosts file that names something other than a regular file: refused rather
/// than read (a FIFO would block, a device never end).
pub(super) fn not_a_file(file: &Path) -> Error {
    Error::other(format!(
        "known_hosts file {} is not a regular file",
        file.display()
    ))
    .with_hint("point UserKnownHostsFile or GlobalKnownHostsFile in ~/.ssh/config at a file")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_lose_their_quotes_and_keep_escaped_ones() {
        assert_eq!(unquote("\"/a b/kh\""), "/a b/kh");
        assert_eq!(unquote("x\"y z\""), "xy z");
        assert_eq!(unquote("\"a\\\"b\\\\c\""), "a\"b\\c");
        assert_eq!(unquote("plain"), "plain");
    }

    #[test]
    fn tokens_and_variables_expand_as_ssh_does() {
        let home = Path::new("/home/me");
        let tokens = Tokens {
            home,
            host: "10.0.0.1",
            original: "box",
            port: 2222,
            remote_user: "git",
            alias: None,
            jump: "me@bastion:2222",
        };
        assert_eq!(
            expand_tokens("%d/kh-%h-%p-%r-%n-%k-%j-%%", &tokens).unwrap(),
            "/home/me/kh-10.0.0.1-2222-git-box-box-me@bastion:2222-%"
        );
        assert_eq!(expand_tokens("${HOME}/x", &tokens).unwrap(), "/home/me/x");
        assert!(expand_tokens("%C", &tokens).is_err());
        assert!(expand_tokens("50%", &tokens).is_err());
        assert!(expand_tokens("${BATON_SURELY_UNSET_VARIABLE}", &tokens).is_err());
        assert_eq!(expand_tilde("~/.ssh/kh", home).unwrap(), "/home/me/.ssh/kh");
        assert!(expand_tilde("~other/kh", home).is_err());
    }
}
