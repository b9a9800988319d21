//! Garbage collection: remove objects no ref and no log line reaches, after a grace period.

use std::collections::BTreeSet;
use std::fs;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::Store;
use super::objects::ListedObject;
use baton_error::{Error, IoContext, Result};

#[derive(Debug, Default, Serialize)]
pub struct GcReport {
    pub reachable: u64,
    pub removed_objects: u64,
    pub removed_bytes: u64,
    pub removed_temp_files: u64,
    /// Unreachable objects kept because they are younger than the grace period.
    pub kept_in_grace: u64,
    pub dry_run: bool,
    /// Packs merged into one (SPEC 17 step 5); nothing in a dry run.
    pub repack: super::repack::RepackReport,
}

impl Store {
    pub fn gc(&self, grace: Duration, dry_run: bool) -> Result<GcReport> {
        let lock = self.lock()?;
        let roots = self.all_roots()?;
        let reachable = self.reachable(&roots).map(|r| r.objects).map_err(|e| {
            Error::integrity(format!(
                "refusing to collect garbage in a damaged store: {}",
                e.message
            ))
            .with_hint(
                "run 'baton verify' and repair the store first ('baton pull --repair [TARGET]')",
            )
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
        // Temp files elsewhere (interrupted pulls in packs/, ref updates in refs/) and
        // staging directories (interrupted imports, or pushes into this store) age out
        // the same way.
        let mut temp_dirs = vec![self.objects.packs_dir().to_path_buf()];
        for name in self.ref_names()? {
            temp_dirs.push(self.ref_dir(&name));
        }
        for dir in temp_dirs {
            let Ok(names) = super::fsutil::read_dir_sorted(&dir) else {
                continue;
            };
            for name in names.into_iter().filter(|n| super::fsutil::is_temp_name(n)) {
                let path = dir.join(name);
                let old = fs::symlink_metadata(&path)
                    .and_then(|m| m.modified())
                    .is_ok_and(|m| m <= cutoff);
                if old {
                    if !dry_run {
                        fs::remove_file(&path).ctx("cannot remove", &path)?;
                        touched.insert(dir.clone());
                    }
                    report.removed_temp_files += 1;
                }
            }
        }
        let staging = self.root().join(baton_format::layout::STAGING);
        if let Ok(names) = super::fsutil::read_dir_sorted(&staging) {
            for name in names {
                let path = staging.join(name);
                let old = fs::symlink_metadata(&path)
                    .and_then(|m| m.modified())
                    .is_ok_and(|m| m <= cutoff);
                if old && path.is_dir() {
                    if !dry_run {
                        fs::remove_dir_all(&path).ctx("cannot remove", &path)?;
                        touched.insert(staging.clone());
                    }
                    report.removed_temp_files += 1;
                }
            }
        }
        for dir in touched {
            super::fsutil::fsync_dir(&dir)?;
        }
        if !dry_run {
            report.repack = self.repack(&lock, super::repack::RepackMode::All)?;
        }
        Ok(report)
    }
}
