//! Workspace evidence: a read-only snapshot of a git workspace, taken through the `git` CLI
//! (and, for the reads it can do exactly as git would, gitoxide in this process: `inproc`).
//!
//! Capture never fails and never writes. Every git call runs with `GIT_OPTIONAL_LOCKS=0`
//! (so `status` does not refresh the index), `LC_ALL=C`, `core.quotepath=false`, no
//! fsmonitor, no external diff or textconv, and only read-only subcommands: `rev-parse`,
//! `status`, `config --get-regexp`, `rev-list`, `log`, `hash-object` without `-w`, and the
//! plumbing `diff-index`/`diff-files` for patches (porcelain `git diff` rewrites the index
//! to refresh stat data even with optional locks off). A directory that is not a git work
//! tree, or a machine without `git`, gives an explicitly partial capture whose `partial`
//! list says why; a directory that is no work tree but holds repositories below it is
//! captured as each of them (`nested`).

mod background;
mod git;
mod history;
mod history_reuse;
mod inproc;
mod nested;
mod patches;
mod probe;
mod reads;
mod status;
mod untracked;
mod url_credentials;

pub use background::{BackgroundCapture, start};
pub use git::git_available;
pub(crate) use git::{Git, absolute, is_object_id};
pub use history::{FIRST_PARENTS_CAP, Operation};
pub use history_reuse::KnownHistory;
pub use nested::{
    MAX_DEPTH as NESTED_MAX_DEPTH, MAX_REPOSITORIES as NESTED_MAX_REPOSITORIES, Repository,
};
pub use patches::{PATCH_REDACTED, PatchHash, Redacted, hash_patch};
pub(crate) use reads::read_patch_hashes;
pub use url_credentials::redact_url_credentials;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use git::{bytes_to_path, lossy};
use reads::{First, Reads, read_all, read_patch, start_first};
use untracked::describe_untracked;

/// The version of the evidence document written by this code.
pub const EVIDENCE_VERSION: u32 = 1;
/// At most this many untracked files are listed (and hashed).
pub const UNTRACKED_CAP: usize = 2_000;
/// How many recent commits are recorded.
pub const RECENT_COMMITS: usize = 20;
/// What replaces the credentials in a remote URL.
pub const REDACTED_URL_CREDENTIALS: &str = "[REDACTED:url_credentials]";

/// What a workspace looked like when a handoff was made.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Evidence {
    /// Always [`EVIDENCE_VERSION`] when written by this code.
    pub version: u32,
    /// The absolute path the capture was taken from.
    pub workspace: String,
    /// Why the capture is incomplete; empty when it is complete.
    pub partial: Vec<String>,
    /// The git state, when the workspace is a git work tree and git could be run.
    pub git: Option<GitEvidence>,
    /// When the workspace is in no work tree: the repositories below it (at most
    /// [`NESTED_MAX_REPOSITORIES`], at most [`NESTED_MAX_DEPTH`] directories down), by
    /// their path relative to it. Absent for a repository and in older evidence.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub repositories: BTreeMap<String, Repository>,
}

