//! `@revoked` lines of known_hosts, which libssh2 does not enforce: the server's key is
//! compared with the key of every such line of every known_hosts file (user and global),
//! byte for byte.
//!
//! A revoked key is refused for every host, whatever the line's host patterns (plain,
//! wildcard or hashed `|1|`): a key is revoked because its private half is no longer
//! trusted, and OpenSSH's per-host reading would only let the same compromised key
//! through under another name. This is stricter than OpenSSH, never looser.

use std::fs;
use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The file and 1-based line of an `@revoked` entry holding `key`, if any.
pub(super) fn revoked_entry(files: &[PathBuf], key: &[u8]) -> Option<(PathBuf, usize)> {
    files.iter().find_map(|file| {
        let text = fs::read(file).ok()?;
        revoked_line(&text, key).map(|line| (file.clone(), line))
    })
}

/// The 1-based line of `text` that revokes `key`.
fn revoked_line(text: &[u8], key: &[u8]) -> Option<usize> {
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = String::from_utf8_lossy(line);
        if revoked_key(&line).is_some_and(|revoked| revoked.as_deref() == Some(key)) {
            return Some(i + 1);
        }
    }
    None
}

/// For an `@revoked HOSTS KEYTYPE BASE64 [COMMENT]` line, the key it revokes (`None`
/// inside when the line is malformed: loading refuses such a file, so that a revocation
/// is never skipped unseen); `None` for any other line.
pub(super) fn revoked_key(line: &str) -> Option<Option<Vec<u8>>> {
    let mut fields = line.split_ascii_whitespace();
    if !fields
        .next()
        .is_some_and(|m| m.eq_ignore_ascii_case("@revoked"))
    {
        return None;
    }
    let (Some(_hosts), Some(_key_type), Some(blob)) = (fields.next(), fields.next(), fields.next())
    else {
        return Some(None);
    };
    Some(STANDARD.decode(blob).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revoked_lines_match_by_key_bytes_whatever_the_host() {
        let key = b"\0\0\0\x0bssh-ed25519\0\0\0\x20abcdefghijklmnopqrstuvwxyz012345";
        let b64 = STANDARD.encode(key);
        let other = STANDARD.encode(b"other");
        let text = format!(
            "host ssh-ed25519 {b64}\n@revoked other ssh-ed25519 {other}\n\
             @REVOKED |1|c2FsdA==|aGFzaA== ssh-ed25519 {b64} comment\n"
        );
        assert_eq!(revoked_line(text.as_bytes(), key), Some(3));
        assert_eq!(revoked_line(format!("h t {b64}\n").as_bytes(), key), None);
        assert_eq!(revoked_line(b"@revoked\n@revoked h t !!!\n", key), None);
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("known_hosts");
        fs::write(&file, &text).expect("write");
        assert_eq!(
            revoked_entry(&[dir.path().join("absent"), file.clone()], key),
            Some((file, 3))
        );
    }
}
