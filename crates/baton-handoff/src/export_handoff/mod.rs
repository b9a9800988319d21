//! `export-handoff` as a library function: a handoff (with `history`, its whole history,
//! parents first) rendered as the files another handoff tool reads, and written into an
//! absent or empty directory through directory fds only (`write.rs`).

mod write;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::export::{self, ExportBundle, ExportFormat};
use baton_error::{Error, IoContext, Result};
use baton_format::{Bundle, EntryKind, ObjectId, TreeEntry};
use baton_store::Store;
use write::write_export;

/// A briefing larger than this is not exported (a handoff.md is a few kilobytes).
const MAX_BRIEFING: u64 = 16 << 20;

/// What to export, and where.
pub struct ExportOptions {
    /// The handoff: an id, a unique prefix, `current~N`, `targets/NAME`.
    pub rev: String,
    pub format: ExportFormat,
    /// Absent or empty; made when absent.
    pub dir: PathBuf,
    /// Every ancestor too, through every parent of a merge.
    pub history: bool,
}

/// What was exported.
pub struct ExportReport {
    /// The bundles' ids, parents first.
    pub bundles: Vec<String>,
    /// The files written, relative slash paths.
    pub files: Vec<String>,
}

/// Refuse a `dir` that is not absent or empty: an export never mixes into other files
/// (checked again when the export opens it).
pub fn check_dir(dir: &Path) -> Result<()> {
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
    Ok(())
}

pub fn export_handoff(store: &Store, opts: &ExportOptions) -> Result<ExportReport> {
    let dir = &opts.dir;
    check_dir(dir)?;
    let id = store.resolve(&opts.rev)?;
    // With --history every ancestor, through every parent of a merge: an export that
    // followed first parents only dropped the other branches.
    let ids = if opts.history {
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
        let briefing = match store.find_path(&bundle.tree, "handoff.md")? {
            Some(entry) if entry.kind != EntryKind::Dir && entry.size <= MAX_BRIEFING => {
                let mut bytes = Vec::new();
                store
                    .objects
                    .copy_to(&entry.id, Some(entry.size), &mut bytes)?;
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            _ => None,
        };
        let extra = match opts.format {
            ExportFormat::Prowl => prowl_files(store, &bundle.tree)?,
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
    let files = export::render(&chain, opts.format);
    // Never two files at one name: the second would fail as if planted by someone else.
    let mut names = HashSet::new();
    if let Some((dup, _)) = files.iter().find(|(p, _)| !names.insert(p.as_str())) {
        return Err(Error::other(format!(
            "internal error: export-handoff would write {dup} twice"
        )));
    }
    write_export(dir, &files)?;
    Ok(ExportReport {
        bundles: chain.into_iter().map(|b| b.id).collect(),
        files: files.into_iter().map(|(path, _)| path).collect(),
    })
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
    store.find_path(tree, path)
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
