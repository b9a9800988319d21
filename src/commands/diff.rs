//! `baton diff OLD NEW`: which paths were added, deleted, modified or changed kind.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::json;

use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, Result};
use baton_format::{EntryKind, ObjectId, TreeEntry};
use baton_store::Store;
use baton_store::tree_limits::{MAX_EXPANDED_ENTRIES, MAX_TREE_DEPTH, ReadSized, Shapes, too_deep};

pub fn run(ctx: &Ctx, old: &str, new: &str) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let old_tree = store.read_bundle(&store.resolve(old)?)?.tree;
    let new_tree = store.read_bundle(&store.resolve(new)?)?.tree;
    let mut changes = Vec::new();
    diff_trees(&store, Some(old_tree), Some(new_tree), &mut changes)?;
    let mut human = String::new();
    for (status, path) in &changes {
        let _ = writeln!(human, "{} {path}", &status[..1].to_uppercase());
    }
    let json_changes: Vec<_> = changes
        .iter()
        .map(|(s, p)| json!({ "status": s, "path": p }))
        .collect();
    Ok(Outcome::new(
        human.trim_end().to_string(),
        json!({ "changes": json_changes }),
    ))
}

/// What is left to do, innermost last: the recursion of a tree diff kept on the heap.
enum Task {
    Emit(&'static str, String),
    /// Compare two trees (either may be absent) below `prefix`, `depth` levels down.
    Diff(Option<ObjectId>, Option<ObjectId>, String, u32),
    /// Every file below a tree present on one side only.
    Expand(&'static str, ObjectId, String),
}

/// Compare two trees, skipping identical subtrees by id. Iterative, with the depth and
/// expansion limits of `store::tree_limits`: a forged tree costs bounded work and memory.
fn diff_trees(
    store: &Store,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    out: &mut Vec<(&'static str, String)>,
) -> Result<()> {
    let mut shapes = Shapes::default();
    // Entries compared or listed so far.
    let mut work: u64 = 0;
    let mut count = |n: u64| {
        work = work.saturating_add(n);
        if work > MAX_EXPANDED_ENTRIES {
            return Err(Error::integrity(format!(
                "the diff expands to more than {MAX_EXPANDED_ENTRIES} entries (MAX_EXPANDED_ENTRIES)"
            ))
            .with_hint("compare smaller parts with 'baton show', or check the bundles with 'baton verify'"));
        }
        Ok(())
    };
    let root = new.or(old);
    let mut tasks = vec![Task::Diff(old, new, String::new(), 0)];
    while let Some(task) = tasks.pop() {
        let (old, new, prefix, depth) = match task {
            Task::Emit(status, path) => {
                out.push((status, path));
                continue;
            }
            Task::Expand(status, id, prefix) => {
                let shape = shapes.walk(&id, None, MAX_TREE_DEPTH, &mut ReadSized(store))?;
                count(shape.entries)?;
                for (path, entry) in store.list_tree(&id)? {
                    if entry.kind != EntryKind::Dir {
                        out.push((status, format!("{prefix}{path}")));
                    }
                }
                continue;
            }
            Task::Diff(old, new, prefix, depth) => (old, new, prefix, depth),
        };
        if old == new {
            continue;
        }
        if depth >= MAX_TREE_DEPTH
            && let Some(root) = root
        {
            return Err(too_deep(&root));
        }
        let read = |id: Option<ObjectId>| -> Result<BTreeMap<String, TreeEntry>> {
            Ok(match id {
                Some(id) => store
                    .read_tree(&id)?
                    .entries
                    .into_iter()
                    .map(|e| (e.name.clone(), e))
                    .collect(),
                None => BTreeMap::new(),
            })
        };
        let (old_entries, new_entries) = (read(old)?, read(new)?);
        let mut names: Vec<&String> = old_entries.keys().chain(new_entries.keys()).collect();
        names.sort();
        names.dedup();
        count(names.len() as u64)?;
        let mut here = Vec::new();
        for name in names {
            let path = format!("{prefix}{name}");
            let (o, n) = (old_entries.get(name), new_entries.get(name));
            match (o, n) {
                (Some(o), Some(n)) if o.kind == n.kind && o.id == n.id => {}
                (Some(o), Some(n)) if o.kind == EntryKind::Dir && n.kind == EntryKind::Dir => {
                    here.push(Task::Diff(
                        Some(o.id),
                        Some(n.id),
                        format!("{path}/"),
                        depth + 1,
                    ));
                }
                (Some(o), Some(n)) if o.kind != EntryKind::Dir && n.kind != EntryKind::Dir => {
                    let status = if o.id == n.id {
                        "type-changed"
                    } else {
                        "modified"
                    };
                    here.push(Task::Emit(status, path));
                }
                _ => {
                    // Added, deleted, or a file replaced by a directory (or back).
                    if let Some(o) = o {
                        if o.kind == EntryKind::Dir {
                            here.push(Task::Expand("deleted", o.id, format!("{path}/")));
                        } else {
                            here.push(Task::Emit("deleted", path.clone()));
                        }
                    }
                    if let Some(n) = n {
                        if n.kind == EntryKind::Dir {
                            here.push(Task::Expand("added", n.id, format!("{path}/")));
                        } else {
                            here.push(Task::Emit("added", path.clone()));
                        }
                    }
                }
            }
        }
        // In name order: the first pushed last, so popped first.
        tasks.extend(here.into_iter().rev());
    }
    Ok(())
}
