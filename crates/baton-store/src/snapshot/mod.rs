//! Snapshotting a directory into blobs and trees: scan everything first, then write.
//!
//! The scan validates the whole input before a single object is written, so bad input
//! (a FIFO, a device, a non-UTF-8 name, an unreadable file) leaves the store untouched.
//!
//! The directory is listed with the `ignore` crate (ripgrep's walker). By default the
//! listing leaves out `.git` (a directory or a gitlink file, at every level) and what
//! `.gitignore` files (at every level below DIR and in DIR's parents, as git applies a
//! parent's rules to a subdirectory), the repository's `.git/info/exclude` and
//! `.batonignore` files exclude. `.gitignore` applies outside a git repository too; the
//! user's global excludes file does not (a snapshot must not depend on who takes it), nor
//! do ripgrep's own `.ignore` files. Symlinks are never followed: they are stored as
//! symlinks. [`Ignores::Off`] (`--no-ignore`) lists everything but the store itself.
//!
//! DIR is opened once as a directory fd ([`Snapshot`]); every listed path is stat'ed,
//! read as a link or opened relative to it, component by component with no symlink
//! followed (`store/beneath.rs`), so a directory swapped for a symlink while the save
//! runs can make it fail, never read outside DIR.

mod rename;
mod write;

pub use rename::{Collision, Names};
pub use write::write;

use foldhash::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use rustix::fs::FileType;

use super::Store;
use super::beneath::Dir;
use super::statcache::{FileStat, Findings, Lookup};
use super::tree_limits::MAX_TREE_DEPTH;
use baton_error::{Error, Result};
use baton_format::ObjectId;

/// A scanned directory tree, not yet stored.
pub enum Node {
    File {
        path: PathBuf,
        exec: bool,
        size: u64,
        /// The metadata the scan saw, the stat cache's key.
        stat: FileStat,
        /// The blob id the stat cache gave ([`scan_cached`]): the file is not read.
        cached: Option<ObjectId>,
    },
    Symlink {
        target: Vec<u8>,
    },
    Dir {
        path: PathBuf,
        children: Vec<(String, Node)>,
    },
}

#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct SnapshotStats {
    pub files: u64,
    pub bytes: u64,
    pub objects_written: u64,
    pub bytes_written: u64,
    /// Files whose blob id came from the stat cache, not from reading them.
    pub files_cached: u64,
}

/// Whether [`scan`] leaves out what ignore files exclude.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignores {
    /// Leave out `.git`, and what `.gitignore`, `.git/info/exclude` and `.batonignore` exclude.
    Respect,
    /// Take everything (`--no-ignore`), still never the store itself.
    Off,
}

/// The name of baton's own ignore files (gitignore syntax).
pub const IGNORE_FILE: &str = ".batonignore";

/// A scanned directory and the fd of DIR, beneath which its files are opened.
pub struct Snapshot {
    pub tree: Node,
    root: Dir,
}

impl Snapshot {
    /// The regular file `path` (a path of [`Snapshot::tree`]), opened beneath DIR.
    pub fn open_file(&self, path: &Path) -> Result<fs::File> {
        open_beneath(&self.root, path)
    }
}

/// `path` (below `root`'s path, as the listing names it) opened beneath `root`.
fn open_beneath(root: &Dir, path: &Path) -> Result<fs::File> {
    let rel = root.relative(path).ok_or_else(|| {
        Error::internal(format!(
            "{} is not below the saved directory",
            path.display()
        ))
    })?;
    root.open_file(rel)
        .map_err(|r| r.into_error("cannot open", path))
}

/// Walk `dir` without following symlinks and without opening anything but regular files.
/// `skip` is a directory (the store itself) to leave out, identified by device and inode.
pub fn scan(dir: &Path, skip: Option<(u64, u64)>, ignores: Ignores) -> Result<Snapshot> {
    scan_cached(dir, skip, ignores, &|_, _| None)
}

/// What the stat cache says about a file (its path and metadata): its blob id, if the
/// file is unchanged since a save stored it ([`cache_lookup`]).
pub(crate) type Cached<'a> = &'a (dyn Fn(&Path, &FileStat) -> Option<ObjectId> + Sync);

/// [`scan`], taking the blob id of every file `cached` vouches for: such a file is not
/// opened now, nor read or scanned later.
pub fn scan_cached(
    dir: &Path,
    skip: Option<(u64, u64)>,
    ignores: Ignores,
    cached: Cached,
) -> Result<Snapshot> {
    scan_listed(list_dir(dir, skip, ignores)?, cached)
}