/// The git state of a work tree.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GitEvidence {
    /// The top of the work tree (`git rev-parse --show-toplevel`).
    pub root: String,
    /// The checked-out branch; `None` on a detached HEAD.
    pub branch: Option<String>,
    /// The commit id of HEAD; `None` before the first commit.
    pub head: Option<String>,
    /// The upstream of the branch, e.g. `origin/main`.
    pub upstream: Option<String>,
    /// Commits on the branch that are not on its upstream.
    pub ahead: Option<u64>,
    /// Commits on the upstream that are not on the branch.
    pub behind: Option<u64>,
    /// Remotes and their fetch URLs, credentials redacted.
    pub remotes: Vec<Remote>,
    /// The parentless commits reachable from HEAD.
    pub root_commits: Vec<String>,
    /// The last [`RECENT_COMMITS`] commits reachable from HEAD, newest first.
    pub recent_commits: Vec<Commit>,
    /// Changes between HEAD and the index.
    pub staged: Vec<Change>,
    /// Changes between the index and the work tree.
    pub unstaged: Vec<Change>,
    /// Paths with unmerged (conflicted) index entries.
    pub conflicted: Vec<String>,
    /// Untracked files (not ignored), at most [`UNTRACKED_CAP`].
    pub untracked: Vec<Untracked>,
    /// The size of `git diff --cached --binary`.
    pub staged_patch_bytes: u64,
    /// The size of `git diff --binary`.
    pub unstaged_patch_bytes: u64,
    /// The first-parent ids of HEAD, newest (HEAD) first, at most [`FIRST_PARENTS_CAP`]:
    /// a receiver that has not fetched finds its own HEAD here. Empty in older evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_parents: Vec<String>,
    /// A merge, rebase, cherry-pick, revert, am or bisect in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<Operation>,
    /// Each file's change in the staged and unstaged patches, hashed. Empty in older
    /// evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch_hashes: Vec<PatchHash>,
    /// Which patches had secrets replaced by placeholders when the handoff was saved
    /// (see [`patches::Redacted`]). Absent when none did, and in older evidence.
    #[serde(default, flatten)]
    pub redacted: patches::Redacted,
}

/// A configured remote.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Remote {
    pub name: String,
    /// The fetch URL with any credentials replaced by [`REDACTED_URL_CREDENTIALS`].
    pub url: String,
}

/// One commit of the recent history.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Commit {
    pub id: String,
    /// `Name <email>`.
    pub author: String,
    /// Author time, strict ISO 8601.
    pub time: String,
    pub subject: String,
}

/// One changed path.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Change {
    pub path: String,
    /// `modified`, `added`, `deleted`, `type changed`, `renamed from X`, `copied from X`,
    /// with ` (submodule: ...)` appended for a submodule.
    pub status: String,
}

/// One untracked file: never its contents, only its size and hash.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Untracked {
    /// Relative to the work-tree root; a directory (a nested repository) ends with `/`.
    pub path: String,
    /// Bytes hashed: the file's length, or a symlink's target length.
    pub size: u64,
    /// BLAKE3 hex of the content (of the target, for a symlink); `None` for a directory
    /// or a file that could not be read.
    pub id: Option<String>,
}

/// A capture: the evidence and the two patches it measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Capture {
    pub evidence: Evidence,
    /// `git diff --cached --binary`: HEAD to index.
    pub staged_patch: Vec<u8>,
    /// `git diff --binary`: index to work tree.
    pub unstaged_patch: Vec<u8>,
    /// The staged and unstaged patches of each of [`Evidence::repositories`].
    pub nested_patches: nested::Patches,
}

impl Evidence {
    /// Whether the capture is complete.
    pub fn is_complete(&self) -> bool {
        self.partial.is_empty()
    }
}

impl GitEvidence {
    /// Whether anything is staged, unstaged, conflicted or untracked.
    pub fn has_uncommitted(&self) -> bool {
        !(self.staged.is_empty()
            && self.unstaged.is_empty()
            && self.conflicted.is_empty()
            && self.untracked.is_empty())
    }

