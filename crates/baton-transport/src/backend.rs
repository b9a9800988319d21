//! The backend trait: what sync asks of a remote store, by kind and name (restic's shape),
//! never by path. Path transports (a local directory, SFTP) get it from `Remote` and
//! `Pipelined` below:
//! `format::layout` maps kinds to paths, and atomic creation is a staging directory plus a
//! no-clobber rename, all inside this file. An object-storage backend implements the trait
//! directly (conditional PUTs need no staging). Each call the adapter makes on a path
//! transport is a trace event (`trace.rs`), so no wrapper re-forwards the transport's methods.

use std::io::Write;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::{Pipelined, Published, Remote, RemoteEntry, Step, Upload, trace};
use baton_error::{Error, Result};
use baton_format::layout::{self, Kind};
use baton_store::leftovers;

/// What one listing of a batch lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listing {
    /// The store's top directory (to refuse creating a store beside other files).
    Root,
    /// Every item of a kind (loose objects: the fan-out directories).
    Of(Kind),
    /// The loose objects of one fan-out directory (a name from `Of(Kind::Loose)`).
    Fanout(String),
    /// What interrupted writers left behind (for `sweep_leftovers`).
    Leftovers,
}

/// A new item being streamed before its name is known.
#[derive(Debug)]
pub struct NewItem {
    staging: String,
    /// A store created with the item (`begin_new_store`): its small files, `config`
    /// last, staged beside the item and published before it.
    store: Vec<(String, Vec<u8>)>,
}

impl NewItem {
    /// An item of a backend that keeps its own staging state under `key` (S3).
    pub fn with_key(key: String) -> NewItem {
        NewItem {
            staging: key,
            store: Vec::new(),
        }
    }

    /// The key given to `with_key` (or the staging directory of a path backend).
    pub fn key(&self) -> &str {
        &self.staging
    }
}

/// What `publish_chain` did.
#[derive(Debug, PartialEq, Eq)]
pub struct Chain {
    /// The store's `config`, when the item was begun with its store (`Exists`: a twin
    /// created the store at the same time, and its config won).
    pub store: Option<Published>,
    pub item: Published,
    pub then: Published,
}

/// Reads and listings begun by `Backend::start_reads`, answered by `collect_reads`.
#[derive(Debug)]
pub struct PendingReads {
    reads: Vec<(Kind, String)>,
    lists: Vec<Listing>,
    limit: u64,
    /// The transport's own token when it split the batch; `None`: `collect_reads`
    /// reads it all then.
    token: Option<u64>,
}

/// An item whose last bytes `Backend::open_tail` read, kept open (where the transport
/// can) so that reading the rest costs no second open: pass it to `read_before_tail`,
/// then `read_rest` or `close_tail`.
#[derive(Debug)]
pub struct OpenTail {
    kind: Kind,
    name: String,
    size: u64,
    /// The item's last bytes, at `tail_start()`: all of it when that is 0.
    pub tail: Vec<u8>,
    /// The transport's open, if it kept one.
    token: Option<u64>,
}

impl OpenTail {
    /// The offset of `tail` in the item.
    pub fn tail_start(&self) -> u64 {
        self.size - self.tail.len() as u64
    }
}

/// A remote store's storage, by kind and name.
pub trait Backend {
    /// Where this is, for messages.
    fn describe(&self) -> String;

    /// Whether a transport error of this backend already comes after its own retries
    /// within a deadline (object storage), so that looking again would only multiply the
    /// wait; a path transport's error is one failed request.
    fn retries_itself(&self) -> bool {
        false
    }

    /// Read small items (missing: `None`; larger than `limit`: an error) and list, in one
    /// batch. Each listing is taken after every read has been answered (or, over SFTP,
    /// after the opens of the files, which the server carries out first): a listing then
    /// holds every pack and object published before any ref generation read.
    #[allow(clippy::type_complexity)]
    fn read_and_list(
        &mut self,
        reads: &[(Kind, String)],
        lists: &[Listing],
        limit: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)>;

