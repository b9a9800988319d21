//! Refs: compare-and-swap ref moves, each recorded in the log (`log.rs`) first, and the
//! generations that hold a ref's history (SPEC 8).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Store, StoreLock, fsutil};
use baton_error::{Error, IoContext, Result};
use baton_format::id::show_full;
use baton_format::names::{RefName, generation_name, parse_generation};
use baton_format::{LogEntry, ObjectId, layout};

/// What a ref must hold for an update to proceed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Whatever it holds (used only where the caller holds the lock and just read it).
    Any,
    /// Exactly this value (`None`: the ref must not exist).
    Value(Option<ObjectId>),
}

/// Who and why, recorded with every ref move.
#[derive(Clone, Debug, Default)]
pub struct MoveReason {
    pub action: String,
    pub from: String,
    pub to: String,
}

/// The newest generation of a ref: its number and the log entry that created it.
pub struct Generation {
    pub number: u64,
    pub entry: LogEntry,
}

impl Store {
    pub fn ref_dir(&self, name: &RefName) -> PathBuf {
        self.root.join(layout::ref_dir(name))
    }

    /// The newest generation of `name`, if the ref exists. Found by probing for
    /// generation files rather than listing the directory (SPEC 8.3): a ref moved ten
    /// thousand times costs about 30 stats, not a listing of ten thousand names.
    pub fn ref_generation(&self, name: &RefName) -> Result<Option<Generation>> {
        let dir = self.ref_dir(name);
        if !dir.exists() {
            return Ok(None);
        }
        let number = match probe_newest(&dir, self.newest_seen(&dir))? {
            Some(number) => Some(number),
            None => newest_listed(name, &dir)?,
        };
        let Some(number) = number else {
            return Ok(None);
        };
        self.saw_generation(&dir, number);
        let path = dir.join(generation_name(number));
        let bytes = fsutil::read_limited(&path, 64 << 10)?;
        let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        let entry = LogEntry::decode_line(line, 1).map_err(|e| {
            Error::integrity(format!(
                "ref '{}' is damaged ({}): {}",
                name.as_string(),
                path.display(),
                e.message
            ))
            .with_hint("remove the damaged generation file to fall back to the previous value")
        })?;
        if entry.ref_name != name.as_string() {
            return Err(Error::integrity(format!(
                "ref '{}' is damaged: {} names ref '{}'",
                name.as_string(),
                path.display(),
                entry.ref_name
            )));
        }
        Ok(Some(Generation { number, entry }))
    }

    /// The newest generation this handle saw in the ref directory `dir`.
    fn newest_seen(&self, dir: &Path) -> Option<u64> {
        let seen = self.newest_seen.lock().ok()?;
        seen.iter().find(|(d, _)| d == dir).map(|(_, n)| *n)
    }

    fn saw_generation(&self, dir: &Path, number: u64) {
        if let Ok(mut seen) = self.newest_seen.lock() {
            match seen.iter_mut().find(|(d, _)| d == dir) {
                Some((_, n)) => *n = (*n).max(number),
                None => seen.push((dir.to_path_buf(), number)),
            }
        }
    }

    /// Every generation of `name`, oldest first: the ref's own history of moves.
    pub fn ref_history(&self, name: &RefName) -> Result<Vec<LogEntry>> {
        let dir = self.ref_dir(name);
        if !dir.exists() {
            return Ok(vec![]);
        }
        let mut out = Vec::new();
        let mut previous: Option<u64> = None;
        for file in super::fsutil::read_dir_sorted(&dir)? {
            if fsutil::is_temp_name(&file) {
                continue;
            }
            let path = dir.join(&file);
            let Some(number) = parse_generation(&file) else {
                return Err(stray(name, &path));
            };
            // Readers find the newest generation by probing (SPEC 8.3), which a gap
            // would mislead: a gap is damage, reported here and so by `verify`.
            if let Some(previous) = previous
                && number != previous + 1
            {
                return Err(Error::integrity(format!(
                    "ref '{}' is damaged: generation {} is missing before {}",
                    name.as_string(),
                    generation_name(previous + 1),
                    path.display()
                ))
                .with_hint(
                    "generations are never deleted; restore the missing one from a backup",
                ));
            }
            previous = Some(number);
            let bytes = fsutil::read_limited(&path, 64 << 10)?;
            let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
            out.push(LogEntry::decode_line(line, 1).map_err(|e| {
                Error::integrity(format!(
                    "ref '{}' is damaged ({}): {}",
                    name.as_string(),
                    path.display(),
                    e.message
                ))
            })?);
        }
        Ok(out)
    }

    /// `current` and every target ref.
    pub fn ref_names(&self) -> Result<Vec<RefName>> {
        let mut names = vec![RefName::Current];
        names.extend(self.target_refs()?.into_iter().map(|(n, _)| n));
        Ok(names)
    }

