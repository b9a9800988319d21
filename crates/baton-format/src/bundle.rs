//! Bundle manifests: one handoff's root tree, parents, provenance and metadata.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{ObjectId, from_canonical_json, to_canonical_json};
use baton_error::{Error, Result};

pub const BUNDLE_TYPE: &str = "bundle";
pub const BUNDLE_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    pub tree: ObjectId,
    pub parents: Vec<ObjectId>,
    /// Creation time, RFC 3339 UTC with whole seconds (`2026-11-29T21:26:12Z`).
    pub created: String,
    pub from: String,
    pub to: String,
    pub summary: String,
    pub note: String,
    pub metadata: BTreeMap<String, String>,
}

/// Format a time the one way bundles and log lines record it.
pub fn format_time(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

pub fn parse_time(text: &str) -> Result<SystemTime> {
    let time = humantime::parse_rfc3339(text)
        .map_err(|e| Error::integrity(format!("bad time '{}': {e}", text.escape_debug())))?;
    if format_time(time) != text {
        return Err(Error::integrity(format!(
            "time '{}' is not RFC 3339 UTC with whole seconds",
            text.escape_debug()
        )));
    }
    Ok(time)
}

/// Seconds since the epoch, for ordering; a time before the epoch counts as 0.
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

impl Bundle {
    pub fn new(tree: ObjectId, parents: Vec<ObjectId>, created: SystemTime) -> Self {
        Bundle {
            kind: BUNDLE_TYPE.to_string(),
            version: BUNDLE_VERSION,
            tree,
            parents,
            created: format_time(created),
            from: String::new(),
            to: String::new(),
            summary: String::new(),
            note: String::new(),
            metadata: BTreeMap::new(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        to_canonical_json(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let bundle: Bundle = from_canonical_json("bundle manifest", bytes)?;
        if bundle.kind != BUNDLE_TYPE || bundle.version != BUNDLE_VERSION {
            return Err(Error::integrity(format!(
                "not a version {BUNDLE_VERSION} bundle (type '{}', version {})",
                bundle.kind.escape_debug(),
                bundle.version
            )));
        }
        parse_time(&bundle.created)?;
        let mut seen = bundle.parents.clone();
        seen.sort();
        seen.dedup();
        if seen.len() != bundle.parents.len() {
            return Err(Error::integrity("bundle manifest lists a parent twice"));
        }
        Ok(bundle)
    }

    /// True when `bytes` look like a bundle manifest: a cheap test before a full decode.
    pub fn looks_like(bytes: &[u8]) -> bool {
        bytes.starts_with(b"{\"type\":\"bundle\"")
    }

    pub fn id(&self) -> ObjectId {
        ObjectId::of(&self.encode())
    }

    pub fn created_time(&self) -> SystemTime {
        parse_time(&self.created).unwrap_or(UNIX_EPOCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_strictness() {
        let mut b = Bundle::new(ObjectId::of(b"t"), vec![ObjectId::of(b"p")], UNIX_EPOCH);
        b.metadata.insert("k".into(), "v".into());
        b.summary = "quote \" and newline \n".into();
        let bytes = b.encode();
        assert!(Bundle::looks_like(&bytes));
        assert_eq!(Bundle::decode(&bytes).unwrap(), b);
        assert_eq!(b.created, "1970-01-01T00:00:00Z");

        let text = String::from_utf8(bytes).unwrap();
        let extra = text.replacen('{', "{\"extra\":1,", 1);
        assert!(Bundle::decode(extra.as_bytes()).is_err());
        let bad_time = text.replace("1970-01-01T00:00:00Z", "1970-01-01T00:00:00.5Z");
        assert!(Bundle::decode(bad_time.as_bytes()).is_err());
    }

    #[test]
    fn duplicate_parents_are_refused() {
        let p = ObjectId::of(b"p");
        let b = Bundle::new(ObjectId::of(b"t"), vec![p, p], UNIX_EPOCH);
        assert!(Bundle::decode(&b.encode()).is_err());
    }
}
