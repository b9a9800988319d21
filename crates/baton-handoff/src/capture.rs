//! Assembling a handoff bundle: briefing, evidence, context, transcript, attachments,
//! every text scanned for secrets, all in memory before anything touches the store.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::briefing::Briefing;
use super::context::{self, PatchNote};
use super::{evidence, pii, secrets};
use baton_error::{Error, IoContext, Result};
use baton_store::beneath::{Dir, Entry};
use baton_store::memtree::MemFile;

/// Patches up to this size are kept as evidence; larger ones become attachments and are
/// only summarised in `context.md`.
pub const PATCH_LIMIT: u64 = 256 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretsMode {
    /// Replace each secret by a typed placeholder and report kinds and counts.
    Redact,
    /// Refuse the save if any secret is found.
    Block,
    /// Store secrets as they are and report them (directory snapshots only).
    Allow,
}

impl SecretsMode {
    pub const ALL: [SecretsMode; 3] = [SecretsMode::Redact, SecretsMode::Block, SecretsMode::Allow];

    pub fn name(self) -> &'static str {
        match self {
            SecretsMode::Redact => "redact",
            SecretsMode::Block => "block",
            SecretsMode::Allow => "allow",
        }
    }

    /// The mode `name` names, ignoring case.
    pub fn from_name(name: &str) -> Option<SecretsMode> {
        SecretsMode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }

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
    pub attachments: Vec<Attachment>,
    /// The store's directory (device, inode): never attached.
    pub skip: Option<(u64, u64)>,
    pub secrets: SecretsMode,
    pub pii: pii::PiiMode,
}

/// One file of a handoff after its scan: the name and bytes redacted, and what was found.
pub struct Scanned {
    pub file: MemFile,
    pub found: BTreeMap<&'static str, u64>,
    /// Where the personal-data scan starts: the bytes before it are a transcript's part
    /// that a previous handoff found free of personal data (an appended session, SPEC
    /// 5.1); 0 for everything else.
    pub pii_from: usize,
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
        let bytes = own.bytes(&file.bytes);
        file.replace_bytes(bytes);
    }
    Scanned {
        file,
        found: own.found,
        pii_from: 0,
    }
}

pub struct Assembled {
    pub files: Vec<MemFile>,
    pub briefing: Option<Briefing>,
    pub evidence: evidence::Evidence,
    /// Secrets found, by kind (values are never kept anywhere).
    pub secrets: BTreeMap<&'static str, u64>,
    /// Personal data found, by place; the same scrubber takes the manifest's fields.
    pub pii: pii::Scrubber,
    /// Whether the transcript's files held personal data (then not cached: scanned again
    /// on every handoff, as a secret is).
    pub pii_in_transcript: bool,
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
    let attachments = read_attachments(request.attachments, request.skip)?;

