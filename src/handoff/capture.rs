//! Assembling a handoff bundle: briefing, evidence, context, transcript, attachments,
//! every text scanned for secrets, all in memory before anything touches the store.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::briefing::Briefing;
use super::context::{self, PatchNote};
use super::{evidence, secrets};
use crate::error::{Error, IoContext, Result};
use crate::store::memtree::MemFile;

/// Patches up to this size are kept as evidence; larger ones become attachments and are
/// only summarised in `context.md`.
pub const PATCH_LIMIT: u64 = 256 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SecretsMode {
    /// Replace each secret by a typed placeholder and report kinds and counts.
    Redact,
    /// Refuse the save if any secret is found.
    Block,
    /// Store secrets as they are and report them (directory snapshots only).
    Allow,
}

impl SecretsMode {
    /// Handoffs redact or refuse; keeping secrets as they are is for snapshots only.
    pub fn for_handoff(self) -> Result<SecretsMode> {
        if self == SecretsMode::Allow {
            return Err(
                Error::usage("--secrets allow is for directory snapshots, not handoffs")
                    .with_hint("use --secrets redact (the default) or --secrets block"),
            );
        }
        Ok(self)
    }
}

pub struct HandoffRequest {
    /// The raw briefing, or `None` for an evidence-only handoff (`--no-brief`).
    pub brief: Option<Vec<u8>>,
    /// The transcript's files (`transcript.jsonl`, and a harness's own session file under
    /// `attachments/`), already through [`scan`] (the caller scans them while the git
    /// evidence is being read).
    pub transcript: Vec<Scanned>,
    pub attachments: Vec<PathBuf>,
    pub secrets: SecretsMode,
}

/// One file of a handoff after its scan: the name and bytes redacted, and what was found.
pub struct Scanned {
    pub file: MemFile,
    pub found: BTreeMap<&'static str, u64>,
}

impl Scanned {
    /// Whether its name and bytes were scanned and held no secret (a `stored` file's
    /// bytes were not scanned here).
    pub fn clean(&self) -> bool {
        self.file.stored.is_none() && self.found.is_empty()
    }
}

/// The one per-file scan: the name always; the bytes unless `stored` names a blob the
/// store already holds, found clean under the current secret policy from exactly these
/// bytes (the transcript cache).
pub fn scan(mut file: MemFile) -> Scanned {
    let mut own = secrets::Scrubber::default();
    file.path = own.text(&file.path);
    if file.stored.is_none() {
        file.bytes = own.bytes(&file.bytes);
    }
    Scanned {
        file,
        found: own.found,
    }
}

pub struct Assembled {
    pub files: Vec<MemFile>,
    pub briefing: Option<Briefing>,
    pub evidence: evidence::Evidence,
    /// Secrets found, by kind (values are never kept anywhere).
    pub secrets: BTreeMap<&'static str, u64>,
    /// For each of `files`: [`Scanned::clean`].
    pub clean: Vec<bool>,
}