    /// A short summary such as `2 staged, 1 untracked`.
    pub fn uncommitted_summary(&self) -> String {
        let parts: Vec<String> = [
            (self.staged.len(), "staged"),
            (self.unstaged.len(), "unstaged"),
            (self.conflicted.len(), "conflicted"),
            (self.untracked.len(), "untracked"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        parts.join(", ")
    }
}

/// Capture the workspace at `dir` with the `git` found on `PATH`. Never fails.
pub fn capture(dir: &Path) -> Capture {
    capture_with_git(dir, Path::new("git"))
}

/// Capture the workspace at `dir` with the given git program (tests point it at a
/// missing file to see the partial capture). Never fails.
pub fn capture_with_git(dir: &Path, git_program: &Path) -> Capture {
    inspect(dir, git_program, true, &Vec::new)
}

/// [`capture`] with every read asked of the `git` on `PATH`, none done in this process:
/// what the in-process reads are checked against.
pub fn capture_asking_git(dir: &Path) -> Capture {
    inspect_with(dir, Path::new("git"), true, &Vec::new, false, None)
}

/// [`capture`] with the histories earlier captures recorded (`known`, which may wait for
/// them; asked at most once): the same evidence, in fewer git processes when HEAD's
/// newest commits lead back to one of them.
pub fn capture_knowing(dir: &Path, known: &(dyn Fn() -> Vec<KnownHistory> + Sync)) -> Capture {
    inspect(dir, Path::new("git"), true, known)
}

/// The git processes a capture of a work tree's root always runs, started by
/// [`Started::new`] on the calling thread (a new thread may wait a while for a core),
/// for [`Started::capture`] to finish on another.
pub struct Started {
    dir: std::path::PathBuf,
    /// The `git` found on `PATH`, found once: each process then starts without a search
    /// of its own (as `git` itself, when nothing is found, so that git's failure is the
    /// evidence).
    program: std::path::PathBuf,
    /// `None` when `dir` has no `.git` of its own: nothing was started.
    early: Option<Early>,
}

/// What [`Started::new`] began at a work tree's root: its first git processes, and the
/// repository opened in this process with its answers read (`None` when it could not be).
struct Early {
    first: First,
    inproc: inproc::Lazily,
}

/// The `git` on `PATH`, found once so that every process is started by its path (a
/// `PATH` search per spawn tries each directory before it); plain `git` when there is
/// none, whose failure to start is then the evidence.
pub fn git_program() -> std::path::PathBuf {
    inproc::program_path(Path::new("git")).unwrap_or_else(|| std::path::PathBuf::from("git"))
}

impl Started {
    /// Start them when `dir` has its own `.git` (as [`capture`] would, with the `git` on
    /// `PATH`), and open the repository with gitoxide while they run, here too, reading
    /// what the first reads need ([`inproc::InProcess::read_early`]); else nothing is
    /// started yet.
    pub fn new(dir: &Path) -> Started {
        let workspace = absolute(dir);
        let program = git_program();
        let git = program.as_path();
        let early = has_own_git(&workspace).then(|| {
            let first = start_first(&Git::new(git, &workspace), true);
            let library = inproc::InProcess::open(&workspace, git);
            if let Some(library) = &library {
                library.read_early();
            }
            Early {
                first,
                inproc: inproc::Lazily::opened(library),
            }
        });
        Started {
            dir: dir.to_path_buf(),
            program,
            early,
        }
    }

    /// [`capture_knowing`] of the directory, with the processes already started.
    pub fn capture(self, known: &(dyn Fn() -> Vec<KnownHistory> + Sync)) -> Capture {
        inspect_with(&self.dir, &self.program, true, known, true, self.early)
    }
}

/// Whether `workspace` has its own `.git`: most likely the root of its work tree.
pub(crate) fn has_own_git(workspace: &Path) -> bool {
    workspace.is_dir() && workspace.join(".git").symlink_metadata().is_ok()
}

impl Capture {
    /// What a later capture can build on (see [`KnownHistory`]): `None` unless HEAD, its
    /// roots and its first parents were all read.
    pub fn known_history(&self) -> Option<KnownHistory> {
        let git = self.evidence.git.as_ref()?;
        let head = git.head.clone()?;
        let known = KnownHistory {
            root: git.root.clone(),
            head,
            root_commits: git.root_commits.clone(),
            first_parents: git.first_parents.clone(),
        };
        history_reuse::usable(&known).then_some(known)
    }
}

// ---------------------------------------------------------------------------------------
// Capture
// ---------------------------------------------------------------------------------------

/// Inspect a workspace. `full` adds what only a capture needs: recent commits, patches
/// and untracked hashes (a comparison needs none of them).
pub(crate) fn inspect(
    dir: &Path,
    git_program: &Path,
    full: bool,
    known: &(dyn Fn() -> Vec<KnownHistory> + Sync),
) -> Capture {
    inspect_with(dir, git_program, full, known, true, None)
}

/// [`inspect`], reading in this process what it can only when `in_process`, with what
/// [`Started`] began (`early`, of the same `git_program` and `full`) or not.
fn inspect_with(
    dir: &Path,
    git_program: &Path,
    full: bool,
    known: &(dyn Fn() -> Vec<KnownHistory> + Sync),
    in_process: bool,
    early: Option<Early>,
) -> Capture {
    let workspace = absolute(dir);
    let mut capture = Capture {
        evidence: Evidence {
            version: EVIDENCE_VERSION,
            workspace: workspace.to_string_lossy().into_owned(),
            partial: Vec::new(),
            git: None,
            repositories: BTreeMap::new(),
        },
        staged_patch: Vec::new(),
        unstaged_patch: Vec::new(),
        nested_patches: nested::Patches::new(),
    };
    let partial = &mut capture.evidence.partial;
    if !workspace.is_dir() {
        partial.push("workspace is not a directory".to_string());
        return capture;
    }

    let probe = Git::new(git_program, &workspace);
    // A workspace with its own `.git` is most likely the root of its work tree: then the
    // reads are started in it at once (the two git processes first, from this thread,
    // before anything else takes the cores), while this process opens the repository
    // (or, failing that, git is asked), and kept only if it is the root (the very
    // commands asking in turn would run).
    let at_root = has_own_git(&workspace);
    // What was begun early is used where it was begun for (else dropped: waited for).
    let (first, inproc) = match (at_root, early) {
        (true, Some(Early { first, inproc })) => (Some(first), inproc),
        (true, None) if in_process => (
            Some(start_first(&probe, full)),
            inproc::Lazily::new(&workspace, git_program),
        ),
        (true, None) => (Some(start_first(&probe, full)), inproc::Lazily::none()),
        (false, _) => (None, inproc::Lazily::none()),
    };
    // Opened at the root of its work tree, the repository needs no question for git.
    let opened_at =
        |library: &inproc::InProcess| (path_bytes(&workspace), Some(library.state_paths()));
    let (opened, combined, early) = match inproc.ready() {
        // Already opened (a handoff's `Started`): nothing to wait for but the reads.
        Some(library) => (
            Some(opened_at(library)),
            None,
            first.map(|first| read_all(&probe, full, known, &inproc, first)),
        ),
        None => std::thread::scope(|s| {
            let early =
                first.map(|first| s.spawn(|| read_all(&probe, full, known, &inproc, first)));
            let opened = inproc.get().map(opened_at);
            let combined = opened.is_none().then(|| probe.run(&probe::combined_args()));
            (opened, combined, early.map(joined))
        }),
    };
    let (root_bytes, state_paths) = match opened {
        Some(opened) => opened,
        None => {
            // One process answers all three questions in a work tree (is it one, where
            // is its root, where are its operation state files); anything else goes the
            // long way for its exact message.
            let combined = combined
                .and_then(Result::ok)
                .and_then(|out| probe::work_tree_state(&out, &workspace));
            match combined {
                Some((root, paths)) => (root, Some(paths)),
                None => match probe::probe_root(&probe, partial) {
                    Some(root) => (root, None),
                    None => {
                        nested::below(&mut capture, &workspace, git_program, full, known);
                        return capture;
                    }
                },
            }
        }
    };
    let root = bytes_to_path(&root_bytes);
    let git = Git::new(git_program, &root);
    let Reads {
        status: (status, p_status),
        remotes: (remotes, p_remotes),
        root_commits: (root_commits, p_roots),
        recent_commits: (recent_commits, p_recent),
        first_parents: (first_parents, p_parents),
        staged_patch: (staged_patch, p_staged),
        unstaged_patch: (unstaged_patch, p_unstaged),
    } = match early {
        Some(reads) if root == workspace => reads,
        _ => read_all(
            &git,
            full,
            known,
            &inproc::Lazily::none(),
            start_first(&git, full),
        ),
    };
    let in_progress = match &state_paths {
        Some(paths) => history::operation_at(paths),
        None => history::read_operation(&git, &root),
    };
    let git = &git;
    partial.extend(p_status);
    if status.detached {
        partial.push("detached HEAD".to_string());
    } else if status.upstream.is_none() {
        partial.push("no upstream".to_string());
    } else if let (None, Some(upstream)) = (status.ahead_behind, &status.upstream) {
        partial.push(format!("upstream {upstream} is gone"));
    }
    if status.head.is_none() {
        partial.push("no commits yet".to_string());
    }
    // Without HEAD, what was read of it is nothing (as if never asked), and the staged
    // patch is against the empty tree.
    let has_head = status.head.is_some();
    let of_head =
        |read: (Vec<String>, Vec<String>)| if has_head { read } else { Default::default() };
    let (root_commits, p_roots) = of_head((root_commits, p_roots));
    let (first_parents, p_parents) = of_head((first_parents, p_parents));
    let (recent_commits, p_recent) = if has_head {
        (recent_commits, p_recent)
    } else {
        Default::default()
    };
    let (staged_patch, p_staged) = if has_head || !full {
        (staged_patch, p_staged)
    } else {
        noting(|p| read_patch(git, true, false, p))
    };
    for notes in [
        p_remotes, p_roots, p_recent, p_parents, p_staged, p_unstaged,
    ] {
        partial.extend(notes);
    }

    let mut untracked = Vec::new();
    let mut patch_hashes = Vec::new();
    if full {
        capture.staged_patch = staged_patch;
        capture.unstaged_patch = unstaged_patch;
        patch_hashes = hash_patch(&capture.staged_patch, "staged");
        patch_hashes.extend(hash_patch(&capture.unstaged_patch, "unstaged"));
        let total = status.untracked.len();
        let mut unreadable = 0usize;
        let tree = baton_store::beneath::Dir::open(&root).ok();
        for path in status.untracked.iter().take(UNTRACKED_CAP) {
            let entry = describe_untracked(tree.as_ref(), path);
            if entry.id.is_none() && !path.ends_with(b"/") {
                unreadable += 1;
            }
            untracked.push(entry);
        }
        if total > UNTRACKED_CAP {
            partial.push(format!(
                "untracked files capped at {UNTRACKED_CAP} of {total}"
            ));
        }
        if unreadable > 0 {
            partial.push(format!("{unreadable} untracked files could not be read"));
        }
    } else {
        untracked = status
            .untracked
            .iter()
            .map(|p| Untracked {
                path: lossy(p),
                size: 0,
                id: None,
            })
            .collect();
    }

    capture.evidence.git = Some(GitEvidence {
        root: lossy(&root_bytes),
        branch: status.branch,
        head: status.head,
        upstream: status.upstream,
        ahead: status.ahead_behind.map(|(a, _)| a),
        behind: status.ahead_behind.map(|(_, b)| b),
        remotes,
        root_commits,
        recent_commits,
        staged: status.staged,
        unstaged: status.unstaged,
        conflicted: status.conflicted,
        untracked,
        staged_patch_bytes: capture.staged_patch.len() as u64,
        unstaged_patch_bytes: capture.unstaged_patch.len() as u64,
        first_parents,
        in_progress,
        patch_hashes,
        redacted: Default::default(),
    });
    capture
}

/// The bytes of `path` (git prints a work tree's root as bytes).
fn path_bytes(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().to_vec()
}

/// Run `read` with a fresh list of partial-evidence notes; the value and the notes.
fn noting<T>(read: impl FnOnce(&mut Vec<String>) -> T) -> (T, Vec<String>) {
    let mut notes = Vec::new();
    let value = read(&mut notes);
    (value, notes)
}

/// A scoped thread's value; a panic in it goes on in the caller.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