    let captured_at = baton_format::bundle::format_time(SystemTime::now());
    let mut capture = capture;
    let mut files = Vec::new();
    let mut patches = Vec::new();
    // The workspace's own patches, then those of each repository below a workspace folder
    // (under `repos/<its path>/`).
    let own = (
        String::new(),
        &capture.staged_patch,
        &capture.unstaged_patch,
    );
    let nested = capture
        .nested_patches
        .iter()
        .map(|(rel, (staged, unstaged))| (rel.clone(), staged, unstaged));
    // The patches are scanned first, so that evidence.json can say which was redacted.
    let mut scanned_patches = Vec::new();
    let mut redacted = evidence::Redacted::default();
    let mut nested_redacted: std::collections::BTreeMap<String, evidence::Redacted> =
        Default::default();
    for (repository, staged, unstaged) in std::iter::once(own).chain(nested) {
        let dir = match repository.as_str() {
            "" => String::new(),
            rel => format!("repos/{rel}/"),
        };
        for (name, bytes) in [("staged.patch", staged), ("unstaged.patch", unstaged)] {
            let stored_at = if bytes.is_empty() {
                None
            } else if (bytes.len() as u64) <= PATCH_LIMIT {
                Some(format!("evidence/{dir}{name}"))
            } else {
                Some(format!("attachments/patches/{dir}{name}"))
            };
            let mut secret = false;
            if let Some(path) = &stored_at {
                let one = scan(MemFile::new(path.clone(), bytes.clone()));
                secret = !one.found.is_empty();
                // evidence.json says so, for the workspace's own patches and for each
                // repository's below a workspace folder.
                if secret {
                    match repository.as_str() {
                        "" => redacted.mark(name),
                        rel => nested_redacted
                            .entry(rel.to_string())
                            .or_default()
                            .mark(name),
                    }
                }
                scanned_patches.push(one);
            }
            patches.push(PatchNote {
                repository: repository.clone(),
                name,
                bytes: bytes.len() as u64,
                stored_at,
                redacted: secret,
            });
        }
    }
    if let Some(b) = &briefing {
        files.push(MemFile::new("handoff.md", b.text.clone()));
    }
    files.push(MemFile::new(
        "context.md",
        context::render(&capture.evidence, &captured_at, &patches),
    ));
    if let Some(git) = capture.evidence.git.as_mut() {
        git.redacted = redacted;
    }
    for (rel, marks) in nested_redacted {
        if let Some(git) = capture
            .evidence
            .repositories
            .get_mut(&rel)
            .and_then(|r| r.git.as_mut())
        {
            git.redacted = marks;
        }
    }
    let evidence_json = serde_json::to_vec_pretty(&capture.evidence)
        .map_err(|e| Error::other(format!("cannot encode evidence: {e}")))?;
    files.push(MemFile::new("evidence/evidence.json", evidence_json));
    // Every byte that goes in is scanned, file names included; nothing is written
    // before this point.
    let mut scanned = scanned_patches;
    scanned.extend(files.into_iter().map(scan));
    // Personal data only in what was written, never in evidence, patches or attachments;
    // the commits' own emails are kept everywhere (they are in the evidence anyway).
    let keep = pii::Keep::from_identities(
        capture
            .evidence
            .git
            .iter()
            .chain(capture.evidence.repositories.values().flat_map(|r| &r.git))
            .flat_map(|g| g.recent_commits.iter().map(|c| c.author.as_str())),
    );
    let mut personal = pii::Scrubber::new(request.pii, keep);
    let mut transcript = request.transcript;
    // The written files first, then the transcript's (attachments are not scanned).
    let mut targets: Vec<(&mut MemFile, usize)> = scanned
        .iter_mut()
        .filter(|one| matches!(one.file.path.as_str(), "handoff.md" | "context.md"))
        .map(|one| (&mut one.file, one.pii_from))
        .collect();
    let written = targets.len();
    targets.extend(
        transcript
            .iter_mut()
            .map(|one| (&mut one.file, one.pii_from)),
    );
    let pii_in_transcript = personal.files(&mut targets)[written..]
        .iter()
        .any(|found| *found);
    scanned.extend(transcript);
    for (path, bytes, exec) in attachments {
        let mut file = MemFile::new(format!("attachments/{path}"), bytes);
        file.exec = exec;
        scanned.push(scan(file));
    }
    let mut scrubber = secrets::Scrubber::default();
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
        pii: personal,
        pii_in_transcript,
    })
}

pub use super::secrets::{describe_counts, refusal as secrets_refusal};

/// A file or directory to attach.
pub enum Attachment {
    /// A path as the user named it (`--attach`): the path itself is followed as named (a
    /// symlink there is recorded by its target), nothing below it.
    Named(PathBuf),
    /// One already opened beneath the workspace (the MCP server), stored under `name`;
    /// `shown` is its path for messages.
    Opened {
        name: String,
        shown: PathBuf,
        entry: Box<Entry>,
    },
}

