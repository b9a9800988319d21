//! Pack files: many stored objects in one file, with a sorted index at the end.
//!
//! Layout: `PACK_MAGIC`, then the objects' stored bytes back to back (each exactly what a
//! loose object file would hold), then the index (`INDEX_ENTRY_LEN` bytes per object,
//! sorted by id: id, offset, length as big-endian u64), then the footer: object count,
//! index offset (both big-endian u64) and `FOOTER_MAGIC`. A pack is named by the BLAKE3
//! of all its bytes, so it is immutable like any object.

use crate::ObjectId;
use baton_error::{Error, Result};

pub const PACK_MAGIC: &[u8; 16] = b"baton-pack-v1\n\0\0";
pub const FOOTER_MAGIC: &[u8; 16] = b"baton-pack-end\n\0";
pub const INDEX_ENTRY_LEN: u64 = 48;
pub const FOOTER_LEN: u64 = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackEntry {
    pub id: ObjectId,
    pub offset: u64,
    pub length: u64,
}

/// Encode the index and footer for `entries` (any order), given where the index starts.
pub fn encode_index(mut entries: Vec<PackEntry>, index_offset: u64) -> Vec<u8> {
    entries.sort_by_key(|a| a.id);
    entries.dedup_by(|a, b| a.id == b.id);
    let mut out =
        Vec::with_capacity(entries.len() * INDEX_ENTRY_LEN as usize + FOOTER_LEN as usize);
    for e in &entries {
        out.extend_from_slice(e.id.as_bytes());
        out.extend_from_slice(&e.offset.to_be_bytes());
        out.extend_from_slice(&e.length.to_be_bytes());
    }
    out.extend_from_slice(&(entries.len() as u64).to_be_bytes());
    out.extend_from_slice(&index_offset.to_be_bytes());
    out.extend_from_slice(FOOTER_MAGIC);
    out
}

/// Parse a footer (the last `FOOTER_LEN` bytes of a pack of `pack_len` bytes) into the
/// object count and index offset, checking that they describe this file exactly.
pub fn decode_footer(footer: &[u8], pack_len: u64) -> Result<(u64, u64)> {
    let bad = |why: &str| Error::integrity(format!("pack footer is invalid: {why}"));
    if footer.len() as u64 != FOOTER_LEN || &footer[16..] != FOOTER_MAGIC {
        return Err(bad("no end marker"));
    }
    let count = u64::from_be_bytes(footer[0..8].try_into().map_err(|_| bad("count"))?);
    let index_offset = u64::from_be_bytes(footer[8..16].try_into().map_err(|_| bad("offset"))?);
    let expected = count
        .checked_mul(INDEX_ENTRY_LEN)
        .and_then(|n| n.checked_add(index_offset))
        .and_then(|n| n.checked_add(FOOTER_LEN));
    if index_offset < PACK_MAGIC.len() as u64 || expected != Some(pack_len) {
        return Err(bad("index does not fit the file"));
    }
    Ok((count, index_offset))
}

/// Parse the index bytes (between the index offset and the footer). Entries must be
/// strictly sorted by id and lie inside the object area.
pub fn decode_index(bytes: &[u8], index_offset: u64) -> Result<Vec<PackEntry>> {
    if !(bytes.len() as u64).is_multiple_of(INDEX_ENTRY_LEN) {
        return Err(Error::integrity("pack index has a partial entry"));
    }
    let mut entries: Vec<PackEntry> = Vec::with_capacity(bytes.len() / INDEX_ENTRY_LEN as usize);
    for chunk in bytes.chunks_exact(INDEX_ENTRY_LEN as usize) {
        let mut id = [0u8; 32];
        id.copy_from_slice(&chunk[..32]);
        let id = ObjectId::from_hash(blake3::Hash::from_bytes(id));
        let mut word = [0u8; 8];
        word.copy_from_slice(&chunk[32..40]);
        let offset = u64::from_be_bytes(word);
        word.copy_from_slice(&chunk[40..48]);
        let length = u64::from_be_bytes(word);
        let in_bounds = offset >= PACK_MAGIC.len() as u64
            && offset
                .checked_add(length)
                .is_some_and(|end| end <= index_offset);
        if !in_bounds {
            return Err(Error::integrity(format!(
                "pack index entry {id} points outside the pack"
            )));
        }
        if entries.last().is_some_and(|prev| prev.id >= id) {
            return Err(Error::integrity("pack index is not strictly sorted"));
        }
        entries.push(PackEntry { id, offset, length });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_round_trip() {
        let base = PACK_MAGIC.len() as u64;
        let entries = vec![
            PackEntry {
                id: ObjectId::of(b"b"),
                offset: base,
                length: 5,
            },
            PackEntry {
                id: ObjectId::of(b"a"),
                offset: base + 5,
                length: 7,
            },
        ];
        let index_offset = base + 12;
        let encoded = encode_index(entries.clone(), index_offset);
        let pack_len = index_offset + encoded.len() as u64;
        let footer = &encoded[encoded.len() - FOOTER_LEN as usize..];
        let (count, off) = decode_footer(footer, pack_len).unwrap();
        assert_eq!((count, off), (2, index_offset));
        let decoded = decode_index(
            &encoded[..encoded.len() - FOOTER_LEN as usize],
            index_offset,
        )
        .unwrap();
        let mut sorted = entries;
        sorted.sort_by_key(|a| a.id);
        assert_eq!(decoded, sorted);
    }

    #[test]
    fn hostile_indexes_are_refused() {
        let base = PACK_MAGIC.len() as u64;
        let outside = encode_index(
            vec![PackEntry {
                id: ObjectId::of(b"a"),
                offset: base,
                length: 100,
            }],
            base + 10,
        );
        assert!(decode_index(&outside[..48], base + 10).is_err());
        let footer = &outside[48..];
        assert!(decode_footer(footer, 1000).is_err());
        assert!(decode_footer(&[0u8; 32], 1000).is_err());
    }
}
