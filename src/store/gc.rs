//! Garbage collection: remove objects no ref and no log line reaches, after a grace period.

use std::collections::BTreeSet;
use std::fs;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::Store;
use super::objects::ListedObject;
use crate::error::{Error, IoContext, Result};

/// Objects younger than this are never removed: a concurrent save may be about to refer
/// to them (git uses the same two weeks).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(14 * 24 * 3600);

#[derive(Debug, Default, Serialize)]
pub struct GcReport {
    pub reachable: u64,
    pub removed_objects: u64,
    pub removed_bytes: u64,
    pub removed_temp_files: u64,
    /// Unreachable objects kept because they are younger than the grace period.
    pub kept_in_grace: u64,
    pub dry_run: bool,
}

impl Store {
    pub fn gc(&self, grace: Duration, dry_run: bool) -> Result<GcReport> {
        let _lock = self.lock()?;
        let roots = self.all_roots()?;
        let reachable = self.reachable(&roots).map(|r| r.objects).map_err(|e| {
            Error::integrity(format!(
                "refusing to collect garbage in a damaged store: {}",
                e.message
            ))
            .with_hint("run 'baton verify' and repair the store first")
        })?;
        let cutoff = SystemTime::now()
            .checked_sub(grace)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let mut report = GcReport {
            reachable: reachable.len() as u64,
            dry_run,
            ..GcReport::default()
        };
        // Loose files are listed by storage name.
        let reachable: std::collections::HashSet<_> = reachable
            .iter()
            .map(|id| self.objects.name_of(id))
            .collect();
        let mut touched = BTreeSet::new();
        for listed in self.objects.list()? {
            let (path, is_temp) = match listed {
                ListedObject::Object(id, _) if reachable.contains(&id) => continue,
                ListedObject::Object(_, path) => (path, false),
                ListedObject::Temp(path) => (path, true),
                ListedObject::Stray(_) => continue,
            };
            let meta = fs::symlink_metadata(&path).ctx("cannot stat", &path)?;
            if meta.modified().map(|m| m > cutoff).unwrap_or(true) {
                report.kept_in_grace += u64::from(!is_temp);
                continue;
            }
            if !dry_run {
                fs::remove_file(&path).ctx("cannot remove", &path)?;
                if let Some(parent) = path.parent() {
                    touched.insert(parent.to_path_buf());
                }
            }
            if is_temp {
                report.removed_temp_files += 1;
            } else {
                report.removed_objects += 1;
                report.removed_bytes += meta.len();
            }
        }
        for dir in touched {
            super::fsutil::fsync_dir(&dir)?;
        }
        Ok(report)
    }
}
