//! The reads of a capture that need no git process (the work tree's operation state
//! files, its remotes, its recent commits, and whether anything is staged), done in this
//! process with gitoxide, each `None` (ask git) wherever its answer could differ from the
//! git CLI's.
//!
//! A git process costs about a millisecond of start-up here (docs/benchmarks.md), and
//! these were the cheap questions. `status` and the unstaged patch stay with git: they
//! read the index, the work tree and the attributes exactly as git does, which is the
//! point of the evidence.

use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gix::ObjectId;

use super::history::STATE_FILES;
use super::{Commit, RECENT_COMMITS, Remote, redact_url_credentials};

/// The recent commits of HEAD, each with its parents' ids, as the capture records them.
type RecentCommits = Vec<(Commit, Vec<String>)>;

/// A repository opened in this process, at the root of its work tree, and its answers,
/// each read once (by [`InProcess::read_early`] or by the first to ask).
pub(super) struct InProcess {
    repo: gix::ThreadSafeRepository,
    git_program: PathBuf,
    remotes: OnceLock<Option<Vec<Remote>>>,
    nothing_staged: OnceLock<bool>,
    recent_commits: OnceLock<Option<RecentCommits>>,
}

/// An [`InProcess`] opened by the first read that asks for it (the others wait), so that
/// the git processes of a capture start while it opens.
pub(super) struct Lazily {
    /// The workspace and git program to open it with; `None` for one never to open.
    from: Option<(PathBuf, PathBuf)>,
    opened: OnceLock<Option<InProcess>>,
}

impl Lazily {
    pub(super) fn new(workspace: &Path, git_program: &Path) -> Lazily {
        Lazily {
            from: Some((workspace.to_path_buf(), git_program.to_path_buf())),
            opened: OnceLock::new(),
        }
    }

    /// One opened already (its answers perhaps read).
    pub(super) fn opened(library: Option<InProcess>) -> Lazily {
        Lazily {
            from: None,
            opened: OnceLock::from(library),
        }
    }

    /// One that is never opened: every read asks git.
    pub(super) fn none() -> Lazily {
        Lazily {
            from: None,
            opened: OnceLock::new(),
        }
    }

    /// The repository if it was opened already (nothing is opened here).
    pub(super) fn ready(&self) -> Option<&InProcess> {
        self.opened.get().and_then(Option::as_ref)
    }

    pub(super) fn get(&self) -> Option<&InProcess> {
        self.opened
            .get_or_init(|| {
                let (workspace, program) = self.from.as_ref()?;
                InProcess::open(workspace, program)
            })
            .as_ref()
    }
}

impl InProcess {
    /// The repository whose work tree `workspace` is the root of, when this process can
    /// read it as git would: `git_program` can be found ([`program_path`]), the repository and work tree belong to this user (else git may refuse
    /// them: `safe.directory`), no `git -c` settings are inherited (gitoxide does not read
    /// `GIT_CONFIG_PARAMETERS`), and objects are SHA-1.
    pub(super) fn open(workspace: &Path, git_program: &Path) -> Option<InProcess> {
        if std::env::var_os("GIT_CONFIG_PARAMETERS").is_some() {
            return None;
        }
        let git_program = program_path(git_program)?;
        let options = gix::open::Options::default();
        let repo = gix::ThreadSafeRepository::open_opts(workspace, options).ok()?;
        let local = repo.to_thread_local();
        let root = local.workdir()?;
        if std::fs::canonicalize(root).ok()? != workspace
            || local.object_hash() != gix::hash::Kind::Sha1
            || ![workspace, local.git_dir(), local.common_dir()]
                .iter()
                .all(|dir| owned_by_me(dir))
        {
            return None;
        }
        Some(InProcess {
            repo,
            git_program,
            remotes: OnceLock::new(),
            nothing_staged: OnceLock::new(),
            recent_commits: OnceLock::new(),
        })
    }

    /// Read the remotes and "nothing staged" now, on this thread. The recent commits are
    /// left to the history read (on the evidence thread, while the caller goes on): read
    /// here too, they kept a handoff's calling thread 0.7 ms longer from its own work.
    pub(super) fn read_early(&self) {
        self.remotes();
        self.nothing_staged();
    }

    /// [`InProcess::read_remotes`], read once.
    pub(super) fn remotes(&self) -> Option<Vec<Remote>> {
        self.remotes.get_or_init(|| self.read_remotes()).clone()
    }

    /// [`InProcess::read_nothing_staged`], read once.
    pub(super) fn nothing_staged(&self) -> bool {
        *self
            .nothing_staged
            .get_or_init(|| self.read_nothing_staged())
    }

    /// [`InProcess::read_recent_commits`], read once.
    pub(super) fn recent_commits(&self) -> Option<RecentCommits> {
        self.recent_commits
            .get_or_init(|| self.read_recent_commits())
            .clone()
    }

    /// Where git keeps the operation state files (`git rev-parse --git-path NAME`): all
    /// of them are per work tree, so in its git directory.
    pub(super) fn state_paths(&self) -> Vec<PathBuf> {
        let git_dir = self.repo.git_dir();
        STATE_FILES.iter().map(|name| git_dir.join(name)).collect()
    }

