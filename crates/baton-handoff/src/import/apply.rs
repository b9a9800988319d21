//! Applying a checked import plan to a store: secrets scrubbed first, bundles already
//! imported reused, each new one committed and `current` moved onto it.

use std::collections::HashMap;
use std::time::SystemTime;

use serde::Serialize;

use super::{FINGERPRINT, Plan};
use crate::secrets::Scrubber;
use baton_error::{Error, Result};
use baton_format::names::RefName;
use baton_format::{Bundle, ObjectId};
use baton_store::Store;
use baton_store::memtree::MemFile;
use baton_store::refs::{Expect, MoveReason};

/// A planned bundle written by this import.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Imported {
    pub key: String,
    pub bundle: ObjectId,
    pub parents: Vec<ObjectId>,
}

/// A planned bundle found already imported (same source fingerprint in current's
/// history), reused instead of written again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub key: String,
    pub bundle: ObjectId,
}

/// What `apply` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub imported: Vec<Imported>,
    pub skipped: Vec<Skipped>,
    /// `current` after the import.
    pub current: Option<ObjectId>,
}

/// Redact every text of the plan in place; returns the kinds and counts found.
pub fn scrub(plan: &mut Plan) -> Scrubber {
    let mut scrubber = Scrubber::default();
    for bundle in &mut plan.bundles {
        for (path, bytes) in &mut bundle.files {
            *bytes = scrubber.bytes(bytes);
            *path = scrubber.text(path);
        }
        for text in [
            &mut bundle.from,
            &mut bundle.to,
            &mut bundle.summary,
            &mut bundle.note,
        ] {
            *text = scrubber.text(text);
        }
        for value in bundle.metadata.values_mut() {
            *value = scrubber.text(value);
        }
    }
    scrubber
}

/// Commit the plan's bundles in order, each moving `current` by compare-and-swap (and so
/// landing in the log, which keeps every imported head reachable). Roots of the imported
/// history hang under the store's current bundle. A bundle imported before is reused:
/// importing the same input twice adds nothing.
pub fn apply(store: &Store, plan: &Plan) -> Result<Applied> {
    let start = store.read_ref(&RefName::Current)?;
    store.check_log()?;
    let mut ids: HashMap<String, ObjectId> = HashMap::new();
    let mut applied = Applied {
        current: start,
        ..Applied::default()
    };
    let known = imported_fingerprints(store, start)?;
    for planned in &plan.bundles {
        if let Some(id) = planned
            .metadata
            .get(FINGERPRINT)
            .and_then(|fp| known.get(fp))
        {
            ids.insert(planned.key.clone(), *id);
            applied.skipped.push(Skipped {
                key: planned.key.clone(),
                bundle: *id,
            });
            continue;
        }
        let files: Vec<MemFile> = planned
            .files
            .iter()
            .map(|(p, b)| MemFile::new(p.clone(), b.clone()))
            .collect();
        let tree = store.write_mem_tree(&files)?;
        let mut parents = Vec::new();
        for key in &planned.parents {
            let id = ids.get(key).ok_or_else(|| {
                Error::other(format!(
                    "internal error: parent {key} of {} was not imported first",
                    planned.key
                ))
            })?;
            parents.push(*id);
        }
        // Roots of the imported history hang under the store's current bundle, so that
        // `current` keeps every earlier handoff in its history.
        if parents.is_empty() {
            parents.extend(start);
        }
        let mut bundle = Bundle::new(
            tree,
            parents,
            planned.created.unwrap_or_else(SystemTime::now),
        );
        bundle.from = planned.from.clone();
        bundle.to = planned.to.clone();
        bundle.summary = planned.summary.clone();
        bundle.note = planned.note.clone();
        bundle.metadata = planned.metadata.clone();
        let id = store.write_bundle(&bundle)?;
        // Each import moves `current` (and so lands in the log), which keeps every
        // imported head reachable even when the history has several.
        let reason = MoveReason {
            action: "import-handoff".into(),
            from: bundle.from.clone(),
            to: bundle.to.clone(),
        };
        store.update_ref(
            &RefName::Current,
            Expect::Value(applied.current),
            Some(id),
            &reason,
        )?;
        applied.current = Some(id);
        ids.insert(planned.key.clone(), id);
        applied.imported.push(Imported {
            key: planned.key.clone(),
            bundle: id,
            parents: bundle.parents,
        });
    }
    Ok(applied)
}

/// The `import.fingerprint` of every bundle in `start`'s history, to its bundle id.
fn imported_fingerprints(
    store: &Store,
    start: Option<ObjectId>,
) -> Result<HashMap<String, ObjectId>> {
    let mut out = HashMap::new();
    let Some(start) = start else {
        return Ok(out);
    };
    for id in store.history(&start)? {
        let bundle = store.read_bundle(&id)?;
        if let Some(fp) = bundle.metadata.get(FINGERPRINT) {
            out.entry(fp.clone()).or_insert(id);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::import::{Format, PlannedBundle};

    fn planned(key: &str, parents: &[&str]) -> PlannedBundle {
        PlannedBundle {
            key: key.into(),
            parents: parents.iter().map(|p| p.to_string()).collect(),
            files: vec![("briefing.md".into(), format!("# {key}\n").into_bytes())],
            created: None,
            from: "a".into(),
            to: "b".into(),
            summary: key.into(),
            note: String::new(),
            metadata: BTreeMap::from([(FINGERPRINT.to_string(), format!("fp-{key}"))]),
        }
    }

    #[test]
    fn apply_commits_in_order_and_reuses_what_was_imported_before() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::init(&tmp.path().join("s")).unwrap();
        let plan = Plan {
            warnings: Vec::new(),
            format: Format::Frontmatter,
            bundles: vec![planned("one", &[]), planned("two", &["one"])],
        };
        let first = apply(&store, &plan).unwrap();
        assert!(first.skipped.is_empty());
        assert_eq!(first.imported.len(), 2);
        assert!(first.imported[0].parents.is_empty());
        assert_eq!(first.imported[1].parents, vec![first.imported[0].bundle]);
        assert_eq!(first.current, Some(first.imported[1].bundle));
        assert_eq!(
            store.read_ref(&RefName::Current).unwrap(),
            Some(first.imported[1].bundle)
        );

        let again = apply(&store, &plan).unwrap();
        assert!(again.imported.is_empty());
        assert_eq!(
            again.skipped,
            vec![
                Skipped {
                    key: "one".into(),
                    bundle: first.imported[0].bundle
                },
                Skipped {
                    key: "two".into(),
                    bundle: first.imported[1].bundle
                },
            ]
        );
        assert_eq!(again.current, first.current);
    }
}
