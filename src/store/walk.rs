//! Walking what bundles reference: tree paths, file listings and reachability.

use std::collections::{HashSet, VecDeque};

use super::Store;
use crate::error::{Error, Result};
use crate::format::{EntryKind, ObjectId, TreeEntry};

/// What a reachability walk found.
pub struct Reach {
    pub objects: HashSet<ObjectId>,
    pub bundles: usize,
}

impl Store {
    /// Every entry below `tree`, depth first in name order, with its slash-separated path.
    pub fn list_tree(&self, tree: &ObjectId) -> Result<Vec<(String, TreeEntry)>> {
        let mut out = Vec::new();
        self.list_into(tree, "", &mut out)?;
        Ok(out)
    }

    fn list_into(
        &self,
        tree: &ObjectId,
        prefix: &str,
        out: &mut Vec<(String, TreeEntry)>,
    ) -> Result<()> {
        for entry in self.read_tree(tree)?.entries {
            let path = format!("{prefix}{}", entry.name);
            let subtree = (entry.kind == EntryKind::Dir).then_some(entry.id);
            out.push((path.clone(), entry));
            if let Some(id) = subtree {
                self.list_into(&id, &format!("{path}/"), out)?;
            }
        }
        Ok(())
    }

    /// The entry at `path` (slash-separated) below `tree`.
    pub fn lookup_path(&self, tree: &ObjectId, path: &str) -> Result<TreeEntry> {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if parts.is_empty() {
            return Err(Error::usage("an empty path names no file")
                .with_hint("use REV:PATH, e.g. current:handoff.md"));
        }
        let mut current = *tree;
        for (i, part) in parts.iter().enumerate() {
            let tree = self.read_tree(&current)?;
            let entry = tree
                .get(part)
                .ok_or_else(|| Error::not_found(format!("path '{path}' is not in the bundle")))?;
            if i + 1 == parts.len() {
                return Ok(entry.clone());
            }
            if entry.kind != EntryKind::Dir {
                return Err(Error::not_found(format!(
                    "path '{path}' is not in the bundle ('{}' is not a directory)",
                    parts[..=i].join("/")
                )));
            }
            current = entry.id;
        }
        unreachable!("loop returns on the last component")
    }

    /// Every object reachable from `bundles`: the bundles, their ancestors, and all trees
    /// and blobs below their root trees. Fails if any of them cannot be read.
    pub fn reachable(&self, bundles: &[ObjectId]) -> Result<Reach> {
        // Bundles and trees are walked once each, tracked apart from the set of all
        // objects: a file whose bytes equal a tree's or a manifest's encoding has the same
        // id, and seeing it as a file must not stop the walk below that tree or bundle.
        let mut walk = Walk::default();
        let mut queue: VecDeque<ObjectId> = bundles.iter().copied().collect();
        while let Some(id) = queue.pop_front() {
            if !walk.bundles.insert(id) {
                continue;
            }
            walk.objects.insert(id);
            let bundle = self.read_bundle(&id)?;
            queue.extend(bundle.parents.iter().copied());
            self.mark_tree(&bundle.tree, &mut walk)?;
        }
        Ok(Reach {
            bundles: walk.bundles.len(),
            objects: walk.objects,
        })
    }

    fn mark_tree(&self, tree: &ObjectId, walk: &mut Walk) -> Result<()> {
        if !walk.trees.insert(*tree) {
            return Ok(());
        }
        walk.objects.insert(*tree);
        for entry in self.read_tree(tree)?.entries {
            if entry.kind == EntryKind::Dir {
                self.mark_tree(&entry.id, walk)?;
            } else {
                walk.objects.insert(entry.id);
            }
        }
        Ok(())
    }
}

#[derive(Default)]
struct Walk {
    objects: HashSet<ObjectId>,
    bundles: HashSet<ObjectId>,
    trees: HashSet<ObjectId>,
}

impl Store {
    /// `bundle` and all its ancestors.
    pub fn history(&self, bundle: &ObjectId) -> Result<Vec<ObjectId>> {
        let mut seen = HashSet::new();
        let mut order = Vec::new();
        let mut queue = VecDeque::from([*bundle]);
        while let Some(id) = queue.pop_front() {
            if seen.insert(id) {
                order.push(id);
                queue.extend(self.read_bundle(&id)?.parents);
            }
        }
        Ok(order)
    }

    /// Whether `ancestor` is `descendant` or one of its ancestors.
    pub fn is_ancestor(&self, ancestor: &ObjectId, descendant: &ObjectId) -> Result<bool> {
        Ok(ancestor == descendant || self.history(descendant)?.contains(ancestor))
    }
}
