//! Tree shapes and their limits: how deep a tree is and what it expands to, computed
//! once per distinct subtree, without recursion.
//!
//! Trees are a DAG: one subtree may be named many times (identical directories are one
//! object), so a tree of a few hundred bytes can name 10^30 paths ("billion laughs"), and
//! a chain of trees can be nested far deeper than any file system allows. Walks that visit
//! each distinct tree once (verify, gc, reachability, receive checks) stay cheap on any DAG;
//! walks that expand a tree into paths (show, resume, checkout, diff) first compute its
//! shape here, in time proportional to the distinct trees, and refuse one past the limits
//! below before expanding anything. Every walk keeps its own stack on the heap, so depth
//! costs memory in proportion, never the thread's stack.

use std::collections::HashMap;

use super::Store;
use baton_error::{Error, ErrorKind, Result};
use baton_format::{EntryKind, MAX_METADATA_OBJECT, ObjectId, Tree};

/// Deepest tree accepted: path components of its deepest entry. Git's `core.maxTreeDepth`
/// has the same default; a path that deep (at least 8 KiB with one-byte names and
/// slashes) is already past PATH_MAX (4096), so no file system checkout could restore it.
pub const MAX_TREE_DEPTH: u32 = 4096;
/// Most entries (files, links, directories) one tree may expand to. Generous: about 100
/// times the Linux kernel's tree, 25 times Chromium's; listing that many costs about
/// 2 GiB of memory (each path and entry held at once), which is the point of the limit.
pub const MAX_EXPANDED_ENTRIES: u64 = 10_000_000;
/// Most bytes all the expanded paths of one tree may add up to (10 million paths of
/// 107 bytes on average).
pub(crate) const MAX_EXPANDED_PATH_BYTES: u64 = 1 << 30;
/// Most bytes of file contents (declared sizes) a checkout of one tree may write: 1 TiB.
pub(crate) const MAX_CHECKOUT_BYTES: u64 = 1 << 40;

/// What a tree expands to. Sums saturate at `u64::MAX`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Path components of the deepest entry (0 for the empty tree).
    pub depth: u32,
    /// Entries below it, at every level.
    pub entries: u64,
    /// Total bytes of the slash-separated paths of those entries.
    pub path_bytes: u64,
    /// Total declared size of its files and symlinks.
    pub file_bytes: u64,
}

impl Shape {
    /// Add a directory entry named `name_len` bytes whose tree has shape `child`.
    fn add_dir(&mut self, name_len: u64, child: &Shape) {
        self.entries = self.entries.saturating_add(1).saturating_add(child.entries);
        let prefixed = child.entries.saturating_mul(name_len.saturating_add(1));
        self.path_bytes = self
            .path_bytes
            .saturating_add(name_len)
            .saturating_add(child.path_bytes)
            .saturating_add(prefixed);
        self.file_bytes = self.file_bytes.saturating_add(child.file_bytes);
        self.depth = self.depth.max(child.depth.saturating_add(1));
    }

    /// Refuse a tree past the expansion limits (entries, path bytes).
    pub(crate) fn check_expansion(&self, tree: &ObjectId) -> Result<()> {
        let refuse = |what: String| {
            Error::integrity(format!("tree {tree} expands to {what}"))
                .with_hint("baton refuses to list or restore it; a tree that names one subtree many times is forged or damaged")
        };
        if self.entries > MAX_EXPANDED_ENTRIES {
            return Err(refuse(format!(
                "{} entries, over the limit of {MAX_EXPANDED_ENTRIES} (MAX_EXPANDED_ENTRIES)",
                shown(self.entries)
            )));
        }
        if self.path_bytes > MAX_EXPANDED_PATH_BYTES {
            return Err(refuse(format!(
                "{} bytes of paths, over the limit of {MAX_EXPANDED_PATH_BYTES} (MAX_EXPANDED_PATH_BYTES)",
                shown(self.path_bytes)
            )));
        }
        Ok(())
    }
}

/// A saturated sum is "more than" its maximum.
fn shown(n: u64) -> String {
    if n == u64::MAX {
        format!("more than {}", u64::MAX - 1)
    } else {
        n.to_string()
    }
}

/// The error for a tree nested deeper than `MAX_TREE_DEPTH`.
pub fn too_deep(tree: &ObjectId) -> Error {
    Error::integrity(format!(
        "tree {tree} is nested more than {MAX_TREE_DEPTH} directories deep (MAX_TREE_DEPTH)"
    ))
    .with_hint("baton refuses deeper trees (as git's core.maxTreeDepth does); it was forged or made by another tool")
}

