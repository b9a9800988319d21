//! The S3 backend's uploads: a begun item staged in a local temporary file, then
//! created on the server under its name (one conditional PUT, or a multipart upload when
//! large) and read back before anything names it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, WriteMultipart};

use super::{PART_SIZE, PARTS_IN_FLIGHT, S3Backend, TAIL_CHECK};
use crate::error::{Error, ErrorKind, Result};
use crate::transport::{Published, Receipt, Upload};

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
    /// Upload a staged item under `rel` unless something is there: one conditional PUT,
    /// or (large) a HEAD and then a multipart upload of the content-named item (a twin
    /// racing on the same name writes the same bytes).
    pub(super) fn put_item(&self, staged: &Staged, rel: &str) -> Result<Published> {
        if staged.len <= self.multipart_above {
            let mut bytes = vec![0u8; staged.len as usize];
            staged
                .file
                .read_exact_at(&mut bytes, 0)
                .map_err(|e| Error::other(format!("cannot read the staged upload: {e}")))?;
            return self.create(rel, bytes);
        }
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