    /// The remotes and their first URLs in configuration order, as
    /// `git config --get-regexp '^remote\..*\.url$'` lists them; `None` when git may read
    /// a system configuration file this process would not (gitoxide reads
    /// `/etc/gitconfig`, git `$(prefix)/etc/gitconfig` of its own build).
    fn read_remotes(&self) -> Option<Vec<Remote>> {
        if !system_config_agrees(&self.git_program) {
            return None;
        }
        let repo = self.repo.to_thread_local();
        let config = repo.config_snapshot();
        let mut remotes: Vec<Remote> = Vec::new();
        let Some(sections) = config.plumbing().sections_by_name("remote") else {
            return Some(remotes);
        };
        for section in sections {
            let Some(name) = section.header().subsection_name() else {
                continue;
            };
            let name = name.to_string();
            if remotes.iter().any(|r| r.name == name) {
                continue;
            }
            // A key without `=` is listed by git with no value; rare enough to ask git.
            if section.value_implicit("url") == Some(None) {
                return None;
            }
            if let Some(url) = section.values("url").first() {
                remotes.push(Remote {
                    name,
                    url: redact_url_credentials(&url.to_string()),
                });
            }
        }
        Some(remotes)
    }

    /// Whether the index is known to hold exactly HEAD's tree, so that the staged patch
    /// (`git diff-index --cached HEAD`) is empty: the index's cache tree (git's `TREE`
    /// extension, which `commit`, `checkout` and `reset` leave valid and `add` breaks)
    /// covers every entry and names HEAD's tree, and no entry is conflicted, intended
    /// to add (`add -N`) or a sparse directory. `false` says only "not known": git is
    /// asked for the patch.
    fn read_nothing_staged(&self) -> bool {
        let repo = self.repo.to_thread_local();
        let (Ok(head_tree), Ok(index)) = (repo.head_tree_id(), repo.open_index()) else {
            return false;
        };
        let Some(cache_tree) = index.tree() else {
            return false;
        };
        let entries = index.entries();
        cache_tree.id == head_tree.detach()
            && cache_tree.num_entries == u32::try_from(entries.len()).ok()
            && index.link().is_none()
            && !index.is_sparse()
            && entries.iter().all(|entry| {
                entry.stage_raw() == 0
                    && !entry
                        .flags
                        .contains(gix::index::entry::Flags::INTENT_TO_ADD)
                    && !entry.mode.is_sparse()
            })
    }

    /// The last [`RECENT_COMMITS`] commits of HEAD, each with its parents' ids, in the
    /// order `git log` gives them: newest committer date first, commits of equal date in
    /// the order they were met (git's date-ordered walk). `None` when git would rewrite
    /// the history it shows (replace refs, grafts, a shallow clone) or format a commit
    /// differently (an `encoding` header, a NUL in the message, an unreadable date), or
    /// when anything cannot be read: git is asked then, and says why.
    fn read_recent_commits(&self) -> Option<RecentCommits> {
        let repo = self.repo.to_thread_local();
        if repo.is_shallow().ok()?
            || repo.common_dir().join("info/grafts").exists()
            || has_replace_refs(&repo)?
        {
            return None;
        }
        let head = repo.head_id().ok()?.detach();
        let mut walk = Walk::default();
        walk.push(&repo, head)?;
        let mut commits = Vec::new();
        while commits.len() < RECENT_COMMITS {
            let Some(next) = walk.pop() else { break };
            for parent in &next.parents {
                walk.push(&repo, *parent)?;
            }
            commits.push((
                next.commit,
                next.parents.iter().map(ObjectId::to_string).collect(),
            ));
        }
        Some(commits)
    }
}

/// One commit of the walk, read.
struct Read {
    commit: Commit,
    parents: Vec<ObjectId>,
    committer_seconds: i64,
}

/// git's walk for `log`: a queue ordered by committer date, ties in order of insertion
/// (`commit_list_insert_by_date`), each commit queued once.
#[derive(Default)]
struct Walk {
    queue: BinaryHeap<(i64, std::cmp::Reverse<u64>, ObjectId)>,
    read: HashMap<ObjectId, Option<Read>>,
    inserted: u64,
}

impl Walk {
    fn push(&mut self, repo: &gix::Repository, id: ObjectId) -> Option<()> {
        if self.read.contains_key(&id) {
            return Some(());
        }
        let read = read_commit(repo, id)?;
        self.queue
            .push((read.committer_seconds, std::cmp::Reverse(self.inserted), id));
        self.inserted += 1;
        self.read.insert(id, Some(read));
        Some(())
    }

    fn pop(&mut self) -> Option<Read> {
        let (_, _, id) = self.queue.pop()?;
        self.read.get_mut(&id)?.take()
    }
}

