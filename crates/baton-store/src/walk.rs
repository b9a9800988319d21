//! Walking what bundles reference: tree paths, file listings and reachability.

use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};

use super::Store;
use super::tree_limits::{MAX_TREE_DEPTH, Shape, Shapes, TreeSource};
use crate::error::StoreError;
use baton_error::{Error, Result};
use baton_format::bundle::unix_seconds;
use baton_format::names::RefName;
use baton_format::{Bundle, EntryKind, ObjectId, Tree, TreeEntry};

/// What a reachability walk found.
pub struct Reach {
    pub objects: HashSet<ObjectId>,
    pub bundles: usize,
    /// The deepest root tree reached and its depth (`Shape::depth`).
    pub deepest: Option<(ObjectId, u32)>,
}

impl Store {
    /// Every entry below `tree`, depth first in name order, with its slash-separated path.
    /// Refused (before anything is expanded) past `MAX_TREE_DEPTH` or the expansion
    /// limits of `tree_limits.rs`.
    pub fn list_tree(&self, tree: &ObjectId) -> Result<Vec<(String, TreeEntry)>> {
        Ok(self.list_tree_shaped(tree)?.1)
    }

    /// `list_tree` and the tree's shape (for limits on what the caller does with it).
    pub(crate) fn list_tree_shaped(
        &self,
        tree: &ObjectId,
    ) -> Result<(Shape, Vec<(String, TreeEntry)>)> {
        // The shape first, each distinct tree read once and kept: a tree past the limits
        // costs what its distinct trees cost, not what it expands to.
        let mut cache = Cache {
            store: self,
            trees: HashMap::new(),
        };
        let shape = Shapes::default().walk(tree, None, MAX_TREE_DEPTH, &mut cache)?;
        shape.check_expansion(tree)?;
        let trees = cache.trees;
        let get = |id: &ObjectId| {
            trees
                .get(id)
                .ok_or_else(|| Error::other(format!("internal error: tree {id} was not kept")))
        };
        let mut out = Vec::with_capacity(usize::try_from(shape.entries).unwrap_or(0));
        let mut stack = vec![(get(tree)?.entries.iter(), String::new())];
        while let Some((entries, prefix)) = stack.last_mut() {
            let Some(entry) = entries.next() else {
                stack.pop();
                continue;
            };
            let path = format!("{prefix}{}", entry.name);
            out.push((path.clone(), entry.clone()));
            if entry.kind == EntryKind::Dir {
                stack.push((get(&entry.id)?.entries.iter(), format!("{path}/")));
            }
        }
        Ok((shape, out))
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
            let entry = tree.get(part).ok_or_else(|| {
                StoreError::NoSuchPath {
                    path: path.to_string(),
                    why: String::new(),
                }
                .into_error()
            })?;
            if i + 1 == parts.len() {
                return Ok(entry.clone());
            }
            if entry.kind != EntryKind::Dir {
                return Err(StoreError::NoSuchPath {
                    path: path.to_string(),
                    why: format!(" ('{}' is not a directory)", parts[..=i].join("/")),
                }
                .into_error());
            }
            current = entry.id;
        }
        unreachable!("loop returns on the last component")
    }

    /// The entry at `path` in `tree`, or `None` when the bundle has no such path; any
    /// other failure (a damaged or missing tree) is an error, never "absent".
    pub fn find_path(&self, tree: &ObjectId, path: &str) -> Result<Option<TreeEntry>> {
        match self.lookup_path(tree, path) {
            Ok(entry) => Ok(Some(entry)),
            Err(e) if StoreError::is_no_such_path(&e) => Ok(None),
            Err(e) => Err(e),
        }
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
            deepest: walk.deepest,
        })
    }

    /// What local refs hold (`current` and each `targets/NAME`): bundles whose history
    /// is complete here and was checked when it arrived.
    pub(crate) fn ref_bases(&self) -> Result<Vec<ObjectId>> {
        let mut bases = Vec::new();
        if let Some(id) = self.read_ref(&RefName::Current)? {
            bases.push(id);
        }
        for (_, value) in self.target_refs()? {
            bases.extend(value);
        }
        Ok(bases)
    }

    /// Whether everything `tip` reaches that no local ref reaches is here and reads:
    /// each such bundle and every tree below it (`reachable`'s walk, stopped at the
    /// bundles a ref holds, whose history is complete here). A pull of one bundle onto
    /// a history of 10,000 reads that one bundle and its tree, not all 10,000.
    pub fn complete_beyond_refs(&self, tip: &ObjectId) -> Result<()> {
        let bases = self.ref_bases()?;
        let (new, _) = self.bundles_not_in_any(*tip, &bases)?;
        let mut walk = Walk::default();
        for id in &new {
            let bundle = self.read_bundle(id)?;
            self.mark_tree(&bundle.tree, &mut walk)?;
        }
        Ok(())
    }

    /// Mark `tree` and everything below it, each distinct tree read once, iteratively:
    /// any depth costs heap in proportion, never the stack. The depth is measured, not
    /// limited (callers decide: verify reports a tree past `MAX_TREE_DEPTH`).
    fn mark_tree(&self, tree: &ObjectId, walk: &mut Walk) -> Result<()> {
        let mut marking = Marking {
            store: self,
            objects: &mut walk.objects,
        };
        let shape = walk.shapes.walk(tree, None, u32::MAX, &mut marking)?;
        if walk.deepest.is_none_or(|(_, depth)| shape.depth > depth) {
            walk.deepest = Some((*tree, shape.depth));
        }
        Ok(())
    }
}

