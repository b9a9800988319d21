//! Pull: download what we lack into local staging, verify every object, check the whole
//! received history, publish, then fast-forward `current` and record `targets/<name>`.

use std::io::Write;
use std::time::Instant;

use indicatif::ProgressBar;
use serde::Serialize;

use super::remote_store;
use super::target_hint::Packs;
use baton_error::{Error, ErrorKind, Result};
use baton_format::ObjectId;
use baton_format::layout::{self, Kind};
use baton_format::names::RefName;
use baton_format::pack::{FOOTER_LEN, PACK_MAGIC, PackEntry, decode_footer, decode_index};
use baton_store::Store;
use baton_store::ingest::{self, Forward, Ingest};
use baton_store::packs::pack_file_name;
use baton_store::refs::{Expect, MoveReason};
use baton_transport::backend::{BackendExt, Listing, OpenTail};

#[derive(Debug, Default, Serialize)]
pub struct PullReport {
    pub remote_current: Option<ObjectId>,
    pub current_before: Option<ObjectId>,
    pub current_after: Option<ObjectId>,
    /// `fast-forward`, `up-to-date`, `local-ahead`, `empty-remote`, `initial`.
    pub outcome: String,
    pub objects_received: u64,
    pub bytes_received: u64,
    pub elapsed_ms: u64,
}

/// Loose objects up to this size travel in batched reads; larger ones are streamed.
const BATCHED_LOOSE_LIMIT: u64 = 4 << 20;

pub fn pull(
    store: &Store,
    remote: &mut dyn BackendExt,
    target: &str,
    progress: &ProgressBar,
) -> Result<PullReport> {
    let state = remote_store::read_state(remote)?;
    pull_from(store, remote, target, state, progress)
}