fn read_commit(repo: &gix::Repository, id: ObjectId) -> Option<Read> {
    let object = repo.find_object(id).ok()?;
    if object.kind != gix::object::Kind::Commit {
        return None;
    }
    let commit = gix::objs::CommitRef::from_bytes(&object.data, repo.object_hash()).ok()?;
    if commit.encoding.is_some() || commit.message.contains(&0) {
        return None;
    }
    let author = commit.author().ok()?;
    let committer = commit.committer().ok()?;
    let parents = commit.parents().collect::<Vec<ObjectId>>();
    Some(Read {
        commit: Commit {
            id: id.to_string(),
            author: format!(
                "{} <{}>",
                String::from_utf8_lossy(trim_end_space(author.name)),
                String::from_utf8_lossy(author.email)
            ),
            time: strict_iso8601(author.time().ok()?)?,
            subject: String::from_utf8_lossy(&subject(commit.message)).into_owned(),
        },
        parents,
        committer_seconds: committer.time().ok()?.seconds,
    })
}

/// Whether any `refs/replace/` ref exists (git would show the replacements).
fn has_replace_refs(repo: &gix::Repository) -> Option<bool> {
    let refs = repo.references().ok()?;
    let mut replaced = refs.prefixed("refs/replace/").ok()?;
    Some(replaced.next().is_some())
}

/// `%aI`: `2026-11-30T10:00:00+01:00`, and `Z` for a zero offset as git (since 2.41)
/// prints it.
fn strict_iso8601(time: gix::date::Time) -> Option<String> {
    let text = time.format(gix::date::time::format::ISO8601_STRICT).ok()?;
    Some(match time.offset {
        0 => format!("{}Z", text.strip_suffix("+00:00")?),
        _ => text,
    })
}

/// git's `%s` (pretty.c `format_subject` after `skip_blank_lines`): the first paragraph
/// of the message, blank lines before it skipped, its lines joined by one space, each
/// without trailing whitespace. Whitespace is git's: space, tab, CR, LF.
fn subject(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut started = false;
    for line in message.split(|b| *b == b'\n') {
        let line = trim_end_space(line);
        if line.is_empty() {
            if started {
                break;
            }
            continue;
        }
        if started {
            out.push(b' ');
        }
        out.extend_from_slice(line);
        started = true;
    }
    out
}

/// `bytes` without its trailing git whitespace (space, tab, CR, LF).
fn trim_end_space(bytes: &[u8]) -> &[u8] {
    let end = bytes
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .map_or(0, |i| i + 1);
    &bytes[..end]
}

/// Whether `path` belongs to the effective user (git's ownership check for
/// `safe.directory`).
fn owned_by_me(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    std::fs::metadata(path).is_ok_and(|m| m.uid() == me)
}

/// Whether gitoxide and git read the same remotes from system configuration: none at
/// all (`GIT_CONFIG_NOSYSTEM`), one file named by `GIT_CONFIG_SYSTEM`, or, at each place
/// either looks (gitoxide `/etc/gitconfig`, git `$(prefix)/etc/gitconfig` of its build),
/// no file, or one with no remote and no include.
fn system_config_agrees(git_program: &Path) -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    let no_system = std::env::var("GIT_CONFIG_NOSYSTEM")
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"));
    if no_system || set("GIT_CONFIG_SYSTEM") {
        return true;
    }
    let mut places = vec![PathBuf::from("/etc/gitconfig")];
    if let Some(prefix) = std::fs::canonicalize(git_program)
        .ok()
        .and_then(|p| p.parent()?.parent().map(Path::to_path_buf))
    {
        places.push(prefix.join("etc/gitconfig"));
    }
    places.iter().all(|place| {
        if !place.exists() {
            return true;
        }
        let Ok(file) =
            gix::config::File::from_path_no_includes(place.clone(), gix::config::Source::System)
        else {
            return false;
        };
        ["remote", "include", "includeIf"].iter().all(|name| {
            file.sections_by_name(name)
                .is_none_or(|mut s| s.next().is_none())
        })
    })
}

/// The executable file `program` runs: itself when it is a path, else the first on
/// `PATH`; `None` when there is none (git's own failure is then the evidence).
pub(super) fn program_path(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 {
        return executable(program).then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_is_the_first_paragraph_as_git_joins_it() {
        let cases: [(&[u8], &[u8]); 7] = [
            (b"one\n", b"one"),
            (b"one\ntwo  \n\nbody\n", b"one two"),
            (b"\n\n  indented\n", b"  indented"),
            (b"crlf\r\nnext\r\n\r\nbody", b"crlf next"),
            (b" \t\nafter a blank line\n \nbody", b"after a blank line"),
            (b"", b""),
            (b"no newline", b"no newline"),
        ];
        for (message, want) in cases {
            assert_eq!(
                subject(message),
                want.to_vec(),
                "{}",
                String::from_utf8_lossy(message)
            );
        }
    }

    #[test]
    fn a_zero_offset_is_z() {
        let utc = gix::date::Time {
            seconds: 1_796_200_000,
            offset: 0,
        };
        assert_eq!(strict_iso8601(utc).as_deref(), Some("2026-12-02T08:26:40Z"));
        let west = gix::date::Time {
            seconds: 1_796_200_000,
            offset: -(90 * 60),
        };
        assert_eq!(
            strict_iso8601(west).as_deref(),
            Some("2026-12-02T06:56:40-01:30")
        );
    }
}