/// The bundle's files from `request` and the workspace's evidence (`capture`, read by
/// the caller, concurrently with whatever it did meanwhile).
pub fn assemble(request: HandoffRequest, capture: evidence::Capture) -> Result<Assembled> {
    let briefing = match &request.brief {
        Some(raw) => {
            let text = std::str::from_utf8(raw).map_err(|_| {
                super::briefing::invalid(
                    "the briefing is not UTF-8 text (save it as UTF-8 markdown)".into(),
                )
            })?;
            Some(Briefing::parse(text)?)
        }
        None => None,
    };
    let attachments = read_attachments(&request.attachments)?;

    let captured_at = crate::format::bundle::format_time(SystemTime::now());
    let mut files = Vec::new();
    let mut patches = Vec::new();
    for (name, bytes) in [
        ("staged.patch", &capture.staged_patch),
        ("unstaged.patch", &capture.unstaged_patch),
    ] {
        let stored_at = if bytes.is_empty() {
            None
        } else if (bytes.len() as u64) <= PATCH_LIMIT {
            Some(format!("evidence/{name}"))
        } else {
            Some(format!("attachments/patches/{name}"))
        };
        if let Some(path) = &stored_at {
            files.push(MemFile::new(path.clone(), bytes.clone()));
        }
        patches.push(PatchNote {
            name,
            bytes: bytes.len() as u64,
            stored_at,
        });
    }
    if let Some(b) = &briefing {
        files.push(MemFile::new("handoff.md", b.text.clone()));
    }
    files.push(MemFile::new(
        "context.md",
        context::render(&capture.evidence, &captured_at, &patches),
    ));
    let evidence_json = serde_json::to_vec_pretty(&capture.evidence)
        .map_err(|e| Error::other(format!("cannot encode evidence: {e}")))?;
    files.push(MemFile::new("evidence/evidence.json", evidence_json));
    // Every byte that goes in is scanned, file names included; nothing is written
    // before this point.
    let mut scanned: Vec<Scanned> = files.into_iter().map(scan).collect();
    scanned.extend(request.transcript);
    for (path, bytes, exec) in attachments {
        scanned.push(scan(MemFile {
            path: format!("attachments/{path}"),
            bytes,
            exec,
            stored: None,
        }));
    }
    let mut scrubber = secrets::Scrubber::default();
    let clean = scanned.iter().map(Scanned::clean).collect();
    let mut files = Vec::with_capacity(scanned.len());
    for one in scanned {
        for (kind, n) in one.found {
            *scrubber.found.entry(kind).or_default() += n;
        }
        files.push(one.file);
    }
    scrubber.refuse_if(request.secrets == SecretsMode::Block)?;
    let found = scrubber.found;
    // The briefing kept for the summary and kickoff must be the redacted one too.
    let briefing = match &briefing {
        Some(_) => files
            .iter()
            .find(|f| f.path == "handoff.md")
            .and_then(|f| std::str::from_utf8(&f.bytes).ok())
            .map(Briefing::parse)
            .transpose()?,
        None => None,
    };
    Ok(Assembled {
        files,
        briefing,
        evidence: capture.evidence,
        secrets: found,
        clean,
    })
}

pub use super::secrets::{describe_counts, refusal as secrets_refusal};

/// Read attached files and directories (regular files only; symlinks are recorded by
/// their target text, never followed). Returns (path under attachments/, bytes, exec).
fn read_attachments(paths: &[PathBuf]) -> Result<Vec<(String, Vec<u8>, bool)>> {
    let mut out = Vec::new();
    for path in paths {
        let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            Error::usage(format!(
                "cannot attach {}: no UTF-8 file name",
                path.display()
            ))
        })?;
        collect(path, name, &mut out)?;
    }
    Ok(out)
}

fn collect(path: &Path, rel: &str, out: &mut Vec<(String, Vec<u8>, bool)>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = fs::symlink_metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            Error::not_found(format!("attachment {} does not exist", path.display()))
        }
        _ => Error::io("cannot read attachment", path, e),
    })?;
    if meta.is_dir() {
        let mut names: Vec<_> = fs::read_dir(path)
            .ctx("cannot read", path)?
            .filter_map(|e| e.ok())
            .collect();
        names.sort_by_key(|e| e.file_name());
        for entry in names {
            let child = entry.file_name();
            let child = child.to_str().ok_or_else(|| {
                Error::usage(format!(
                    "cannot attach {}: file name is not UTF-8",
                    entry.path().display()
                ))
            })?;
            collect(&entry.path(), &format!("{rel}/{child}"), out)?;
        }
    } else if meta.is_file() {
        let mut file = crate::store::fsutil::open_regular(path)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).ctx("cannot read", path)?;
        out.push((
            rel.to_string(),
            bytes,
            meta.permissions().mode() & 0o100 != 0,
        ));
    } else if meta.file_type().is_symlink() {
        let target = fs::read_link(path).ctx("cannot read link", path)?;
        out.push((
            rel.to_string(),
            target.to_string_lossy().into_owned().into_bytes(),
            false,
        ));
    } else {
        return Err(Error::usage(format!(
            "cannot attach {}: not a regular file or directory",
            path.display()
        )));
    }
    Ok(())
}
