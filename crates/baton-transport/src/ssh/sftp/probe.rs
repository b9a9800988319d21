//! Reads split in two (`Remote::start_reads`, `collect_reads`), so that a small look at
//! the remote rides with other batches: on a guessed handle each read goes out with its
//! open (`chained_reads`); otherwise the opens go out with the next batch's requests, the reads
//! (`advance_probes`, called once an upload's opens are answered) with the one after.
//! Their answers are taken from what arrived meanwhile. A push that trusts its hint of
//! the remote's generation reads the remote state this way while its pack's opens and
//! writes travel (SPEC section 14).
//!
//! Meant for a few small files and short listings (sent the long way, at most
//! `HANDLE_WINDOW` items, all opened at once; as a chain on a guessed handle, at most
//! `chained_reads::CHAIN_ITEMS`, all read with their opens); a file longer than two chunks or a
//! listing longer than the READDIRs sent is read on at `collect_reads`, at the cost of
//! round trips of its own.

use russh_sftp::protocol::{OpenFlags, Packet, StatusCode};

use super::chained_reads::Chained;

use super::batch::HANDLE_WINDOW;
use super::{CHUNK, SftpRemote};
use crate::RemoteEntry;
use baton_error::{Error, Result};

/// An advanced item: its handle and the ids of its two READ or READDIR requests.
type Advanced = (String, [u32; 2]);

/// Started reads: files first, then directories, each with its open's request id.
pub(super) struct Probe {
    files: Vec<String>,
    dirs: Vec<String>,
    limit: u64,
    opens: Vec<u32>,
    /// Per item once advanced (`None`: it does not exist).
    advanced: Option<Vec<Option<Advanced>>>,
    /// Sent as a chain (`opens` is empty): nothing to advance.
    chained: Option<Chained>,
}

#[allow(clippy::type_complexity)]
impl SftpRemote {
    pub(super) fn probe_start(
        &mut self,
        files: &[String],
        dirs: &[String],
        limit: u64,
    ) -> Result<Option<u64>> {
        let chained = self.chain_send(files, dirs)?;
        if chained.is_none() && files.len() + dirs.len() > HANDLE_WINDOW {
            return Ok(None);
        }
        let mut opens = Vec::with_capacity(files.len() + dirs.len());
        if chained.is_none() {
            for f in files {
                opens.push(self.open(f, OpenFlags::READ, None)?);
            }
            for d in dirs {
                opens.push(self.open_dir(d)?);
            }
        }
        self.next_probe += 1;
        let token = self.next_probe;
        self.probes.insert(
            token,
            Probe {
                files: files.to_vec(),
                dirs: dirs.to_vec(),
                limit,
                opens,
                advanced: None,
                chained,
            },
        );
        Ok(Some(token))
    }

    /// Send the reads of every started probe not yet advanced.
    pub(super) fn advance_probes(&mut self) -> Result<()> {
        let waiting: Vec<u64> = self
            .probes
            .iter()
            .filter(|(_, p)| p.advanced.is_none())
            .map(|(t, _)| *t)
            .collect();
        for token in waiting {
            self.probe_advance(token)?;
        }
        Ok(())
    }

    fn probe_advance(&mut self, token: u64) -> Result<()> {
        let Some(mut probe) = self.probes.remove(&token) else {
            return Err(Error::internal("advance_reads of reads never started"));
        };
        if probe.advanced.is_none() && probe.chained.is_none() {
            let n_files = probe.files.len();
            let mut advanced = Vec::with_capacity(probe.opens.len());
            for (i, id) in probe.opens.iter().enumerate() {
                let reply = self.wait(*id)?;
                let (what, is_file) = match probe.files.get(i) {
                    Some(f) => (format!("open {f}"), true),
                    None => (format!("list {}", probe.dirs[i - n_files]), false),
                };
                let Some(handle) = self.expect_handle(reply, &what)? else {
                    advanced.push(None);
                    continue;
                };
                let ids = if is_file {
                    [
                        self.send_read(&handle, 0, CHUNK as u32)?,
                        self.send_read(&handle, CHUNK as u64, CHUNK as u32)?,
                    ]
                } else {
                    [self.send_readdir(&handle)?, self.send_readdir(&handle)?]
                };
                advanced.push(Some((handle, ids)));
            }
            probe.advanced = Some(advanced);
        }
        self.probes.insert(token, probe);
        Ok(())
    }

