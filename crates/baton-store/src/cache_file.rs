//! Cache files of the store's top directory, beside its history (the stat cache, the
//! target hints): each is a version line, a body (JSON, or the stat cache's binary
//! encoding) and a line with the hex BLAKE3 of both, written by
//! temp file and rename without fsync (a lost or torn file only costs work, and the
//! checksum makes a torn one ignored), and ignored whole when anything about it is off.
//! `verify` never reads them.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Store;
use super::leftovers::{self, Rule};
use baton_error::{Error, IoContext, Result};
use baton_format::ObjectId;

/// One cache file of the store's top directory.
pub(crate) struct CacheFile {
    /// Its name (`format::layout`).
    pub file: &'static str,
    /// Its first line; a reader ignores a file with any other.
    pub magic: &'static str,
    /// Its temp files' prefix (`.tmp-` as every temp file; the pid follows).
    pub temp_prefix: &'static str,
    /// A larger file is ignored (and replaced by the next write).
    pub max_len: u64,
    /// What it is, for messages.
    pub what: &'static str,
}

impl CacheFile {
    fn path(&self, store: &Store) -> PathBuf {
        store.root().join(self.file)
    }

    /// What the file holds, or `None` for a missing, damaged or newer-version file.
    pub fn read<T: DeserializeOwned>(&self, store: &Store) -> Option<T> {
        serde_json::from_slice(self.read_body(store)?.as_slice()).ok()
    }

    /// The body of the file (between the version line and the checksum line), or `None`
    /// for a missing, damaged or newer-version file.
    pub fn read_body(&self, store: &Store) -> Option<Body> {
        let bytes = super::fsutil::read_limited(&self.path(store), self.max_len).ok()?;
        let body = bytes.strip_prefix(self.magic.as_bytes())?;
        // The last line is the hex BLAKE3 of everything before it.
        let body = body.strip_suffix(b"\n")?;
        let at = body.iter().rposition(|b| *b == b'\n')?;
        let (body, sum) = (&body[..at], &body[at + 1..]);
        let mut hasher = blake3::Hasher::new();
        hasher.update(self.magic.as_bytes());
        hasher.update(body);
        if hasher.finalize().to_hex().as_bytes() != sum {
            return None;
        }
        let start = self.magic.len();
        Some(Body {
            range: start..start + body.len(),
            bytes,
        })
    }

    /// Replace the file with `contents` (temp file, rename, no fsync).
    pub fn write<T: Serialize>(&self, store: &Store, contents: &T) -> Result<()> {
        self.prepare(store, contents)?.publish()
    }

    /// Write `contents` to a temp file beside the file, to replace it by
    /// [`Prepared::publish`] (dropped unpublished, the temp file is removed).
    pub fn prepare<T: Serialize>(&self, store: &Store, contents: &T) -> Result<Prepared> {
        let json = serde_json::to_vec(contents)
            .map_err(|e| Error::other(format!("cannot encode the {}: {e}", self.what)))?;
        self.prepare_body(store, &json)
    }

    /// Write `body` framed (version line, checksum line) to a temp file beside the file.
    pub fn prepare_body(&self, store: &Store, body: &[u8]) -> Result<Prepared> {
        let mut bytes = Vec::with_capacity(self.magic.len() + body.len() + 66);
        bytes.extend_from_slice(self.magic.as_bytes());
        bytes.extend_from_slice(body);
        let sum = ObjectId::of(&bytes).to_hex();
        bytes.push(b'\n');
        bytes.extend_from_slice(sum.as_bytes());
        bytes.push(b'\n');

        let dir = store.root();
        leftovers::sweep(
            dir,
            &[Rule {
                prefix: self.temp_prefix,
                pid_after_prefix: true,
                by_age: true,
            }],
        );
        let mut temp = tempfile::Builder::new()
            .prefix(&format!("{}{}-", self.temp_prefix, std::process::id()))
            .permissions(PermissionsExt::from_mode(0o600))
            .tempfile_in(dir)
            .ctx("cannot create a temp file in", dir)?;
        temp.as_file()
            .set_permissions(PermissionsExt::from_mode(0o600))
            .ctx("cannot set permissions of", temp.path())?;
        temp.write_all(&bytes).ctx("cannot write", temp.path())?;
        Ok(Prepared {
            temp,
            dest: self.path(store),
        })
    }
}

/// A cache file's body, checked, in the buffer the file was read into.
pub(crate) struct Body {
    bytes: Vec<u8>,
    range: std::ops::Range<usize>,
}

impl Body {
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.bytes[self.range.clone()]
    }
}

/// A cache file written to its temp file, not yet in place.
pub struct Prepared {
    temp: tempfile::NamedTempFile,
    dest: PathBuf,
}

impl Prepared {
    /// Rename it into place.
    pub fn publish(self) -> Result<()> {
        let dest = self.dest;
        self.temp
            .persist(&dest)
            .map_err(|e| Error::io("cannot rename into", &dest, e.error))?;
        Ok(())
    }
}