/// A directory opened and listed, for [`scan_listed`]: listing takes system calls, and
/// a caller may prepare its stat cache lookup meanwhile.
pub struct Listed {
    root: Dir,
    dir: PathBuf,
    skip: Option<(u64, u64)>,
    listing: Listing,
}

/// The first half of [`scan_cached`]: open `dir` and list it with the ignore rules.
pub fn list_dir(dir: &Path, skip: Option<(u64, u64)>, ignores: Ignores) -> Result<Listed> {
    let meta = match fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(
                Error::not_found(format!("directory {} does not exist", dir.display()))
                    .with_hint("give the path of an existing directory to save"),
            );
        }
        Err(e) => return Err(Error::io("cannot read", dir, e)),
    };
    if !meta.is_dir() {
        return Err(
            Error::usage(format!("{} is not a directory", dir.display()))
                .with_hint("give the path of a directory to save"),
        );
    }
    let root = Dir::open(dir).map_err(|e| Error::io("cannot read", dir, e))?;
    let listing = list(dir, skip, ignores)?;
    Ok(Listed {
        root,
        dir: dir.to_path_buf(),
        skip,
        listing,
    })
}

/// The second half of [`scan_cached`]: stat what was listed and build the tree.
pub fn scan_listed(listed: Listed, cached: Cached) -> Result<Snapshot> {
    let Listed {
        root,
        dir,
        skip,
        listing,
    } = listed;
    let mut preloaded = preload(&root, &listing, cached);
    let tree = scan_dir(&root, &dir, skip, &listing, &mut preloaded, 0)?;
    Ok(Snapshot { tree, root })
}

/// What one listed path is: its `lstat` metadata and, for a regular file, the stat
/// cache's blob id or else the proof that it opens (an error otherwise).
/// By directory, in the order of the directory's listed entries (each taken once).
type Preloaded<'a> = HashMap<&'a Path, Vec<Option<Result<(FileStat, Option<ObjectId>)>>>>;

/// Every listed path stat'ed (and each regular file the stat cache does not vouch for
/// opened) in parallel, as git preloads its index with parallel `lstat`s; the walk below
/// takes the results in listing order, so the first error in that order is the one
/// reported, as by a serial scan. Flat, so the walk's recursion stays on one thread.
/// Each listed directory is opened beneath the root once and its entries stat'ed on its
/// fd (an `lstat` of each path beneath the root opened, stat'ed and closed it: three
/// system calls a file instead of one).
fn preload<'a>(root: &Dir, listing: &'a Listing, cached: Cached) -> Preloaded<'a> {
    let dirs: HashMap<&PathBuf, Dir> = listing
        .keys()
        .collect::<Vec<_>>()
        .par_iter()
        .filter_map(|dir| {
            let rel = root.relative(dir)?;
            root.open_dir(rel).ok().map(|opened| (*dir, opened))
        })
        .collect();
    let paths: Vec<(&PathBuf, &PathBuf)> = listing
        .iter()
        .flat_map(|(dir, paths)| paths.iter().map(move |path| (dir, path)))
        .collect();
    let found: Vec<_> = paths
        .par_iter()
        .map(|(dir, path)| {
            lstat(root, dirs.get(dir), path).and_then(|stat| {
                if FileType::from_raw_mode(stat.mode) != FileType::RegularFile {
                    return Ok((stat, None));
                }
                let id = cached(path, &stat);
                // Opening proves the file is readable now, before anything is
                // written (a file the stat cache gives is never read).
                if id.is_none() {
                    open_beneath(root, path)?;
                }
                Ok((stat, id))
            })
        })
        .collect();
    // `paths` is the listing's order (a map unchanged iterates alike): deal them out.
    let mut found = found.into_iter().map(Some);
    listing
        .iter()
        .map(|(dir, paths)| (dir.as_path(), found.by_ref().take(paths.len()).collect()))
        .collect()
}

/// The `lstat` of `path`: on the fd of its directory, or (when that did not open, so
/// that its error is the one reported) beneath the root.
fn lstat(root: &Dir, parent: Option<&Dir>, path: &Path) -> Result<FileStat> {
    let rel = root.relative(path).ok_or_else(|| {
        Error::internal(format!(
            "{} is not below the saved directory",
            path.display()
        ))
    })?;
    match (parent, path.file_name()) {
        (Some(parent), Some(name)) => parent
            .lstat_entry(name)
            .map(|st| FileStat::of_stat(&st))
            .map_err(|r| r.into_error("cannot stat", path)),
        _ => root
            .lstat(rel)
            .map(|meta| FileStat::of(&meta))
            .map_err(|r| r.into_error("cannot stat", path)),
    }
}

