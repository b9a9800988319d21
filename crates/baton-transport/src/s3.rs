//! The S3 backend: a store's items as objects under `PREFIX/` of a bucket, at the same
//! paths as a path store (`format::layout`, so a copy of the bucket is a store). There is
//! no staging on the server: a begun item is streamed into a local temporary file, and
//! publishing is a conditional create (`If-None-Match: *`) under its final name, which is
//! the compare-and-swap of the ref generations (SPEC section 12). object_store does the
//! requests (SigV4, retries with backoff) on a current-thread tokio runtime: the rest of
//! baton stays synchronous. What a hostile server can make it read is bounded
//! (`limits.rs`), and what it claims to have stored is read back (`upload.rs`).

mod http;
mod limits;
mod list;
pub mod settings;
mod tries;
mod upload;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path;
use object_store::{
    ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
    PutPayload, RetryConfig,
};

use super::backend::{
    Backend, BackendExt, Chain, Listing, NewItem, new_store_files, refuse_delete, staging_name,
};
use super::error::TransportError;
use super::{Published, RemoteEntry, Upload};
use baton_error::{Error, Result};
use baton_format::layout::{self, Kind};
use baton_store::leftovers;
use http::{CountingConnector, Counts, map_error};
pub use settings::S3Options;
use upload::{S3Upload, Staged};

/// Items larger than this go up as multipart uploads (`BATON_S3_MULTIPART_ABOVE` bytes).
const MULTIPART_ABOVE: u64 = 64 << 20;
/// The part size of a multipart upload, and how many parts are in flight at once.
const PART_SIZE: usize = 8 << 20;
const PARTS_IN_FLIGHT: usize = 4;
/// How long connecting, and one request, may take unless `--timeout` says otherwise (a
/// single PUT carries up to `MULTIPART_ABOVE` bytes).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
/// How often a failed request is retried at most (object_store's default), within the
/// retry deadline (`settings::retry_timeout`).
const MAX_RETRIES: usize = 10;
/// GETs and LISTs in flight at once in one `read_and_list`.
const READS_IN_FLIGHT: usize = 32;
/// How much of a published item's end is read back when the caller named no ranges.
const TAIL_CHECK: u64 = 64 << 10;

pub struct S3Backend {
    s3: AmazonS3,
    rt: tries::ClientRuntime,
    bucket: String,
    /// The endpoint the requests go to, when it is not AWS's (named in errors: "check the
    /// endpoint" is no help without it).
    endpoint: Option<String>,
    /// `PREFIX/`, or empty for the bucket's top.
    prefix: String,
    staged: HashMap<String, Staged>,
    /// Whether this process checked that the server refuses a second conditional create.
    probed: bool,
    /// Whether it checked the same under `refs/` (`probe_refs`; set by a future that
    /// runs beside the pack's upload, hence atomic).
    refs_probed: AtomicBool,
    /// The newest ref generation this process read, per ref directory: its path and
    /// bytes (what `probe_refs` re-creates).
    generations_read: BTreeMap<String, (String, Vec<u8>)>,
    multipart_above: u64,
    counts: Arc<Counts>,
}

/// The one line a probe failure prints (also what the tests look for).
pub const PROBE_FAILED: &str = "this server ignored If-None-Match: its conditional writes cannot serve as baton's compare-and-swap";

