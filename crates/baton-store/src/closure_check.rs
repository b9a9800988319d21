//! Completeness of one bundle: the check every ref move onto a bundle makes first.

use super::Store;
use baton_error::{Error, Result};
use baton_format::ObjectId;
use baton_format::id::show_full;

impl Store {
    /// A ref may only name a bundle whose tree is all here and whose parents are here
    /// (each of which was complete when it was stored: save, pull and import publish
    /// objects before manifests). Costs the size of one bundle, not of the history.
    pub fn require_complete(&self, bundle: &ObjectId) -> Result<()> {
        let manifest = self.read_bundle(bundle)?;
        let missing = |what: &str, id: &ObjectId| {
            Error::integrity(format!(
                "bundle {} is incomplete here: {what} {} is missing",
                bundle.short(),
                show_full(Some(*id))
            ))
            .with_hint("pull or import it again, then retry")
        };
        for parent in &manifest.parents {
            if !self.objects.contains(parent) {
                return Err(missing("parent bundle", parent));
            }
        }
        // Each distinct tree once: a tree naming one subtree many times is checked cheaply.
        let mut below: Vec<ObjectId> = self.trees_below(&[*bundle])?.into_iter().collect();
        below.sort();
        for id in below {
            if !self.objects.contains(&id) {
                return Err(missing("object", &id));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::memtree::MemFile;
    use baton_format::Bundle;

    #[test]
    fn a_bundle_is_complete_only_with_its_parents_and_every_object() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::init(&tmp.path().join("s")).unwrap();
        // The blob loose (a tree's new objects go into a pack), so it can be lost below.
        let pending = crate::objects::PendingDirs::default();
        store.objects.put_bytes(b"hello", &pending).unwrap();
        pending.sync().unwrap();
        let tree = store
            .write_mem_tree(&[MemFile::new("a.txt", b"hello".to_vec())])
            .unwrap();
        let root = store
            .write_bundle(&Bundle::new(tree, vec![], SystemTime::now()))
            .unwrap();
        store.require_complete(&root).unwrap();

        let absent = ObjectId::of(b"no such bundle");
        let orphan = store
            .write_bundle(&Bundle::new(tree, vec![absent], SystemTime::now()))
            .unwrap();
        let err = store.require_complete(&orphan).unwrap_err();
        assert_eq!(err.kind, baton_error::ErrorKind::Integrity);
        assert!(
            err.message.contains("parent bundle") && err.message.contains(&absent.to_hex()),
            "{}",
            err.message
        );

        let blob = store
            .trees_below(&[root])
            .unwrap()
            .into_iter()
            .find(|id| *id != tree)
            .unwrap();
        std::fs::remove_file(store.objects.path(&blob)).unwrap();
        let err = store.require_complete(&root).unwrap_err();
        assert_eq!(err.kind, baton_error::ErrorKind::Integrity);
        assert!(
            err.message
                .contains(&format!("object {} is missing", blob.to_hex())),
            "{}",
            err.message
        );
    }
}