/// Every directory's kept entries (paths), by the directory's path.
type Listing = HashMap<PathBuf, Vec<PathBuf>>;

/// List the whole tree under `dir` once, with the ignore rules applied.
fn list(dir: &Path, skip: Option<(u64, u64)>, ignores: Ignores) -> Result<Listing> {
    let respect = ignores == Ignores::Respect;
    let mut builder = ignore::WalkBuilder::new(dir);
    builder
        .standard_filters(false)
        .hidden(false)
        .follow_links(false)
        // One level past the limit is enough for scan_dir to refuse a deeper tree.
        .max_depth(Some(MAX_TREE_DEPTH as usize + 1));
    if respect {
        builder
            .git_ignore(true)
            .git_exclude(true)
            .git_global(false)
            .ignore(false)
            .parents(true)
            .require_git(false)
            .add_custom_ignore_filename(IGNORE_FILE);
    }
    builder.filter_entry(move |entry| {
        if entry.depth() == 0 {
            return true;
        }
        if respect && entry.file_name() == ".git" {
            return false;
        }
        if entry.file_type().is_some_and(|t| t.is_dir())
            && let Some(skip) = skip
            && let Ok(meta) = fs::symlink_metadata(entry.path())
            && (meta.dev(), meta.ino()) == skip
        {
            return false;
        }
        true
    });
    let mut listing = Listing::default();
    for entry in builder.build() {
        let entry = entry.map_err(|e| walk_error(e, dir))?;
        if entry.depth() == 0 {
            continue;
        }
        let path = entry.into_path();
        let parent = path.parent().unwrap_or(dir).to_path_buf();
        listing.entry(parent).or_default().push(path);
    }
    Ok(listing)
}

/// A walk error as baton's: an unreadable directory as before, a bad ignore file by name.
fn walk_error(err: ignore::Error, dir: &Path) -> Error {
    fn path_of(err: &ignore::Error) -> Option<&Path> {
        match err {
            ignore::Error::WithPath { path, .. } => Some(path),
            ignore::Error::WithLineNumber { err, .. } | ignore::Error::WithDepth { err, .. } => {
                path_of(err)
            }
            ignore::Error::Partial(errs) => errs.iter().find_map(path_of),
            _ => None,
        }
    }
    let path = path_of(&err).unwrap_or(dir).to_path_buf();
    let text = err.to_string();
    match err.into_io_error() {
        Some(io) => Error::io("cannot read directory", &path, io),
        None => Error::usage(format!("bad ignore rule: {text}")).with_hint(format!(
            "fix the pattern in that .gitignore or {IGNORE_FILE}, or save with --no-ignore"
        )),
    }
}

fn scan_dir(
    root: &Dir,
    dir: &Path,
    skip: Option<(u64, u64)>,
    listing: &Listing,
    preloaded: &mut Preloaded,
    depth: u32,
) -> Result<Node> {
    // Readers refuse deeper trees (and this scan and the writer recurse per level).
    if depth >= MAX_TREE_DEPTH {
        return Err(Error::usage(format!(
            "{} is more than {MAX_TREE_DEPTH} directories deep (MAX_TREE_DEPTH)",
            dir.display()
        ))
        .with_hint("baton stores trees up to that depth; save a shallower directory"));
    }
    let mut children = Vec::new();
    for (i, path) in listing.get(dir).into_iter().flatten().enumerate() {
        let path = path.clone();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            return Err(
                Error::usage(format!("file name {} is not valid UTF-8", path.display())).with_hint(
                    "rename it (baton stores UTF-8 names only) or move it out of the directory",
                ),
            );
        };
        let taken = preloaded
            .get_mut(dir)
            .and_then(|found| found.get_mut(i))
            .and_then(Option::take);
        let (stat, from_cache) = match taken {
            Some(Ok(found)) => found,
            Some(Err(e)) => return Err(e),
            None => {
                return Err(Error::other(format!(
                    "internal error: {} was not preloaded",
                    path.display()
                )));
            }
        };
        let kind = FileType::from_raw_mode(stat.mode);
        let node = if kind == FileType::Symlink {
            let rel = root.relative(&path).unwrap_or(&path);
            let target = root
                .read_link(rel)
                .map_err(|r| r.into_error("cannot read link", &path))?;
            Node::Symlink { target }
        } else if kind == FileType::Directory {
            if skip == Some((stat.dev, stat.ino)) {
                continue;
            }
            scan_dir(root, &path, skip, listing, preloaded, depth + 1)?
        } else if kind == FileType::RegularFile {
            Node::File {
                exec: stat.mode & 0o100 != 0,
                size: stat.size,
                stat,
                cached: from_cache,
                path,
            }
        } else {
            let what = match kind {
                FileType::Fifo => "a FIFO",
                FileType::Socket => "a socket",
                FileType::BlockDevice | FileType::CharacterDevice => "a device file",
                _ => "an unsupported file type",
            };
            return Err(Error::usage(format!("{} is {what}", path.display()))
                .with_hint("baton saves regular files, directories and symlinks only; move it out of the directory"));
        };
        children.push((name, node));
    }
    children.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Node::Dir {
        path: dir.to_path_buf(),
        children,
    })
}