impl S3Backend {
    /// A backend for `s3://bucket/prefix`; nothing is sent until the first call.
    pub fn open(bucket: &str, prefix: &str, options: &S3Options) -> Result<Self> {
        tracing::debug!(target: crate::trace::TARGET, kind = "opened");
        let endpoint = settings::endpoint(options)?;
        let region = settings::region(options)?;
        let retry = RetryConfig {
            retry_timeout: settings::retry_timeout()?,
            max_retries: MAX_RETRIES,
            ..RetryConfig::default()
        };
        let counts = Arc::new(Counts::default());
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_region(region)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_retry(retry)
            .with_client_options(
                ClientOptions::new()
                    .with_connect_timeout(options.timeout.unwrap_or(CONNECT_TIMEOUT))
                    .with_timeout(options.timeout.unwrap_or(REQUEST_TIMEOUT)),
            )
            .with_http_connector(CountingConnector {
                counts: counts.clone(),
            })
            .with_allow_http(false)
            // One DELETE per key (not a POST of a batch): every server has it.
            // Path-style requests unless AWS_VIRTUAL_HOSTED_STYLE_REQUEST=true says otherwise
            // (object_store's default; every S3-compatible server takes them).
            .with_disable_bulk_delete(true);
        if let Some(endpoint) = &endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        let builder = settings::credentials(builder)?;
        let s3 = builder.build().map_err(|e| {
            Error::usage(format!("cannot set up S3 for s3://{bucket}: {e}"))
                .with_hint("check the endpoint, region and AWS_* settings")
        })?;
        let rt = tries::ClientRuntime::new(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::other(format!("cannot start the S3 client runtime: {e}")))?,
        );
        let multipart_above = std::env::var("BATON_S3_MULTIPART_ABOVE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(MULTIPART_ABOVE);
        Ok(S3Backend {
            s3,
            rt,
            bucket: bucket.to_string(),
            endpoint,
            prefix: if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}/")
            },
            staged: HashMap::new(),
            probed: false,
            refs_probed: AtomicBool::new(false),
            generations_read: BTreeMap::new(),
            multipart_above,
            counts,
        })
    }

    fn key(&self, rel: &str) -> String {
        format!("{}{rel}", self.prefix)
    }

    fn path(&self, rel: &str) -> Result<Path> {
        let key = self.key(rel);
        Path::parse(&key).map_err(|e| Error::internal(format!("invalid S3 key {key}: {e}")))
    }

    /// The store as errors name it: its URL, and the endpoint when it is not AWS's.
    fn place(&self) -> String {
        match &self.endpoint {
            Some(endpoint) => format!("{} (endpoint {endpoint})", Backend::describe(self)),
            None => Backend::describe(self),
        }
    }

    fn err(&self, e: object_store::Error, rel: &str) -> Error {
        map_error(e, &self.place(), &self.key(rel), &self.counts.tries)
    }

    /// Create `rel` with `bytes` unless it exists (`If-None-Match: *`).
    fn create(&self, rel: &str, bytes: Vec<u8>) -> Result<Published> {
        self.rt.block_on(self.create_async(rel, bytes))
    }

    async fn create_async(&self, rel: &str, bytes: Vec<u8>) -> Result<Published> {
        let path = self.path(rel)?;
        let opts = PutOptions::from(PutMode::Create);
        match self.s3.put_opts(&path, PutPayload::from(bytes), opts).await {
            Ok(_) => Ok(Published::Done),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(Published::Exists),
            Err(e) => Err(self.err(e, rel)),
        }
    }

    /// Create `rel` with `bytes`; an existing object with exactly these bytes is ours (a
    /// request retried after its answer was lost), anything else is `Exists`.
    fn create_small(&self, rel: &str, bytes: &[u8]) -> Result<Published> {
        match self.create(rel, bytes.to_vec())? {
            Published::Done => Ok(Published::Done),
            Published::Exists => self.existing_is(rel, bytes),
        }
    }

    /// `Done` when `rel` holds exactly `bytes` (read no further than their length), else
    /// `Exists`.
    fn existing_is(&self, rel: &str, bytes: &[u8]) -> Result<Published> {
        let theirs = self
            .rt
            .block_on(self.fetch_small(rel, bytes.len() as u64))?;
        Ok(match theirs {
            Small::Bytes(theirs) if theirs == bytes => Published::Done,
            _ => Published::Exists,
        })
    }

    fn begin(&mut self, store: Vec<(String, Vec<u8>)>) -> Result<NewItem> {
        self.probe()?;
        let file = tempfile::tempfile().map_err(|e| {
            Error::other(format!(
                "cannot create a temporary file for the upload: {e}"
            ))
        })?;
        let key = staging_name();
        self.staged.insert(
            key.clone(),
            Staged {
                file,
                len: 0,
                readback: Vec::new(),
                beside: HashMap::new(),
                store,
            },
        );
        Ok(NewItem::with_key(key))
    }

    fn staged(&self, item: &NewItem) -> Result<&Staged> {
        self.staged
            .get(item.key())
            .ok_or_else(|| Error::internal(format!("no staged S3 item {}", item.key())))
    }

    /// Give the small item `name` staged beside an item its name `kind`/`name`.
    fn create_beside(
        &self,
        staged: &Staged,
        name: &str,
        kind: &Kind,
        to: &str,
    ) -> Result<Published> {
        let bytes = staged
            .beside
            .get(name)
            .ok_or_else(|| Error::internal(format!("nothing staged as {name}")))?;
        self.publish_generation(&layout::path(kind, to), bytes)
    }

    /// One small read: `None` when missing; larger than `limit`: an error.
    async fn read_small(&self, rel: String, limit: u64) -> Result<Option<Vec<u8>>> {
        match self.fetch_small(&rel, limit).await? {
            Small::Missing => Ok(None),
            Small::Bytes(bytes) => Ok(Some(bytes)),
            Small::Larger => Err(Error::integrity(format!(
                "{} at {} is larger than {limit} bytes",
                self.key(&rel),
                self.place()
            ))),
        }
    }

    /// `rel`'s bytes if it has at most `limit` of them, read as they arrive and no
    /// further than one chunk past `limit` whatever the server declares or sends.
    async fn fetch_small(&self, rel: &str, limit: u64) -> Result<Small> {
        let path = self.path(rel)?;
        let got = match self.s3.get_opts(&path, GetOptions::default()).await {
            Ok(got) => got,
            Err(e @ object_store::Error::NotFound { .. }) => {
                // A missing bucket answers 404 too: that is an error, not a missing item.
                let mapped = map_error(e, &self.place(), &self.key(rel), &self.counts.tries);
                return if TransportError::is_no_such_bucket(&mapped) {
                    Err(mapped)
                } else {
                    Ok(Small::Missing)
                };
            }
            Err(e) => {
                return Err(map_error(
                    e,
                    &self.place(),
                    &self.key(rel),
                    &self.counts.tries,
                ));
            }
        };
        if got.meta.size > limit {
            return Ok(Small::Larger);
        }
        let mut bytes = Vec::with_capacity(got.meta.size.min(1 << 20) as usize);
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk
                .map_err(|e| map_error(e, &self.place(), &self.key(rel), &self.counts.tries))?;
            if (bytes.len() + chunk.len()) as u64 > limit {
                return Ok(Small::Larger);
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Small::Bytes(bytes))
    }
}

