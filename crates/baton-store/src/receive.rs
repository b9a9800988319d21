//! Receive-side checks: the trees a pull, clone or import brings in are checked before a
//! ref names them: every tree and file present, every declared size right (of objects
//! received and of objects already here alike), no tree deeper than `MAX_TREE_DEPTH`.
//! One check for every receive path (pull and clone call `Store::check_received`, import
//! runs `TreeCheck` over its staging area), so that nothing received can fail `verify`
//! later.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use super::Store;
use super::tree_limits::{MAX_TREE_DEPTH, Shapes, TreeSource, wrong_size};
use baton_error::{Error, ErrorKind, Result};
use baton_format::{EntryKind, MAX_METADATA_OBJECT, ObjectId, Tree};

/// Where received objects are: the store itself (pull, clone: objects are published as
/// they arrive, and no ref names them until checked) or a staging area in front of it.
pub trait Incoming {
    /// The verified content of tree `id` (at most `MAX_METADATA_OBJECT` bytes), if here.
    fn tree_bytes(&self, id: &ObjectId) -> Result<Option<Vec<u8>>>;
    /// The content length of blob `id`, if here.
    fn blob_len(&self, id: &ObjectId) -> Result<Option<u64>>;
    /// The error for object `id` (a `tree` or `file`) of `bundle`, which is not here.
    fn missing(&self, id: &ObjectId, what: &str, bundle: &ObjectId) -> Error {
        Error::integrity(format!("{what} object {id} of bundle {bundle} is missing"))
    }
}

/// The check of received trees, each distinct tree once, shared across bundles.
#[derive(Default)]
pub struct TreeCheck {
    shapes: Shapes,
    /// Every tree and blob reached.
    pub trees: HashSet<ObjectId>,
    pub blobs: HashSet<ObjectId>,
    /// Blob sizes already checked: a blob and the size an entry gives it. The pair, not
    /// the blob: one blob may be named with two sizes, and only one can be right.
    sized: HashSet<(ObjectId, u64)>,
}

impl TreeCheck {
    /// A check that takes the pairs in `known` as checked already (those of the trees
    /// local refs reach, checked when they arrived): a blob named with the size it has
    /// there costs nothing, with another size it is read.
    pub fn new(known: HashSet<(ObjectId, u64)>) -> Self {
        TreeCheck {
            sized: known,
            ..TreeCheck::default()
        }
    }

    /// Check `tree`, the root tree of `bundle`, and everything below it.
    pub fn check(&mut self, from: &dyn Incoming, bundle: &ObjectId, tree: &ObjectId) -> Result<()> {
        let mut source = Checking {
            from,
            bundle,
            trees: &mut self.trees,
            blobs: &mut self.blobs,
            sized: &mut self.sized,
        };
        self.shapes.walk(tree, None, MAX_TREE_DEPTH, &mut source)?;
        Ok(())
    }
}

struct Checking<'a> {
    from: &'a dyn Incoming,
    bundle: &'a ObjectId,
    trees: &'a mut HashSet<ObjectId>,
    blobs: &'a mut HashSet<ObjectId>,
    sized: &'a mut HashSet<(ObjectId, u64)>,
}

impl TreeSource for Checking<'_> {
    fn read(&mut self, id: &ObjectId, _size: Option<u64>) -> Result<(Tree, u64)> {
        self.trees.insert(*id);
        let Some(bytes) = self.from.tree_bytes(id)? else {
            return Err(self.from.missing(id, "tree", self.bundle));
        };
        let tree = Tree::decode(&bytes)
            .map_err(|e| e.recast(ErrorKind::Integrity, format!("tree {id}")))?;
        for entry in &tree.entries {
            if entry.kind == EntryKind::Dir {
                continue;
            }
            self.blobs.insert(entry.id);
            if !self.sized.insert((entry.id, entry.size)) {
                continue;
            }
            match self.from.blob_len(&entry.id)? {
                None => return Err(self.from.missing(&entry.id, "file", self.bundle)),
                Some(len) if len != entry.size => {
                    return Err(wrong_size(&entry.id, len, entry.size));
                }
                Some(_) => {}
            }
        }
        Ok((tree, bytes.len() as u64))
    }
}

/// The store with the lengths of what a receive verified on arrival.
struct Received<'a> {
    store: &'a Store,
    lengths: &'a HashMap<ObjectId, u64>,
}

