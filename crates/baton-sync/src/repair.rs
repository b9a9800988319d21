//! `pull --repair`: refetch every object that is missing or damaged here from a target
//! that has it, each verified by its name as it arrives, published only once all of
//! them have arrived (SPEC 16.1). A tree that declares a wrong size for an object is
//! not damaged storage but a wrong object, which no target can replace: the repair
//! says so.

use std::collections::HashMap;
use std::io::Write;

use indicatif::ProgressBar;
use serde::Serialize;

use super::pull::remote_pack_index;
use super::remote_store;
use baton_error::{Error, IoContext, Result};
use baton_format::ObjectId;
use baton_format::layout::Kind;
use baton_format::pack::PackEntry;
use baton_store::Store;
use baton_store::repair::Received;
use baton_transport::backend::{BackendExt, Listing};

#[derive(Debug, Default, Serialize)]
pub struct RepairReport {
    /// Objects whose stored bytes here failed their check.
    pub damaged: u64,
    /// Objects refetched (damaged or missing here).
    pub objects_received: u64,
    pub bytes_received: u64,
    /// Damaged packs removed once every object they held was stored loose.
    pub packs_retired: u64,
    /// Damaged loose files removed because a healthy pack holds the object.
    pub shadowed_removed: u64,
    /// The storage names refetched.
    pub repaired: Vec<ObjectId>,
}

/// Where the target keeps an object: loose (its storage name in hex, its size), or a
/// range of a pack (the pack's file name).
enum Source {
    Loose(String, u64),
    Packed(String, PackEntry),
}

/// Repair this store from `remote`. Nothing here changes unless every object needed
/// arrives and verifies; a target that lacks one (or holds it damaged) is an integrity
/// error naming it.
pub fn repair(
    store: &Store,
    remote: &mut dyn BackendExt,
    progress: &ProgressBar,
) -> Result<RepairReport> {
    let state = remote_store::read_existing_state(store, remote)?;
    let mut damage = store.scan_damage()?;
    let mut report = RepairReport {
        damaged: (damage.damaged.len() + damage.shadowing.len()) as u64,
        ..RepairReport::default()
    };
    let mut received: HashMap<ObjectId, Received> = HashMap::new();
    let mut sources: Option<HashMap<ObjectId, Source>> = None;
    loop {
        let needs = store.repair_needs(&damage, &received)?;
        if needs.is_empty() {
            break;
        }
        if sources.is_none() {
            sources = Some(remote_sources(remote, &state)?);
        }
        let known = sources
            .as_ref()
            .ok_or_else(|| Error::other("the target's objects could not be listed"))?;
        let lacking: Vec<&ObjectId> = needs.iter().filter(|n| !known.contains_key(n)).collect();
        if !lacking.is_empty() {
            return Err(lacks(remote, &lacking));
        }
        for name in &needs {
            let (temp, id, size) = fetch_one(store, remote, name, &known[name], progress)?;
            damage.sizes.insert(id, size);
            report.bytes_received += temp
                .as_file()
                .metadata()
                .ctx("cannot stat", temp.path())?
                .len();
            report.objects_received += 1;
            received.insert(*name, Received { name: *name, temp });
        }
    }
    let mut repaired: Vec<ObjectId> = received.keys().copied().collect();
    repaired.sort();
    report.repaired = repaired;
    report.shadowed_removed = damage.shadowing.len() as u64;
    report.packs_retired = store.install_repairs(received.into_values().collect(), &damage)?;
    // Every object is here and checked now, so the sizes trees declare can be too.
    let lies = store.declared_size_problems(&damage.sizes)?;
    if let Some(first) = lies.first() {
        return Err(cannot_repair_sizes(first, lies.len(), &report));
    }
    Ok(report)
}