/// What a bounded small read found.
enum Small {
    Missing,
    /// More than the limit (declared or sent).
    Larger,
    Bytes(Vec<u8>),
}

impl Backend for S3Backend {
    fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix.trim_end_matches('/'))
            .trim_end_matches('/')
            .to_string()
    }

    fn read_and_list(
        &mut self,
        reads: &[(Kind, String)],
        lists: &[Listing],
        limit: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        let this = &*self;
        let (read, listed) = this.rt.block_on(async {
            let reads = futures::stream::iter(
                reads
                    .iter()
                    .map(|(k, n)| this.read_small(layout::path(k, n), limit)),
            )
            .buffered(READS_IN_FLIGHT)
            .try_collect::<Vec<_>>()
            .await?;
            // The listings only once the reads are answered (the trait's contract): a
            // push publishes its pack before the ref generation naming it, so a listing
            // taken after a generation was read holds that generation's pack.
            let lists = futures::stream::iter(lists.iter().map(|l| this.list(l.rel())))
                .buffered(READS_IN_FLIGHT)
                .map_ok(Some)
                .try_collect::<Vec<_>>()
                .await?;
            Ok::<_, Error>((reads, lists))
        })?;
        self.remember_generations(reads, &read);
        Ok((read, listed))
    }

    fn read_range(&mut self, kind: &Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let rel = layout::path(kind, name);
        if len == 0 {
            return Ok(Vec::new());
        }
        let path = self.path(&rel)?;
        let bytes = self
            .rt
            .block_on(self.s3.get_range(&path, offset..offset + len))
            .map_err(|e| self.err(e, &rel))?;
        if bytes.len() as u64 != len {
            return Err(Error::integrity(format!(
                "{} at {} is shorter than {} bytes",
                self.key(&rel),
                self.place(),
                offset + len
            )));
        }
        Ok(bytes.to_vec())
    }

    fn read_sized(
        &mut self,
        kind: &Kind,
        name: &str,
        len: u64,
        sink: &mut dyn Write,
    ) -> Result<()> {
        let rel = layout::path(kind, name);
        let path = self.path(&rel)?;
        let wrong = |size: u64| {
            Error::integrity(format!(
                "{} at {} is {size} bytes, not the {len} its listing and index declared",
                self.key(&rel),
                self.place()
            ))
        };
        if len == 0 {
            let meta = self
                .rt
                .block_on(self.s3.head(&path))
                .map_err(|e| self.err(e, &rel))?;
            return if meta.size == 0 {
                Ok(())
            } else {
                Err(wrong(meta.size))
            };
        }
        let opts = GetOptions {
            range: Some(GetRange::Bounded(0..len)),
            ..GetOptions::default()
        };
        let got = match self.rt.block_on(self.s3.get_opts(&path, opts)) {
            Ok(got) => got,
            // A name listed and then gone reads as a wrong size, as on a path store.
            Err(object_store::Error::NotFound { .. }) => return Err(wrong(0)),
            Err(e) => return Err(self.err(e, &rel)),
        };
        if got.meta.size != len {
            return Err(wrong(got.meta.size));
        }
        let mut stream = got.into_stream();
        let mut copied = 0u64;
        while let Some(chunk) = self.rt.block_on(stream.next()) {
            let chunk = chunk.map_err(|e| self.err(e, &rel))?;
            copied += chunk.len() as u64;
            sink.write_all(&chunk).map_err(|e| {
                Error::other(format!("cannot store {}: {e}", self.key(&rel))).with_hint(
                    "free some disk space and run the command again; nothing was published",
                )
            })?;
        }
        if copied != len {
            return Err(wrong(copied));
        }
        Ok(())
    }

    fn begin_new(&mut self, store: Option<Vec<u8>>) -> Result<NewItem> {
        self.begin(store.map(new_store_files).unwrap_or_default())
    }

    fn upload_with(
        &mut self,
        item: &NewItem,
        beside: &[(String, Vec<u8>)],
    ) -> Result<Box<dyn Upload + '_>> {
        let staged = self
            .staged
            .get_mut(item.key())
            .ok_or_else(|| Error::internal(format!("no staged S3 item {}", item.key())))?;
        staged.beside = beside.iter().cloned().collect();
        let file = staged
            .file
            .try_clone()
            .map_err(|e| Error::other(format!("cannot write the staged upload: {e}")))?;
        let mut file = file;
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)).map(|_| ()))
            .map_err(|e| Error::other(format!("cannot write the staged upload: {e}")))?;
        Ok(Box::new(S3Upload {
            out: BufWriter::with_capacity(1 << 20, file),
            staged,
            written: 0,
        }))
    }

    fn publish_chain(
        &mut self,
        item: &NewItem,
        kind: &Kind,
        name: &str,
        (staged_name, then_kind, then_name): (&str, &Kind, &str),
    ) -> Result<Chain> {
        // Does the server honour the condition under refs/? Asked beside the pack's
        // upload, answered before any generation is created.
        let probe = self.refs_probe_for(then_kind);
        let staged = self.staged(item)?;
        // A new store's small files at once (any already there is fine: a half-made
        // store, or a twin making it), then `config`: a store with a config is complete.
        let mut store = None;
        if let Some(((config, bytes), first)) = staged.store.split_last() {
            let creates = first.iter().map(|(f, b)| self.create_async(f, b.clone()));
            self.rt.block_on(futures::future::try_join_all(creates))?;
            store = Some(self.create_small(config, bytes)?);
        }
        let rel = layout::path(kind, name);
        let item_published = self.put_item(staged, &rel, probe)?;
        if item_published == Published::Exists {
            return Ok(Chain {
                store,
                item: Published::Exists,
                then: Published::Exists,
            });
        }
        if let Err(e) = self.verify_item(staged, &rel) {
            // A pack that is not what we sent must not keep its content name.
            if let Ok(path) = self.path(&rel) {
                let _ = self.rt.block_on(self.s3.delete(&path));
            }
            return Err(e);
        }
        let then = self.create_beside(staged, staged_name, then_kind, then_name)?;
        Ok(Chain {
            store,
            item: Published::Done,
            then,
        })
    }

    fn publish_beside(
        &mut self,
        item: &NewItem,
        staged: &str,
        kind: &Kind,
        name: &str,
    ) -> Result<Published> {
        self.create_beside(self.staged(item)?, staged, kind, name)
    }

    fn publish_item(&mut self, item: &NewItem, kind: &Kind, name: &str) -> Result<Published> {
        let staged = self.staged(item)?;
        let rel = layout::path(kind, name);
        let published = self.put_item(staged, &rel, None)?;
        if published == Published::Done
            && let Err(e) = self.verify_item(staged, &rel)
        {
            // Not what we sent: it must not keep its content name.
            if let Ok(path) = self.path(&rel) {
                let _ = self.rt.block_on(self.s3.delete(&path));
            }
            return Err(e);
        }
        Ok(published)
    }

    fn close_new(&mut self, item: NewItem, _all: bool) {
        self.staged.remove(item.key());
    }

    fn delete(&mut self, kind: &Kind, name: &str) -> Result<bool> {
        if !matches!(kind, Kind::Pack | Kind::Loose) {
            return refuse_delete(kind, name);
        }
        self.rt.block_on(self.delete_async(kind, name))
    }
}

