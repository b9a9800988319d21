//! The independent git reads of a capture, run at once: status, remotes, root and recent
//! commits, first parents, and the staged and unstaged patches.

use super::git::{Git, GitError, Running, lossy, trim_newline};
use super::history_reuse::{self, KnownHistory};
use super::inproc::{InProcess, Lazily};
use super::status::{Status, fallback_status, parse_status};
use super::{
    Commit, PatchHash, RECENT_COMMITS, Remote, hash_patch, history, joined, noting,
    redact_url_credentials,
};

/// A read's answer and its partial-evidence notes.
type Noted<T> = (T, Vec<String>);

/// The recent commits, root commits and first parents of HEAD, each noted.
type HistoryReads = (Noted<Vec<Commit>>, Noted<Vec<String>>, Noted<Vec<String>>);

/// Each read's answer and its partial-evidence notes.
pub(super) struct Reads {
    pub(super) status: Noted<Status>,
    pub(super) remotes: Noted<Vec<Remote>>,
    pub(super) root_commits: Noted<Vec<String>>,
    pub(super) recent_commits: Noted<Vec<Commit>>,
    pub(super) first_parents: Noted<Vec<String>>,
    pub(super) staged_patch: Noted<Vec<u8>>,
    pub(super) unstaged_patch: Noted<Vec<u8>>,
}

/// Every read at once, `status` too: those that need HEAD run before `status` says
/// whether there is one, and the caller uses their answers (and failures) only if there
/// is, so the evidence is exactly that of asking in turn. `full` adds what only a
/// capture needs (recent commits, first parents, patches); for it, `known` gives the
/// histories earlier captures recorded (it may wait for them: see [`read_history`]).
/// The remotes and recent commits are read in this process where `inproc` opens and can
/// (see [`InProcess`]), each asked of git where it cannot.
/// `first` is [`start_first`] of the same `git` and `full`.
///
/// What `inproc` already holds is taken on this thread, and the [`First`] processes are
/// waited for here, one after the other (each drains its own pipes); only the reads that
/// may wait on something else (the histories, git) get a thread: on two cores every
/// thread started while git runs delays git.
pub(super) fn read_all(
    git: &Git,
    full: bool,
    known: &(dyn Fn() -> Vec<KnownHistory> + Sync),
    inproc: &Lazily,
    first: First,
) -> Reads {
    let First { status, unstaged } = first;
    let ready = inproc.ready();
    std::thread::scope(|s| {
        let history = s.spawn(move || {
            if full {
                read_history(git, known, inproc)
            } else {
                let roots = noting(|p| read_root_commits(git, p));
                (Default::default(), roots, Default::default())
            }
        });
        let remotes = match ready.and_then(InProcess::remotes) {
            Some(remotes) => Ok((remotes, Vec::new())),
            None => Err(
                s.spawn(move || match inproc.get().and_then(InProcess::remotes) {
                    Some(remotes) => (remotes, Vec::new()),
                    None => noting(|p| read_remotes(git, p)),
                }),
            ),
        };
        // Nothing staged, as the index itself shows: no process to ask.
        let staged = if !full || ready.is_some_and(InProcess::nothing_staged) {
            Ok((Vec::new(), Vec::new()))
        } else {
            Err(s.spawn(move || {
                noting(|p| {
                    if inproc.get().is_some_and(InProcess::nothing_staged) {
                        return Vec::new();
                    }
                    read_patch(git, true, true, p)
                })
            }))
        };
        let status = noting(|p| status_from(git, status.and_then(Running::wait), p));
        let unstaged_patch = noting(|p| match unstaged {
            Some(started) => patch_from(false, started.and_then(Running::wait), p),
            None => Vec::new(),
        });
        let (recent_commits, root_commits, first_parents) = joined(history);
        Reads {
            status,
            remotes: remotes.unwrap_or_else(joined),
            root_commits,
            recent_commits,
            first_parents,
            staged_patch: staged.unwrap_or_else(joined),
            unstaged_patch,
        }
    })
}

