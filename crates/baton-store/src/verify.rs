//! Verification: rehash objects, check every ref, log line and reachable object, and
//! every size a reachable tree declares against the object it names.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;

use super::Store;
use super::objects::ListedObject;
use super::tree_limits::{MAX_TREE_DEPTH, Shapes, TreeSource, too_deep, wrong_size};
use super::walk::Reach;
use baton_error::Result;
use baton_format::{EntryKind, ObjectId, Tree};

#[derive(Debug, Default, Serialize)]
pub struct VerifyReport {
    pub objects_checked: u64,
    pub bytes_checked: u64,
    pub bundles_checked: u64,
    pub log_entries: u64,
    /// Temp files left by interrupted writes: harmless, removed by `gc`.
    pub temp_files: u64,
    /// The log ends in a partial line from an interrupted append: never committed, and
    /// cut off by the next ref move.
    pub log_torn_tail: bool,
    pub problems: Vec<String>,
    /// False for an encrypted store verified without an identity: files, names, pack
    /// hashes, refs and the log were checked, object contents were not.
    pub contents_checked: bool,
}

impl VerifyReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Store {
    /// Verify the whole store: every object file rehashed, every ref and log line parsed,
    /// everything they reach present and well-formed, every mode private.
    pub fn verify_all(&self, progress: &(dyn Fn(u64) + Sync)) -> Result<VerifyReport> {
        let mut report = VerifyReport {
            contents_checked: !self.objects.envelope().is_locked(),
            ..VerifyReport::default()
        };
        let mut objects = Vec::new();
        for listed in self.objects.list()? {
            match listed {
                ListedObject::Object(name, path) => objects.push((name, path)),
                ListedObject::Temp(_) => report.temp_files += 1,
                ListedObject::Stray(path) => report
                    .problems
                    .push(format!("unexpected file {}", path.display())),
            }
        }
        // Listed names are storage names: the id itself in a plain store, a keyed hash
        // of it in an encrypted one (checked by `decode_named`).
        let locked = self.objects.envelope().is_locked();
        let results: Vec<Result<(ObjectId, u64)>> = objects
            .par_iter()
            .map(|(name, path)| {
                let result = fs::File::open(path)
                    .map_err(|e| baton_error::Error::io("cannot read object", path, e))
                    .and_then(|file| {
                        if locked {
                            // Without keys: the file must at least be an age file.
                            age::Decryptor::new_buffered(std::io::BufReader::new(file))
                                .map(|_| (*name, 0))
                                .map_err(|e| {
                                    baton_error::Error::integrity(format!(
                                        "object file {} is not an age file: {e}",
                                        path.display()
                                    ))
                                })
                        } else {
                            self.objects.decode_named(name, file, &mut std::io::sink())
                        }
                    });
                progress(1);
                result
            })
            .collect();
        // The content length of every object that checked, by id: what the sizes that
        // trees declare are compared with, at no further read.
        let mut sizes: HashMap<ObjectId, u64> = HashMap::new();
        for result in results {
            report.objects_checked += 1;
            match result {
                Ok((id, bytes)) => {
                    report.bytes_checked += bytes;
                    sizes.insert(id, bytes);
                }
                Err(e) => report.problems.push(e.message),
            }
        }
        self.verify_packs(&mut report, &mut sizes);
        let roots = self.check_refs_and_log(&mut report);
        if locked {
            check_modes(self.root(), &mut report.problems);
            report.problems.sort();
            report.problems.dedup();
            return Ok(report);
        }
        let roots: Vec<ObjectId> = roots.into_iter().collect();
        match self.reachable_sized(&roots, &sizes, &mut report.problems) {
            Ok(reach) => {
                report.bundles_checked = reach.bundles as u64;
                if let Some((tree, depth)) = reach.deepest
                    && depth > MAX_TREE_DEPTH
                {
                    report.problems.push(too_deep(&tree).message);
                }
                // The walk reads bundles and trees but only names blobs: a blob whose file
                // is gone would otherwise go unnoticed, as the rehash above sees only the
                // objects that are present.
                let mut missing: Vec<&ObjectId> = reach
                    .objects
                    .iter()
                    .filter(|id| !self.objects.contains(id))
                    .collect();
                missing.sort();
                for id in missing {
                    report
                        .problems
                        .push(format!("object {id} is missing from the store"));
                }
            }
            Err(e) => report
                .problems
                .push(format!("history is incomplete: {}", e.message)),
        }
        check_modes(self.root(), &mut report.problems);
        report.problems.sort();
        report.problems.dedup();
        Ok(report)
    }

