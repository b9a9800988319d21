//! Which cipher the session asks for: libssh2 lists its portable ChaCha20-Poly1305
//! first, which costs most of a bulk transfer's CPU, while AES-GCM and AES-CTR run on
//! AES-NI through OpenSSL. Without a `Ciphers` line in `~/.ssh/config` those come first;
//! with one, its list (after OpenSSH's `+`, `-` and `^` rules) is offered in its order.

use ssh2::{MethodType, Session};

use baton_error::{Error, Result};

/// baton's order when the ssh config says nothing: AES on AES-NI first, then the rest.
pub(super) const PREFERRED: [&str; 6] = [
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "aes128-ctr",
    "aes256-ctr",
    "aes192-ctr",
    "chacha20-poly1305@openssh.com",
];

/// The cipher list to offer: `configured` (a `Ciphers` line) in its order, else
/// `PREFERRED`, then every other cipher libssh2 supports only when nothing was
/// configured; names libssh2 does not support are left out.
pub(super) fn cipher_list(supported: &[&str], configured: Option<&[String]>) -> Vec<String> {
    match configured {
        Some(list) => list
            .iter()
            .filter(|c| supported.contains(&c.as_str()))
            .cloned()
            .collect(),
        None => {
            let mut out: Vec<String> = PREFERRED
                .iter()
                .filter(|c| supported.contains(c))
                .map(|c| c.to_string())
                .collect();
            // Whatever else this libssh2 offers (old CBC modes among them), after ours.
            for c in supported {
                if !out.iter().any(|o| o == c) && !c.ends_with("-cbc") && *c != "none" {
                    out.push(c.to_string());
                }
            }
            out
        }
    }
}

/// Set the cipher preference of both directions before the handshake; `configured` is
/// the `Ciphers` line of `config_file`, if it has one.
pub(super) fn prefer_ciphers(
    session: &Session,
    configured: Option<&[String]>,
    config_file: &std::path::Path,
) -> Result<()> {
    let supported = session
        .supported_algs(MethodType::CryptCs)
        .unwrap_or_default();
    if supported.is_empty() {
        return Ok(()); // nothing to choose from: libssh2 keeps its own order
    }
    let list = cipher_list(&supported, configured);
    if list.is_empty() {
        let asked = configured.map(|c| c.join(",")).unwrap_or_default();
        return Err(Error::usage(format!(
            "{}: Ciphers {asked} names no cipher baton's SSH library supports",
            config_file.display()
        ))
        .with_hint(format!(
            "list one of {} on the Ciphers line, or remove it",
            supported.join(", ")
        )));
    }
    let prefs = list.join(",");
    for method in [MethodType::CryptCs, MethodType::CryptSc] {
        session
            .method_pref(method, &prefs)
            .map_err(|e| Error::other(format!("cannot set cipher preferences: {}", e.message())))?;
    }
    Ok(())
}

/// The negotiated ciphers, for `BATON_TRACE`: `client-to-server` alone when both
/// directions agree, else `cs/sc`.
pub(super) fn negotiated(session: &Session) -> String {
    let cs = session.methods(MethodType::CryptCs).unwrap_or("?");
    let sc = session.methods(MethodType::CryptSc).unwrap_or("?");
    if cs == sc {
        cs.to_string()
    } else {
        format!("{cs}/{sc}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIBSSH2: [&str; 7] = [
        "chacha20-poly1305@openssh.com",
        "aes256-gcm@openssh.com",
        "aes128-gcm@openssh.com",
        "aes256-ctr",
        "aes192-ctr",
        "aes128-ctr",
        "aes256-cbc",
    ];

    #[test]
    fn aes_comes_first_unless_the_config_says_otherwise() {
        let list = cipher_list(&LIBSSH2, None);
        assert_eq!(list[0], "aes128-gcm@openssh.com");
        assert_eq!(
            list.last().map(String::as_str),
            Some("chacha20-poly1305@openssh.com")
        );
        assert!(!list.iter().any(|c| c.ends_with("-cbc")));
        let configured = vec![
            "chacha20-poly1305@openssh.com".to_string(),
            "twofish-cbc".to_string(),
            "aes128-ctr".to_string(),
        ];
        assert_eq!(
            cipher_list(&LIBSSH2, Some(&configured)),
            ["chacha20-poly1305@openssh.com", "aes128-ctr"]
        );
        assert!(cipher_list(&LIBSSH2, Some(&["twofish-cbc".to_string()])).is_empty());
    }
}
