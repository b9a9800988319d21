//! The store's `config` file: format name, version, required features and settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use baton_error::{Error, ErrorKind, Result};

pub const FORMAT_NAME: &str = "baton-store";
pub const FORMAT_VERSION: u32 = 1;
/// Optional capabilities this build understands. A store that requires any other feature
/// is refused, the way git refuses unknown `extensions.*`.
pub const KNOWN_FEATURES: &[&str] = &["age-v1"];

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreConfig {
    pub format: String,
    pub version: u32,
    /// Features a reader must understand to use this store.
    #[serde(default)]
    pub features: Vec<String>,
    /// Remote targets by name, like git remotes. Never holds a credential.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub targets: BTreeMap<String, TargetConfig>,
    /// The target `push` and `pull` use when none is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_target: Option<String>,
    /// At-rest encryption (feature `age-v1`, store-format/ENCRYPTION.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<EncryptionConfig>,
}

/// The `encryption` section: who can read the store, and its wrapped name key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncryptionConfig {
    /// age X25519 recipients every object is encrypted to.
    pub recipients: Vec<String>,
    /// True when the store is unlocked by a passphrase (see `identity`).
    #[serde(default)]
    pub passphrase: bool,
    /// Passphrase stores only: the store's X25519 identity, armored age ciphertext
    /// sealed with the passphrase (scrypt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// Armored age ciphertext of the 32-byte key that derives storage names.
    pub name_key: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetConfig {
    pub url: String,
    /// S3 targets: the endpoint URL (`target add --endpoint`); never a credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// S3 targets: the region (`target add --region`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            features: vec![],
            targets: BTreeMap::new(),
            default_target: None,
            encryption: None,
        }
    }
}

impl StoreConfig {
    pub fn encode(&self) -> Vec<u8> {
        // A struct of strings, integers and BTreeMaps always serializes; an empty config
        // written in its place would lose the store's settings.
        let mut bytes = serde_json::to_vec_pretty(self).expect("a store config always serializes");
        bytes.push(b'\n');
        bytes
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let config: StoreConfig = serde_json::from_slice(bytes).map_err(|e| {
            Error::integrity(format!("store config does not decode: {e}"))
                .with_hint("restore the config file from a backup or re-create the store")
        })?;
        if config.format != FORMAT_NAME {
            return Err(Error::integrity(format!(
                "not a baton store (format '{}')",
                config.format.escape_debug()
            )));
        }
        if config.version != FORMAT_VERSION {
            return Err(Error::new(ErrorKind::Unsupported, format!(
                "store format version {} is not supported (this baton reads version {FORMAT_VERSION})",
                config.version
            ))
            .with_hint("use a baton release that supports this store version"));
        }
        if let Some(unknown) = config
            .features
            .iter()
            .find(|f| !KNOWN_FEATURES.contains(&f.as_str()))
        {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "store requires feature '{}' which this baton does not support",
                    unknown.escape_debug()
                ),
            )
            .with_hint("upgrade baton"));
        }
        let has_feature = config.features.iter().any(|f| f == "age-v1");
        if has_feature != config.encryption.is_some() {
            return Err(Error::integrity(
                "store config: feature 'age-v1' and the 'encryption' section must come together",
            ));
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_features_are_checked() {
        let ok = StoreConfig::default();
        assert_eq!(StoreConfig::decode(&ok.encode()).unwrap(), ok);
        let future = StoreConfig {
            version: 2,
            ..StoreConfig::default()
        };
        assert!(StoreConfig::decode(&future.encode()).is_err());
        let featured = StoreConfig {
            features: vec!["packs-v9".into()],
            ..StoreConfig::default()
        };
        assert!(StoreConfig::decode(&featured.encode()).is_err());
        assert!(StoreConfig::decode(b"not json").is_err());
    }
}
