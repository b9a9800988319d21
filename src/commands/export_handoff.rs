//! `baton export-handoff REV --format frontmatter|prowl DIR [--history]`: a handoff (with
//! `--history` its whole history, parents first) as the files another handoff tool
//! reads, written through directory fds only.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::cli::ExportHandoffArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, IoContext, Result};
use baton_format::{Bundle, EntryKind, ObjectId, TreeEntry};
use baton_handoff::export::{self, ExportBundle, ExportFormat};
use baton_store::Store;
use baton_store::beneath::{Dir, Refused};

/// A briefing larger than this is not exported (a handoff.md is a few kilobytes).
const MAX_BRIEFING: u64 = 16 << 20;

pub fn run(ctx: &Ctx, args: &ExportHandoffArgs) -> Result<Outcome> {
    let dir = &args.dir;
    // Never mix the export into other files: DIR is absent or empty.
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::usage(format!(
                    "{}: directory is not empty; export-handoff writes only into an absent or empty directory",
                    dir.display()
                ))
                .with_hint("name a new directory"));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Error::usage(format!(
                "{}: exists and is not a directory",
                dir.display()
            )));
        }
        Err(e) => return Err(e).ctx("cannot read", dir),
    }
    let store = ctx.open_store()?;
    let id = store.resolve(&args.rev)?;
    // With --history every ancestor, through every parent of a merge: an export that
    // followed first parents only dropped the other branches.
    let ids = if args.history {
        store.history(&id)?
    } else {
        vec![id]
    };
    let exported: HashSet<ObjectId> = ids.iter().copied().collect();
    let mut bundles = HashMap::new();
    for at in &ids {
        bundles.insert(*at, store.read_bundle(at)?);
    }
    let mut chain = Vec::with_capacity(ids.len());
    for at in parents_first(&bundles) {
        let Some(bundle) = bundles.remove(&at) else {
            continue;
        };
        let briefing = match store.lookup_path(&bundle.tree, "handoff.md") {
            Ok(entry) if entry.kind != EntryKind::Dir && entry.size <= MAX_BRIEFING => {
                let mut bytes = Vec::new();
                store
                    .objects
                    .copy_to(&entry.id, Some(entry.size), &mut bytes)?;
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            Ok(_) => None,
            Err(e) if e.kind == baton_error::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let extra = match args.format {
            ExportFormat::Prowl => prowl_files(&store, &bundle.tree)?,
            ExportFormat::Frontmatter => Vec::new(),
        };
        chain.push(ExportBundle {
            id: at.to_hex(),
            extra,
            parents: bundle
                .parents
                .iter()
                .filter(|p| exported.contains(p))
                .map(ObjectId::to_hex)
                .collect(),
            created: bundle.created,
            from: bundle.from,
            to: bundle.to,
            summary: bundle.summary,
            note: bundle.note,
            metadata: bundle.metadata,
            briefing,
        });
    }
    let files = export::render(&chain, args.format);
    // Never two files at one name: the second would fail as if planted by someone else.
    let mut names = HashSet::new();
    if let Some((dup, _)) = files.iter().find(|(p, _)| !names.insert(p.as_str())) {
        return Err(Error::other(format!(
            "internal error: export-handoff would write {dup} twice"
        )));
    }
    write_export(dir, &files)?;
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    let human = if ctx.quiet {
        String::new()
    } else {
        format!(
            "Exported {} as {} into {} ({})",
            crate::output::count(chain.len() as u64, "handoff"),
            args.format.name(),
            dir.display(),
            crate::output::count(files.len() as u64, "file")
        )
    };
    Ok(Outcome::new(
        human,
        json!({
            "format": args.format.name(),
            "dir": dir,
            "bundles": chain.iter().map(|b| b.id.as_str()).collect::<Vec<_>>(),
            "files": paths,
        }),
    ))
}

/// The files of a bundle's tree that prowl's layout holds beside the briefing:
/// `context.md` and the session excerpts `sessions/*` (text files up to
/// [`MAX_BRIEFING`]; a `sessions/` below that is not prowl's).
fn prowl_files(store: &Store, tree: &ObjectId) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if let Some(entry) = lookup(store, tree, "context.md")?
        && let Some(text) = file_text(store, &entry)?
    {
        out.push(("context.md".to_string(), text));
    }
    if let Some(dir) = lookup(store, tree, "sessions")?.filter(|e| e.kind == EntryKind::Dir) {
        for entry in store.read_tree(&dir.id)?.entries {
            if let Some(text) = file_text(store, &entry)? {
                out.push((format!("sessions/{}", entry.name), text));
            }
        }
    }
    Ok(out)
}

