//! Tree objects: one directory, its entries sorted by name, canonically encoded.

use serde::{Deserialize, Serialize};

use super::{ObjectId, from_canonical_json, names::validate_entry_name, to_canonical_json};
use baton_error::{Error, Result};

pub const TREE_TYPE: &str = "tree";
pub const TREE_VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A regular file with the owner's execute bit set.
    Exec,
    /// A symbolic link; its blob holds the link target's bytes.
    Symlink,
    /// A directory; its id names another tree.
    Dir,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Exec => "exec",
            EntryKind::Symlink => "symlink",
            EntryKind::Dir => "dir",
        }
    }
}

/// One entry. `size` is always the length in bytes of the object `id` names (file
/// contents, link target, or the encoded subtree), so a reader can bound every read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeEntry {
    pub name: String,
    pub kind: EntryKind,
    pub size: u64,
    pub id: ObjectId,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Tree {
    pub entries: Vec<TreeEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeWire {
    #[serde(rename = "type")]
    kind: String,
    version: u32,
    entries: Vec<TreeEntry>,
}

impl Tree {
    /// Build a tree from entries in any order; refuses duplicate or invalid names.
    pub fn new(mut entries: Vec<TreeEntry>) -> Result<Self> {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let tree = Tree { entries };
        tree.validate()?;
        Ok(tree)
    }

    fn validate(&self) -> Result<()> {
        for entry in &self.entries {
            validate_entry_name(&entry.name)?;
        }
        for pair in self.entries.windows(2) {
            if pair[0].name >= pair[1].name {
                return Err(Error::integrity(format!(
                    "tree entries are not strictly sorted at '{}'",
                    pair[1].name.escape_debug()
                )));
            }
        }
        Ok(())
    }

    pub fn encode(&self) -> Vec<u8> {
        to_canonical_json(&TreeWire {
            kind: TREE_TYPE.to_string(),
            version: TREE_VERSION,
            entries: self.entries.clone(),
        })
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let wire: TreeWire = from_canonical_json("tree", bytes)?;
        if wire.kind != TREE_TYPE || wire.version != TREE_VERSION {
            return Err(Error::integrity(format!(
                "not a version {TREE_VERSION} tree (type '{}', version {})",
                wire.kind.escape_debug(),
                wire.version
            )));
        }
        let tree = Tree {
            entries: wire.entries,
        };
        tree.validate()?;
        Ok(tree)
    }

    pub fn id(&self) -> ObjectId {
        ObjectId::of(&self.encode())
    }

    pub fn get(&self, name: &str) -> Option<&TreeEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, kind: EntryKind, content: &[u8]) -> TreeEntry {
        TreeEntry {
            name: name.into(),
            kind,
            size: content.len() as u64,
            id: ObjectId::of(content),
        }
    }

    #[test]
    fn order_of_insertion_does_not_change_the_id() {
        let a = entry("a", EntryKind::File, b"1");
        let b = entry("b", EntryKind::Exec, b"2");
        let t1 = Tree::new(vec![a.clone(), b.clone()]).unwrap();
        let t2 = Tree::new(vec![b, a]).unwrap();
        assert_eq!(t1.encode(), t2.encode());
        assert_eq!(Tree::decode(&t1.encode()).unwrap(), t1);
    }

    #[test]
    fn duplicates_and_bad_names_are_refused() {
        let a = entry("a", EntryKind::File, b"1");
        assert!(Tree::new(vec![a.clone(), a]).is_err());
        assert!(Tree::new(vec![entry("..", EntryKind::Dir, b"")]).is_err());
    }

    #[test]
    fn non_canonical_bytes_are_refused() {
        let t = Tree::new(vec![entry("a", EntryKind::File, b"1")]).unwrap();
        let text = String::from_utf8(t.encode()).unwrap();
        let spaced = text.replace(":", ": ");
        assert!(Tree::decode(spaced.as_bytes()).is_err());
        let reordered = text.replace(
            "\"type\":\"tree\",\"version\":1",
            "\"version\":1,\"type\":\"tree\"",
        );
        assert!(Tree::decode(reordered.as_bytes()).is_err());
        assert!(Tree::decode(b"{}").is_err());
    }
}