/// Read attached files and directories, each directory listed and descended by fd
/// (regular files only; symlinks are recorded by their target text, never followed; the
/// directory `skip`, the store, is left out). Returns (path under attachments/, bytes,
/// exec).
fn read_attachments(
    attachments: Vec<Attachment>,
    skip: Option<(u64, u64)>,
) -> Result<Vec<(String, Vec<u8>, bool)>> {
    let mut out = Vec::new();
    for attachment in attachments {
        let (name, shown, entry) = match attachment {
            Attachment::Named(path) => (root_name(&path)?, path.clone(), open_named(&path)?),
            Attachment::Opened { name, shown, entry } => (name, shown, *entry),
        };
        if let Entry::Dir(dir) = &entry
            && skip.is_some()
            && dir.id().ok() == skip
        {
            return Err(Error::usage(format!(
                "cannot attach {}: it is the store itself",
                shown.display()
            ))
            .with_hint("a handoff never holds its own store; attach the files you mean"));
        }
        collect(entry, &shown, &name, skip, &mut out)?;
    }
    Ok(out)
}

/// The name an attachment is stored under: its file name, or for `.` and the like the
/// file name of the directory it is.
fn root_name(path: &Path) -> Result<String> {
    let canonical;
    let named = match path.file_name() {
        Some(name) => name,
        None => {
            canonical = fs::canonicalize(path).map_err(|e| attach_error(path, e))?;
            canonical.file_name().unwrap_or_default()
        }
    };
    match named.to_str() {
        Some(name) if !name.is_empty() => Ok(name.to_string()),
        _ => Err(Error::usage(format!(
            "cannot attach {}: no UTF-8 file name",
            path.display()
        ))),
    }
}

fn attach_error(path: &Path, e: std::io::Error) -> Error {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            Error::not_found(format!("attachment {} does not exist", path.display()))
        }
        _ => Error::io("cannot read attachment", path, e),
    }
}

/// A path the user named, opened as what it is without following a symlink at its end.
fn open_named(path: &Path) -> Result<Entry> {
    let meta = fs::symlink_metadata(path).map_err(|e| attach_error(path, e))?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = fs::read_link(path).ctx("cannot read link", path)?;
        return Ok(Entry::Symlink(target.into_os_string().into_encoded_bytes()));
    }
    if kind.is_dir() {
        let dir = Dir::open_nofollow(path).map_err(|r| r.into_error("cannot read", path))?;
        return Ok(Entry::Dir(dir));
    }
    if kind.is_file() {
        let file = baton_store::fsutil::open_regular(path)?;
        let meta = file.metadata().ctx("cannot stat", path)?;
        return Ok(Entry::File(file, meta));
    }
    Ok(Entry::Other(kind))
}

fn collect(
    entry: Entry,
    shown: &Path,
    rel: &str,
    skip: Option<(u64, u64)>,
    out: &mut Vec<(String, Vec<u8>, bool)>,
) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match entry {
        Entry::Dir(dir) => {
            for child in dir.names().ctx("cannot read", shown)? {
                let path = shown.join(&child);
                let name = child.to_str().ok_or_else(|| {
                    Error::usage(format!(
                        "cannot attach {}: file name is not UTF-8",
                        path.display()
                    ))
                })?;
                let entry = dir
                    .entry(Path::new(name))
                    .map_err(|r| r.into_error("cannot read attachment", &path))?;
                if let Entry::Dir(sub) = &entry
                    && skip.is_some()
                    && sub.id().ok() == skip
                {
                    continue; // the store itself never goes into a bundle
                }
                collect(entry, &path, &format!("{rel}/{name}"), skip, out)?;
            }
        }
        Entry::File(mut file, meta) => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes).ctx("cannot read", shown)?;
            out.push((
                rel.to_string(),
                bytes,
                meta.permissions().mode() & 0o100 != 0,
            ));
        }
        Entry::Symlink(target) => out.push((rel.to_string(), target, false)),
        Entry::Other(_) => {
            return Err(Error::usage(format!(
                "cannot attach {}: not a regular file or directory",
                shown.display()
            )));
        }
    }
    Ok(())
}