    /// Every bundle id a ref, a ref generation or a log line has ever named: the roots
    /// that `gc` keeps and `verify` checks. The log is read as a stream.
    pub(crate) fn all_roots(&self) -> Result<Vec<ObjectId>> {
        let mut roots = std::collections::BTreeSet::new();
        for name in self.ref_names()? {
            for entry in self.ref_history(&name)? {
                roots.extend(entry.old);
                roots.extend(entry.new);
            }
        }
        self.log_roots(&mut roots)?;
        Ok(roots.into_iter().collect())
    }

    pub fn read_ref(&self, name: &RefName) -> Result<Option<ObjectId>> {
        Ok(self.ref_generation(name)?.and_then(|g| g.entry.new))
    }

    /// Every target ref, sorted by name.
    pub(crate) fn target_refs(&self) -> Result<Vec<(RefName, Option<ObjectId>)>> {
        let dir = self.root.join(layout::TARGETS);
        let mut out = Vec::new();
        for name in super::fsutil::read_dir_sorted(&dir)? {
            if fsutil::is_temp_name(&name) {
                continue;
            }
            let ref_name = RefName::parse(&format!("targets/{name}")).map_err(|_| {
                Error::integrity(format!(
                    "unexpected entry {} in refs/targets",
                    name.escape_debug()
                ))
            })?;
            let value = self.read_ref(&ref_name)?;
            out.push((ref_name, value));
        }
        Ok(out)
    }

    /// Move a ref by compare-and-swap, under the lock the caller holds: check the
    /// expected old value, append the log line (durably), then publish the next
    /// generation without overwriting anything.
    pub fn update_ref_locked(
        &self,
        _lock: &StoreLock,
        name: &RefName,
        expect: Expect,
        new: Option<ObjectId>,
        reason: &MoveReason,
    ) -> Result<Option<ObjectId>> {
        let current = self.ref_generation(name)?;
        let old = current.as_ref().and_then(|g| g.entry.new);
        if let Expect::Value(expected) = expect
            && expected != old
        {
            return Err(Error::conflict(format!(
                "ref '{}' is {}, expected {}",
                name.as_string(),
                show_full(old),
                show_full(expected)
            ))
            .with_hint("someone else moved it; look at 'baton log --audit' and retry"));
        }
        // In an encrypted store the free text (who, where) is sealed like objects.
        let entry = self.log_entry(name, old, new, reason)?;
        let dir = self.ref_dir(name);
        let next = current.map(|g| g.number).unwrap_or(0) + 1;
        let dest = dir.join(generation_name(next));
        // The log line and the generation's temp file are made durable at once (two
        // device flushes waited for together): both only have to be durable before the
        // generation is published, and a temp file refers to nothing.
        let (logged, temp) = std::thread::scope(|s| {
            let logged = s.spawn(|| self.append_log(&entry));
            let temp = (|| {
                fsutil::ensure_private_dir(&dir)?;
                let mut temp = fsutil::temp_file_in(&dir)?;
                temp.write_all(&entry.encode_line())
                    .ctx("cannot write", temp.path())?;
                temp.as_file().sync_all().ctx("cannot fsync", temp.path())?;
                Ok::<_, Error>(temp)
            })();
            let logged = logged
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (logged, temp)
        });
        logged?;
        let temp = temp?;
        temp.persist_noclobber(&dest).map_err(|e| {
            if e.error.kind() == std::io::ErrorKind::AlreadyExists {
                Error::conflict(format!(
                    "ref '{}' moved while it was being updated",
                    name.as_string()
                ))
                .with_hint("retry")
            } else {
                Error::io("cannot publish", &dest, e.error)
            }
        })?;
        fsutil::fsync_dir(&dir)?;
        self.saw_generation(&dir, next);
        Ok(old)
    }

    pub fn update_ref(
        &self,
        name: &RefName,
        expect: Expect,
        new: Option<ObjectId>,
        reason: &MoveReason,
    ) -> Result<Option<ObjectId>> {
        let lock = self.lock()?;
        self.update_ref_locked(&lock, name, expect, new, reason)
    }
}

