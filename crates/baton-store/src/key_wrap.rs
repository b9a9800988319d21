//! The `baton-wrap` age stanza: each object's age file key also wrapped under a key
//! derived from the store's secret, so reading an object skips the X25519 exchange.
//!
//! An object sealed by baton carries two kinds of stanzas: the standard X25519 ones, so
//! that `age -d -i key.txt` opens it with no knowledge of baton, and this one, which the
//! store's own reader tries first. Whoever can read one can read the other: the store
//! secret is the name key, itself sealed to the same recipients (ENCRYPTION.md).

use std::collections::HashSet;

use age::secrecy::ExposeSecret;
use age_core::format::{FILE_KEY_BYTES, FileKey, Stanza};
use age_core::primitives::{aead_decrypt, aead_encrypt, hkdf};
use base64::Engine;

pub const TAG: &str = "baton-wrap";
const SALT_BYTES: usize = 16;
const WRAP_LABEL: &[u8] = b"baton.age-v1/file-key-wrap";
const SECRET_CONTEXT: &str = "baton age-v1 2026-11 file-key wrap secret";

/// Wraps and unwraps file keys under one store's secret.
pub struct StoreKeyWrap {
    secret: [u8; 32],
}

impl StoreKeyWrap {
    /// The wrap secret of a store whose name key is `name_key` (domain-separated, so the
    /// two keys are independent).
    pub fn from_name_key(name_key: &[u8; 32]) -> Self {
        StoreKeyWrap {
            secret: blake3::derive_key(SECRET_CONTEXT, name_key),
        }
    }

    fn stanza(&self, file_key: &FileKey, salt: &[u8; SALT_BYTES]) -> Stanza {
        Stanza {
            tag: TAG.to_string(),
            args: vec![base64::engine::general_purpose::STANDARD_NO_PAD.encode(salt)],
            body: aead_encrypt(&self.wrap_key(salt), file_key.expose_secret()),
        }
    }

    fn wrap_key(&self, salt: &[u8]) -> [u8; 32] {
        // A fresh random salt per object makes every wrap key single-use, which age's
        // zero-nonce AEAD requires.
        hkdf(salt, WRAP_LABEL, &self.secret)
    }
}

fn salt() -> Result<[u8; SALT_BYTES], age::EncryptError> {
    random_bytes().map_err(|e| age::EncryptError::Io(std::io::Error::other(e.message)))
}

/// Fresh bytes from the operating system (salts, keys).
pub(super) fn random_bytes<const N: usize>() -> baton_error::Result<[u8; N]> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out)
        .map_err(|e| baton_error::Error::other(format!("cannot read random bytes: {e}")))?;
    Ok(out)
}

impl age::Recipient for StoreKeyWrap {
    fn wrap_file_key(
        &self,
        file_key: &FileKey,
    ) -> Result<(Vec<Stanza>, HashSet<String>), age::EncryptError> {
        Ok((vec![self.stanza(file_key, &salt()?)], HashSet::new()))
    }
}

impl age::Identity for StoreKeyWrap {
    fn unwrap_stanza(&self, stanza: &Stanza) -> Option<Result<FileKey, age::DecryptError>> {
        if stanza.tag != TAG {
            return None;
        }
        let salt = match stanza.args.as_slice() {
            [arg] => base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(arg)
                .ok()
                .filter(|s| s.len() == SALT_BYTES),
            _ => None,
        };
        let Some(salt) = salt else {
            return Some(Err(age::DecryptError::InvalidHeader));
        };
        // A stanza this store's secret does not open (another store's object) is not an
        // error: the X25519 stanzas may still match one of our identities.
        let plain = aead_decrypt(&self.wrap_key(&salt), FILE_KEY_BYTES, &stanza.body).ok()?;
        let key: [u8; FILE_KEY_BYTES] = plain.try_into().ok()?;
        Some(Ok(FileKey::new(Box::new(key))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use age::{Identity, Recipient};

    #[test]
    fn wraps_and_unwraps_only_under_the_same_secret() {
        let ours = StoreKeyWrap::from_name_key(&[7; 32]);
        let theirs = StoreKeyWrap::from_name_key(&[8; 32]);
        let key = FileKey::new(Box::new([42; FILE_KEY_BYTES]));
        let (stanzas, labels) = ours.wrap_file_key(&key).expect("wrap");
        assert!(labels.is_empty());
        assert_eq!(stanzas.len(), 1);
        let back = ours
            .unwrap_stanza(&stanzas[0])
            .expect("ours")
            .expect("opens");
        assert_eq!(back.expose_secret(), &[42; FILE_KEY_BYTES]);
        assert!(theirs.unwrap_stanza(&stanzas[0]).is_none());
        let bad = Stanza {
            tag: TAG.to_string(),
            args: vec!["!".into()],
            body: stanzas[0].body.clone(),
        };
        assert!(matches!(ours.unwrap_stanza(&bad), Some(Err(_))));
        // Two wraps of one key never share a salt (hence never a wrap key).
        let (again, _) = ours.wrap_file_key(&key).expect("wrap");
        assert_ne!(again[0].args, stanzas[0].args);
    }

    /// The normative vector of store-format/vectors/key_wrap.json.
    #[test]
    fn matches_the_format_vector() {
        let text = include_str!("../../../store-format/vectors/key_wrap.json");
        let v: serde_json::Value = serde_json::from_str(text).expect("vector json");
        let hex32 = |k: &str| -> Vec<u8> {
            let s = v[k].as_str().expect(k);
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
                .collect()
        };
        let name_key: [u8; 32] = hex32("name_key").try_into().expect("32 bytes");
        let salt: [u8; SALT_BYTES] = hex32("salt").try_into().expect("16 bytes");
        let file_key: [u8; FILE_KEY_BYTES] = hex32("file_key").try_into().expect("16 bytes");
        let wrap = StoreKeyWrap::from_name_key(&name_key);
        assert_eq!(wrap.secret.to_vec(), hex32("wrap_secret"));
        let stanza = wrap.stanza(&FileKey::new(Box::new(file_key)), &salt);
        assert_eq!(stanza.tag, v["tag"].as_str().expect("tag"));
        assert_eq!(
            stanza.args,
            vec![v["arg"].as_str().expect("arg").to_string()]
        );
        assert_eq!(stanza.body, hex32("body"));
        let back = wrap.unwrap_stanza(&stanza).expect("ours").expect("opens");
        assert_eq!(back.expose_secret(), &file_key);
    }
}
