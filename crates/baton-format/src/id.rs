//! Object ids: 32-byte BLAKE3 digests, written as 64 lowercase hex digits.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use baton_error::{Error, Result};

pub const HEX_LEN: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId([u8; 32]);

impl ObjectId {
    /// The id of a byte string: its plain BLAKE3 digest (so `b3sum` agrees with us).
    pub fn of(bytes: &[u8]) -> Self {
        ObjectId(*blake3::hash(bytes).as_bytes())
    }

    pub fn from_hash(hash: blake3::Hash) -> Self {
        ObjectId(*hash.as_bytes())
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn to_hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// Parse exactly 64 lowercase hex digits; anything else is refused.
    pub fn parse(text: &str) -> Result<Self> {
        if !is_lower_hex(text) || text.len() != HEX_LEN {
            return Err(Error::usage(format!(
                "'{}' is not an object id (64 lowercase hex digits)",
                text.escape_debug()
            )));
        }
        let hash = blake3::Hash::from_hex(text)
            .map_err(|e| Error::usage(format!("'{text}' is not an object id: {e}")))?;
        Ok(Self::from_hash(hash))
    }

    pub fn short(&self) -> String {
        self.to_hex()[..12].to_string()
    }
}

/// A ref value for messages: the full id, or `(none)` for an absent ref.
pub fn show_full(value: Option<ObjectId>) -> String {
    value.map(|i| i.to_hex()).unwrap_or_else(|| "(none)".into())
}

/// A ref value for human output: the short id, or `(none)` for an absent ref.
pub fn show_short(value: Option<ObjectId>) -> String {
    value.map(|i| i.short()).unwrap_or_else(|| "(none)".into())
}

pub fn is_lower_hex(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.to_hex())
    }
}

impl FromStr for ObjectId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl Serialize for ObjectId {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ObjectId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        ObjectId::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_plain_blake3() {
        // b3sum of the empty input.
        assert_eq!(
            ObjectId::of(b"").to_hex(),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
    }

    #[test]
    fn parse_refuses_uppercase_and_wrong_length() {
        let id = ObjectId::of(b"x").to_hex();
        assert!(ObjectId::parse(&id).is_ok());
        assert!(ObjectId::parse(&id.to_uppercase()).is_err());
        assert!(ObjectId::parse(&id[..63]).is_err());
        assert!(ObjectId::parse("").is_err());
    }
}