    fn verify_packs(&self, report: &mut VerifyReport, sizes: &mut HashMap<ObjectId, u64>) {
        let dir = self.objects.packs_dir();
        if let Ok(names) = super::fsutil::read_dir_sorted(dir) {
            for name in names {
                if super::fsutil::is_temp_name(&name) {
                    report.temp_files += 1;
                } else if super::packs::pack_name_id(&name).is_none() {
                    report
                        .problems
                        .push(format!("unexpected file {}", dir.join(name).display()));
                }
            }
        }
        // A pack that vanished while it was checked was merged into a new pack under
        // the store lock (SPEC 7): list again, once, and check the packs not seen yet.
        let mut done = std::collections::HashSet::new();
        for round in 0..2 {
            let packs = match self.objects.packs() {
                Ok(packs) => packs,
                Err(e) => {
                    report.problems.push(e.message);
                    return;
                }
            };
            let mut vanished = false;
            for pack in packs.iter() {
                if done.contains(&pack.id) {
                    continue;
                }
                let check = super::packs::verify_pack(pack, self.objects.envelope());
                if round == 0 && !check.problems.is_empty() && !pack.path.exists() {
                    vanished = true;
                    continue;
                }
                done.insert(pack.id);
                report.objects_checked += check.objects;
                report.bytes_checked += check.bytes;
                report.problems.extend(check.problems);
                sizes.extend(check.sizes);
            }
            if !vanished {
                return;
            }
            self.objects.refresh_packs();
        }
    }

    /// Everything `roots` reach, as `Store::reachable` finds it, while each blob entry of
    /// each tree is checked against the content length `sizes` holds for its object: a
    /// different one is a problem (SPEC 4.2: corruption; a pull that took such a tree
    /// moved `current` onto a bundle `verify current` refuses). Objects without a length
    /// here are missing or damaged, reported apart.
    fn reachable_sized(
        &self,
        roots: &[ObjectId],
        sizes: &HashMap<ObjectId, u64>,
        problems: &mut Vec<String>,
    ) -> Result<Reach> {
        let mut source = SizeCheck {
            store: self,
            sizes,
            bundle: None,
            objects: HashSet::new(),
            problems,
        };
        let mut shapes = Shapes::default();
        let mut bundles = HashSet::new();
        let mut deepest: Option<(ObjectId, u32)> = None;
        let mut queue: VecDeque<ObjectId> = roots.iter().copied().collect();
        while let Some(id) = queue.pop_front() {
            if !bundles.insert(id) {
                continue;
            }
            source.objects.insert(id);
            let bundle = self.read_bundle(&id)?;
            queue.extend(bundle.parents.iter().copied());
            source.bundle = Some(id);
            let shape = shapes.walk(&bundle.tree, None, u32::MAX, &mut source)?;
            if deepest.is_none_or(|(_, depth)| shape.depth > depth) {
                deepest = Some((bundle.tree, shape.depth));
            }
        }
        Ok(Reach {
            objects: source.objects,
            bundles: bundles.len(),
            deepest,
        })
    }

    /// The sizes declared below every root (SPEC 16, item 6) that differ from the
    /// length `sizes` gives their object (the content lengths a rehash of the store
    /// found), one problem each; for `pull --repair`, once the store is complete.
    pub fn declared_size_problems(&self, sizes: &HashMap<ObjectId, u64>) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        self.reachable_sized(&self.all_roots()?, sizes, &mut problems)?;
        problems.sort();
        problems.dedup();
        Ok(problems)
    }

    /// Every id named by a ref or a log line; damaged refs and log lines become problems
    /// (and then no roots: the reachability check needs them all). The log is read once,
    /// as a stream.
    fn check_refs_and_log(&self, report: &mut VerifyReport) -> BTreeSet<ObjectId> {
        let mut roots = BTreeSet::new();
        let mut complete = true;
        match self.log_roots(&mut roots) {
            Ok(lines) => report.log_entries = lines,
            Err(e) => {
                report.problems.push(e.message);
                complete = false;
            }
        }
        report.log_torn_tail = self.log_has_torn_tail().unwrap_or(false);
        match self.ref_names() {
            Ok(names) => {
                for name in names {
                    match self
                        .ref_history(&name)
                        .and_then(|h| Ok((h, self.read_ref(&name)?)))
                    {
                        Ok((history, _)) => {
                            for entry in history {
                                roots.extend(entry.old);
                                roots.extend(entry.new);
                            }
                        }
                        Err(e) => {
                            report.problems.push(e.message);
                            complete = false;
                        }
                    }
                }
            }
            Err(e) => {
                report.problems.push(e.message);
                complete = false;
            }
        }
        if complete { roots } else { BTreeSet::new() }
    }

    /// Verify one bundle and everything below its tree, and that its parents are here;
    /// with `history`, every ancestor the same way. Without it the cost is the bundle's
    /// size, whatever the length of the history (a ref implies a complete history: every
    /// bundle was complete when it was stored, SPEC.md section 16).
    pub fn verify_rev(
        &self,
        bundle: &ObjectId,
        history: bool,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<VerifyReport> {
        self.verify_rev_leaving(bundle, history, &[], progress)
    }

    /// [`Store::verify_rev`], leaving out the contents of the blobs `left` (their trees
    /// are checked as always): for a caller that reads those whole itself, every byte
    /// checked against its id as it is read, and counts a failure as a problem.
    pub fn verify_rev_leaving(
        &self,
        bundle: &ObjectId,
        history: bool,
        left: &[ObjectId],
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<VerifyReport> {
        let mut report = VerifyReport {
            contents_checked: true,
            ..VerifyReport::default()
        };
        let mut blobs: BTreeSet<(ObjectId, u64)> = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut shapes = Shapes::default();
        let mut stack = vec![*bundle];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            match self.read_bundle(&id) {
                Ok(b) => {
                    report.bundles_checked += 1;
                    report.objects_checked += 1;
                    if history {
                        stack.extend(b.parents);
                    } else {
                        for parent in &b.parents {
                            if !self.objects.contains(parent) {
                                report
                                    .problems
                                    .push(format!("parent bundle {parent} of {id} is missing"));
                            }
                        }
                    }
                    if let Err(e) =
                        self.collect_blobs(&b.tree, &mut shapes, &mut blobs, &mut report)
                    {
                        report.problems.push(e.message);
                    }
                }
                Err(e) => report.problems.push(e.message),
            }
        }
        blobs.retain(|(id, _)| !left.contains(id));
        let results: Vec<Result<u64>> = blobs
            .par_iter()
            .map(|(id, size)| {
                let r = self.objects.copy_to(id, Some(*size), &mut std::io::sink());
                progress(1);
                r
            })
            .collect();
        for result in results {
            report.objects_checked += 1;
            match result {
                Ok(bytes) => report.bytes_checked += bytes,
                Err(e) => report.problems.push(e.message),
            }
        }
        report.problems.sort();
        report.problems.dedup();
        Ok(report)
    }

    /// Every blob below `tree` (each distinct tree read once, shared across bundles by
    /// `shapes`), with the size its entry declares; trees are checked against theirs. A
    /// tree that cannot be read is a problem and the walk goes on beside it.
    fn collect_blobs(
        &self,
        tree: &ObjectId,
        shapes: &mut Shapes,
        blobs: &mut BTreeSet<(ObjectId, u64)>,
        report: &mut VerifyReport,
    ) -> Result<()> {
        let mut source = Collect {
            store: self,
            blobs,
            report,
        };
        shapes.walk(tree, None, MAX_TREE_DEPTH, &mut source)?;
        Ok(())
    }
}

