//! Refs and the audit log: compare-and-swap ref moves, each recorded in `log` first.

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::SystemTime;

use super::{Store, StoreLock, fsutil};
use crate::error::{Error, IoContext, Result};
use crate::format::bundle::format_time;
use crate::format::id::show_full;
use crate::format::names::{RefName, generation_name, parse_generation};
use crate::format::{LogEntry, ObjectId};

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
        match name {
            RefName::Current => self.root.join("refs").join("current"),
            RefName::Target(t) => self.root.join("refs").join("targets").join(t),
        }
    }

    /// The newest generation of `name`, if the ref exists.
    pub fn ref_generation(&self, name: &RefName) -> Result<Option<Generation>> {
        let dir = self.ref_dir(name);
        if !dir.exists() {
            return Ok(None);
        }
        let mut newest = None;
        for file in super::objects::read_dir_sorted(&dir)? {
            if fsutil::is_temp_name(&file) {
                continue;
            }
            let Some(number) = parse_generation(&file) else {
                return Err(Error::integrity(format!(
                    "ref '{}' is damaged: unexpected file {}",
                    name.as_string(),
                    dir.join(&file).display()
                ))
                .with_hint("move the stray file out of the ref directory"));
            };
            newest = newest.max(Some(number));
        }
        let Some(number) = newest else {
            return Ok(None);
        };
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

    /// The log line recording a move of `name` from `old` to `new`, by this user on this
    /// host now; free text sealed in an encrypted store.
    pub fn log_entry(
        &self,
        name: &RefName,
        old: Option<ObjectId>,
        new: Option<ObjectId>,
        reason: &MoveReason,
    ) -> Result<LogEntry> {
        let seal = |t: String| self.objects.envelope().seal_text(&t);
        let host = hostname::get()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(LogEntry {
            time: format_time(SystemTime::now()),
            ref_name: name.as_string(),
            old,
            new,
            action: reason.action.clone(),
            from: seal(reason.from.clone())?,
            to: seal(reason.to.clone())?,
            host: seal(host)?,
            user: seal(current_user())?,
        })
    }

    /// Every generation of `name`, oldest first: the ref's own history of moves.
    pub fn ref_history(&self, name: &RefName) -> Result<Vec<LogEntry>> {
        let dir = self.ref_dir(name);
        if !dir.exists() {
            return Ok(vec![]);
        }
        let mut out = Vec::new();
        for file in super::objects::read_dir_sorted(&dir)? {
            if fsutil::is_temp_name(&file) {
                continue;
            }
            let path = dir.join(&file);
            if parse_generation(&file).is_none() {
                return Err(Error::integrity(format!(
                    "ref '{}' has a stray file {}",
                    name.as_string(),
                    path.display()
                )));
            }
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
    /// that `gc` keeps and `verify` checks.
    pub fn all_roots(&self) -> Result<Vec<ObjectId>> {
        let mut roots = std::collections::BTreeSet::new();
        for name in self.ref_names()? {
            for entry in self.ref_history(&name)? {
                roots.extend(entry.old);
                roots.extend(entry.new);
            }
        }
        for entry in self.read_log()? {
            roots.extend(entry.old);
            roots.extend(entry.new);
        }
        Ok(roots.into_iter().collect())
    }

    pub fn read_ref(&self, name: &RefName) -> Result<Option<ObjectId>> {
        Ok(self.ref_generation(name)?.and_then(|g| g.entry.new))
    }

    /// Every target ref, sorted by name.
    pub fn target_refs(&self) -> Result<Vec<(RefName, Option<ObjectId>)>> {
        let dir = self.root.join("refs").join("targets");
        let mut out = Vec::new();
        for name in super::objects::read_dir_sorted(&dir)? {
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
        self.append_log(&entry)?;
        let dir = self.ref_dir(name);
        fsutil::ensure_private_dir(&dir)?;
        let next = current.map(|g| g.number).unwrap_or(0) + 1;
        let dest = dir.join(generation_name(next));
        let mut temp = fsutil::temp_file_in(&dir)?;
        temp.write_all(&entry.encode_line())
            .ctx("cannot write", temp.path())?;
        temp.as_file().sync_all().ctx("cannot fsync", temp.path())?;
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

    fn log_path(&self) -> PathBuf {
        self.root.join("log")
    }

    fn append_log(&self, entry: &LogEntry) -> Result<()> {
        let path = self.log_path();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .ctx("cannot open log", &path)?;
        // A last line without its newline is a write that a crash interrupted: it was
        // never committed (a line counts once its newline is durable), so it is cut off
        // before the next line goes in. Committed lines are never touched.
        let (committed, len) = committed_length(&mut file).ctx("cannot read", &path)?;
        if committed != len {
            file.set_len(committed)
                .ctx("cannot cut the torn tail of", &path)?;
            file.sync_data().ctx("cannot fsync", &path)?;
        }
        // One write call per line: with O_APPEND the kernel never interleaves lines.
        file.write_all(&entry.encode_line())
            .ctx("cannot append to", &path)?;
        file.sync_data().ctx("cannot fsync", &path)
    }

    /// Whether the log ends in an interrupted (uncommitted) partial line.
    pub fn log_has_torn_tail(&self) -> Result<bool> {
        let path = self.log_path();
        let mut file = fs::File::open(&path).ctx("cannot open log", &path)?;
        let (committed, len) = committed_length(&mut file).ctx("cannot read", &path)?;
        Ok(committed != len)
    }

    /// The whole log, oldest first. A damaged line is an integrity error naming it; a
    /// torn last line (an interrupted append, never committed) is left out.
    pub fn read_log(&self) -> Result<Vec<LogEntry>> {
        let path = self.log_path();
        let bytes = fs::read(&path).ctx("cannot read log", &path)?;
        let mut entries = Vec::new();
        let mut rest: &[u8] = &bytes;
        let mut line_no = 0;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            line_no += 1;
            entries.push(LogEntry::decode_line(&rest[..end], line_no).map_err(|e| {
                e.with_hint("the log is never rewritten by baton; repair it by hand from a backup")
            })?);
            rest = &rest[end + 1..];
        }
        Ok(entries)
    }
}

/// The length of the log up to and including its last newline, and its full length.
fn committed_length(file: &mut fs::File) -> std::io::Result<(u64, u64)> {
    let len = file.metadata()?.len();
    let mut end = len;
    let mut buf = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok((start + i as u64 + 1, len));
        }
        end = start;
    }
    Ok((0, len))
}

/// The login name for the audit log: `$USER`, else the password database, else the uid.
pub fn current_user() -> String {
    if let Ok(user) = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")) {
        return user;
    }
    // SAFETY: getuid cannot fail; getpwuid returns null or a pointer to static storage
    // that stays valid until the next getpw* call, and we copy the name out at once.
    unsafe {
        let uid = libc::getuid();
        let pw = libc::getpwuid(uid);
        if !pw.is_null() && !(*pw).pw_name.is_null() {
            return std::ffi::CStr::from_ptr((*pw).pw_name)
                .to_string_lossy()
                .into_owned();
        }
        format!("uid{uid}")
    }
}