    /// `len` bytes of an item at `offset`.
    fn read_range(&mut self, kind: &Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>>;

    /// `read_and_list` in two steps, so that it rides with the batches sent between them
    /// (SFTP: the opens go now, the reads as soon as the next `upload_with` has its own
    /// opens answered, and `collect_reads` takes the answers). A backend that does not
    /// split a batch reads it all at `collect_reads`: correct, only not faster.
    fn start_reads(
        &mut self,
        reads: &[(Kind, String)],
        lists: &[Listing],
        limit: u64,
    ) -> Result<PendingReads> {
        Ok(PendingReads {
            reads: reads.to_vec(),
            lists: lists.to_vec(),
            limit,
            token: None,
        })
    }

    /// The answers of started reads, as `read_and_list` gives them.
    #[allow(clippy::type_complexity)]
    fn collect_reads(
        &mut self,
        pending: PendingReads,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        self.read_and_list(&pending.reads, &pending.lists, pending.limit)
    }

    /// Stream an item of exactly `len` bytes into `sink`, reading nothing past `len`.
    fn read_sized(&mut self, kind: &Kind, name: &str, len: u64, sink: &mut dyn Write)
    -> Result<()>;

    /// Read the last `tail_len` bytes of an item of exactly `size` bytes (a pack's index
    /// and footer) on an open that the transport keeps for the rest (SFTP: one open per
    /// item, not two). `body`: the rest is most likely wanted too (a clone), so the
    /// transport may start reading it at once; it is still only handed over by
    /// `read_rest`, and `close_tail` drops what came early.
    fn open_tail(
        &mut self,
        kind: &Kind,
        name: &str,
        size: u64,
        tail_len: u64,
        _body: bool,
    ) -> Result<OpenTail> {
        let tail_len = tail_len.min(size);
        let tail = self.read_range(kind, name, size - tail_len, tail_len)?;
        Ok(OpenTail {
            kind: kind.clone(),
            name: name.to_string(),
            size,
            tail,
            token: None,
        })
    }

    /// `len` bytes at `offset` (before the tail) of an item opened by `open_tail`.
    fn read_before_tail(&mut self, item: &OpenTail, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.read_range(&item.kind, &item.name, offset, len)
    }

    /// The whole item opened by `open_tail` into `sink` (its bytes before the tail, then
    /// the tail), reading nothing past its size, which is checked again at the end.
    fn read_rest(&mut self, item: OpenTail, sink: &mut dyn Write) -> Result<()> {
        self.read_sized(&item.kind, &item.name, item.size, sink)
    }

    /// Close an item opened by `open_tail` without reading the rest.
    fn close_tail(&mut self, _item: OpenTail) {}

    /// The items of `kind` that `open_tail` will be asked for next, in this order: (name,
    /// size, tail_len, body) each (see `Pipelined::expect_tails`).
    fn expect_tails(&mut self, _kind: &Kind, _items: &[(String, u64, u64, bool)]) {}

    /// Get ready to create items of `kinds` soon (a store made by an older baton may lack
    /// their directories; SFTP opens them now so that each later publish costs one round
    /// trip).
    fn prepare(&mut self, kinds: &[Kind]) -> Result<()>;

    /// `prepare` for a store known to have the directories (a push that trusts its
    /// hint, so nothing is made in a location that may no longer hold the store).
    fn prepare_in_existing_dirs(&mut self, kinds: &[Kind]) -> Result<()> {
        self.prepare(kinds)
    }

    /// Start an item whose name is known only once it is written (a pack named by its
    /// hash); write it with `upload_with`, then `publish_chain` or `abandon`.
    fn begin_new(&mut self) -> Result<NewItem>;

    /// `begin_new` for a remote without a store: the store is created with the item,
    /// its directories now, its small files with `config` last staged with the item
    /// (`upload_with`) and published in the same batch before it (`publish_chain`): a
    /// store with a config is complete.
    fn begin_new_store(&mut self, config: Vec<u8>) -> Result<NewItem>;

    /// The stream into a begun item, with small items `beside` (name, bytes) staged with
    /// it: written, fsynced and read back in the upload's own batches (`finish` fails if
    /// one does not read back exactly).
    fn upload_with(
        &mut self,
        item: &NewItem,
        beside: &[(String, Vec<u8>)],
    ) -> Result<Box<dyn Upload + '_>>;

    /// Give a written item its name, never over an existing item, and then, only if that happened,
    /// give the small item `then.0` staged beside it the name `then.2` of kind `then.1`,
    /// in one batch (a pack, then the ref generation that needs it: one round trip). The
    /// item's name taken means nothing of `then` was published (both `Exists`): check
    /// the existing item, then `publish_beside`. A store begun with the item is
    /// published first.
    fn publish_chain(
        &mut self,
        item: &NewItem,
        kind: &Kind,
        name: &str,
        then: (&str, &Kind, &str),
    ) -> Result<Chain>;

    /// Give the small item `staged` of a begun item its name, never over an existing one.
    fn publish_beside(
        &mut self,
        item: &NewItem,
        staged: &str,
        kind: &Kind,
        name: &str,
    ) -> Result<Published>;

    /// Remove a begun item's staging once its items are published (`all`), else
    /// whatever is left of it (best effort: a leftover is swept later).
    fn close_new(&mut self, item: NewItem, all: bool);

    /// Forget a begun item (best effort: a leftover is swept later).
    fn abandon(&mut self, item: NewItem);

    /// Remove what interrupted writers left (entries of `Listing::Leftovers`) that are
    /// stale or were left by a dead process of this host.
    fn sweep_leftovers(&mut self, listed: &[RemoteEntry]);

    /// Delete an item (garbage collection, a merged pack, a probe): `false` when it was
    /// not there. Only packs and loose objects are ever deleted: the config, the log and
    /// ref generations are the store's history (SPEC sections 8, 9 and 17).
    fn delete(&mut self, kind: &Kind, name: &str) -> Result<bool>;
}

/// Where a store file of `item` is staged.
fn store_staged(item: &NewItem, name: &str) -> String {
    format!("{}/store{name}", item.staging)
}

/// A fresh, unique staging directory name: host, pid and time.
pub fn staging_name() -> String {
    let host = leftovers::this_host();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{host}-{}-{nanos}", std::process::id())
}

fn listing_path(listing: &Listing) -> String {
    match listing {
        Listing::Root => String::new(),
        Listing::Of(kind) => layout::dir(kind),
        Listing::Fanout(name) => format!("{}/{name}", layout::OBJECTS),
        Listing::Leftovers => layout::STAGING.to_string(),
    }
}

/// Run `f`, the call `call` on a path transport, and trace it (`trace::call`): `waited`
/// when it waits for its answer.
fn traced<R: Pipelined + ?Sized, T>(
    remote: &mut R,
    call: &'static str,
    waited: bool,
    what: impl FnOnce() -> String,
    f: impl FnOnce(&mut R) -> Result<T>,
) -> Result<T> {
    let t0 = Instant::now();
    let result = f(remote);
    trace::call(call, what, waited, t0, remote.round_trips(), &result);
    result
}

fn make_dirs<R: Pipelined + ?Sized>(remote: &mut R, dirs: &[String]) -> Result<()> {
    let what = || format!("make_dirs {dirs:?} (not waited for)");
    traced(remote, "make_dirs", false, what, |r| r.make_dirs(dirs))
}

fn prepare_publish<R: Pipelined + ?Sized>(remote: &mut R, dirs: &[String]) -> Result<()> {
    let what = || format!("prepare_publish {dirs:?} (not waited for)");
    traced(remote, "prepare_publish", false, what, |r| {
        r.prepare_publish(dirs)
    })
}

fn remove_dir_all<R: Pipelined + ?Sized>(remote: &mut R, dir: &str) -> Result<()> {
    let what = || format!("remove_dir_all {dir}");
    traced(remote, "remove_dir_all", true, what, |r| {
        r.remove_dir_all(dir)
    })
}

/// The refusal of deleting history (a bug in the caller, never input).
fn refuse_delete(kind: &Kind, name: &str) -> Result<bool> {
    Err(Error::internal(format!(
        "refusing to delete {}: config, log and ref generations are never deleted",
        layout::path(kind, name)
    )))
}

impl<T: Pipelined + ?Sized> Backend for T {
    fn describe(&self) -> String {
        Remote::describe(self)
    }

