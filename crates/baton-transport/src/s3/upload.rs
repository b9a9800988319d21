//! The S3 backend's writes: a begun item staged in a local temporary file, then
//! created on the server under its name (one conditional PUT, or a multipart upload when
//! large) and read back before anything names it; the probes that the server honours
//! `If-None-Match: *` (in `staging/`, and under `refs/`), and each ref generation read
//! back once created, since only that shows a server whose conditional writes lie.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;

use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, WriteMultipart};

use super::{PART_SIZE, PARTS_IN_FLIGHT, PROBE_FAILED, S3Backend, Small, TAIL_CHECK};
use crate::backend::staging_name;
use crate::{Published, Receipt, Upload};
use baton_error::{Error, ErrorKind, Result};
use baton_format::layout::{self, Kind};

/// The refusal of a server that accepted a create it should have refused, and its hint.
fn ignored_condition(what: String) -> Error {
    Error::new(ErrorKind::Security, format!("{PROBE_FAILED} ({what})"))
        .with_hint("use a server that enforces If-None-Match on PutObject under every prefix (AWS S3, MinIO, R2, ...), or remove the proxy that strips it")
}

/// A begun item: its bytes in an unnamed local temporary file (0600, gone with the
/// process), the small items staged beside it, and a new store's files.
pub(super) struct Staged {
    pub(super) file: File,
    pub(super) len: u64,
    pub(super) readback: Vec<(u64, u64)>,
    pub(super) beside: HashMap<String, Vec<u8>>,
    pub(super) store: Vec<(String, Vec<u8>)>,
}

impl S3Backend {
    /// Before the first write of this process: a key created twice with `If-None-Match:
    /// *` must be refused the second time, else nothing baton publishes is safe.
    pub(super) fn probe(&mut self) -> Result<()> {
        if self.probed {
            return Ok(());
        }
        let rel = format!("{}/probe-{}", layout::STAGING, staging_name());
        // `Exists` the first time is our own retried request (the name is unique).
        self.create(&rel, b"baton probe 1\n".to_vec())?;
        let second = self.create(&rel, b"baton probe 2\n".to_vec())?;
        let path = self.path(&rel)?;
        let _ = self.rt.block_on(self.s3.delete(&path));
        if second == Published::Done {
            return Err(ignored_condition(format!(
                "a second create of {} at {} succeeded",
                self.key(&rel),
                self.place()
            )));
        }
        self.probed = true;
        Ok(())
    }

    /// Keep the newest generation of each ref read (`read_and_list`'s answers).
    pub(super) fn remember_generations(
        &mut self,
        reads: &[(Kind, String)],
        answers: &[Option<Vec<u8>>],
    ) {
        for ((kind, name), answer) in reads.iter().zip(answers) {
            let (Kind::Generation(_), Some(bytes)) = (kind, answer) else {
                continue;
            };
            let rel = layout::path(kind, name);
            let newest = self.generations_read.get(&layout::dir(kind));
            // Generation names are zero-padded numbers: the larger sorts last.
            if newest.is_none_or(|(seen, _)| *seen < rel) {
                self.generations_read
                    .insert(layout::dir(kind), (rel, bytes.clone()));
            }
        }
    }

    /// What to re-create before the first generation of `kind` this process publishes:
    /// the newest one it read, with its own bytes (`probe_refs`); `None` when done, or
    /// when the store has no generation yet (its first push relies on the read-back of
    /// `publish_generation` alone).
    pub(super) fn refs_probe_for(&self, kind: &Kind) -> Option<(String, Vec<u8>)> {
        if self.refs_probed.load(Ordering::Relaxed) || !matches!(kind, Kind::Generation(_)) {
            return None;
        }
        self.generations_read.get(&layout::dir(kind)).cloned()
    }