/// The newest generation number in ref directory `dir`, found without listing it:
/// writers only ever publish N+1 over the newest N and never delete, so the numbers
/// present run 1..=N (SPEC 8.3); probe 1, 2, 4, ... until one is missing, then bisect.
/// That is 2·log2(N) stats. `None` when generation 1 is absent (an empty ref, or one
/// whose oldest generations were pruned by hand): the caller lists the directory.
/// A generation published concurrently is either seen or not; either answer is a value
/// the ref held, and a move based on a stale one loses its no-clobber publish.
/// `seen`: a generation this process saw earlier. Generations are never removed from the
/// top, so while it exists the probe starts there (two stats when the ref has not moved
/// since: a handoff reads `current` three times).
fn probe_newest(dir: &Path, seen: Option<u64>) -> Result<Option<u64>> {
    let exists = |n: u64| -> Result<bool> {
        let path = dir.join(generation_name(n));
        match fs::symlink_metadata(&path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("cannot read ref", &path, e)),
        }
    };
    let mut low = match seen {
        Some(seen) if seen > 1 && exists(seen)? => seen,
        _ if exists(1)? => 1,
        _ => return Ok(None),
    };
    // Gallop up from `low` (which exists) until a number is missing, then bisect.
    let mut step = 1u64;
    let Some(mut high) = low.checked_add(step) else {
        return Ok(None);
    };
    while exists(high)? {
        low = high;
        step = step.saturating_mul(2);
        let Some(next) = low.checked_add(step) else {
            return Ok(None);
        };
        high = next;
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if exists(mid)? {
            low = mid;
        } else {
            high = mid;
        }
    }
    Ok(Some(low))
}

/// The newest generation number in `dir` by listing it: the fallback for a ref without
/// generation 1. Reports stray entries, as `ref_history` (and so `verify`) does.
fn newest_listed(name: &RefName, dir: &Path) -> Result<Option<u64>> {
    let mut newest = None;
    for file in super::fsutil::read_dir_sorted(dir)? {
        if fsutil::is_temp_name(&file) {
            continue;
        }
        let Some(number) = parse_generation(&file) else {
            return Err(stray(name, &dir.join(&file)));
        };
        newest = newest.max(Some(number));
    }
    Ok(newest)
}

fn stray(name: &RefName, path: &Path) -> Error {
    Error::integrity(format!(
        "ref '{}' is damaged: unexpected file {}",
        name.as_string(),
        path.display()
    ))
    .with_hint("move the stray file out of the ref directory")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, numbers: impl IntoIterator<Item = u64>) {
        for n in numbers {
            fs::write(dir.join(generation_name(n)), b"").unwrap();
        }
    }

    #[test]
    fn probing_finds_the_newest_generation() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        assert_eq!(probe_newest(dir, None).unwrap(), None);
        assert_eq!(probe_newest(dir, Some(3)).unwrap(), None);
        for n in 1..=300u64 {
            touch(dir, [n]);
            assert_eq!(probe_newest(dir, None).unwrap(), Some(n), "after {n}");
            // From any generation seen before, the same answer.
            for seen in [1, 2, n / 2, n.saturating_sub(1), n] {
                assert_eq!(
                    probe_newest(dir, Some(seen)).unwrap(),
                    Some(n),
                    "{n} {seen}"
                );
            }
        }
        // Temp files are not generations.
        fs::write(dir.join(".tmp-x"), b"").unwrap();
        assert_eq!(probe_newest(dir, None).unwrap(), Some(300));
        // A generation seen that is not there (another store at the path): as if unseen.
        assert_eq!(probe_newest(dir, Some(301)).unwrap(), Some(300));
        assert_eq!(probe_newest(dir, Some(5000)).unwrap(), Some(300));
    }

    #[test]
    fn a_handle_reads_the_moves_it_makes_and_those_of_others() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("s");
        let (ours, theirs) = (Store::init(&root).unwrap(), Store::open(&root).unwrap());
        let id = |i: u32| baton_format::ObjectId::of(&i.to_be_bytes());
        let reason = MoveReason::default();
        let mut expected = None;
        for i in 0..40u32 {
            let mover = if i % 3 == 0 { &theirs } else { &ours };
            let lock = mover.lock().unwrap();
            mover
                .update_ref_locked(
                    &lock,
                    &RefName::Current,
                    Expect::Value(expected),
                    Some(id(i)),
                    &reason,
                )
                .unwrap();
            drop(lock);
            expected = Some(id(i));
            for store in [&ours, &theirs] {
                let read = store.ref_generation(&RefName::Current).unwrap().unwrap();
                assert_eq!((read.number, read.entry.new), (u64::from(i) + 1, expected));
            }
        }
    }

    #[test]
    fn a_pruned_ref_is_listed_and_a_gap_is_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        touch(dir, [5, 6, 7]);
        assert_eq!(
            probe_newest(dir, None).unwrap(),
            None,
            "no generation 1: list"
        );
        assert_eq!(
            probe_newest(dir, Some(3)).unwrap(),
            None,
            "no generation 1: list"
        );
        assert_eq!(
            probe_newest(dir, Some(6)).unwrap(),
            Some(7),
            "seen: from there"
        );
        assert_eq!(newest_listed(&RefName::Current, dir).unwrap(), Some(7));
        fs::write(dir.join("stray"), b"").unwrap();
        assert!(newest_listed(&RefName::Current, dir).is_err());
    }
}
