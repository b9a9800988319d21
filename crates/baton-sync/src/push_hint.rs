//! A push that trusts its target hint (the remote generation the last sync saw, SPEC
//! §5.2): the pack is written on the assumption that the remote `current` is still the
//! hinted bundle, while the same batches read `config`, that generation and the next one
//! (`BackendExt::start_reads`), so that it costs three round trips after connect over SFTP
//! (opens; writes, fsyncs, read-backs and the state reads; publish) instead of five.
//!
//! A hint is only a hint: when the remote does not bear it out (another push moved it,
//! the store was replaced), the staged upload is removed and the caller pushes the long
//! way. Nothing is published before the reads agree with the hint, and the publish is
//! the same no-clobber chain as always, so a push that races with this one still loses
//! or wins by the create of the next generation (SPEC §14).

use indicatif::ProgressBar;

use super::push_parts::{
    PushReport, PushRequest, missing_objects, publish, staged_ref, write_pack,
};
use super::remote_store;
use super::target_hint::{Packs, remember, target_url};
use baton_error::Result;
use baton_format::layout::Kind;
use baton_format::names::RefName;
use baton_store::Store;
use baton_store::target_hints;
use baton_transport::backend::BackendExt;

/// Push along the hint. `Ok(None)`: there is no usable hint, or the remote did not bear
/// it out (nothing was published, and what was staged is being removed): push the long
/// way.
pub(super) fn try_push(
    store: &Store,
    remote: &mut dyn BackendExt,
    request: &PushRequest,
    report: &mut PushReport,
    progress: &ProgressBar,
) -> Result<Option<()>> {
    let bundle = request.bundle;
    if request.force.is_some() {
        return Ok(None);
    }
    let Some(url) = target_url(store, request.target) else {
        return Ok(None);
    };
    let Some(hint) = target_hints::get(store, request.target, &url) else {
        return Ok(None);
    };
    // Up to date, or diverged: the long way says so (it costs no more).
    if hint.current == bundle
        || !store.objects.contains(&hint.current)
        || !store.is_ancestor(&hint.current, &bundle)?
    {
        return Ok(None);
    }
    let missing = missing_objects(store, bundle, Some(hint.current))?;
    let beside = staged_ref(store, Some(hint.current), bundle)?;
    progress.set_length(missing.stored_len);
    // The state's opens first: they are answered before the pack's, whose wait brings
    // them in; their reads then travel with the pack's writes.
    let (reads, lists) = remote_store::hint_reads(hint.generation);
    let pending = remote.start_reads(&reads, &lists, 1 << 20)?;
    remote.prepare_in_existing_dirs(&[Kind::Pack, Kind::Generation(RefName::Current)])?;
    let item = remote.begin_new(None)?;
    let written = write_pack(store, remote, &item, &beside, &missing, progress);
    let answers = match remote.collect_reads(pending) {
        Ok(answers) => answers,
        Err(e) => {
            remote.abandon(item);
            return Err(e);
        }
    };
    let Some(state) = remote_store::check_hint(remote, answers, hint.generation, hint.current)
    else {
        // Not what the hint said: whatever the upload did is not wanted.
        remote.abandon(item);
        return Ok(None);
    };
    let (pack_id, pack_len) = match written {
        Ok(written) => written,
        Err(e) => {
            remote.abandon(item);
            return Err(e);
        }
    };
    if let Some(config) = &state.config
        && let Err(e) =
            remote_store::check_same_encryption(store, config, remote.describe().as_str())
    {
        remote.abandon(item);
        return Err(e);
    }
    remote.sweep_leftovers(&state.staging);
    report.remote_before = state.current;
    report.objects_sent = (missing.objects.len() + missing.bundles.len()) as u64;
    report.bytes_sent = pack_len;
    publish(
        remote,
        item,
        &pack_id,
        pack_len,
        hint.generation + 1,
        bundle,
    )?;
    remember(
        store,
        request.target,
        hint.generation + 1,
        Some(bundle),
        Packs::Pushed(pack_id),
    );
    Ok(Some(()))
}