    /// Re-create an existing generation with its own bytes under `If-None-Match: *`. A
    /// server that honours the condition refuses (412); one that accepts has rewritten the
    /// same bytes (harmless) and shown that it ignores the condition there, which the
    /// staging probe cannot see in a server that checks some prefixes only. One PUT per
    /// process, sent beside the pack's upload (no round trip of its own).
    pub(super) async fn probe_refs(&self, probe: Option<(String, Vec<u8>)>) -> Result<()> {
        let Some((rel, bytes)) = probe else {
            return Ok(());
        };
        if self.create_async(&rel, bytes).await? == Published::Done {
            return Err(ignored_condition(format!(
                "under refs/: a create of the existing {} at {} succeeded; it was given the same bytes, so nothing changed",
                self.key(&rel),
                self.place()
            )));
        }
        self.refs_probed.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Create the ref generation `rel` with `bytes` unless it exists, then read it back:
    /// a server that accepted the create must hold exactly our bytes there. Anything else
    /// (another push's bytes, nothing at all) means its conditional writes do not make a
    /// compare-and-swap: `store_conflict`, never a success.
    pub(super) fn publish_generation(&self, rel: &str, bytes: &[u8]) -> Result<Published> {
        if self.create(rel, bytes.to_vec())? == Published::Exists {
            return self.existing_is(rel, bytes);
        }
        let found = match self
            .rt
            .block_on(self.fetch_small(rel, bytes.len() as u64))?
        {
            Small::Bytes(theirs) if theirs == bytes => return Ok(Published::Done),
            Small::Bytes(_) | Small::Larger => "another push's generation",
            Small::Missing => "nothing",
        };
        Err(Error::conflict(format!(
            "{} at {} holds {found} right after the server accepted this push's create of it: the server's conditional writes (If-None-Match) are not to be trusted",
            self.key(rel),
            self.place()
        ))
        .with_hint("this push is not published; use a server that enforces If-None-Match atomically under every prefix (AWS S3, MinIO, R2, ...), then 'baton pull' and push again"))
    }

    /// Upload a staged item under `rel` unless something is there: one conditional PUT,
    /// or (large) a HEAD and then a multipart upload of the content-named item (a twin
    /// racing on the same name writes the same bytes); `probe` (`refs_probe_for`) is
    /// asked at the same time. A failed probe leaves at most an unnamed pack.
    pub(super) fn put_item(
        &self,
        staged: &Staged,
        rel: &str,
        probe: Option<(String, Vec<u8>)>,
    ) -> Result<Published> {
        if staged.len <= self.multipart_above {
            let mut bytes = vec![0u8; staged.len as usize];
            staged
                .file
                .read_exact_at(&mut bytes, 0)
                .map_err(|e| Error::other(format!("cannot read the staged upload: {e}")))?;
            let both =
                futures::future::try_join(self.probe_refs(probe), self.create_async(rel, bytes));
            return self.rt.block_on(both).map(|((), published)| published);
        }
        self.rt.block_on(self.probe_refs(probe))?;
        let path = self.path(rel)?;
        match self.rt.block_on(self.s3.head(&path)) {
            Ok(_) => return Ok(Published::Exists),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(self.err(e, rel)),
        }
        let result: object_store::Result<()> = self.rt.block_on(async {
            let upload = self.s3.put_multipart(&path).await?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
            let mut offset = 0u64;
            let mut buf = vec![0u8; PART_SIZE];
            while offset < staged.len {
                let n = (staged.len - offset).min(PART_SIZE as u64) as usize;
                if let Err(e) = staged.file.read_exact_at(&mut buf[..n], offset) {
                    let _ = writer.abort().await;
                    return Err(object_store::Error::Generic {
                        store: "S3",
                        source: Box::new(e),
                    });
                }
                if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                    let _ = writer.abort().await;
                    return Err(e);
                }
                writer.write(&buf[..n]);
                offset += n as u64;
            }
            writer.finish().await.map(|_| ())
        });
        result.map_err(|e| self.err(e, rel))?;
        Ok(Published::Done)
    }

    /// Read back what the server holds under `rel` (its size, and the ranges the caller
    /// asked for, else its tail) and compare it with the staged bytes.
    pub(super) fn verify_item(&self, staged: &Staged, rel: &str) -> Result<()> {
        let start = staged
            .readback
            .iter()
            .map(|(o, _)| *o)
            .min()
            .unwrap_or(staged.len.saturating_sub(TAIL_CHECK))
            .min(staged.len);
        if start == staged.len {
            return Ok(());
        }
        let path = self.path(rel)?;
        let opts = GetOptions {
            range: Some(GetRange::Bounded(start..staged.len)),
            ..GetOptions::default()
        };
        let (size, bytes) = self
            .rt
            .block_on(async {
                let got = self.s3.get_opts(&path, opts).await?;
                let size = got.meta.size;
                Ok::<_, object_store::Error>((size, got.bytes().await?))
            })
            .map_err(|e| self.err(e, rel))?;
        let mut ours = vec![0u8; (staged.len - start) as usize];
        staged
            .file
            .read_exact_at(&mut ours, start)
            .map_err(|e| Error::other(format!("cannot read the staged upload: {e}")))?;
        if size != staged.len || bytes.as_ref() != ours.as_slice() {
            return Err(Error::new(
                ErrorKind::Transport,
                format!(
                    "{} at {} reads back differently from what was sent ({size} bytes, {} sent)",
                    self.key(rel),
                    self.place(),
                    staged.len
                ),
            )
            .with_hint("nothing was published; run the command again"));
        }
        Ok(())
    }
}

/// The upload into a begun item's temporary file. The server sees nothing until
/// `publish_chain`, which reads back what it stored before anything is named by a ref.
pub(super) struct S3Upload<'a> {
    pub(super) out: BufWriter<File>,
    pub(super) staged: &'a mut Staged,
    pub(super) written: u64,
}

impl Write for S3Upload<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl Upload for S3Upload<'_> {
    fn finish(mut self: Box<Self>, readback: &[(u64, u64)]) -> Result<Receipt> {
        self.out
            .flush()
            .map_err(|e| Error::other(format!("cannot write the staged upload: {e}")))?;
        self.staged.len = self.written;
        self.staged.readback = readback.to_vec();
        let mut back = Vec::with_capacity(readback.len());
        for (offset, len) in readback {
            let mut buf = vec![0u8; *len as usize];
            self.staged
                .file
                .read_exact_at(&mut buf, *offset)
                .map_err(|e| Error::other(format!("cannot read the staged upload: {e}")))?;
            back.push(buf);
        }
        Ok(Receipt {
            size: self.written,
            readback: back,
        })
    }
}