fn lookup(store: &Store, tree: &ObjectId, path: &str) -> Result<Option<TreeEntry>> {
    match store.lookup_path(tree, path) {
        Ok(entry) => Ok(Some(entry)),
        Err(e) if e.kind == baton_error::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A regular file's text, `None` for anything else or past [`MAX_BRIEFING`].
fn file_text(store: &Store, entry: &TreeEntry) -> Result<Option<String>> {
    if !matches!(entry.kind, EntryKind::File | EntryKind::Exec) || entry.size > MAX_BRIEFING {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    store
        .objects
        .copy_to(&entry.id, Some(entry.size), &mut bytes)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The bundles' ids, every parent before its children (each once; ties by `created`,
/// then id), so that a re-import, which needs a parent before a child, can rebuild the
/// history and the exported REV, the descendant of all of them, comes last.
fn parents_first(bundles: &HashMap<ObjectId, Bundle>) -> Vec<ObjectId> {
    let mut pending: HashMap<ObjectId, usize> = HashMap::new();
    let mut children: HashMap<ObjectId, Vec<ObjectId>> = HashMap::new();
    for (id, b) in bundles {
        let mut inside = 0;
        for p in b.parents.iter().filter(|p| bundles.contains_key(p)) {
            inside += 1;
            children.entry(*p).or_default().push(*id);
        }
        pending.insert(*id, inside);
    }
    let rank = |id: &ObjectId| (bundles[id].created.clone(), *id);
    let mut ready: BTreeSet<(String, ObjectId)> = pending
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(id, _)| rank(id))
        .collect();
    let mut order = Vec::with_capacity(bundles.len());
    while let Some((_, id)) = ready.pop_first() {
        order.push(id);
        for c in children.get(&id).into_iter().flatten() {
            if let Some(n) = pending.get_mut(c) {
                // A parent listed twice counts twice above, and is released twice here.
                *n -= 1;
                if *n == 0 {
                    ready.insert(rank(c));
                }
            }
        }
    }
    order
}

/// Write `files` (relative slash paths) into `dir`, which was absent or empty: `dir` made
/// (or, when it exists, opened as named) once, then every directory below it made with
/// `mkdirat` and every file created beside its final name and renamed to it without
/// replacing, all relative to the directory fds this export made. A name that appears
/// meanwhile, a symlink above all, is never written through: the export stops with a
/// security error and removes what it wrote.
fn write_export(dir: &Path, files: &[(String, String)]) -> Result<()> {
    // Without a trailing `/`, which would make even an O_NOFOLLOW open follow a symlink.
    let dir: &Path = &dir.components().collect::<PathBuf>();
    // Its parents are where the user named it: made as named, as they always were.
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).ctx("cannot create", parent)?;
    }
    let created = match fs::DirBuilder::new().create(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(e).ctx("cannot create", dir),
    };
    let root = if created {
        Dir::open_nofollow(dir).map_err(|r| refused(r, dir))?
    } else {
        let root = Dir::open(dir).ctx("cannot open", dir)?;
        if !root.names().ctx("cannot read", dir)?.is_empty() {
            return Err(Error::usage(format!(
                "{}: directory is not empty; export-handoff writes only into an absent or empty directory",
                dir.display()
            ))
            .with_hint("name a new directory"));
        }
        root
    };
    let mut written = Written {
        root,
        dirs: BTreeMap::new(),
        files: Vec::new(),
    };
    let result = written.write_all(files);
    if result.is_err() {
        written.remove();
        if created {
            let _ = fs::remove_dir(dir);
        }
    } else if created && let Some(parent) = dir.parent() {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        baton_store::fsutil::fsync_dir(parent)?;
    }
    result
}

/// What an export made so far, by fd: to fsync, or to remove when it fails.
struct Written {
    root: Dir,
    /// The directories made below the root, by relative path.
    dirs: BTreeMap<PathBuf, Dir>,
    /// The files renamed into place: (directory's relative path, name).
    files: Vec<(PathBuf, String)>,
}

impl Written {
    fn write_all(&mut self, files: &[(String, String)]) -> Result<()> {
        for (rel, text) in files {
            let rel_path = Path::new(rel);
            let (parent, name) = match rel.rsplit_once('/') {
                Some((parent, name)) => (PathBuf::from(parent), name),
                None => (PathBuf::new(), rel.as_str()),
            };
            self.make_dirs(&parent)?;
            let at = self.dirs.get(&parent).unwrap_or(&self.root);
            at.create_file(OsStr::new(name), text.as_bytes())
                .map_err(|r| refused(r, &self.root.path().join(rel_path)))?;
            self.files.push((parent, name.to_string()));
        }
        // Durable: each directory's new names, deepest first, then the root's.
        for dir in self.dirs.values().rev() {
            dir.sync().ctx("cannot fsync", dir.path())?;
        }
        self.root.sync().ctx("cannot fsync", self.root.path())
    }

    /// Make every directory of `parent` below the root not made yet, each by `mkdirat`
    /// in the one above it.
    fn make_dirs(&mut self, parent: &Path) -> Result<()> {
        let mut at = PathBuf::new();
        for part in parent.iter() {
            let next = at.join(part);
            if !self.dirs.contains_key(&next) {
                let above = self.dirs.get(&at).unwrap_or(&self.root);
                let made = above
                    .create_dir(part)
                    .map_err(|r| refused(r, &self.root.path().join(&next)))?;
                self.dirs.insert(next.clone(), made);
            }
            at = next;
        }
        Ok(())
    }

    /// Remove what this export made (best effort: it is failing already).
    fn remove(&self) {
        for (parent, name) in &self.files {
            let at = self.dirs.get(parent).unwrap_or(&self.root);
            let _ = at.remove(OsStr::new(name), false);
        }
        for rel in self.dirs.keys().rev() {
            let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
                continue;
            };
            let at = self.dirs.get(parent).unwrap_or(&self.root);
            let _ = at.remove(name, true);
        }
    }
}

/// A refusal while writing the export, named by its path.
fn refused(r: Refused, path: &Path) -> Error {
    match r {
        Refused::Exists | Refused::Symlink => Error::new(
            baton_error::ErrorKind::Security,
            format!(
                "{} appeared in the export directory while baton wrote it (not made by baton); refusing to write through it",
                path.display()
            ),
        )
        .with_hint("something else writes into that directory: export into a new directory only you can write to"),
        r => r.into_error("cannot write", path),
    }
}