    fn read_and_list(
        &mut self,
        reads: &[(Kind, String)],
        lists: &[Listing],
        limit: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        let files: Vec<String> = reads.iter().map(|(k, n)| layout::path(k, n)).collect();
        let dirs: Vec<String> = lists.iter().map(listing_path).collect();
        let what = || format!("read_many {files:?} {dirs:?}");
        traced(self, "read_many", true, what, |r| {
            r.read_many(&files, &dirs, limit)
        })
    }

    fn read_range(&mut self, kind: &Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let path = layout::path(kind, name);
        let what = || format!("read_range {path} {offset}+{len}");
        traced(self, "read_range", true, what, |r| {
            Remote::read_range(r, &path, offset, len)
        })
    }

    fn start_reads(
        &mut self,
        reads: &[(Kind, String)],
        lists: &[Listing],
        limit: u64,
    ) -> Result<PendingReads> {
        let files: Vec<String> = reads.iter().map(|(k, n)| layout::path(k, n)).collect();
        let dirs: Vec<String> = lists.iter().map(listing_path).collect();
        let what = || format!("start_reads {files:?} {dirs:?} (not waited for)");
        let token = traced(self, "start_reads", false, what, |r| {
            Pipelined::start_reads(r, &files, &dirs, limit)
        })?;
        Ok(PendingReads {
            reads: reads.to_vec(),
            lists: lists.to_vec(),
            limit,
            token,
        })
    }

