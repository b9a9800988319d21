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
        self.commit_bundle_with(tree, action, fill, How::default())
            .and_then(committed)
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
        let how = How {
            batch: Some(batch),
            ..How::default()
        };
        self.commit_bundle_with(tree, action, fill, how)
            .and_then(committed)
    }

    /// `commit_bundle_in`, unless `unchanged(current)`, asked under the store lock, says
    /// that `current` already holds this content: then nothing is written and no ref
    /// moves (`batch` is dropped unpublished), and the answer is `None`. A checkpoint's
    /// "nothing new" test, made where no concurrent save can slip in between.
    pub fn commit_bundle_in_unless(
        &self,
        batch: PackBatch<'_>,
        tree: ObjectId,
        action: &str,
        unchanged: &mut dyn FnMut(Option<ObjectId>) -> Result<bool>,
        fill: impl FnOnce(&mut Bundle),
    ) -> Result<Option<(ObjectId, Bundle)>> {
        let how = How {
            batch: Some(batch),
            unchanged: Some(unchanged),
            ..How::default()
        };
        self.commit_bundle_with(tree, action, fill, how)
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
        let how = How {
            expect: Some(Some(expect)),
            extra,
            ..How::default()
        };
        self.commit_bundle_with(tree, action, fill, how)
            .and_then(committed)
    }

    fn commit_bundle_with(
        &self,
        tree: ObjectId,
        action: &str,
        fill: impl FnOnce(&mut Bundle),
        how: How<'_, '_>,
    ) -> Result<Option<(ObjectId, Bundle)>> {
        let How {
            expect,
            extra,
            batch,
            unchanged,
        } = how;
        let lock = self.lock()?;
        let parent = self.read_ref(&RefName::Current)?;
        if let Some(unchanged) = unchanged {
            // `parent` may be another process's bundle, in a pack published since this
            // store was opened: the test reads it, so the pack list is read again.
            self.objects.refresh_packs();
            if unchanged(parent)? {
                return Ok(None);
            }
        }
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
        Ok(Some((stored.id, bundle)))
    }
}

/// How a commit is made besides its tree, action and fields: the `current` it expects
/// (a merge), more parents, the pack batch of its objects, and a test that makes it
/// commit nothing when `current` already holds the content.
#[derive(Default)]
struct How<'a, 'b> {
    expect: Option<Option<ObjectId>>,
    extra: &'a [ObjectId],
    batch: Option<PackBatch<'b>>,
    unchanged: Option<&'a mut dyn FnMut(Option<ObjectId>) -> Result<bool>>,
}

/// The bundle a commit without an `unchanged` test made (it always makes one).
fn committed(made: Option<(ObjectId, Bundle)>) -> Result<(ObjectId, Bundle)> {
    made.ok_or_else(|| Error::internal("a commit without a test committed nothing"))
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