/// `pull` with the remote's state already read (clone reads it first for the config).
pub fn pull_from(
    store: &Store,
    remote: &mut dyn BackendExt,
    target: &str,
    state: remote_store::RemoteState,
    progress: &ProgressBar,
) -> Result<PullReport> {
    let started = Instant::now();
    let mut report = fetch_retrying(store, remote, target, state, progress)?;
    let current = store.read_ref(&RefName::Current)?;
    report.current_before = current;
    report.current_after = current;
    let Some(theirs) = report.remote_current else {
        report.outcome = "empty-remote".into();
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    };
    let reason = MoveReason {
        action: "pull".into(),
        from: target.into(),
        to: String::new(),
    };
    let (before, forward) = ingest::fast_forward(
        store,
        &RefName::Current,
        theirs,
        &reason,
        |ours| {
            Error::conflict(format!(
            "history diverged (store_conflict): local current is {ours}, remote current is {theirs}"
        ))
        .with_hint(format!("the remote bundle was fetched as targets/{target} (see 'baton log targets/{target}'): 'baton merge targets/{target}' to keep both lines, or 'baton reset targets/{target}' to take theirs and save your work again on top (the old bundle stays in 'baton log --audit')"))
        },
    )?;
    report.current_before = before;
    report.current_after = match forward {
        Forward::Initial | Forward::FastForward => Some(theirs),
        Forward::UpToDate | Forward::LocalAhead => before,
    };
    report.outcome = forward.as_str().into();
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// Download everything the remote `current` needs that we lack, verify it, publish it
/// locally, and move `targets/<target>` (never `current`).
pub fn fetch(
    store: &Store,
    remote: &mut dyn BackendExt,
    target: &str,
    progress: &ProgressBar,
) -> Result<PullReport> {
    let state = remote_store::read_state(remote)?;
    fetch_retrying(store, remote, target, state, progress)
}

/// Looks at the remote a fetch may take: one, and one more for each merge of its packs
/// that ran under the fetch before.
const FETCH_ATTEMPTS: u32 = 5;

/// `fetch_from` against a pack listing that a merge (`gc --target`, SPEC 17.1) may
/// change under it: a listed pack deleted before it was read fails the fetch, and then
/// the store is looked at again and the fetch taken again; the merged pack, published
/// before any pack it replaces was deleted, is in the new listing. A failure with every
/// listed pack still there is the failure.
fn fetch_retrying(
    store: &Store,
    remote: &mut dyn BackendExt,
    target: &str,
    mut state: remote_store::RemoteState,
    progress: &ProgressBar,
) -> Result<PullReport> {
    let mut attempt = 1;
    loop {
        let listed: Vec<String> = state.packs.iter().map(|(_, e)| e.name.clone()).collect();
        let err = match fetch_from(store, remote, target, state, progress) {
            Err(e) if attempt < FETCH_ATTEMPTS => e,
            done => return done,
        };
        let Ok(now) = remote_store::read_state(remote) else {
            return Err(err);
        };
        let still: std::collections::HashSet<&str> =
            now.packs.iter().map(|(_, e)| e.name.as_str()).collect();
        if listed.iter().all(|name| still.contains(name.as_str())) {
            return Err(err);
        }
        tracing::debug!("a listed pack went while the fetch ran ({err}); looking again");
        state = now;
        attempt += 1;
    }
}

fn fetch_from(
    store: &Store,
    remote: &mut dyn BackendExt,
    target: &str,
    state: remote_store::RemoteState,
    progress: &ProgressBar,
) -> Result<PullReport> {
    if state.config.is_none() {
        return Err(
            Error::not_found(format!("no baton store at {}", remote.describe()))
                .with_hint("check the target URL, or push to create the remote store"),
        );
    }
    if let Some(config) = &state.config {
        remote_store::check_same_encryption(store, config, remote.describe().as_str())?;
    }
    let mut report = PullReport {
        remote_current: state.current,
        ..PullReport::default()
    };
    let Some(theirs) = state.current else {
        return Ok(report);
    };
    let mut packs = Packs::Keep;
    let listed: Vec<ObjectId> = state.packs.iter().map(|(id, _)| *id).collect();
    let mut held = Vec::new();
    if store.reachable(&[theirs]).is_err() {
        let mut ingest = Ingest::new(store);
        // A store with no objects yet (a clone) lacks everything in every pack.
        let empty = store.objects.is_empty()?;
        // Packs whose objects this store held at the last sync (it pushed them): read
        // by their index first; any other's body is most likely wanted whole.
        let known = super::target_hint::held_packs(store, target);
        progress.set_length(state.packs.iter().map(|(_, e)| e.size).sum());
        let wanted: Vec<_> = state
            .packs
            .iter()
            .filter(|(id, _)| !store.objects.packs_dir().join(pack_file_name(id)).exists())
            .collect();
        // The packs are read in this order: a transport may open and read them ahead.
        let expected: Vec<(String, u64, u64, bool)> = wanted
            .iter()
            .map(|(id, e)| {
                let body = empty || !known.contains(id);
                (e.name.clone(), e.size, index_tail_read(e.size), body)
            })
            .collect();
        remote.expect_tails(&Kind::Pack, &expected);
        for (pack_id, entry) in wanted {
            // The trailer and index first: a pack that is not what its listing declares
            // is refused before a byte of it is stored here. On the same open the rest
            // follows; a clone wants every pack whole, so its body is asked for with
            // the tail (and streams in behind it), and so does a pull for a pack it did
            // not push.
            let body = empty || !known.contains(pack_id);
            let (entries, open) = remote_pack_tail(remote, &entry.name, entry.size, body)?;
            held.push(*pack_id);
            if !empty && !entries.iter().any(|e| !store.objects.contains_name(&e.id)) {
                remote.close_tail(open);
                continue;
            }
            download_pack(
                &mut ingest,
                remote,
                pack_id,
                (entries, open),
                &entry.name,
                entry.size,
                progress,
            )?;
        }
        download_loose(store, &mut ingest, remote, &state.fanouts, progress)?;
        let described = format!("the remote store {}", remote.describe());
        let (objects, bytes) = ingest.complete(&theirs, &described)?;
        report.objects_received = objects;
        report.bytes_received = bytes;
        packs = Packs::Listed {
            listed: &listed,
            held: &held,
        };
    } else {
        // Everything is here already, but not necessarily checked: objects can be here
        // that no ref reaches (a refused pull of an older baton left its packs, an
        // interrupted one its objects), and a tree among them may lie about a size.
        store.check_received(&theirs)?;
    }
    let name = RefName::parse(&format!("targets/{target}"))?;
    if store.read_ref(&name)? != Some(theirs) {
        let reason = MoveReason {
            action: "fetch".into(),
            from: target.into(),
            to: String::new(),
        };
        store.update_ref(&name, Expect::Any, Some(theirs), &reason)?;
    }
    // The next push from here can read this generation with its upload.
    super::target_hint::remember(store, target, state.generation, state.current, packs);
    Ok(report)
}

/// Largest remote pack index read (48 bytes an entry: over five million objects).
pub const MAX_REMOTE_PACK_INDEX: u64 = 256 << 20;

/// The tail of a remote pack read first: its footer and index, or all of a pack that
/// small. At least 64 KiB (an index of about 1,300 objects), 1/128 of a larger pack (so
/// that the index of a pack of objects of 6 KiB or more on average comes with it), at
/// most 1 MiB; a longer index costs a second read.
fn index_tail_read(size: u64) -> u64 {
    (size / 128).clamp(64 << 10, 1 << 20)
}

/// Read and check a remote pack's footer and index (two ranges at its end), against
/// the size its listing declared: the footer must place the index exactly at the end of
/// a file of that size, and the entries must fill the object area, so that the size is
/// what the index declares and nothing undeclared is ever downloaded.
pub(crate) fn remote_pack_index(
    remote: &mut dyn BackendExt,
    name: &str,
    size: u64,
) -> Result<Vec<PackEntry>> {
    let (entries, open) = remote_pack_tail(remote, name, size, false)?;
    remote.close_tail(open);
    Ok(entries)
}

/// `remote_pack_index` on an open kept for the rest of the pack (`read_rest`, or
/// `close_tail`); `body`: the rest is wanted too (see `BackendExt::open_tail`). Closed
/// on every error.
fn remote_pack_tail(
    remote: &mut dyn BackendExt,
    name: &str,
    size: u64,
    body: bool,
) -> Result<(Vec<PackEntry>, OpenTail)> {
    let described = remote.describe();
    let bad = |why: String| {
        Error::integrity(format!(
            "remote pack {name} on {described} is invalid: {why}"
        ))
        .with_hint("nothing was downloaded or published; run 'baton verify' on the remote store")
    };
    if size < PACK_MAGIC.len() as u64 + FOOTER_LEN {
        return Err(bad(format!("it is {size} bytes, too short for a pack")));
    }
    // One read of the tail holds the footer and, for all but huge indexes, the index
    // (and a small pack whole): a second read fetches only the part of a longer index
    // that the tail missed.
    let open = remote.open_tail(&Kind::Pack, name, size, index_tail_read(size), body)?;
    match check_pack_tail(remote, &open, size, &bad) {
        Ok(entries) => Ok((entries, open)),
        Err(e) => {
            remote.close_tail(open);
            Err(e)
        }
    }
}

fn check_pack_tail(
    remote: &mut dyn BackendExt,
    open: &OpenTail,
    size: u64,
    bad: &dyn Fn(String) -> Error,
) -> Result<Vec<PackEntry>> {
    let tail = &open.tail;
    let tail_start = open.tail_start();
    if (tail.len() as u64) < FOOTER_LEN {
        return Err(bad("its tail could not be read".into()));
    }
    let footer = &tail[tail.len() - FOOTER_LEN as usize..];
    let (count, index_offset) = decode_footer(footer, size).map_err(|e| bad(e.message))?;
    let index_len = size - FOOTER_LEN - index_offset;
    if index_len > MAX_REMOTE_PACK_INDEX {
        return Err(bad(format!(
            "its index is {index_len} bytes (the limit is {MAX_REMOTE_PACK_INDEX})"
        )));
    }
    let index_end = size - FOOTER_LEN;
    let index = if index_offset >= tail_start {
        tail[(index_offset - tail_start) as usize..(index_end - tail_start) as usize].to_vec()
    } else {
        let mut index = remote.read_before_tail(open, index_offset, tail_start - index_offset)?;
        index.extend_from_slice(&tail[..(index_end - tail_start) as usize]);
        index
    };
    let entries = decode_index(&index, index_offset).map_err(|e| bad(e.message))?;
    if entries.len() as u64 != count {
        return Err(bad("its index count does not match".into()));
    }
    // Writers put the objects back to back (SPEC 7): the area holds exactly them.
    let declared: u64 = entries.iter().map(|e| e.length).sum();
    let area = index_offset - PACK_MAGIC.len() as u64;
    if declared != area {
        return Err(bad(format!(
            "its index declares {declared} bytes of objects in an object area of {area}"
        )));
    }
    Ok(entries)
}

/// Download one pack (its `entries` read and checked by `remote_pack_tail`, on the open
/// it kept, which brought the whole pack when it is small), verified object by object
/// as it arrives and never read past the size its listing declared, and keep it for
/// `Ingest::complete` to publish (`Ingest::receive_pack`).
fn download_pack(
    ingest: &mut Ingest,
    remote: &mut dyn BackendExt,
    pack_id: &ObjectId,
    (entries, open): (Vec<PackEntry>, OpenTail),
    name: &str,
    size: u64,
    progress: &ProgressBar,
) -> Result<()> {
    let mut open = Some(open);
    let result = ingest.receive_pack(pack_id, entries, size, |writer| {
        let mut sink = ProgressWriter {
            inner: writer,
            progress,
        };
        let Some(open) = open.take() else {
            return Err(Error::internal("pack download started twice"));
        };
        if open.tail_start() == 0 {
            // Read with the index already: verified the same way as it is stored.
            let written = sink
                .write_all(&open.tail)
                .map_err(|e| Error::other(format!("cannot store pack {name}: {e}")));
            remote.close_tail(open);
            return written;
        }
        remote.read_rest(open, &mut sink)
    });
    if let Some(open) = open {
        remote.close_tail(open);
    }
    result
}

/// Download every loose object of the remote that we lack; each is verified on arrival.
fn download_loose(
    store: &Store,
    ingest: &mut Ingest,
    remote: &mut dyn BackendExt,
    fanouts: &[String],
    progress: &ProgressBar,
) -> Result<()> {
    if fanouts.is_empty() {
        return Ok(());
    }
    let lists: Vec<Listing> = fanouts.iter().cloned().map(Listing::Fanout).collect();
    let (_, listings) = remote.read_and_list(&[], &lists, 0)?;
    let mut small = Vec::new();
    let mut large = Vec::new();
    for (fanout, listing) in fanouts.iter().zip(listings) {
        for entry in listing.unwrap_or_default() {
            let name = format!("{fanout}{}", entry.name);
            let Ok(id) = ObjectId::parse(&name) else {
                continue;
            };
            // `id` is the storage name (the object id in a plain store).
            if store.objects.contains_name(&id) {
                continue;
            }
            if entry.size <= BATCHED_LOOSE_LIMIT {
                small.push((id, name))
            } else {
                large.push((id, name, entry.size))
            }
        }
    }
    for chunk in small.chunks(256) {
        let items: Vec<(Kind, String)> = chunk
            .iter()
            .map(|(_, n)| (Kind::Loose, n.clone()))
            .collect();
        let (files, _) = remote.read_and_list(&items, &[], BATCHED_LOOSE_LIMIT)?;
        for ((id, name), data) in chunk.iter().zip(files) {
            let data = data.ok_or_else(|| {
                Error::new(
                    ErrorKind::Transport,
                    format!(
                        "remote object {} vanished",
                        layout::path(&Kind::Loose, name)
                    ),
                )
            })?;
            ingest.receive_loose(id, &data)?;
            progress.inc(data.len() as u64);
        }
    }
    for (id, name, size) in large {
        ingest.receive_loose_stream(&id, size, |writer| {
            // The size the listing declared, and not a byte more.
            let mut sink = ProgressWriter {
                inner: writer,
                progress,
            };
            remote.read_sized(&Kind::Loose, &name, size, &mut sink)
        })?;
    }
    Ok(())
}

struct ProgressWriter<'a, W: Write> {
    inner: W,
    progress: &'a ProgressBar,
}

impl<W: Write> Write for ProgressWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.progress.inc(n as u64);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
