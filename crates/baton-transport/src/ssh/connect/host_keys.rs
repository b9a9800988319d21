//! Host key verification against known_hosts: loading every user and global file into
//! one set, line by line through libssh2's parser (whose own file reader cuts lines at
//! 4 KiB and rejects a whole file for one bad line), preferring the key types already
//! known for the host, refusing `@revoked` and changed keys, and recording a new key
//! (accept-new) the way OpenSSH does.

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use ssh2::{CheckResult, HashType, KnownHostFileKind, KnownHosts, MethodType, Session};

use super::known_hosts_files::not_a_file;
use super::{NewHostKeys, Resolved, host_port, revoked, shell_quote};
use baton_error::{Error, ErrorKind, Result};

/// The name known_hosts uses for the host: `host` on port 22, else `[host]:port`.
pub fn known_hosts_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

/// OpenSSH's fingerprint form: `SHA256:` and the unpadded base64 of the digest.
pub fn fingerprint_sha256(digest: &[u8]) -> String {
    format!("SHA256:{}", STANDARD_NO_PAD.encode(digest))
}

/// Largest known_hosts file read (OpenSSH's own are a few hundred bytes a host).
const MAX_KNOWN_HOSTS: u64 = 64 << 20;

/// Load `files` (user files, then global ones) into one set, as OpenSSH does: a key
/// listed in any of them is known. A missing file is no file; one that cannot be read or
/// holds a line libssh2 cannot parse is an error naming the file and line.
pub(super) fn load_known_hosts(session: &Session, files: &[PathBuf]) -> Result<KnownHosts> {
    let mut known_hosts = session
        .known_hosts()
        .map_err(|e| Error::other(format!("cannot initialize known hosts: {}", e.message())))?;
    for file in files {
        let Some(bytes) = read_known_hosts(file)? else {
            continue;
        };
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let text = String::from_utf8_lossy(line);
            let text = text.trim_end_matches('\r');
            if let Some(revoked) = revoked::revoked_key(text) {
                // Enforced by `revoked`, and only if it can be read.
                if revoked.is_none() {
                    return Err(Error::new(
                        ErrorKind::Security,
                        format!(
                            "known_hosts file {}:{} has an @revoked line whose key cannot be read",
                            file.display(),
                            i + 1
                        ),
                    )
                    .with_hint("fix the line (@revoked HOSTS KEYTYPE BASE64): baton does not connect past a revocation it cannot check"));
                }
                continue;
            }
            if is_marker(text, "@cert-authority") {
                // libssh2 verifies no host certificates, so a CA vouches for no key here.
                continue;
            }
            if let Err(e) = known_hosts.read_str(text, KnownHostFileKind::OpenSSH) {
                return Err(Error::other(format!(
                    "cannot load known_hosts file {}:{}: libssh2 cannot parse that line ({})",
                    file.display(),
                    i + 1,
                    e.message()
                ))
                .with_hint("fix or delete the offending line (ssh-keygen -R HOST rewrites the file), or point UserKnownHostsFile or GlobalKnownHostsFile elsewhere"));
            }
        }
    }
    Ok(known_hosts)
}

/// The bytes of a known_hosts file, `None` when it does not exist.
fn read_known_hosts(file: &Path) -> Result<Option<Vec<u8>>> {
    match fs::metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("cannot read known_hosts file", file, e)),
        Ok(m) if !m.is_file() => return Err(not_a_file(file)),
        Ok(m) if m.len() > MAX_KNOWN_HOSTS => {
            return Err(Error::other(format!(
                "known_hosts file {} is {} bytes, more than baton reads ({MAX_KNOWN_HOSTS})",
                file.display(),
                m.len()
            )));
        }
        Ok(_) => {}
    }
    let mut bytes = Vec::new();
    fs::File::open(file)
        .and_then(|f| f.take(MAX_KNOWN_HOSTS + 1).read_to_end(&mut bytes))
        .map_err(|e| Error::io("cannot read known_hosts file", file, e))?;
    Ok(Some(bytes))
}

/// Whether `line` starts with the marker `marker` (`@cert-authority`, `@revoked`).
fn is_marker(line: &str, marker: &str) -> bool {
    line.split_ascii_whitespace()
        .next()
        .is_some_and(|m| m.eq_ignore_ascii_case(marker))
}