impl S3Backend {
    /// `delete` as a future: whether the item was there (a HEAD), then its DELETE.
    async fn delete_async(&self, kind: &Kind, name: &str) -> Result<bool> {
        let rel = layout::path(kind, name);
        let path = self.path(&rel)?;
        match self.s3.head(&path).await {
            Ok(_) => {}
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(self.err(e, &rel)),
        }
        self.s3.delete(&path).await.map_err(|e| self.err(e, &rel))?;
        Ok(true)
    }
}

/// Only what differs from the defaults: S3's errors come after its own retries, and what
/// interrupted writers can leave is a probe. The rest gains nothing here: `read_and_list`
/// sends its GETs and LISTs at once already, there are no directories to prepare, and an
/// abandoned item is only forgotten (`close_new`).
impl BackendExt for S3Backend {
    fn retries_itself(&self) -> bool {
        true
    }

    fn delete_many(&mut self, kind: &Kind, names: &[String]) -> Result<Vec<bool>> {
        if !matches!(kind, Kind::Pack | Kind::Loose) {
            return names.iter().map(|n| refuse_delete(kind, n)).collect();
        }
        let this = &*self;
        this.rt.block_on(
            futures::stream::iter(names.iter().map(|n| this.delete_async(kind, n)))
                .buffered(READS_IN_FLIGHT)
                .try_collect(),
        )
    }

    fn sweep_leftovers(&mut self, listed: &[RemoteEntry]) {
        // Only probes can be left (a process killed between creating and deleting one);
        // abandoned multipart uploads are the bucket lifecycle rule's (docs/sync.md).
        let sweep = leftovers::RemoteSweep::now();
        for entry in listed {
            let Some(name) = entry.name.strip_prefix("probe-") else {
                continue;
            };
            if !entry.is_dir
                && sweep.removable(name, entry.mtime)
                && let Ok(path) = self.path(&layout::staging_dir(&entry.name))
            {
                let _ = self.rt.block_on(self.s3.delete(&path));
            }
        }
    }
}

impl Drop for S3Backend {
    fn drop(&mut self) {
        self.counts.trace();
    }
}