/// The recent commits, root commits and first parents of HEAD. With no history known
/// for this work tree, three git processes at once. Otherwise the recent commits first, with their parents:
/// when they lead back to a known HEAD (commits made since an earlier capture), the
/// roots and first parents follow from it (`history_reuse::derive`) and git is not asked to walk
/// the whole history twice more; else it is.
fn read_history(
    git: &Git,
    known: &(dyn Fn() -> Vec<KnownHistory> + Sync),
    inproc: &Lazily,
) -> HistoryReads {
    // Only this work tree's: any other's would not hold HEAD, and the walks would wait
    // for a `log` that could not spare them.
    let known: Vec<KnownHistory> = known()
        .into_iter()
        .filter(|k| std::path::Path::new(&k.root) == git.dir())
        .collect();
    let walks = |recent: Option<Noted<Vec<Commit>>>| {
        std::thread::scope(|s| {
            let roots = s.spawn(|| noting(|p| read_root_commits(git, p)));
            let parents = s.spawn(|| noting(|p| history::read_first_parents(git, p)));
            let recent = recent.unwrap_or_else(|| {
                let (commits, notes) = noting(|p| read_recent_commits(git, inproc, p));
                (commits.into_iter().map(|(c, _)| c).collect(), notes)
            });
            (recent, joined(roots), joined(parents))
        })
    };
    if known.is_empty() {
        return walks(None);
    }
    let (commits, notes) = noting(|p| read_recent_commits(git, inproc, p));
    let derived = if notes.is_empty() {
        let links: Vec<(String, Vec<String>)> = commits
            .iter()
            .map(|(c, parents)| (c.id.clone(), parents.clone()))
            .collect();
        known.iter().find_map(|k| history_reuse::derive(&links, k))
    } else {
        None
    };
    let recent = (commits.into_iter().map(|(c, _)| c).collect(), notes);
    match derived {
        Some((roots, first_parents)) => (recent, (roots, Vec::new()), (first_parents, Vec::new())),
        None => walks(Some(recent)),
    }
}

/// The git processes every read of a work tree runs, started: `status` and, for a
/// capture, the unstaged patch (`diff-files`). They are the longest reads, so they start
/// before anything else (threads, this process's own reads) takes the cores.
pub(super) struct First {
    status: Result<Running, GitError>,
    unstaged: Option<Result<Running, GitError>>,
}

/// Start the [`First`] processes in `git`'s directory.
pub(super) fn start_first(git: &Git, full: bool) -> First {
    let untracked_mode = if full {
        "--untracked-files=all"
    } else {
        "--untracked-files=normal"
    };
    First {
        status: git.start(&[
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            untracked_mode,
            "--ignore-submodules=none",
        ]),
        unstaged: full.then(|| git.start(&patch_args(false, None))),
    }
}

/// `git status --porcelain=v2 --branch -z` (all untracked files for a capture) from its
/// `output`, or the plumbing fallback when it failed (said in `partial`).
fn status_from(git: &Git, output: Result<Vec<u8>, GitError>, partial: &mut Vec<String>) -> Status {
    match output {
        Ok(out) => parse_status(&out),
        Err(e) => {
            partial.push(format!("git status failed: {}", e.describe()));
            fallback_status(git)
        }
    }
}

fn read_root_commits(git: &Git, partial: &mut Vec<String>) -> Vec<String> {
    match git.run(&["rev-list", "--max-parents=0", "HEAD", "--"]) {
        Ok(out) => out
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(lossy)
            .collect(),
        Err(e) => {
            partial.push(format!("git rev-list failed: {}", e.describe()));
            Vec::new()
        }
    }
}

/// The per-file hashes of one live patch, for a comparison: the staged one (against
/// HEAD, or the empty tree before the first commit) or the unstaged one.
pub(crate) fn read_patch_hashes(git: &Git, staged: bool, has_head: bool) -> Vec<PatchHash> {
    let mut ignored = Vec::new();
    let which = if staged { "staged" } else { "unstaged" };
    hash_patch(&read_patch(git, staged, has_head, &mut ignored), which)
}

