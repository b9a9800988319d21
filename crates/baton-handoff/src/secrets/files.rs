//! Secrets in the files of a plain snapshot (`baton save DIR`): every file scanned (in
//! parallel) before a single object is written, and a flagged file read back redacted.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use baton_error::{Error, Result};

/// Files up to this size are scanned (and redacted) in memory; larger ones are scanned
/// in chunks and cannot be redacted.
pub const REDACT_LIMIT: u64 = 16 << 20;

/// A snapshot file that holds secrets.
#[derive(Clone, Debug)]
pub struct Found {
    pub path: PathBuf,
    /// Counts by kind, or `None` with `big_kinds` for a file scanned in chunks.
    pub counts: Option<BTreeMap<&'static str, u64>>,
    pub big_kinds: BTreeSet<&'static str>,
}

impl Found {
    pub fn kinds(&self) -> Vec<&'static str> {
        match &self.counts {
            Some(counts) => counts.keys().copied().collect(),
            None => self.big_kinds.iter().copied().collect(),
        }
    }
}

/// How a snapshot's file is opened (beneath its directory: `Snapshot::open_file`).
pub type Open<'a> = &'a (dyn Fn(&Path) -> Result<std::fs::File> + Sync);

/// Scan every file for secrets (in parallel); the files that hold some, in input order.
pub fn scan_files(files: &[&Path], open: Open) -> Result<Vec<Found>> {
    use rayon::prelude::*;
    let found: Vec<Option<Found>> = files
        .par_iter()
        .map(|path| {
            let mut file = open(path)?;
            let len = file
                .metadata()
                .map_err(|e| Error::io("cannot stat", path, e))?
                .len();
            let (counts, big_kinds) = if len <= REDACT_LIMIT {
                let mut bytes = Vec::with_capacity(len as usize);
                (&mut file)
                    .take(REDACT_LIMIT + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|e| Error::io("cannot read", path, e))?;
                let counts = super::scan(&bytes);
                if counts.is_empty() {
                    return Ok(None);
                }
                (Some(counts), Default::default())
            } else {
                let kinds =
                    super::scan_reader(&mut file).map_err(|e| Error::io("cannot read", path, e))?;
                if kinds.is_empty() {
                    return Ok(None);
                }
                (None, kinds)
            };
            Ok(Some(Found {
                path: path.to_path_buf(),
                counts,
                big_kinds,
            }))
        })
        .collect::<Result<_>>()?;
    Ok(found.into_iter().flatten().collect())
}

/// The bytes of `path` with its secrets replaced by placeholders (a file of at most
/// [`REDACT_LIMIT`] bytes, as `scan_files` found it).
pub fn read_redacted(path: &Path, open: Open) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open(path)?
        .take(REDACT_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("cannot read", path, e))?;
    Ok(super::redact(&bytes).bytes)
}

/// Every kind found, once, sorted.
pub fn all_kinds(found: &[Found]) -> Vec<&'static str> {
    let kinds: BTreeSet<_> = found.iter().flat_map(|f| f.kinds()).collect();
    kinds.into_iter().collect()
}

/// "github_token (1 file), password_assignment (2 files)".
pub fn describe_files(found: &[Found]) -> String {
    let mut files: BTreeMap<&'static str, u64> = BTreeMap::new();
    for f in found {
        for kind in f.kinds() {
            *files.entry(kind).or_default() += 1;
        }
    }
    files
        .iter()
        .map(|(k, n)| format!("{k} ({n} file{})", if *n == 1 { "" } else { "s" }))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_with_secrets_are_found_and_redaction_reads_them_back() {
        let tmp = tempfile::tempdir().unwrap();
        let clean = tmp.path().join("clean.txt");
        let leaky = tmp.path().join("leaky.txt");
        std::fs::write(&clean, b"nothing to see\n").unwrap();
        let token = format!("ghp_{}", "a1B2c3D4e5".repeat(4).get(..36).unwrap());
        std::fs::write(&leaky, format!("token = {token}\n")).unwrap();
        let open = |p: &Path| baton_store::fsutil::open_regular(p);
        let found = scan_files(&[clean.as_path(), leaky.as_path()], &open).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].path, leaky);
        assert!(!found[0].kinds().is_empty());
        assert!(describe_files(&found).contains("(1 file)"));
        let redacted = read_redacted(&leaky, &open).unwrap();
        assert!(!String::from_utf8_lossy(&redacted).contains(&token));
    }
}