    pub(super) fn probe_collect(
        &mut self,
        token: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        self.probe_advance(token)?;
        let Some(mut probe) = self.probes.remove(&token) else {
            return Err(Error::internal("collect_reads of reads never started"));
        };
        if let Some(chained) = probe.chained.take() {
            return self.chain_collect(chained, &probe.files, &probe.dirs, probe.limit);
        }
        let advanced = probe.advanced.unwrap_or_default();
        let n_files = probe.files.len();
        let mut files = Vec::with_capacity(n_files);
        let mut dirs = Vec::with_capacity(probe.dirs.len());
        for (i, item) in advanced.into_iter().enumerate() {
            let Some((handle, ids)) = item else {
                if i < n_files {
                    files.push(None);
                } else {
                    dirs.push(None);
                }
                continue;
            };
            if let Some(name) = probe.files.get(i) {
                files.push(Some(self.probe_file(&handle, ids, name, probe.limit)?));
                self.close_later(handle, name)?;
            } else {
                let name = &probe.dirs[i - n_files];
                dirs.push(Some(self.probe_dir(&handle, ids, name)?));
                self.close_later(handle, name)?;
            }
        }
        Ok((files, dirs))
    }

    /// The bytes of a probed file: its first chunk, or (longer than two reads, or a
    /// short read) all of it read again.
    fn probe_file(
        &mut self,
        handle: &str,
        ids: [u32; 2],
        name: &str,
        limit: u64,
    ) -> Result<Vec<u8>> {
        if let Some(bytes) = self.whole_in_two_reads(&ids, name, limit)? {
            return Ok(bytes);
        }
        let mut bytes = Vec::new();
        self.stream_handle(handle, limit, &mut bytes, name)?;
        if bytes.len() as u64 > limit {
            return Err(self.too_large(name, limit));
        }
        Ok(bytes)
    }

    /// A small file from the replies to its two READs (of a chunk each, from offset 0)
    /// when they hold all of it, at most `limit` bytes; `None` when it is longer (or a
    /// read came back short), to be read on.
    pub(super) fn whole_in_two_reads(
        &mut self,
        ids: &[u32],
        name: &str,
        limit: u64,
    ) -> Result<Option<Vec<u8>>> {
        let (mut bytes, mut done, mut more) = (Vec::new(), false, false);
        for (k, id) in ids.iter().enumerate() {
            match self.wait(*id)? {
                Packet::Data(d) if k == 0 => bytes = d.data,
                Packet::Data(_) => more = true,
                Packet::Status(s) if s.status_code == StatusCode::Eof => done = true,
                other => return Err(self.unexpected(&format!("read {name}"), other)),
            }
        }
        Ok((done && !more && bytes.len() as u64 <= limit).then_some(bytes))
    }

    pub(super) fn too_large(&self, name: &str, limit: u64) -> Error {
        Error::integrity(format!(
            "{name} on {} is larger than {limit} bytes",
            self.describe
        ))
    }

    /// The entries of a probed directory, sorted by name (read on past two READDIRs).
    pub(super) fn probe_dir(
        &mut self,
        handle: &str,
        ids: [u32; 2],
        name: &str,
    ) -> Result<Vec<RemoteEntry>> {
        let mut entries = Vec::new();
        let mut pending = ids.to_vec();
        loop {
            let mut end = false;
            for id in pending {
                let reply = self.wait(id)?;
                end |= self.collect_names(reply, name, &mut entries)?;
            }
            if end {
                break;
            }
            pending = vec![self.send_readdir(handle)?, self.send_readdir(handle)?];
        }
        entries.sort_by(|x, y| x.name.cmp(&y.name));
        Ok(entries)
    }
}