impl Incoming for Received<'_> {
    fn tree_bytes(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        self.store.tree_bytes(id)
    }

    fn blob_len(&self, id: &ObjectId) -> Result<Option<u64>> {
        match self.lengths.get(id) {
            Some(len) => Ok(Some(*len)),
            None => self.store.blob_len(id),
        }
    }
}

/// Trees read for `sizes_below`: the pairs of their blob entries collected.
struct Pairs<'a> {
    store: &'a Store,
    pairs: HashSet<(ObjectId, u64)>,
}

impl TreeSource for Pairs<'_> {
    fn read(&mut self, id: &ObjectId, _size: Option<u64>) -> Result<(Tree, u64)> {
        let (tree, len) = self.store.read_tree_len(id)?;
        for entry in &tree.entries {
            if entry.kind != EntryKind::Dir {
                self.pairs.insert((entry.id, entry.size));
            }
        }
        Ok((tree, len))
    }
}

impl Incoming for Store {
    fn tree_bytes(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        if !self.objects.contains(id) {
            return Ok(None);
        }
        self.objects.get_bytes(id, MAX_METADATA_OBJECT).map(Some)
    }

    fn blob_len(&self, id: &ObjectId) -> Result<Option<u64>> {
        if !self.objects.contains(id) {
            return Ok(None);
        }
        self.content_len(id).map(Some)
    }
}

impl Store {
    /// Every (blob, declared size) pair of the trees below `bundles`, each tree read
    /// once (their subtrees' sizes checked by the walk).
    fn sizes_below(&self, bundles: &[ObjectId]) -> Result<HashSet<(ObjectId, u64)>> {
        let mut shapes = Shapes::default();
        let mut source = Pairs {
            store: self,
            pairs: HashSet::new(),
        };
        for id in bundles {
            let tree = self.read_bundle(id)?.tree;
            shapes.walk(&tree, None, u32::MAX, &mut source)?;
        }
        Ok(source.pairs)
    }

    /// The content length of object `id`. Every object in the store was fully checked
    /// when it was written or received, its zstd frame's declared content size included,
    /// so a frame that declares its size is believed (a few bytes read); one that does
    /// not (files over 1 MiB are streamed without it) is decoded and counted.
    pub fn content_len(&self, id: &ObjectId) -> Result<u64> {
        let stored = self.objects.open_stored(id)?;
        let mut opened = self.objects.envelope().open(id, stored)?;
        let mut head = [0u8; 18];
        let mut got = 0;
        while got < head.len() {
            match opened.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if let Ok(Some(len)) = zstd::zstd_safe::get_frame_content_size(&head[..got]) {
            return Ok(len);
        }
        self.objects.copy_to(id, None, &mut std::io::sink())
    }

    /// Check what a pull or clone received below `tip` (already published, named by no
    /// ref yet): every bundle that no local ref reaches, and every tree and file below
    /// it that the boundary's trees do not already hold, with their declared sizes and
    /// depth. What a local ref reaches was checked when it arrived.
    pub fn check_received(&self, tip: &ObjectId) -> Result<()> {
        self.check_received_with(tip, &HashMap::new())
    }

    /// `check_received`, with the content lengths of objects `received` verified as they
    /// arrived (by `Ingest`): those are not read again.
    pub fn check_received_with(
        &self,
        tip: &ObjectId,
        received: &HashMap<ObjectId, u64>,
    ) -> Result<()> {
        let from = Received {
            store: self,
            lengths: received,
        };
        let bases = self.ref_bases()?;
        let (new, boundary) = self.bundles_not_in_any(*tip, &bases)?;
        if new.is_empty() {
            return Ok(());
        }
        // A boundary tree that cannot be read vouches for nothing: then every blob is read.
        let known = self.sizes_below(&boundary).unwrap_or_default();
        let mut check = TreeCheck::new(known);
        let hint =
            "no ref was moved: the remote store is damaged or forged; run 'baton verify' on it";
        for id in &new {
            let bundle = self.read_bundle(id)?;
            check.check(&from, id, &bundle.tree).map_err(|e| {
                e.recast(ErrorKind::Integrity, format!("received bundle {id}"))
                    .with_hint(hint)
            })?;
        }
        Ok(())
    }
}
