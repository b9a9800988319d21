//! Committing a bundle: write its manifest and move `current` onto it, atomically.

use std::time::SystemTime;

use super::Store;
use super::objects::PendingDirs;
use super::pack_batch::PackBatch;
use super::refs::{Expect, MoveReason};
use baton_error::{Error, Result};
use baton_format::id::show_short;
use baton_format::names::RefName;
use baton_format::{Bundle, ObjectId};

impl Store {
    /// Make a bundle of `tree` whose parent is whatever `current` holds at this instant,
    /// and move `current` to it. The read, the manifest write and the ref move happen
    /// under the store lock, so concurrent savers form a chain and no update is lost.
    pub fn commit_bundle(
        &self,
        tree: ObjectId,
        action: &str,
        fill: impl FnOnce(&mut Bundle),
    ) -> Result<(ObjectId, Bundle)> {
        self.commit_bundle_with(tree, None, &[], action, fill, None)
    }

    /// `commit_bundle` of a tree whose new objects are still in `batch` (not finished):
    /// the manifest goes into the same pack, so one durable publish (one file fsync and
    /// one of `packs/`) covers the tree and the manifest before the ref moves (SPEC 12.2),
    /// instead of a loose manifest's fsyncs of its file and fan-out directories.
    pub fn commit_bundle_in(
        &self,
        batch: PackBatch<'_>,
        tree: ObjectId,
        action: &str,
        fill: impl FnOnce(&mut Bundle),
    ) -> Result<(ObjectId, Bundle)> {
        self.commit_bundle_with(tree, None, &[], action, fill, Some(batch))
    }

    /// `commit_bundle` with more parents after `current` (a merge: `current`, then
    /// `extra`), when `current` is still `expect`: the tree was made from what `current`
    /// held, so a save in between is a conflict, not something to build on silently.
    pub fn commit_merge_bundle(
        &self,
        tree: ObjectId,
        expect: ObjectId,
        extra: &[ObjectId],
        action: &str,
        fill: impl FnOnce(&mut Bundle),
    ) -> Result<(ObjectId, Bundle)> {
        self.commit_bundle_with(tree, Some(Some(expect)), extra, action, fill, None)
    }

    fn commit_bundle_with(
        &self,
        tree: ObjectId,
        expect: Option<Option<ObjectId>>,
        extra: &[ObjectId],
        action: &str,
        fill: impl FnOnce(&mut Bundle),
        batch: Option<PackBatch<'_>>,
    ) -> Result<(ObjectId, Bundle)> {
        let lock = self.lock()?;
        let parent = self.read_ref(&RefName::Current)?;
        if let Some(expected) = expect
            && expected != parent
        {
            return Err(Error::conflict(format!(
                "current moved from {} to {} while the {action} was being made",
                show_short(expected),
                show_short(parent)
            ))
            .with_hint(format!("run the {action} again")));
        }
        let mut parents: Vec<ObjectId> = parent.into_iter().collect();
        parents.extend(extra.iter().copied());
        let mut bundle = Bundle::new(tree, parents, SystemTime::now());
        fill(&mut bundle);
        let stored = match batch {
            Some(batch) => {
                let stored = batch.put_bytes(&bundle.encode())?;
                batch.finish()?;
                stored
            }
            None => {
                let pending = PendingDirs::default();
                let stored = self.objects.put_bytes(&bundle.encode(), &pending)?;
                pending.sync()?;
                stored
            }
        };
        let reason = MoveReason {
            action: action.into(),
            from: bundle.from.clone(),
            to: bundle.to.clone(),
        };
        self.update_ref_locked(
            &lock,
            &RefName::Current,
            Expect::Value(parent),
            Some(stored.id),
            &reason,
        )?;
        Ok((stored.id, bundle))
    }
}

impl Store {
    /// Write a manifest as given (explicit parents: imports), without moving any ref.
    pub fn write_bundle(&self, bundle: &Bundle) -> Result<ObjectId> {
        let pending = PendingDirs::default();
        let stored = self.objects.put_bytes(&bundle.encode(), &pending)?;
        pending.sync()?;
        Ok(stored.id)
    }
}
