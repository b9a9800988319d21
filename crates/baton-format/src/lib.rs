//! The on-disk format as pure data: canonical encodings, ids and validation, no I/O.
//!
//! Everything here is specified normatively in `store-format/SPEC.md`; the test vectors in
//! `store-format/vectors/` are checked against these functions.

pub mod bundle;
pub mod config;
pub mod id;
pub mod layout;
pub mod log_entry;
pub mod names;
pub mod pack;
pub mod text;
pub mod tree;

pub use bundle::Bundle;
pub use config::StoreConfig;
pub use id::ObjectId;
pub use log_entry::LogEntry;
pub use tree::{EntryKind, Tree, TreeEntry};

use baton_error::{Error, Result};

/// The largest tree or bundle object a reader accepts. Blobs are unbounded and streamed;
/// metadata objects are read whole, so a hostile store must not make us allocate without
/// limit.
pub const MAX_METADATA_OBJECT: u64 = 64 << 20;

/// Encode a value as canonical JSON (compact, fields in declaration order).
pub(crate) fn to_canonical_json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Serializing plain structs of strings, integers, vectors and BTreeMaps cannot fail;
    // if it ever did, hashing empty bytes would give a wrong id, so stop instead.
    serde_json::to_vec(value).expect("canonical JSON of a format struct cannot fail")
}

/// Decode canonical JSON: parse strictly, then require that re-encoding gives back exactly
/// the same bytes, so that one value has exactly one encoding (and hence one id).
pub(crate) fn from_canonical_json<T>(what: &str, bytes: &[u8]) -> Result<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let value: T = serde_json::from_slice(bytes)
        .map_err(|e| Error::integrity(format!("{what} does not decode: {e}")))?;
    if to_canonical_json(&value) != bytes {
        return Err(Error::integrity(format!("{what} is not in canonical form")));
    }
    Ok(value)
}
