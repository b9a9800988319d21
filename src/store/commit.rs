//! Committing a bundle: write its manifest and move `current` onto it, atomically.

use std::time::SystemTime;

use super::Store;
use super::objects::PendingDirs;
use super::refs::{Expect, MoveReason};
use crate::error::Result;
use crate::format::names::RefName;
use crate::format::{Bundle, ObjectId};

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
        let lock = self.lock()?;
        let parent = self.read_ref(&RefName::Current)?;
        let mut bundle = Bundle::new(tree, parent.into_iter().collect(), SystemTime::now());
        fill(&mut bundle);
        let pending = PendingDirs::default();
        let stored = self.objects.put_bytes(&bundle.encode(), &pending)?;
        pending.sync()?;
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
