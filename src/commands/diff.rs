//! `baton diff OLD NEW`: which paths were added, deleted, modified or changed kind.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::json;

use crate::error::Result;
use crate::format::{EntryKind, ObjectId, TreeEntry};
use crate::output::{Ctx, Outcome};
use crate::store::Store;

pub fn run(ctx: &Ctx, old: &str, new: &str) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let old_tree = store.read_bundle(&store.resolve(old)?)?.tree;
    let new_tree = store.read_bundle(&store.resolve(new)?)?.tree;
    let mut changes = Vec::new();
    diff_trees(&store, Some(old_tree), Some(new_tree), "", &mut changes)?;
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

/// Compare two trees (either may be absent), skipping identical subtrees by id.
fn diff_trees(
    store: &Store,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    prefix: &str,
    out: &mut Vec<(&'static str, String)>,
) -> Result<()> {
    if old == new {
        return Ok(());
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
    for name in names {
        let path = format!("{prefix}{name}");
        let dir_id = |e: Option<&TreeEntry>| e.filter(|e| e.kind == EntryKind::Dir).map(|e| e.id);
        let (o, n) = (old_entries.get(name), new_entries.get(name));
        match (o, n) {
            (Some(o), Some(n)) if o.kind == n.kind && o.id == n.id => {}
            (Some(o), Some(n)) if o.kind == EntryKind::Dir && n.kind == EntryKind::Dir => {
                diff_trees(store, Some(o.id), Some(n.id), &format!("{path}/"), out)?;
            }
            (Some(o), Some(n)) if o.kind != EntryKind::Dir && n.kind != EntryKind::Dir => {
                out.push((
                    if o.id == n.id {
                        "type-changed"
                    } else {
                        "modified"
                    },
                    path,
                ));
            }
            _ => {
                // Added, deleted, or a file replaced by a directory (or back).
                if let Some(o) = o {
                    if o.kind == EntryKind::Dir {
                        diff_trees(store, dir_id(Some(o)), None, &format!("{path}/"), out)?;
                    } else {
                        out.push(("deleted", path.clone()));
                    }
                }
                if let Some(n) = n {
                    if n.kind == EntryKind::Dir {
                        diff_trees(store, None, dir_id(Some(n)), &format!("{path}/"), out)?;
                    } else {
                        out.push(("added", path.clone()));
                    }
                }
            }
        }
    }
    Ok(())
}