/// Trees read for a listing, kept for its expansion.
struct Cache<'a> {
    store: &'a Store,
    trees: HashMap<ObjectId, Tree>,
}

impl TreeSource for Cache<'_> {
    fn read(&mut self, id: &ObjectId, _size: Option<u64>) -> Result<(Tree, u64)> {
        self.store.read_tree_len(id)
    }
    fn keep(&mut self, id: ObjectId, tree: Tree) {
        self.trees.insert(id, tree);
    }
}

/// Trees read for reachability: each tree and every blob it names is marked.
struct Marking<'a> {
    store: &'a Store,
    objects: &'a mut HashSet<ObjectId>,
}

impl TreeSource for Marking<'_> {
    fn read(&mut self, id: &ObjectId, _size: Option<u64>) -> Result<(Tree, u64)> {
        let (tree, len) = self.store.read_tree_len(id)?;
        self.objects.insert(*id);
        for entry in &tree.entries {
            if entry.kind != EntryKind::Dir {
                self.objects.insert(entry.id);
            }
        }
        Ok((tree, len))
    }
}

#[derive(Default)]
struct Walk {
    objects: HashSet<ObjectId>,
    bundles: HashSet<ObjectId>,
    shapes: Shapes,
    deepest: Option<(ObjectId, u32)>,
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

    /// Up to `limit` bundles from `start` back through every parent, newest first by
    /// creation time (ties by id), each once: `baton log`'s order, like `git log`'s.
    pub fn history_newest_first(
        &self,
        start: &ObjectId,
        limit: usize,
    ) -> Result<Vec<(ObjectId, Bundle)>> {
        let mut heap = BinaryHeap::new();
        let mut queued = HashMap::new();
        let first = self.read_bundle(start)?;
        heap.push((unix_seconds(first.created_time()), *start));
        queued.insert(*start, first);
        let mut out = Vec::new();
        while let Some((_, id)) = heap.pop() {
            if out.len() >= limit {
                break;
            }
            let Some(bundle) = queued.get(&id).cloned() else {
                continue;
            };
            for parent in &bundle.parents {
                if !queued.contains_key(parent) {
                    let p = self.read_bundle(parent)?;
                    heap.push((unix_seconds(p.created_time()), *parent));
                    queued.insert(*parent, p);
                }
            }
            out.push((id, bundle));
        }
        Ok(out)
    }

    /// Whether `ancestor` is `descendant` or one of its ancestors. Stops as soon as it is
    /// found, so the usual answer (a fast-forward) costs the distance between the two,
    /// not the whole history; only a "no" walks everything.
    pub fn is_ancestor(&self, ancestor: &ObjectId, descendant: &ObjectId) -> Result<bool> {
        if ancestor == descendant {
            return Ok(true);
        }
        let mut seen = HashSet::from([*descendant]);
        let mut queue = VecDeque::from([*descendant]);
        while let Some(id) = queue.pop_front() {
            for parent in self.read_bundle(&id)?.parents {
                if parent == *ancestor {
                    return Ok(true);
                }
                if seen.insert(parent) {
                    queue.push_back(parent);
                }
            }
        }
        Ok(false)
    }