    fn collect_reads(
        &mut self,
        pending: PendingReads,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        match pending.token {
            Some(token) => traced(
                self,
                "collect_reads",
                true,
                || "collect_reads".into(),
                |r| Pipelined::collect_reads(r, token),
            ),
            None => self.read_and_list(&pending.reads, &pending.lists, pending.limit),
        }
    }

    fn read_sized(
        &mut self,
        kind: &Kind,
        name: &str,
        len: u64,
        sink: &mut dyn Write,
    ) -> Result<()> {
        let path = layout::path(kind, name);
        let what = || format!("read_file_sized {path} {len}");
        traced(self, "read_file_sized", true, what, |r| {
            r.read_file_sized(&path, len, sink)
        })
    }

    fn open_tail(
        &mut self,
        kind: &Kind,
        name: &str,
        size: u64,
        tail_len: u64,
        body: bool,
    ) -> Result<OpenTail> {
        let path = layout::path(kind, name);
        let what = || {
            let body = if body { " and the body" } else { "" };
            format!("open_tail {path} {size} (last {tail_len}{body})")
        };
        let (tail, token) = traced(self, "open_tail", true, what, |r| {
            Pipelined::open_tail(r, &path, size, tail_len, body)
        })?;
        Ok(OpenTail {
            kind: kind.clone(),
            name: name.to_string(),
            size,
            tail,
            token,
        })
    }

    fn read_before_tail(&mut self, item: &OpenTail, offset: u64, len: u64) -> Result<Vec<u8>> {
        let path = layout::path(&item.kind, &item.name);
        let what = || format!("read_open {path} {offset}+{len}");
        traced(self, "read_open", true, what, |r| {
            Pipelined::read_open(r, item.token, &path, offset, len)
        })
    }