/// A tree whose entry declares a size its object does not have: its id is the hash of
/// those very bytes, so every copy anywhere says the same, and the object it names is
/// right (its id is its hash too). Refetching changes neither.
fn cannot_repair_sizes(first: &str, count: usize, report: &RepairReport) -> Error {
    let others = match count {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    let repaired = match report.objects_received + report.packs_retired {
        0 => String::new(),
        _ => format!(
            "; the rest was repaired ({} objects refetched, {} packs retired)",
            report.objects_received, report.packs_retired
        ),
    };
    Error::integrity(format!(
        "cannot be repaired by refetching: {first}{others}: a tree is named by the hash of its bytes, so every copy of it declares the same wrong size{repaired}"
    ))
    .with_hint("the bundles below which it sits cannot be checked out or verified; move current off them ('baton reset REV' to an earlier bundle, then save again); 'baton verify' keeps reporting the tree while the history of a ref names such a bundle")
}

fn lacks(remote: &dyn BackendExt, lacking: &[&ObjectId]) -> Error {
    let shown: Vec<String> = lacking.iter().take(5).map(|n| n.to_string()).collect();
    Error::integrity(format!(
        "cannot repair: {} lacks {} missing or damaged here: {}{}",
        remote.describe(),
        if lacking.len() == 1 {
            "1 object".to_string()
        } else {
            format!("{} objects", lacking.len())
        },
        shown.join(", "),
        if lacking.len() > 5 { ", ..." } else { "" }
    ))
    .with_hint("nothing was changed; try another target with 'baton pull --repair NAME'")
}

/// Every object the target holds by storage name: its loose files (one listing of its
/// fanout directories) and the entries of its packs' indexes.
fn remote_sources(
    remote: &mut dyn BackendExt,
    state: &remote_store::RemoteState,
) -> Result<HashMap<ObjectId, Source>> {
    let mut sources = HashMap::new();
    for (_, entry) in &state.packs {
        for e in remote_pack_index(remote, &entry.name, entry.size)? {
            sources
                .entry(e.id)
                .or_insert_with(|| Source::Packed(entry.name.clone(), e));
        }
    }
    if !state.fanouts.is_empty() {
        let lists: Vec<Listing> = state.fanouts.iter().cloned().map(Listing::Fanout).collect();
        let (_, listings) = remote.read_and_list(&[], &lists, 0)?;
        for (fanout, listing) in state.fanouts.iter().zip(listings) {
            for entry in listing.unwrap_or_default() {
                let hex = format!("{fanout}{}", entry.name);
                let Ok(name) = ObjectId::parse(&hex) else {
                    continue;
                };
                // A loose copy is read before a packed one, as lookups do.
                sources.insert(name, Source::Loose(hex, entry.size));
            }
        }
    }
    Ok(sources)
}

/// Receive one object into a temp file beside its final place and verify it there (it
/// must open to content whose id derives `name`).
fn fetch_one(
    store: &Store,
    remote: &mut dyn BackendExt,
    name: &ObjectId,
    source: &Source,
    progress: &ProgressBar,
) -> Result<(tempfile::NamedTempFile, ObjectId, u64)> {
    let mut temp = store.objects.temp_for_name(name)?;
    match source {
        Source::Loose(name, size) => {
            remote.read_sized(&Kind::Loose, name, *size, temp.as_file_mut())?
        }
        Source::Packed(pack, entry) => {
            let bytes = remote.read_range(&Kind::Pack, pack, entry.offset, entry.length)?;
            temp.write_all(&bytes).ctx("cannot write", temp.path())?;
        }
    }
    temp.as_file().sync_all().ctx("cannot fsync", temp.path())?;
    let file = std::fs::File::open(temp.path()).ctx("cannot read", temp.path())?;
    let (id, size) = store
        .objects
        .decode_named(name, file, &mut std::io::sink())
        .map_err(|e| {
            Error::integrity(format!(
                "cannot repair: the copy of object {name} at {} is damaged too: {}",
                remote.describe(),
                e.message
            ))
            .with_hint("nothing was changed; try another target with 'baton pull --repair NAME'")
        })?;
    progress.inc(1);
    Ok((temp, id, size))
}
