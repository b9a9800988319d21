//! Leftovers of interrupted work: the one place that decides when a temp file, a staging
//! directory or a clone's work directory may be removed by someone other than its maker.
//!
//! Two rules, used everywhere: anything older than `STALE_SECS` is abandoned (a live
//! operation never takes that long between making its leftover-to-be and finishing), and
//! anything whose name records the pid of a process on this host that no longer runs was
//! left by a killed run and can go at once.

use std::fs;
use std::path::Path;

/// Staging and temp files older than this are leftovers of interrupted runs.
pub(crate) const STALE_SECS: u64 = 3600;

/// Which entries of a local directory one kind of leftover is.
pub struct Rule<'a> {
    /// The name prefix the maker uses (`.tmp-pull-`, `import-`, `.baton-clone-`).
    pub prefix: &'a str,
    /// The name continues `<pid>-...` after the prefix: a dead pid makes it a leftover.
    pub pid_after_prefix: bool,
    /// Older than `STALE_SECS` makes it a leftover.
    pub by_age: bool,
}

impl Rule<'_> {
    fn matches(&self, name: &str, entry: &fs::DirEntry) -> bool {
        let Some(rest) = name.strip_prefix(self.prefix) else {
            return false;
        };
        (self.pid_after_prefix && pid_is_dead(rest.split('-').next().unwrap_or("")))
            || (self.by_age && entry.metadata().is_ok_and(|m| is_stale(&m)))
    }
}

/// Remove (best effort: a leftover that stays is removed by a later run) every entry of
/// `dir`, file or directory, that one of `rules` calls a leftover.
pub fn sweep(dir: &Path, rules: &[Rule]) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !rules.iter().any(|rule| rule.matches(&name, &entry)) {
            continue;
        }
        let path = entry.path();
        let _ = match entry.file_type() {
            Ok(t) if t.is_dir() => fs::remove_dir_all(&path),
            _ => fs::remove_file(&path),
        };
    }
}

/// Whether a file's modification time is more than `STALE_SECS` ago.
pub(crate) fn is_stale(meta: &fs::Metadata) -> bool {
    meta.modified()
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age.as_secs() > STALE_SECS)
}

/// Whether a remote entry modified at `mtime` (seconds since the epoch) is stale at `now`.
pub(crate) fn is_stale_at(mtime: u64, now: u64) -> bool {
    now.saturating_sub(mtime) > STALE_SECS
}

/// Which leftovers of a remote's staging may go: the stale ones, and those a dead process
/// of this host left (its names are `<host>-<pid>-<nanos>`).
pub struct RemoteSweep {
    now: u64,
    here: String,
}

impl RemoteSweep {
    /// Judged from now, on this host.
    pub fn now() -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        RemoteSweep {
            now,
            here: this_host(),
        }
    }

    /// Whether the leftover `name`, modified at `mtime` (seconds since the epoch), may go.
    pub fn removable(&self, name: &str, mtime: u64) -> bool {
        is_stale_at(mtime, self.now) || left_by_dead_process_here(name, &self.here)
    }
}

/// Whether `pid` (decimal) names a process that is gone.
fn pid_is_dead(pid: &str) -> bool {
    pid.parse::<i32>()
        .is_ok_and(|pid| pid > 0 && !process_alive(pid))
}

/// kill(pid, 0): the process exists unless the answer is "no such process".
pub(crate) fn process_alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    // Signal 0 performs only the existence and permission check.
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// This host's name as staging names carry it: at most 32 of `[A-Za-z0-9-]`.
pub fn this_host() -> String {
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    host.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(32)
        .collect()
}

/// Whether a staging name (`<host>-<pid>-<nanos>`) was made on host `here` by a process
/// that no longer runs: an interrupted push, whose leftovers the next push can remove at
/// once instead of after the stale age.
pub(crate) fn left_by_dead_process_here(name: &str, here: &str) -> bool {
    let mut parts = name.rsplitn(3, '-');
    let (Some(_nanos), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    host == here && pid_is_dead(pid)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_running_process_is_alive_and_a_reaped_one_is_not() {
        assert!(process_alive(std::process::id() as i32));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(!process_alive(pid));
        assert!(pid_is_dead(&pid.to_string()));
        assert!(!pid_is_dead("0") && !pid_is_dead("-1") && !pid_is_dead("x"));
    }

    use super::*;

    #[test]
    fn sweep_removes_what_a_rule_names_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dead_pid();
        let live = std::process::id();
        for name in [
            format!(".tmp-pull-{dead}-x"),
            format!(".tmp-pull-{live}-x"),
            "other".to_string(),
        ] {
            fs::write(dir.path().join(name), b"x").unwrap();
        }
        fs::create_dir(dir.path().join(format!(".baton-clone-{dead}-y"))).unwrap();
        sweep(
            dir.path(),
            &[
                Rule {
                    prefix: ".tmp-pull-",
                    pid_after_prefix: true,
                    by_age: true,
                },
                Rule {
                    prefix: ".baton-clone-",
                    pid_after_prefix: true,
                    by_age: false,
                },
            ],
        );
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            vec![format!(".tmp-pull-{live}-x"), "other".to_string()]
        );
    }

    #[test]
    fn staging_names_of_dead_local_processes_are_leftovers() {
        let here = this_host();
        let dead = dead_pid();
        assert!(left_by_dead_process_here(
            &format!("{here}-{dead}-123"),
            &here
        ));
        let live = std::process::id();
        assert!(!left_by_dead_process_here(
            &format!("{here}-{live}-123"),
            &here
        ));
        assert!(!left_by_dead_process_here(
            &format!("elsewhere-{dead}-123"),
            &here
        ));
        assert!(!left_by_dead_process_here("garbage", &here));
        assert!(is_stale_at(0, STALE_SECS + 1));
        assert!(!is_stale_at(10, STALE_SECS));
    }

    /// A pid that no process has: a child that has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }
}
