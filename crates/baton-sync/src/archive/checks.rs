//! Checks of what an archive holds: entry names and kinds, the log, the manifest.

use super::*;

pub(super) fn check_name(file: &Path, name: &[u8]) -> Result<()> {
    let shown = String::from_utf8_lossy(name).escape_debug().to_string();
    if name.first() == Some(&b'/') {
        return Err(malformed(
            file,
            format!("entry '{shown}' has an absolute path"),
        ));
    }
    if name.split(|&b| b == b'/').any(|c| c == b"..") {
        return Err(malformed(
            file,
            format!("entry '{shown}' has a '..' component"),
        ));
    }
    let ok = match std::str::from_utf8(name) {
        Ok(MANIFEST_NAME) | Ok(LOG_NAME) => true,
        Ok(text) => text
            .strip_prefix("objects/")
            .is_some_and(|hex| hex.len() == 64 && baton_format::id::is_lower_hex(hex)),
        Err(_) => false,
    };
    if !ok {
        return Err(malformed(
            file,
            format!(
                "unexpected entry '{shown}' (only {MANIFEST_NAME}, {LOG_NAME} and objects/<id> are allowed)"
            ),
        ));
    }
    Ok(())
}

pub(super) fn describe_kind(kind: tar::EntryType) -> &'static str {
    use tar::EntryType as T;
    match kind {
        T::Symlink => "symbolic link",
        T::Link => "hard link",
        T::Directory => "directory",
        T::Char => "character device",
        T::Block => "block device",
        T::Fifo => "FIFO",
        T::Continuous => "contiguous file",
        T::GNUSparse => "sparse file",
        T::XHeader | T::XGlobalHeader => "PAX extension header",
        T::GNULongName | T::GNULongLink => "GNU long-name header",
        _ => "entry of an unsupported type",
    }
}

/// A tar reader error as one printable phrase (the tar crate quotes raw header bytes).
pub(super) fn tar_error(e: &io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" when getting").next().unwrap_or_default();
    let text: String = text.chars().take(200).collect();
    text.trim_end_matches([':', ' ']).escape_debug().to_string()
}

pub(super) fn short_entry(file: &Path, name: &str, got: u64, declared: u64) -> Error {
    malformed(
        file,
        format!("entry {name} holds {got} bytes, its header declares {declared} (truncated)"),
    )
}

pub(super) fn duplicate(name: &str) -> Error {
    Error::integrity(format!(
        "the archive holds two entries {name} with different bytes"
    ))
    .with_hint("nothing was imported; the archive is damaged or forged")
}

/// Every log line must decode; a final line without its newline is refused.
pub(super) fn check_log(bytes: &[u8]) -> Result<u64> {
    let mut rest = bytes;
    let mut line_no = 0u64;
    while !rest.is_empty() {
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return Err(Error::integrity(format!(
                "the archive's log ends in a partial line (after line {line_no})"
            )));
        };
        line_no += 1;
        LogEntry::decode_line(&rest[..end], line_no as usize)
            .map_err(|e| e.recast(baton_error::ErrorKind::Integrity, "the archive's log"))?;
        rest = &rest[end + 1..];
    }
    Ok(line_no)
}

/// The manifest's bundles (deduplicated, in order) and its `current`, checked.
pub(super) fn check_manifest(
    file: &Path,
    received: &Received,
) -> Result<(Vec<ObjectId>, ObjectId)> {
    let m = &received.manifest;
    if m.format != FORMAT {
        return Err(malformed(
            file,
            format!(
                "{MANIFEST_NAME} has format '{}', not {FORMAT}",
                m.format.escape_debug()
            ),
        ));
    }
    if m.version != VERSION {
        return Err(Error::new(
            baton_error::ErrorKind::Unsupported,
            format!(
                "{} is a baton archive version {}; this baton reads version {VERSION}",
                file.display(),
                m.version
            ),
        ));
    }
    let parse = |text: &str| {
        ObjectId::parse(text).map_err(|_| {
            malformed(
                file,
                format!(
                    "{MANIFEST_NAME} names '{}', not a bundle id",
                    text.escape_debug()
                ),
            )
        })
    };
    let mut bundles = Vec::new();
    for text in &m.bundles {
        let id = parse(text)?;
        if !bundles.contains(&id) {
            bundles.push(id);
        }
    }
    let current = parse(&m.current)?;
    if bundles.is_empty() {
        return Err(malformed(file, format!("{MANIFEST_NAME} lists no bundles")));
    }
    if !bundles.contains(&current) {
        return Err(malformed(
            file,
            format!("{MANIFEST_NAME} names current {current}, which it does not list"),
        ));
    }
    for id in &bundles {
        if !received.staged.contains_key(id) {
            return Err(Error::integrity(format!(
                "the archive lists bundle {id} but does not hold it"
            ))
            .with_hint("nothing was imported; the archive is damaged or forged"));
        }
    }
    Ok((bundles, current))
}