/// Where a walk gets its trees: it reads each distinct tree once (the tree and the length
/// of its encoding), with the size its parent's entry declares (`None` for a root), and
/// hands it back when done with it. The walk checks every declared size, also of trees
/// it meets again.
pub trait TreeSource {
    fn read(&mut self, id: &ObjectId, size: Option<u64>) -> Result<(Tree, u64)>;
    fn keep(&mut self, _id: ObjectId, _tree: Tree) {}
}

/// A directory being walked: the subtrees still to visit and the shape so far.
struct Frame {
    id: ObjectId,
    len: u64,
    /// This tree's name length in its parent.
    name_len: u64,
    dirs: Vec<(ObjectId, u64, u64)>,
    next: usize,
    shape: Shape,
}

/// Shapes of the trees walked so far: a tree named again (in this tree or in another
/// bundle's) costs a lookup.
#[derive(Default)]
pub struct Shapes {
    /// Each tree walked: its shape and the length of its encoding.
    done: HashMap<ObjectId, (Shape, u64)>,
}

impl Shapes {
    /// The shape of `root`, reading every tree below it not walked before from `source`.
    /// A tree nested deeper than `max_depth` is refused as soon as the walk gets there.
    pub fn walk(
        &mut self,
        root: &ObjectId,
        size: Option<u64>,
        max_depth: u32,
        source: &mut dyn TreeSource,
    ) -> Result<Shape> {
        if let Some(&(shape, len)) = self.done.get(root) {
            check_size(root, len, size)?;
            return if shape.depth > max_depth {
                Err(too_deep(root))
            } else {
                Ok(shape)
            };
        }
        let open = |source: &mut dyn TreeSource, id: &ObjectId, size, name_len| -> Result<Frame> {
            let (tree, len) = source.read(id, size)?;
            check_size(id, len, size)?;
            let mut frame = Frame {
                id: *id,
                len,
                name_len,
                dirs: Vec::new(),
                next: 0,
                shape: Shape::default(),
            };
            for entry in &tree.entries {
                let name_len = entry.name.len() as u64;
                if entry.kind == EntryKind::Dir {
                    frame.dirs.push((entry.id, entry.size, name_len));
                } else {
                    let s = &mut frame.shape;
                    s.entries = s.entries.saturating_add(1);
                    s.path_bytes = s.path_bytes.saturating_add(name_len);
                    s.file_bytes = s.file_bytes.saturating_add(entry.size);
                    s.depth = s.depth.max(1);
                }
            }
            source.keep(*id, tree);
            Ok(frame)
        };
        let mut stack = vec![open(source, root, size, 0)?];
        loop {
            let Some(top) = stack.last_mut() else {
                unreachable!("the loop returns when the root is done");
            };
            if let Some(&(child, size, name_len)) = top.dirs.get(top.next) {
                top.next += 1;
                if let Some(&(shape, len)) = self.done.get(&child) {
                    check_size(&child, len, Some(size))?;
                    top.shape.add_dir(name_len, &shape);
                    // The child's deepest entry sits this many components below the root.
                    let below = (stack.len() as u64).saturating_add(u64::from(shape.depth));
                    if below > u64::from(max_depth) {
                        return Err(too_deep(root));
                    }
                    continue;
                }
                // The child's own entry is at component `stack.len()`.
                if stack.len() as u64 > u64::from(max_depth) {
                    return Err(too_deep(root));
                }
                let frame = open(source, &child, Some(size), name_len)?;
                stack.push(frame);
                continue;
            }
            let Some(frame) = stack.pop() else {
                unreachable!("the stack is not empty here");
            };
            self.done.insert(frame.id, (frame.shape, frame.len));
            match stack.last_mut() {
                Some(parent) => parent.shape.add_dir(frame.name_len, &frame.shape),
                None => {
                    return if frame.shape.depth > max_depth {
                        Err(too_deep(root))
                    } else {
                        Ok(frame.shape)
                    };
                }
            }
        }
    }
}

impl Store {
    /// Read tree `id` and the length of its encoding (which walks check against the
    /// size the parent's entry declares: SPEC 4.2, a different length is corruption).
    pub(crate) fn read_tree_len(&self, id: &ObjectId) -> Result<(Tree, u64)> {
        let bytes = self.objects.get_bytes(id, MAX_METADATA_OBJECT)?;
        let tree = Tree::decode(&bytes)
            .map_err(|e| e.recast(ErrorKind::Integrity, format!("tree {id}")))?;
        Ok((tree, bytes.len() as u64))
    }