    /// The bundles `tip` reaches and `base` does not, and the boundary: the bundles that
    /// `base` reaches and that are parents of those (with `base` itself). Both histories
    /// are walked together, newest first, and the walk stops once every bundle still
    /// queued is reachable from `base` (git's "paint down" of `rev-list tip ^base`), so a
    /// bundle on top of `base` costs one step, not the whole history. Bundle times only
    /// order the walk: with skewed clocks it may stop late (more work) or count a bundle
    /// of `base`'s history as new (sent again, harmless), never the reverse.
    pub fn bundles_not_in(
        &self,
        tip: ObjectId,
        base: Option<ObjectId>,
    ) -> Result<(Vec<ObjectId>, Vec<ObjectId>)> {
        self.bundles_not_in_any(tip, base.as_slice())
    }

    /// `bundles_not_in` with several bases: the bundles `tip` reaches and none of
    /// `bases` does.
    pub(crate) fn bundles_not_in_any(
        &self,
        tip: ObjectId,
        bases: &[ObjectId],
    ) -> Result<(Vec<ObjectId>, Vec<ObjectId>)> {
        let mut paint = Paint::default();
        paint.add(self, tip, OURS)?;
        for base in bases {
            paint.add(self, *base, THEIRS)?;
        }
        while paint
            .heap
            .iter()
            .any(|(_, id)| paint.flags[id] & THEIRS == 0)
        {
            let Some((_, id)) = paint.heap.pop() else {
                break;
            };
            let f = paint.flags[&id];
            if paint.done.insert(id, f) == Some(f) {
                continue;
            }
            for parent in paint.parents[&id].clone() {
                paint.add(self, parent, f)?;
            }
        }
        let mut new: Vec<ObjectId> = paint
            .flags
            .iter()
            .filter(|(_, f)| **f == OURS)
            .map(|(id, _)| *id)
            .collect();
        new.sort();
        let mut boundary: HashSet<ObjectId> = bases.iter().copied().collect();
        for id in &new {
            for parent in &paint.parents[id] {
                if paint.flags.get(parent).is_some_and(|f| f & THEIRS != 0) {
                    boundary.insert(*parent);
                }
            }
        }
        let mut boundary: Vec<ObjectId> = boundary.into_iter().collect();
        boundary.sort();
        Ok((new, boundary))
    }

    /// Every tree and blob below the root trees of `bundles`, each tree read once.
    pub fn trees_below(&self, bundles: &[ObjectId]) -> Result<HashSet<ObjectId>> {
        Ok(self.below(bundles)?.objects)
    }

    /// `trees_below` with the deepest tree found (`bundles` counts the bundles read).
    pub fn below(&self, bundles: &[ObjectId]) -> Result<Reach> {
        let mut walk = Walk::default();
        for id in bundles {
            let bundle = self.read_bundle(id)?;
            self.mark_tree(&bundle.tree, &mut walk)?;
        }
        Ok(Reach {
            objects: walk.objects,
            bundles: bundles.len(),
            deepest: walk.deepest,
        })
    }
}

const OURS: u8 = 1;
const THEIRS: u8 = 2;

/// State of `bundles_not_in`: which side reaches each bundle seen, newest first.
#[derive(Default)]
struct Paint {
    flags: HashMap<ObjectId, u8>,
    /// The flags each bundle had when its parents were last painted.
    done: HashMap<ObjectId, u8>,
    parents: HashMap<ObjectId, Vec<ObjectId>>,
    created: HashMap<ObjectId, u64>,
    heap: BinaryHeap<(u64, ObjectId)>,
}

impl Paint {
    /// Paint `id` with `side`; queue it when that adds something.
    fn add(&mut self, store: &Store, id: ObjectId, side: u8) -> Result<()> {
        let f = self.flags.entry(id).or_insert(0);
        if *f | side == *f {
            return Ok(());
        }
        *f |= side;
        if !self.parents.contains_key(&id) {
            let (created, parents) = match store.read_bundle(&id) {
                Ok(bundle) => (unix_seconds(bundle.created_time()), bundle.parents),
                // Only the other side's history is unreadable (a store that never had
                // it): it ends there; what this side needs must read.
                Err(_) if side & OURS == 0 => (0, Vec::new()),
                Err(e) => return Err(e),
            };
            self.created.insert(id, created);
            self.parents.insert(id, parents);
        }
        self.heap.push((self.created[&id], id));
        Ok(())
    }
}
