//! Assembling a handoff bundle: briefing, evidence, context, transcript, attachments,
//! every text scanned for secrets, all in memory before anything touches the store.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::briefing::Briefing;
use super::context::{self, PatchNote};
use super::{evidence, secrets, transcript};
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

pub struct HandoffRequest<'a> {
    pub workspace: &'a Path,
    /// The raw briefing, or `None` for an evidence-only handoff (`--no-brief`).
    pub brief: Option<Vec<u8>>,
    pub transcript: Option<Vec<u8>>,
    /// A harness's own session file behind a normalised transcript: (path under
    /// attachments/, bytes), scanned and redacted like every other file.
    pub raw_transcript: Option<(String, Vec<u8>)>,
    pub attachments: Vec<PathBuf>,
    pub secrets: SecretsMode,
    /// Files whose blobs the store already holds, found clean under the current secret
    /// policy from exactly these bytes (the transcript cache): added without reading or
    /// scanning their content again; their names are scanned like every other.
    pub stored: Vec<MemFile>,
}

pub struct Assembled {
    pub files: Vec<MemFile>,
    pub briefing: Option<Briefing>,
    pub evidence: evidence::Evidence,
    /// Secrets found, by kind (values are never kept anywhere).
    pub secrets: BTreeMap<&'static str, u64>,
    /// For each of `files`: whether its name and bytes were scanned here and held no
    /// secret (a `stored` file: false, it was not scanned here).
    pub clean: Vec<bool>,
}

pub fn assemble(request: &HandoffRequest) -> Result<Assembled> {
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
    if let Some(t) = &request.transcript {
        transcript::validate(t)?;
    }
    let attachments = read_attachments(&request.attachments)?;

    let capture = evidence::capture(request.workspace);
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
    if let Some(t) = &request.transcript {
        files.push(MemFile::new("transcript.jsonl", t.clone()));
    }
    if let Some((path, bytes)) = &request.raw_transcript {
        files.push(MemFile::new(format!("attachments/{path}"), bytes.clone()));
    }
    files.extend(request.stored.iter().cloned());
    for (path, bytes, exec) in attachments {
        files.push(MemFile {
            path: format!("attachments/{path}"),
            bytes,
            exec,
            stored: None,
        });
    }

    // Every byte that goes in is scanned, file names included; nothing is written
    // before this point.
    let mut scrubber = secrets::Scrubber::default();
    let mut clean = Vec::with_capacity(files.len());
    for file in &mut files {
        let mut own = secrets::Scrubber::default();
        file.path = own.text(&file.path);
        if file.stored.is_none() {
            file.bytes = own.bytes(&file.bytes);
        }
        clean.push(file.stored.is_none() && !own.found_any());
        for (kind, n) in own.found {
            *scrubber.found.entry(kind).or_default() += n;
        }
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