    /// The shape of `tree` (each distinct subtree read once), refused if deeper than
    /// `MAX_TREE_DEPTH`.
    pub fn tree_shape(&self, tree: &ObjectId) -> Result<Shape> {
        Shapes::default().walk(tree, None, MAX_TREE_DEPTH, &mut ReadSized(self))
    }
}

/// The store's trees, their sizes checked by the walk.
pub struct ReadSized<'a>(pub &'a Store);

impl TreeSource for ReadSized<'_> {
    fn read(&mut self, id: &ObjectId, _size: Option<u64>) -> Result<(Tree, u64)> {
        self.0.read_tree_len(id)
    }
}

fn check_size(id: &ObjectId, len: u64, declared: Option<u64>) -> Result<()> {
    match declared {
        Some(declared) if declared != len => Err(wrong_size(id, len, declared)),
        _ => Ok(()),
    }
}

/// An object whose length differs from what its tree entry declares.
pub fn wrong_size(id: &ObjectId, actual: u64, declared: u64) -> Error {
    Error::integrity(format!(
        "object {id} holds {actual} bytes, its tree entry says {declared}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_format::TreeEntry;

    /// Trees held in memory by id.
    struct Mem(HashMap<ObjectId, Tree>, usize);

    impl TreeSource for Mem {
        fn read(&mut self, id: &ObjectId, _size: Option<u64>) -> Result<(Tree, u64)> {
            self.1 += 1;
            let tree = self
                .0
                .get(id)
                .cloned()
                .ok_or_else(|| Error::not_found("no such tree"))?;
            let len = tree.encode().len() as u64;
            Ok((tree, len))
        }
    }

    fn dir(name: &str, tree: &Tree) -> TreeEntry {
        TreeEntry {
            name: name.into(),
            kind: EntryKind::Dir,
            size: tree.encode().len() as u64,
            id: tree.id(),
        }
    }

    #[test]
    fn billion_laughs_is_measured_without_expanding_it() {
        let mut mem = Mem(HashMap::new(), 0);
        let leaf = Tree::new(vec![TreeEntry {
            name: "f".into(),
            kind: EntryKind::File,
            size: 3,
            id: ObjectId::of(b"abc"),
        }])
        .unwrap();
        let mut top = leaf.clone();
        mem.0.insert(leaf.id(), leaf);
        for _ in 0..30 {
            let entries = (0..10).map(|i| dir(&format!("d{i}"), &top)).collect();
            top = Tree::new(entries).unwrap();
            mem.0.insert(top.id(), top.clone());
        }
        let shape = Shapes::default()
            .walk(&top.id(), None, MAX_TREE_DEPTH, &mut mem)
            .unwrap();
        assert_eq!(mem.1, 31, "each distinct tree read once");
        assert_eq!(shape.depth, 31);
        assert_eq!(shape.entries, u64::MAX);
        assert!(shape.check_expansion(&top.id()).is_err());
    }

    #[test]
    fn depth_counts_path_components_and_is_refused_past_the_limit() {
        let mut mem = Mem(HashMap::new(), 0);
        let mut top = Tree::default();
        mem.0.insert(top.id(), top.clone());
        let mut ids = vec![top.id()];
        for _ in 0..5000 {
            top = Tree::new(vec![dir("a", &top)]).unwrap();
            mem.0.insert(top.id(), top.clone());
            ids.push(top.id());
        }
        let mut shapes = Shapes::default();
        // 4096 nested directories: the deepest entry has 4096 components.
        let at_limit = ids[MAX_TREE_DEPTH as usize];
        let shape = shapes
            .walk(&at_limit, None, MAX_TREE_DEPTH, &mut mem)
            .unwrap();
        assert_eq!(shape.depth, MAX_TREE_DEPTH);
        assert_eq!(shape.entries, u64::from(MAX_TREE_DEPTH));
        let over = ids[MAX_TREE_DEPTH as usize + 1];
        let err = shapes
            .walk(&over, None, MAX_TREE_DEPTH, &mut mem)
            .unwrap_err();
        assert!(err.message.contains("MAX_TREE_DEPTH"), "{}", err.message);
        // Refused also when the walk starts afresh, before reading the whole chain.
        let mut fresh = Mem(mem.0.clone(), 0);
        let top = *ids.last().unwrap();
        assert!(
            Shapes::default()
                .walk(&top, None, MAX_TREE_DEPTH, &mut fresh)
                .is_err()
        );
        assert!(fresh.1 <= MAX_TREE_DEPTH as usize + 1, "read {}", fresh.1);
        // Without a limit the walk measures it.
        let shape = Shapes::default()
            .walk(&top, None, u32::MAX, &mut mem)
            .unwrap();
        assert_eq!(shape.depth, 5000);
    }
}
