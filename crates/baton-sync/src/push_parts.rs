//! The pieces every push is made of, the long way and along a target hint alike: what
//! the remote lacks, the pack written and staged beside the next ref generation, and the
//! publish that moves the remote `current` by compare-and-swap.

use std::collections::HashSet;
use std::io::Write;

use indicatif::ProgressBar;
use serde::Serialize;

use super::remote_store;
use baton_error::{Error, ErrorKind, Result};
use baton_format::ObjectId;
use baton_format::id::show_full;
use baton_format::layout::{self, Kind};
use baton_format::names::{RefName, generation_name};
use baton_store::Store;
use baton_store::packs::{PackWriter, pack_file_name};
use baton_store::refs::MoveReason;
use baton_transport::Published;
use baton_transport::backend::{BackendExt, NewItem};

#[derive(Debug, Default, Serialize)]
pub struct PushReport {
    pub bundle: Option<ObjectId>,
    pub remote_before: Option<ObjectId>,
    pub up_to_date: bool,
    pub created_remote: bool,
    pub objects_sent: u64,
    pub bytes_sent: u64,
    pub elapsed_ms: u64,
}

pub struct PushRequest<'a> {
    pub target: &'a str,
    pub bundle: ObjectId,
    /// `Some(expected)`: overwrite the remote `current` if (and only if) it holds `expected`.
    pub force: Option<Option<ObjectId>>,
}

/// A failed upload write: the transport's own error (a full remote disk, a broken link)
/// keeps its kind and hint; anything else is a transport failure.
pub(super) fn transport_err(what: &str, e: std::io::Error) -> Error {
    if let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<Error>()) {
        return Error::rewrapped(inner, what);
    }
    Error::new(ErrorKind::Transport, format!("{what}: {e}"))
}

/// Objects reachable from `bundle` but not from `remote_current` (when we know it):
/// the remote holds everything below any ref it published. Bundles come back separately
/// so that manifests go last in the pack.
///
/// Only the new bundles are walked, not the whole history: their trees, minus the trees
/// of the remote's bundles they sit on (the boundary). An object that only an older
/// remote bundle holds is sent again (a duplicate in another pack is harmless); nothing
/// the remote lacks is ever left out, since everything below the boundary is there.
pub(super) fn missing_objects(
    store: &Store,
    bundle: ObjectId,
    remote_current: Option<ObjectId>,
) -> Result<Missing> {
    let base = remote_current.filter(|r| store.objects.contains(r));
    let (manifests, boundary) = store.bundles_not_in(bundle, base)?;
    let ours = store.trees_below(&manifests)?;
    // Unreadable remote-side trees only mean more is sent.
    let theirs = store.trees_below(&boundary).unwrap_or_default();
    let bundles: HashSet<ObjectId> = manifests.iter().copied().collect();
    let mut objects: Vec<ObjectId> = ours
        .iter()
        .filter(|id| !theirs.contains(id) && !bundles.contains(id))
        .copied()
        .collect();
    objects.sort();
    let stored_len = objects
        .iter()
        .filter_map(|id| store.objects.stored_len(id))
        .sum();
    Ok(Missing {
        objects,
        bundles: manifests,
        stored_len,
    })
}

/// What a push sends: the objects the remote lacks, then the manifests of the bundles.
pub(super) struct Missing {
    pub objects: Vec<ObjectId>,
    pub bundles: Vec<ObjectId>,
    /// The objects' stored bytes: about the pack's size.
    pub stored_len: u64,
}

/// The next generation of the remote ref (a log line naming old and new id), to stage
/// beside the pack and read back with it.
pub(super) fn staged_ref(
    store: &Store,
    remote_current: Option<ObjectId>,
    bundle: ObjectId,
) -> Result<Vec<(String, Vec<u8>)>> {
    let source = store.read_bundle(&bundle)?;
    let reason = MoveReason {
        action: "push".into(),
        from: source.from.clone(),
        to: source.to.clone(),
    };
    let entry = store.log_entry(&RefName::Current, remote_current, Some(bundle), &reason)?;
    Ok(vec![(STAGED_REF.to_string(), entry.encode_line())])
}

