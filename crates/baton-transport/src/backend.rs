//! The backend traits: what sync asks of a remote store, by kind and name (restic's shape),
//! never by path. `Backend` is the core a new backend writes (ten methods: read, list,
//! stream, create an item and delete one); `BackendExt` is what a backend does in fewer
//! round trips or needs besides (twelve methods, each with a default over the core), and
//! is the type sync holds. Path transports (a local directory, SFTP) get both from
//! `Remote` and `Pipelined` (`backend/path_adapter.rs`); the S3 backend (`s3.rs`)
//! implements the core and overrides a few of the extension's defaults.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Published, RemoteEntry, Upload};
use baton_error::{Error, Result};
use baton_format::layout::{self, Kind};
use baton_store::leftovers;

mod path_adapter;

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

impl Listing {
    /// Where the listing looks, relative to the store's top (a path, or a key prefix).
    pub fn rel(&self) -> String {
        match self {
            Listing::Root => String::new(),
            Listing::Of(kind) => layout::dir(kind),
            Listing::Fanout(name) => format!("{}/{name}", layout::OBJECTS),
            Listing::Leftovers => layout::STAGING.to_string(),
        }
    }
}

/// A new item being streamed before its name is known.
#[derive(Debug)]
pub struct NewItem {
    staging: String,
    /// A store created with the item (`begin_new` with `Some(config)`): its small files, `config`
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

/// Reads and listings begun by `BackendExt::start_reads`, answered by `collect_reads`.
#[derive(Debug)]
pub struct PendingReads {
    reads: Vec<(Kind, String)>,
    lists: Vec<Listing>,
    limit: u64,
    /// The transport's own token when it split the batch; `None`: `collect_reads`
    /// reads it all then.
    token: Option<u64>,
}

/// An item whose last bytes `BackendExt::open_tail` read, kept open (where the transport
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

/// A remote store's storage, by kind and name: the core every backend implements. What
/// it can do in fewer round trips (split batches, items kept open, directories opened
/// ahead) is `BackendExt`, whose defaults are written over these methods.
pub trait Backend {
    /// Where this is, for messages.
    fn describe(&self) -> String;

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

    /// Stream an item of exactly `len` bytes into `sink`, reading nothing past `len`.
    fn read_sized(&mut self, kind: &Kind, name: &str, len: u64, sink: &mut dyn Write)
    -> Result<()>;

    /// Start an item whose name is known only once it is written (a pack named by its
    /// hash); write it with `upload_with`, then `publish_chain` or `abandon`. `store`:
    /// the remote has no store yet, and this `config` creates it with the item: its
    /// directories now, its small files with `config` last staged with the item
    /// (`upload_with`) and published in the same batch before it (`publish_chain`): a
    /// store with a config is complete.
    fn begin_new(&mut self, store: Option<Vec<u8>>) -> Result<NewItem>;

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

    /// Give a written item its name alone, never over an existing item (a merged pack,
    /// which no ref waits for: `gc --target`).
    fn publish_item(&mut self, item: &NewItem, kind: &Kind, name: &str) -> Result<Published>;

    /// Remove a begun item's staging once its items are published (`all`), else
    /// whatever is left of it (best effort: a leftover is swept later).
    fn close_new(&mut self, item: NewItem, all: bool);

    /// Delete an item (garbage collection, a merged pack, a probe): `false` when it was
    /// not there. Only packs and loose objects are ever deleted: the config, the log and
    /// ref generations are the store's history (SPEC sections 8, 9 and 17).
    fn delete(&mut self, kind: &Kind, name: &str) -> Result<bool>;
}

/// What a backend does in fewer round trips than the core calls one after the other, or
/// needs besides them: reads split in two steps, an item's tail read on an open kept for
/// the rest, reads announced ahead, directories made and opened before a publish, what
/// interrupted writers left swept. Every method has a default written over `Backend`, so
/// a backend overrides only what it gains from (a path transport nearly all of it; S3
/// `retries_itself` and `sweep_leftovers`). Sync holds a `dyn BackendExt`.
pub trait BackendExt: Backend {
    /// Whether a transport error of this backend already comes after its own retries
    /// within a deadline (object storage), so that looking again would only multiply the
    /// wait; a path transport's error is one failed request.
    fn retries_itself(&self) -> bool {
        false
    }

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

    /// Get ready to create items of `kinds` soon: nothing by default (object storage has
    /// no directories). A path store made by an older baton may lack their directories,
    /// and SFTP opens them now so that each later publish costs one round trip.
    fn prepare(&mut self, _kinds: &[Kind]) -> Result<()> {
        Ok(())
    }

    /// `prepare` for a store known to have the directories (a push that trusts its
    /// hint, so nothing is made in a location that may no longer hold the store).
    fn prepare_in_existing_dirs(&mut self, kinds: &[Kind]) -> Result<()> {
        self.prepare(kinds)
    }

    /// Forget a begun item that will not be published (best effort: a leftover is swept
    /// later): `close_new` of an unpublished item by default; a path transport also lets
    /// go of what `prepare` opened for its publish.
    fn abandon(&mut self, item: NewItem) {
        self.close_new(item, false);
    }

    /// Remove what interrupted writers left (entries of `Listing::Leftovers`) that are
    /// stale or were left by a dead process of this host: nothing by default (a backend
    /// that stages its items locally leaves nothing on the server).
    fn sweep_leftovers(&mut self, _listed: &[RemoteEntry]) {}

    /// `delete` of each of `names` (S3: many requests at once), whether each was there.
    fn delete_many(&mut self, kind: &Kind, names: &[String]) -> Result<Vec<bool>> {
        names.iter().map(|name| self.delete(kind, name)).collect()
    }
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

/// The refusal of deleting history (a bug in the caller, never input): what `delete`
/// answers for anything but a pack or a loose object.
pub fn refuse_delete(kind: &Kind, name: &str) -> Result<bool> {
    Err(Error::internal(format!(
        "refusing to delete {}: config, log and ref generations are never deleted",
        layout::path(kind, name)
    )))
}

/// The small files of a new store, `config` last (what `begin_new` stages with the item
/// when it creates the store).
pub fn new_store_files(config: Vec<u8>) -> Vec<(String, Vec<u8>)> {
    layout::INITIAL_FILES
        .iter()
        .map(|(name, bytes)| (name.to_string(), bytes.to_vec()))
        .chain([(layout::CONFIG.to_string(), config)])
        .collect()
}

#[cfg(test)]
mod tests;