/// Trees read by the full verify's reachability walk: each tree and every object it
/// names is marked, and each blob entry's size checked against its object's length.
struct SizeCheck<'a> {
    store: &'a Store,
    sizes: &'a HashMap<ObjectId, u64>,
    /// The bundle being walked (the first to reach each tree: each is read once).
    bundle: Option<ObjectId>,
    objects: HashSet<ObjectId>,
    problems: &'a mut Vec<String>,
}

impl TreeSource for SizeCheck<'_> {
    fn read(&mut self, id: &ObjectId, _size: Option<u64>) -> Result<(Tree, u64)> {
        let (tree, len) = self.store.read_tree_len(id)?;
        self.objects.insert(*id);
        for entry in &tree.entries {
            if entry.kind == EntryKind::Dir {
                continue;
            }
            self.objects.insert(entry.id);
            if let Some(&actual) = self.sizes.get(&entry.id)
                && actual != entry.size
            {
                self.problems.push(format!(
                    "{} (entry \"{}\" of tree {id}, below bundle {})",
                    wrong_size(&entry.id, actual, entry.size).message,
                    entry.name.escape_debug(),
                    baton_format::id::show_full(self.bundle)
                ));
            }
        }
        Ok((tree, len))
    }
}

/// Trees read by `verify_rev`: counted, their blobs collected, unreadable ones reported.
struct Collect<'a> {
    store: &'a Store,
    blobs: &'a mut BTreeSet<(ObjectId, u64)>,
    report: &'a mut VerifyReport,
}

impl TreeSource for Collect<'_> {
    fn read(&mut self, id: &ObjectId, size: Option<u64>) -> Result<(Tree, u64)> {
        self.report.objects_checked += 1;
        let (tree, len) = match (self.store.read_tree_len(id), size) {
            (Ok(read), _) => read,
            // The root's own error is the caller's; below it, one problem per tree, and
            // the walk goes on beside it.
            (Err(e), Some(size)) => {
                self.report.problems.push(e.message);
                return Ok((Tree::default(), size));
            }
            (Err(e), None) => return Err(e),
        };
        for entry in &tree.entries {
            if entry.kind != EntryKind::Dir {
                self.blobs.insert((entry.id, entry.size));
            }
        }
        Ok((tree, len))
    }
}

/// Directories must be 0700 and files 0600: anything wider leaks handoffs to other users.
fn check_modes(dir: &Path, problems: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let mode = meta.permissions().mode() & 0o7777;
        if meta.is_dir() {
            if mode != super::fsutil::DIR_MODE {
                problems.push(format!(
                    "directory {} has mode {mode:o}, expected 700",
                    path.display()
                ));
            }
            check_modes(&path, problems);
        } else if mode != super::fsutil::FILE_MODE {
            problems.push(format!(
                "file {} has mode {mode:o}, expected 600",
                path.display()
            ));
        }
    }
}