/// Write the pack of `objects` and then `bundles` (manifests last) into `item`, with
/// `beside` staged next to it; check what the remote read back. The caller abandons
/// `item` on an error.
pub(super) fn write_pack(
    store: &Store,
    remote: &mut dyn BackendExt,
    item: &NewItem,
    beside: &[(String, Vec<u8>)],
    missing: &Missing,
    progress: &ProgressBar,
) -> Result<(ObjectId, u64)> {
    let mut manifest_bytes: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut upload = remote.upload_with(item, beside)?;
    upload.expect_len(missing.stored_len);
    let mut writer =
        PackWriter::new(&mut *upload).map_err(|e| transport_err("cannot upload pack", e))?;
    for id in &missing.objects {
        let start = writer.begin_object();
        store.objects.copy_stored_verified(id, &mut writer)?;
        writer.end_object(store.objects.name_of(id), start);
        progress.inc(writer.len() - start);
    }
    for id in &missing.bundles {
        let mut stored = Vec::new();
        store.objects.copy_stored_verified(id, &mut stored)?;
        let start = writer.begin_object();
        writer
            .write_all(&stored)
            .map_err(|e| transport_err("cannot upload pack", e))?;
        writer.end_object(store.objects.name_of(id), start);
        manifest_bytes.push((start, stored));
    }
    let (pack_id, pack_len, _, _) = writer
        .finish()
        .map_err(|e| transport_err("cannot upload pack", e))?;
    let ranges: Vec<(u64, u64)> = manifest_bytes
        .iter()
        .map(|(o, b)| (*o, b.len() as u64))
        .collect();
    let receipt = upload.finish(&ranges)?;
    check_staged_len(receipt.size, pack_len)?;
    for ((_, sent), back) in manifest_bytes.iter().zip(&receipt.readback) {
        if sent != back {
            return Err(Error::new(
                ErrorKind::Transport,
                "a staged manifest reads back differently from what was sent",
            ));
        }
    }
    Ok((pack_id, pack_len))
}

/// The staged pack is as long on the remote as what was sent.
pub(super) fn check_staged_len(staged: u64, pack_len: u64) -> Result<()> {
    if staged != pack_len {
        return Err(Error::new(
            ErrorKind::Transport,
            format!("staged pack is {staged} bytes on the remote, {pack_len} were sent"),
        ));
    }
    Ok(())
}

/// Publish, in one batch: the pack (objects and manifests together), then, only if that
/// happened, the ref as generation `next`. Closes `item` whatever happens.
pub(super) fn publish(
    remote: &mut dyn BackendExt,
    item: NewItem,
    pack_id: &ObjectId,
    pack_len: u64,
    next: u64,
    bundle: ObjectId,
) -> Result<()> {
    let pack_name = pack_file_name(pack_id);
    let next = generation_name(next);
    let generation = Kind::Generation(RefName::Current);
    let chain = remote.publish_chain(
        &item,
        &Kind::Pack,
        &pack_name,
        (STAGED_REF, &generation, &next),
    );
    let chain = match chain {
        Ok(chain) => chain,
        Err(e) => {
            remote.close_new(item, false);
            return Err(e);
        }
    };
    if chain.store == Some(Published::Exists)
        && let Err(e) = remote_store::check_twin_config(remote)
    {
        remote.close_new(item, false);
        return Err(e);
    }
    let (pack_published, mut ref_published) = (chain.item, chain.then);
    if pack_published == Published::Exists {
        // The name is taken: it must be the same pack (a push that published it and
        // then lost its ref), read no further than our pack's size.
        if let Err(e) = check_existing_pack(remote, pack_id, &pack_name, pack_len) {
            remote.close_new(item, false);
            return Err(e);
        }
        ref_published = match remote.publish_beside(&item, STAGED_REF, &generation, &next) {
            Ok(p) => p,
            Err(e) => {
                remote.close_new(item, false);
                return Err(e);
            }
        };
    }
    // After the fallback the staged pack is still there (its rename was refused).
    let all = pack_published == Published::Done && ref_published == Published::Done;
    remote.close_new(item, all);
    if ref_published != Published::Done {
        // The race is lost whatever the remote says now: a failure to read the winner's
        // ref (it may still be mid-publish) must not turn the conflict into another error.
        let show = match remote_store::read_push_state(remote) {
            Ok(now) => show_full(now.current),
            Err(_) => "a newer bundle (it could not be read yet)".to_string(),
        };
        return Err(Error::conflict(format!(
            "remote current moved during the push: it is now {show}, this push was for {bundle}"
        ))
        .with_hint("someone else pushed at the same time; 'baton pull', then push again"));
    }
    Ok(())
}

/// The staged name of the ref generation beside the pack.
const STAGED_REF: &str = "ref";

/// An existing remote pack of our pack's name must hash to it (read no more than our
/// pack's size: a file of another size is another file); else `store_conflict`.
pub(super) fn check_existing_pack(
    remote: &mut dyn BackendExt,
    pack_id: &ObjectId,
    pack_name: &str,
    pack_len: u64,
) -> Result<()> {
    let mut hasher = blake3::Hasher::new();
    let theirs = match remote.read_sized(&Kind::Pack, pack_name, pack_len, &mut hasher) {
        Ok(()) => Some(ObjectId::from_hash(hasher.finalize())),
        Err(e) if e.kind == ErrorKind::Integrity => None,
        Err(e) => return Err(e),
    };
    if theirs == Some(*pack_id) {
        return Ok(());
    }
    let what = match theirs {
        Some(theirs) => format!("its bytes hash to {theirs}"),
        None => format!("it is not a file of {pack_len} bytes"),
    };
    let pack_dest = layout::path(&Kind::Pack, pack_name);
    Err(Error::conflict(format!(
        "the remote already has a different file at {pack_dest} ({what})"
    ))
    .with_hint("the remote store was modified by hand or is corrupt; nothing was overwritten"))
}