/// The file and line of the entry that holds a different key for `name`.
fn mismatching_entry(
    session: &Session,
    files: &[PathBuf],
    name: &str,
    key: &[u8],
) -> Option<(PathBuf, usize)> {
    for file in files {
        let Ok(bytes) = fs::read(file) else { continue };
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let text = String::from_utf8_lossy(line);
            if text.trim_start().starts_with('@') {
                continue;
            }
            let Ok(mut one) = session.known_hosts() else {
                return None;
            };
            if one.read_str(&text, KnownHostFileKind::OpenSSH).is_ok()
                && matches!(one.check(name, key), CheckResult::Mismatch)
            {
                return Some((file.clone(), i + 1));
            }
        }
    }
    None
}

/// The key types (`ssh-ed25519`, `ssh-rsa`, ...) that known_hosts records for `name`,
/// plain or hashed: each recorded key is checked against the host through libssh2.
pub(super) fn known_key_types(known_hosts: &KnownHosts, name: &str) -> Vec<String> {
    // A key that matches nothing: NotFound means no entry at all for this host.
    if matches!(known_hosts.check(name, &[0u8]), CheckResult::NotFound) {
        return Vec::new();
    }
    let Ok(entries) = known_hosts.hosts() else {
        return Vec::new();
    };
    let mut types: Vec<String> = Vec::new();
    for entry in entries {
        let Ok(blob) = STANDARD.decode(entry.key()) else {
            continue;
        };
        let Some(key_type) = blob_key_type(&blob) else {
            continue;
        };
        if types.iter().any(|t| t == key_type) {
            continue;
        }
        if matches!(known_hosts.check(name, &blob), CheckResult::Match) {
            types.push(key_type.to_string());
        }
    }
    types
}

/// The key type named at the start of an SSH public key blob (RFC 4253 `string`).
pub(super) fn blob_key_type(blob: &[u8]) -> Option<&str> {
    let len = u32::from_be_bytes(blob.get(..4)?.try_into().ok()?) as usize;
    if len == 0 || len > 64 {
        return None;
    }
    std::str::from_utf8(blob.get(4..4 + len)?).ok()
}

/// Host key algorithms that prove possession of a key of this type.
fn algorithms_for_key_type(key_type: &str) -> &'static [&'static str] {
    match key_type {
        "ssh-ed25519" => &["ssh-ed25519"],
        "ecdsa-sha2-nistp256" => &["ecdsa-sha2-nistp256"],
        "ecdsa-sha2-nistp384" => &["ecdsa-sha2-nistp384"],
        "ecdsa-sha2-nistp521" => &["ecdsa-sha2-nistp521"],
        // SHA-1 `ssh-rsa` stays off: rsa-sha2 signatures with the same key.
        "ssh-rsa" => &["rsa-sha2-512", "rsa-sha2-256"],
        _ => &[],
    }
}

/// Put the algorithms of the key types already known for the host first. Without this,
/// a server that prefers another type makes libssh2 answer Mismatch instead of Match.
pub(super) fn prefer_host_key_types(session: &Session, known_types: &[String]) -> Result<()> {
    if known_types.is_empty() {
        return Ok(());
    }
    let supported = session
        .supported_algs(MethodType::HostKey)
        .unwrap_or_default();
    let mut prefs: Vec<&str> = Vec::new();
    for key_type in known_types {
        for alg in algorithms_for_key_type(key_type) {
            if supported.contains(alg) && !prefs.contains(alg) {
                prefs.push(alg);
            }
        }
    }
    if prefs.is_empty() {
        return Ok(());
    }
    // Then every other algorithm, in libssh2's order, leaving out SHA-1 and DSA ones.
    for alg in &supported {
        if !prefs.contains(alg) && *alg != "ssh-rsa" && *alg != "ssh-dss" {
            prefs.push(alg);
        }
    }
    session
        .method_pref(MethodType::HostKey, &prefs.join(","))
        .map_err(|e| Error::other(format!("cannot set host key preferences: {}", e.message())))
}

