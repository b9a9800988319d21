//! Push: send what the remote lacks as one pack, staged, read back, published, then move
//! the remote `current` by compare-and-swap.

use std::time::Instant;

use indicatif::ProgressBar;

use super::push_parts::{Missing, missing_objects, publish, staged_ref, write_pack};
pub use super::push_parts::{PushReport, PushRequest};
use super::remote_store;
use super::target_hint::Packs;
use baton_error::{Error, Result};
use baton_format::ObjectId;
use baton_format::id::show_full;
use baton_format::layout::Kind;
use baton_format::names::RefName;
use baton_store::Store;
use baton_store::refs::{Expect, MoveReason};
use baton_transport::backend::BackendExt;

pub fn push(
    store: &Store,
    remote: &mut dyn BackendExt,
    request: &PushRequest,
    progress: &ProgressBar,
) -> Result<PushReport> {
    let started = Instant::now();
    let bundle = request.bundle;
    let mut report = PushReport {
        bundle: Some(bundle),
        ..PushReport::default()
    };
    // A hint of the remote's generation saves the look before the upload; when the
    // remote does not bear it out, push the long way.
    if super::push_hint::try_push(store, remote, request, &mut report, progress)?.is_some() {
        record_target(store, request.target, bundle)?;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    }
    let state = remote_store::read_push_state(remote)?;
    match &state.config {
        // Created with the pack, in its publish batch (`Backend::begin_new` given the config).
        None => remote_store::check_room_for_store(remote, state.top.as_deref().unwrap_or(&[]))?,
        Some(config) => {
            remote_store::check_same_encryption(store, config, remote.describe().as_str())?
        }
    }
    remote.sweep_leftovers(&state.staging);
    report.remote_before = state.current;

    match request.force {
        Some(expected) if expected != state.current => {
            return Err(Error::conflict(format!(
                "remote current is {}, but --force expected {}",
                show_full(state.current),
                show_full(expected)
            ))
            .with_hint("fetch with 'baton pull' or look again before forcing"));
        }
        Some(_) => {}
        None if state.current == Some(bundle) => {}
        None => {
            if let Some(remote_current) = state.current
                && !store.is_ancestor(&remote_current, &bundle)?
            {
                return Err(not_a_fast_forward(
                    store,
                    request.target,
                    remote_current,
                    bundle,
                )?);
            }
        }
    }
    if state.current == Some(bundle) {
        report.up_to_date = true;
        record_target(store, request.target, bundle)?;
        super::target_hint::remember(
            store,
            request.target,
            state.generation,
            state.current,
            Packs::Keep,
        );
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    }

    let missing = missing_objects(store, bundle, state.current)?;
    progress.set_length(missing.stored_len);
    let pack_id = upload_and_publish(
        store,
        remote,
        request,
        &state,
        &missing,
        &mut report,
        progress,
    )?;
    record_target(store, request.target, bundle)?;
    super::target_hint::remember(
        store,
        request.target,
        state.generation + 1,
        Some(bundle),
        Packs::Pushed(pack_id),
    );
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// The refusal of a push whose bundle does not descend from the remote `current`: the
/// remote is ahead (a pull is all it takes) when `current` here descends from, or is
/// already below, ours; else both moved (a merge). A remote bundle this store never
/// pulled has its history on the remote only: ours is then "only behind" when it is
/// below what the last sync saw there (`targets/NAME`), i.e. nothing was saved since.
fn not_a_fast_forward(
    store: &Store,
    name: &str,
    remote_current: ObjectId,
    bundle: ObjectId,
) -> Result<Error> {
    let known = store.objects.contains(&remote_current);
    let behind = if known {
        store.is_ancestor(&bundle, &remote_current)?
    } else {
        let seen = store.read_ref(&RefName::parse(&format!("targets/{name}"))?)?;
        match seen {
            Some(seen) => store.is_ancestor(&bundle, &seen)?,
            None => false,
        }
    };
    if !behind {
        return Ok(Error::conflict(format!(
            "history diverged (store_conflict): remote current is {remote_current}, which is not an ancestor of {bundle}"
        ))
        .with_hint(format!("someone else pushed: 'baton pull {name}' then 'baton merge targets/{name}' to keep both lines, or 'baton reset targets/{name}' to take theirs (or push --force OLD_ID to replace theirs)")));
    }
    let what = if known {
        format!("its current {remote_current} already has {bundle} in its history")
    } else {
        format!(
            "its current {remote_current} is newer than anything this store pulled, and {bundle} has nothing new"
        )
    };
    Ok(Error::conflict(format!(
        "the remote is ahead (store_conflict): {what}; nothing was pushed"
    ))
    .with_hint(format!(
        "run 'baton pull {name}' to bring this store up to it (a fast-forward)"
    )))
}

fn upload_and_publish(
    store: &Store,
    remote: &mut dyn BackendExt,
    request: &PushRequest,
    state: &remote_store::RemoteState,
    missing: &Missing,
    report: &mut PushReport,
    progress: &ProgressBar,
) -> Result<ObjectId> {
    let beside = staged_ref(store, state.current, request.bundle)?;
    // 1. The pack: objects, then manifests, read back after writing.
    let item = if state.config.is_none() {
        report.created_remote = true;
        remote.begin_new(Some(remote_store::new_store_config(&store.config)))?
    } else {
        // A store made by `baton init` or an older baton may lack some directories;
        // asking costs nothing (the requests ride along with the next batch).
        remote.prepare(&[Kind::Pack, Kind::Generation(RefName::Current)])?;
        remote.begin_new(None)?
    };
    let (pack_id, pack_len) = match write_pack(store, remote, &item, &beside, missing, progress) {
        Ok(written) => written,
        Err(e) => {
            remote.abandon(item);
            return Err(e);
        }
    };
    report.objects_sent = (missing.objects.len() + missing.bundles.len()) as u64;
    report.bytes_sent = pack_len;
    publish(
        remote,
        item,
        &pack_id,
        pack_len,
        state.generation + 1,
        request.bundle,
    )?;
    Ok(pack_id)
}

fn record_target(store: &Store, target: &str, bundle: ObjectId) -> Result<()> {
    let name = RefName::parse(&format!("targets/{target}"))?;
    if store.read_ref(&name)? == Some(bundle) {
        return Ok(());
    }
    let reason = MoveReason {
        action: "push".into(),
        from: String::new(),
        to: target.into(),
    };
    store.update_ref(&name, Expect::Any, Some(bundle), &reason)?;
    Ok(())
}