    fn read_rest(&mut self, item: OpenTail, sink: &mut dyn Write) -> Result<()> {
        let path = layout::path(&item.kind, &item.name);
        // A kept open streams on (the transport counts its own round trips); without one
        // the file is read again, a call that waits.
        let what = || format!("read_rest {path} {}", item.size);
        traced(self, "read_rest", item.token.is_none(), what, |r| {
            Pipelined::read_rest(r, item.token, &path, item.size, &item.tail, sink)
        })
    }

    fn close_tail(&mut self, item: OpenTail) {
        let path = layout::path(&item.kind, &item.name);
        let what = || format!("close_tail {path} (not waited for)");
        let _ = traced(self, "close_tail", false, what, |r| {
            Pipelined::close_tail(r, item.token, &path);
            Ok(())
        });
    }

    fn expect_tails(&mut self, kind: &Kind, items: &[(String, u64, u64, bool)]) {
        let files: Vec<(String, u64, u64, bool)> = items
            .iter()
            .map(|(name, size, tail, body)| (layout::path(kind, name), *size, *tail, *body))
            .collect();
        let what = || format!("expect_tails of {} files (not waited for)", files.len());
        let _ = traced(self, "expect_tails", false, what, |r| {
            Pipelined::expect_tails(r, &files);
            Ok(())
        });
    }

    fn prepare(&mut self, kinds: &[Kind]) -> Result<()> {
        let dirs: Vec<String> = kinds
            .iter()
            .map(layout::dir)
            .filter(|d| !d.is_empty())
            .collect();
        // Directories first: SFTP sends the requests in order, and opens them next.
        let mut all = dirs.clone();
        all.push(layout::STAGING.to_string());
        make_dirs(self, &all)?;
        prepare_publish(self, &dirs)
    }

    fn prepare_in_existing_dirs(&mut self, kinds: &[Kind]) -> Result<()> {
        let dirs: Vec<String> = kinds
            .iter()
            .map(layout::dir)
            .filter(|d| !d.is_empty())
            .collect();
        prepare_publish(self, &dirs)
    }

    fn begin_new(&mut self) -> Result<NewItem> {
        let staging = layout::staging_dir(&staging_name());
        make_dirs(self, std::slice::from_ref(&staging))?;
        Ok(NewItem {
            staging,
            store: Vec::new(),
        })
    }

    fn begin_new_store(&mut self, config: Vec<u8>) -> Result<NewItem> {
        let dirs: Vec<String> = std::iter::once("")
            .chain(layout::DIRS)
            .map(|d| d.to_string())
            .collect();
        make_dirs(self, &dirs)?;
        // The top directory too: its files are published with a directory fsync each.
        let publish_into = [
            String::new(),
            layout::dir(&Kind::Pack),
            layout::dir(&Kind::Generation(baton_format::names::RefName::Current)),
        ];
        prepare_publish(self, &publish_into)?;
        let mut item = self.begin_new()?;
        item.store = layout::INITIAL_FILES
            .iter()
            .map(|(name, bytes)| (name.to_string(), bytes.to_vec()))
            .chain([(layout::CONFIG.to_string(), config)])
            .collect();
        Ok(item)
    }

    fn upload_with(
        &mut self,
        item: &NewItem,
        beside: &[(String, Vec<u8>)],
    ) -> Result<Box<dyn Upload + '_>> {
        let beside: Vec<(String, Vec<u8>)> = beside
            .iter()
            .map(|(n, b)| (format!("{}/{n}", item.staging), b.clone()))
            .chain(
                item.store
                    .iter()
                    .map(|(n, b)| (store_staged(item, n), b.clone())),
            )
            .collect();
        let path = format!("{}/item", item.staging);
        if !trace::enabled() {
            return self.create_with(&path, &beside);
        }
        let t0 = Instant::now();
        let r = self.create_with(&path, &beside);
        let names: Vec<&String> = beside.iter().map(|(n, _)| n).collect();
        tracing::debug!(
            target: trace::TARGET,
            kind = "upload",
            call = "create",
            what = %format_args!("create {path} beside {names:?}"),
            ms = trace::ms(t0),
            waited = true,
            error = r.is_err()
        );
        Ok(Box::new(trace::TracedUpload { inner: r?, path }))
    }