pub(super) fn verify_host_key(
    session: &Session,
    known_hosts: &KnownHosts,
    name: &str,
    known_types: &[String],
    res: &Resolved,
) -> Result<()> {
    let where_ = host_port(&res.host, res.port);
    let (key, _) = session.host_key().ok_or_else(|| {
        Error::new(
            ErrorKind::Security,
            format!("the SSH server at {where_} sent no host key"),
        )
    })?;
    let key = key.to_vec();
    let key_type = blob_key_type(&key).unwrap_or("unknown").to_string();
    let fingerprint = session
        .host_key_hash(HashType::Sha256)
        .map(fingerprint_sha256)
        .unwrap_or_else(|| "SHA256:?".to_string());
    let first_file = res.known_hosts_files.first();
    let all_files = res.all_known_hosts();
    let files_text = match all_files.as_slice() {
        [] => "no known_hosts file (UserKnownHostsFile and GlobalKnownHostsFile none)".to_string(),
        files => files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    };

    // libssh2 ignores `@revoked` lines: a revoked key is refused before anything else,
    // whatever plain line also lists it, and never recorded by accept-new.
    if let Some((file, line)) = revoked::revoked_entry(&all_files, &key) {
        return Err(Error::new(
            ErrorKind::Security,
            format!(
                "host key of {name} ({key_type} {fingerprint}) is REVOKED in {}:{line}; refusing to connect",
                file.display()
            ),
        )
        .with_hint("the server's key was marked as compromised: ask its administrator for a new host key, and do not remove the @revoked line to get in"));
    }
    match known_hosts.check(name, &key) {
        CheckResult::Match => Ok(()),
        CheckResult::NotFound => match (res.new_host_keys, first_file) {
            (NewHostKeys::Accept, Some(file)) => append_known_host(file, name, &key_type, &key),
            (NewHostKeys::Accept, None) => Err(Error::new(
                ErrorKind::Security,
                format!("host key of {name} ({key_type} {fingerprint}) is unknown and there is no known_hosts file to record it in"),
            )
            .with_hint("set UserKnownHostsFile in ~/.ssh/config")),
            (NewHostKeys::Refuse, _) => {
                let target = match first_file {
                    Some(f) => shell_quote(&f.display().to_string()),
                    None => "~/.ssh/known_hosts".to_string(),
                };
                Err(Error::new(
                    ErrorKind::Security,
                    format!("host {name} is not known ({files_text}); it presents the {key_type} key {fingerprint}"),
                )
                .with_hint(match &res.host_key_alias {
                    Some(alias) => format!(
                        "if that is the server's fingerprint, connect again with --accept-new-host-key (it records the key under the HostKeyAlias {alias} in {target})"
                    ),
                    None => format!(
                        "if that is the server's fingerprint, connect again with --accept-new-host-key, or run: ssh-keyscan -p {} {} >> {target}",
                        res.port,
                        shell_quote(&res.host)
                    ),
                }))
            }
        },
        CheckResult::Mismatch => {
            let at = match mismatching_entry(session, &all_files, name, &key) {
                Some((file, line)) => format!("{}:{line}", file.display()),
                None => files_text.clone(),
            };
            let why = if !known_types.is_empty() && !known_types.contains(&key_type) {
                format!(
                    " (known_hosts records only {} keys for it, and the server now offers a {key_type} key)",
                    known_types.join(", ")
                )
            } else {
                String::new()
            };
            let file_arg = match first_file {
                Some(f) => format!("-f {} ", shell_quote(&f.display().to_string())),
                None => String::new(),
            };
            Err(Error::new(
                ErrorKind::Security,
                format!(
                    "host key for {name} has CHANGED: the server presents {key_type} {fingerprint}, which differs from the key recorded in {at}{why}; someone may be intercepting the connection, or the server was reinstalled"
                ),
            )
            .with_hint(format!(
                "after confirming the new fingerprint with the server's administrator, remove the old key with: ssh-keygen {file_arg}-R {}, then connect again with --accept-new-host-key",
                shell_quote(name)
            )))
        }
        CheckResult::Failure => Err(Error::new(
            ErrorKind::Security,
            format!("cannot check the host key of {name} against {files_text}"),
        )
        .with_hint("check that known_hosts is a valid OpenSSH known_hosts file")),
    }
}

/// Append `name keytype base64` as OpenSSH does, creating the file (0600) and its
/// directory (0700) if needed.
fn append_known_host(file: &Path, name: &str, key_type: &str, key: &[u8]) -> Result<()> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io("cannot create directory", dir, e))?;
    }
    let mut f = fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(file)
        .map_err(|e| Error::io("cannot open known_hosts file", file, e))?;
    let len = f
        .metadata()
        .map_err(|e| Error::io("cannot read known_hosts file", file, e))?
        .len();
    let mut line = String::new();
    if len > 0 {
        let mut last = [0u8; 1];
        f.seek(SeekFrom::Start(len - 1))
            .and_then(|_| f.read_exact(&mut last))
            .map_err(|e| Error::io("cannot read known_hosts file", file, e))?;
        if last[0] != b'\n' {
            line.push('\n');
        }
    }
    line.push_str(&format!("{name} {key_type} {}\n", STANDARD.encode(key)));
    f.write_all(line.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io("cannot write known_hosts file", file, e))
}