impl Node {
    /// Total bytes of file contents below this node, for progress.
    pub fn total_bytes(&self) -> u64 {
        match self {
            Node::File { size, .. } => *size,
            Node::Symlink { .. } => 0,
            Node::Dir { children, .. } => children.iter().map(|(_, c)| c.total_bytes()).sum(),
        }
    }

    /// The regular files below this node, in tree order.
    pub fn files(&self) -> Vec<&Path> {
        self.file_nodes().into_iter().map(|f| f.path).collect()
    }

    /// The regular files below this node that the stat cache did not give: the ones to
    /// read (and scan for secrets).
    pub fn uncached_files(&self) -> Vec<&Path> {
        self.file_nodes()
            .into_iter()
            .filter(|f| f.cached.is_none())
            .map(|f| f.path)
            .collect()
    }

    fn file_nodes(&self) -> Vec<FileRef<'_>> {
        let mut out = Vec::new();
        self.collect_files(&mut out);
        out
    }

    fn collect_files<'a>(&'a self, out: &mut Vec<FileRef<'a>>) {
        match self {
            Node::File {
                path, stat, cached, ..
            } => out.push(FileRef {
                path,
                stat,
                cached: *cached,
            }),
            Node::Symlink { .. } => {}
            Node::Dir { children, .. } => children.iter().for_each(|(_, c)| c.collect_files(out)),
        }
    }

    /// The stat cache entries of this snapshot: each file's path relative to `base`, its
    /// metadata and `blobs[i]` (the ids [`write`] returned, in tree order), except the
    /// files in `leave_out` (those that held secrets: they are scanned on every save).
    pub fn cache_entries(
        &self,
        base: &Path,
        blobs: &[ObjectId],
        findings: &dyn Fn(&Path) -> Option<Option<Findings>>,
    ) -> Vec<(String, FileStat, ObjectId, Option<Findings>)> {
        self.file_nodes()
            .into_iter()
            .zip(blobs)
            .filter_map(|(f, id)| {
                let found = findings(f.path)?;
                Some((relative(base, f.path)?, *f.stat, *id, found))
            })
            .collect()
    }

    /// The regular files below this node that the stat cache gave.
    pub fn cached_files(&self) -> Vec<&Path> {
        self.file_nodes()
            .into_iter()
            .filter(|f| f.cached.is_some())
            .map(|f| f.path)
            .collect()
    }
}

/// A regular file of a scanned tree.
struct FileRef<'a> {
    path: &'a Path,
    stat: &'a FileStat,
    cached: Option<ObjectId>,
}

/// `path` below `base`, `/`-separated, as the stat cache names it.
fn relative(base: &Path, path: &Path) -> Option<String> {
    path.strip_prefix(base).ok()?.to_str().map(str::to_owned)
}

/// The stat cache's answer for [`scan_cached`]: the cached blob id of a file below
/// `base` whose metadata matches its entry, if the store holds that blob.
/// An entry that recorded secrets (a file stored as it is) is used only if
/// `with_secrets` accepts its findings.
pub fn cache_lookup<'a>(
    store: &'a Store,
    base: &'a Path,
    cache: &'a Lookup,
    with_secrets: &'a (dyn Fn(&Findings) -> bool + Sync),
) -> impl Fn(&Path, &FileStat) -> Option<ObjectId> + Sync + 'a {
    move |path, stat| {
        if cache.is_empty() {
            return None;
        }
        let rel = relative(base, path)?;
        let (id, findings) = cache.get(&rel, stat)?;
        if findings.is_some_and(|f| !with_secrets(f)) {
            return None;
        }
        Some(id).filter(|id| store.objects.contains(id))
    }
}

/// `path` below `base` as the stat cache names it (see [`Lookup::findings`]).
pub fn cache_name(base: &Path, path: &Path) -> Option<String> {
    relative(base, path)
}