    fn publish_chain(
        &mut self,
        item: &NewItem,
        kind: &Kind,
        name: &str,
        (staged, then_kind, then_name): (&str, &Kind, &str),
    ) -> Result<Chain> {
        // A store's small files first, `config` last of them (each may exist already:
        // a half-made store, or a twin creating it at the same time).
        let mut steps: Vec<Step> = item
            .store
            .iter()
            .map(|(n, _)| Step::Rename {
                from: store_staged(item, n),
                to: n.clone(),
                sync: true,
            })
            .collect();
        let first = steps.len();
        // Each step of the chain fails when the one before did, so it stops at a failure
        // although every request is sent at once: the item moved away is what lets
        // `item` be made a directory, only a directory takes the small item in, and only
        // from there is it published.
        let at = format!("{}/item", item.staging);
        steps.extend([
            Step::Rename {
                from: at.clone(),
                to: layout::path(kind, name),
                sync: true,
            },
            Step::MkDir(at.clone()),
            Step::Rename {
                from: format!("{}/{staged}", item.staging),
                to: format!("{at}/{staged}"),
                sync: false,
            },
            Step::Rename {
                from: format!("{at}/{staged}"),
                to: layout::path(then_kind, then_name),
                sync: true,
            },
            // Emptied by the steps before when they all went through: removed in the same
            // batch, whose replies are waited for anyway. Removals sent after it and not
            // waited for were sometimes lost when the client hung up right after sending
            // them, leaving the staging directory for a later push to sweep.
            Step::RmDir(at.clone()),
            Step::RmDir(item.staging.clone()),
        ]);
        let what = || format!("run_in_order {steps:?}");
        let done = traced(self, "run_in_order", true, what, |r| r.run_in_order(&steps))?;
        let outcome = |ok: bool| {
            if ok {
                Published::Done
            } else {
                Published::Exists
            }
        };
        Ok(Chain {
            store: (first > 0).then(|| outcome(done[first - 1])),
            item: outcome(done[first]),
            then: outcome(done[first] && done[first + 3]),
        })
    }

    fn publish_beside(
        &mut self,
        item: &NewItem,
        staged: &str,
        kind: &Kind,
        name: &str,
    ) -> Result<Published> {
        let moves = [(
            format!("{}/{staged}", item.staging),
            layout::path(kind, name),
        )];
        let what = || format!("publish {moves:?}");
        let mut outcomes = traced(self, "publish", true, what, |r| r.publish_many(&moves))?;
        Ok(outcomes.pop().unwrap_or(Published::Done))
    }

    fn close_new(&mut self, item: NewItem, all: bool) {
        // A chain that went through whole removed its staging directory in its own last
        // steps; what is left of one that did not goes here.
        if !all {
            let _ = remove_dir_all(self, &item.staging);
        }
    }

    fn abandon(&mut self, item: NewItem) {
        self.forget_prepared();
        let _ = remove_dir_all(self, &item.staging);
    }

    fn sweep_leftovers(&mut self, listed: &[RemoteEntry]) {
        let sweep = leftovers::RemoteSweep::now();
        for entry in listed {
            if entry.is_dir && sweep.removable(&entry.name, entry.mtime) {
                let _ = remove_dir_all(self, &layout::staging_dir(&entry.name));
            }
        }
    }

    fn delete(&mut self, kind: &Kind, name: &str) -> Result<bool> {
        match kind {
            Kind::Pack | Kind::Loose => {
                let path = layout::path(kind, name);
                let what = || format!("remove_file {path}");
                traced(self, "remove_file", true, what, |r| r.remove_file(&path))
            }
            Kind::Config | Kind::Log | Kind::Generation(_) => refuse_delete(kind, name),
        }
    }
}

#[cfg(test)]
mod tests;