fn read_remotes(git: &Git, partial: &mut Vec<String>) -> Vec<Remote> {
    let out = match git.run(&["config", "-z", "--get-regexp", r"^remote\..*\.url$"]) {
        Ok(out) => out,
        Err(GitError::Failed { code: Some(1), .. }) => return Vec::new(), // none configured
        Err(e) => {
            partial.push(format!("git config failed: {}", e.describe()));
            return Vec::new();
        }
    };
    let mut remotes: Vec<Remote> = Vec::new();
    // With -z each entry is `key\nvalue\0`.
    for entry in out.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let text = lossy(entry);
        let (key, value) = text.split_once('\n').unwrap_or((&text, ""));
        let Some(name) = key
            .strip_prefix("remote.")
            .and_then(|k| k.strip_suffix(".url"))
        else {
            continue;
        };
        // The first url of a remote is the one it fetches from.
        if remotes.iter().any(|r| r.name == name) {
            continue;
        }
        remotes.push(Remote {
            name: name.to_string(),
            url: redact_url_credentials(value),
        });
    }
    remotes
}

/// The last [`RECENT_COMMITS`] commits of HEAD, each with its parents' ids: read in
/// this process when `inproc` can, else by `git log`.
fn read_recent_commits(
    git: &Git,
    inproc: &Lazily,
    partial: &mut Vec<String>,
) -> Vec<(Commit, Vec<String>)> {
    if let Some(commits) = inproc.get().and_then(InProcess::recent_commits) {
        return commits;
    }
    let count = format!("-n{RECENT_COMMITS}");
    let out = match git.run(&[
        "log",
        &count,
        "-z",
        "--no-show-signature",
        "--format=%H%x00%P%x00%an <%ae>%x00%aI%x00%s",
        "HEAD",
        "--",
    ]) {
        Ok(out) => out,
        Err(e) => {
            partial.push(format!("git log failed: {}", e.describe()));
            return Vec::new();
        }
    };
    let mut fields: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    // The format terminates each commit, so the output ends with a NUL.
    if fields.len() % 5 == 1 && fields.last().is_some_and(|f| f.is_empty()) {
        fields.pop();
    }
    fields
        .chunks_exact(5)
        .map(|c| {
            let commit = Commit {
                id: lossy(c[0]),
                author: lossy(c[2]),
                time: lossy(c[3]),
                subject: lossy(c[4]),
            };
            let parents = lossy(c[1])
                .split(' ')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect();
            (commit, parents)
        })
        .collect()
}

/// A patch from the plumbing diff commands: `diff-index --cached HEAD` (the empty tree
/// before the first commit) for staged changes, `diff-files` for unstaged ones. Porcelain
/// `git diff` is avoided because it rewrites the index to refresh stat information, even
/// with `GIT_OPTIONAL_LOCKS=0`; the plumbing never writes it.
pub(super) fn read_patch(
    git: &Git,
    staged: bool,
    has_head: bool,
    partial: &mut Vec<String>,
) -> Vec<u8> {
    let base = if !staged {
        None
    } else if has_head {
        Some("HEAD".to_string())
    } else {
        // Hashing empty input as a tree writes nothing; it names the empty tree in the
        // repository's hash algorithm.
        match git.run(&["hash-object", "-t", "tree", "--stdin"]) {
            Ok(out) => Some(lossy(trim_newline(&out))),
            Err(e) => return patch_from(staged, Err(e), partial),
        }
    };
    patch_from(
        staged,
        git.run(&patch_args(staged, base.as_deref())),
        partial,
    )
}

/// The arguments of a patch read: `diff-index --cached BASE` or `diff-files`.
fn patch_args(staged: bool, base: Option<&str>) -> Vec<&str> {
    let mut args: Vec<&str> = if staged {
        vec!["diff-index", "--cached"]
    } else {
        vec!["diff-files"]
    };
    args.extend([
        "-p",
        "--binary",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--submodule=short",
        "--ignore-submodules=none",
        "--src-prefix=a/",
        "--dst-prefix=b/",
    ]);
    if let Some(base) = base {
        args.push(base);
    }
    args.push("--");
    args
}

/// A patch from its read's `output`; nothing when it failed (said in `partial`).
fn patch_from(
    staged: bool,
    output: Result<Vec<u8>, GitError>,
    partial: &mut Vec<String>,
) -> Vec<u8> {
    match output {
        Ok(out) => out,
        Err(e) => {
            let which = if staged {
                "git diff-index --cached"
            } else {
                "git diff-files"
            };
            partial.push(format!("{which} failed: {}", e.describe()));
            Vec::new()
        }
    }
}
