//! The agent skill baton installs into a harness (Claude Code, Codex): the embedded
//! SKILL.md and AGENTS.md section, where each goes, and the install record that tells
//! baton's own files from a user's edits, so an edited file is never overwritten silently.

use std::fs;
use std::io::ErrorKind as IoKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use baton_error::{Error, IoContext, Result};
use baton_store::fsutil;

const SKILL_TEMPLATE: &str = include_str!("skill/SKILL.md");
const AGENTS_TEMPLATE: &str = include_str!("skill/AGENTS-section.md");
const SKILL_FILE: &str = "SKILL.md";
/// Beside SKILL.md: hashes of what baton wrote, so a later run can tell an older baton's
/// text (safe to update) from a user's edit (kept unless `--force`).
const RECORD_FILE: &str = ".baton-install.json";
const RECORD_FORMAT: u32 = 1;
const SECTION_BEGIN: &str = "<!-- baton skill: begin (managed by `baton skill`) -->";
const SECTION_END: &str = "<!-- baton skill: end -->";
/// Largest AGENTS.md or SKILL.md baton reads; anything bigger is not ours to edit.
const MAX_FILE: u64 = 4 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Harness {
    ClaudeCode,
    Codex,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// The user's own configuration, for every project.
    User,
    /// This project only (the top of the git work tree, else the current directory).
    Project,
}

impl Harness {
    pub const ALL: [Harness; 2] = [Harness::ClaudeCode, Harness::Codex];

    pub fn name(self) -> &'static str {
        match self {
            Harness::ClaudeCode => "claude-code",
            Harness::Codex => "codex",
        }
    }

    /// The harness `name` names, ignoring case.
    pub fn from_name(name: &str) -> Option<Harness> {
        Harness::ALL
            .into_iter()
            .find(|h| h.name().eq_ignore_ascii_case(name))
    }
}

impl Scope {
    pub const ALL: [Scope; 2] = [Scope::User, Scope::Project];

    pub fn name(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }

    /// The scope `name` names, ignoring case.
    pub fn from_name(name: &str) -> Option<Scope> {
        Scope::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

/// Where the harnesses keep their configuration, read once from the environment.
#[derive(Clone, Debug)]
pub struct Places {
    pub home: PathBuf,
    /// `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
    pub claude_dir: PathBuf,
    /// `$CODEX_HOME`, else `~/.codex`.
    pub codex_home: PathBuf,
    /// The project's root: the nearest directory upwards holding `.git`, else `cwd`.
    pub project: PathBuf,
}

impl Places {
    pub fn from_env(cwd: &Path) -> Result<Places> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or_else(|| {
                Error::usage("HOME is not set, so the harness configuration cannot be found")
                    .with_hint("set HOME to the user's home directory")
            })?;
        let from_env = |var: &str, default: PathBuf| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or(default)
        };
        let project = cwd
            .ancestors()
            .find(|dir| dir.join(".git").exists())
            .unwrap_or(cwd)
            .to_path_buf();
        Ok(Places {
            claude_dir: from_env("CLAUDE_CONFIG_DIR", home.join(".claude")),
            codex_home: from_env("CODEX_HOME", home.join(".codex")),
            home,
            project,
        })
    }

    /// The directory SKILL.md goes in.
    pub fn skill_dir(&self, harness: Harness, scope: Scope) -> PathBuf {
        match (harness, scope) {
            (Harness::ClaudeCode, Scope::User) => self.claude_dir.join("skills/baton"),
            (Harness::ClaudeCode, Scope::Project) => self.project.join(".claude/skills/baton"),
            (Harness::Codex, Scope::User) => self.codex_home.join("skills/baton"),
            // Codex reads repository skills from .agents/skills (its documented repo scope).
            (Harness::Codex, Scope::Project) => self.project.join(".agents/skills/baton"),
        }
    }

    /// The AGENTS.md that `--agents-md` adds a section to (Codex only).
    pub fn agents_md(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => self.codex_home.join("AGENTS.md"),
            Scope::Project => self.project.join("AGENTS.md"),
        }
    }
}

/// How an installed file relates to what this baton would write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    Absent,
    /// Exactly what this baton writes.
    Current,
    /// What an earlier baton wrote (per the install record): safe to update.
    Outdated,
    /// Neither: someone edited it. Never overwritten or removed without `--force`.
    Modified,
}

#[derive(Clone, Debug, Serialize)]
pub struct Installed {
    pub harness: Harness,
    pub scope: Scope,
    pub path: PathBuf,
    pub state: FileState,
    /// The AGENTS.md section, when one is recorded or present.
    pub agents_md: Option<SectionStatus>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SectionStatus {
    pub path: PathBuf,
    pub state: FileState,
}

/// What install or remove did to one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Installed,
    Updated,
    Unchanged,
    Removed,
    NotInstalled,
}

#[derive(Clone, Debug, Serialize)]
pub struct Change {
    pub path: PathBuf,
    pub action: Action,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    format: u32,
    baton_version: String,
    /// BLAKE3 of the SKILL.md bytes baton wrote.
    skill_md: String,
    /// The AGENTS.md section baton wrote, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    agents_md: Option<RecordedSection>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RecordedSection {
    path: PathBuf,
    /// BLAKE3 of the section's text between (and excluding) the markers.
    hash: String,
}

pub fn skill_text(harness: Harness) -> String {
    SKILL_TEMPLATE.replace("{{HARNESS}}", harness.name())
}

fn section_text(harness: Harness) -> String {
    AGENTS_TEMPLATE.replace("{{HARNESS}}", harness.name())
}

fn hash(text: &[u8]) -> String {
    blake3::hash(text).to_hex().to_string()
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == IoKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("cannot read", path, e)),
        Ok(meta) if !meta.is_file() => {
            return Err(Error::usage(format!(
                "{} is not a regular file, so baton leaves it alone",
                path.display()
            ))
            .with_hint("move it away and run the command again"));
        }
        Ok(_) => {}
    }
    fsutil::read_limited(path, MAX_FILE).map(Some)
}

fn read_record(dir: &Path) -> Result<Option<Record>> {
    let path = dir.join(RECORD_FILE);
    let Some(bytes) = read_optional(&path)? else {
        return Ok(None);
    };
    // A damaged record only loses the "outdated" distinction: the files then count as
    // modified, which is the safe side.
    Ok(serde_json::from_slice(&bytes).ok())
}

fn file_state(bytes: Option<&[u8]>, wanted: &str, recorded: Option<&str>) -> FileState {
    match bytes {
        None => FileState::Absent,
        Some(b) if b == wanted.as_bytes() => FileState::Current,
        Some(b) if recorded == Some(hash(b).as_str()) => FileState::Outdated,
        Some(_) => FileState::Modified,
    }
}

/// The text between the markers of baton's section in an AGENTS.md, with the byte range
/// of the whole section (markers included).
fn find_section(text: &str) -> Option<(std::ops::Range<usize>, &str)> {
    let start = text.find(SECTION_BEGIN)?;
    let inner_start = start + SECTION_BEGIN.len();
    let inner_len = text[inner_start..].find(SECTION_END)?;
    let end = inner_start + inner_len + SECTION_END.len();
    let inner = text[inner_start..inner_start + inner_len].trim_matches('\n');
    Some((start..end, inner))
}

fn section_state(path: &Path, harness: Harness, record: Option<&Record>) -> Result<FileState> {
    let Some(bytes) = read_optional(path)? else {
        return Ok(FileState::Absent);
    };
    let text = String::from_utf8_lossy(&bytes);
    let Some((_, inner)) = find_section(&text) else {
        return Ok(FileState::Absent);
    };
    let recorded = record
        .and_then(|r| r.agents_md.as_ref())
        .filter(|s| s.path == path)
        .map(|s| s.hash.as_str());
    let wanted = section_text(harness);
    Ok(file_state(
        Some(inner.as_bytes()),
        wanted.trim_matches('\n'),
        recorded,
    ))
}

pub fn status(places: &Places, harness: Harness, scope: Scope) -> Result<Installed> {
    let dir = places.skill_dir(harness, scope);
    let record = read_record(&dir)?;
    let path = dir.join(SKILL_FILE);
    let bytes = read_optional(&path)?;
    let state = file_state(
        bytes.as_deref(),
        &skill_text(harness),
        record.as_ref().map(|r| r.skill_md.as_str()),
    );
    let agents_md = if harness == Harness::Codex {
        let path = places.agents_md(scope);
        let state = section_state(&path, harness, record.as_ref())?;
        (state != FileState::Absent).then_some(SectionStatus { path, state })
    } else {
        None
    };
    Ok(Installed {
        harness,
        scope,
        path,
        state,
        agents_md,
    })
}

fn refuse_modified(path: &Path, doing: &str) -> Error {
    // What --force would do to the edits: an install replaces them, a remove removes them.
    let force = if doing.starts_with("remove") {
        "remove them with the rest"
    } else {
        "replace them"
    };
    Error::conflict(format!(
        "{} was changed since baton installed it, so baton will not {doing} it",
        path.display()
    ))
    .with_hint(format!(
        "keep your edits, or run the command again with --force to {force}"
    ))
}

fn create_dirs(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(fsutil::DIR_MODE)
        .create(dir)
        .ctx("cannot create directory", dir)
}

/// Install (or update) the skill, and with `agents_md` the AGENTS.md section. Files that
/// already match are left untouched; a modified one is refused unless `force`.
pub fn install(
    places: &Places,
    harness: Harness,
    scope: Scope,
    agents_md: bool,
    force: bool,
) -> Result<Vec<Change>> {
    if agents_md && harness != Harness::Codex {
        return Err(Error::usage(
            "--agents-md is for Codex: Claude Code loads the skill by itself",
        )
        .with_hint("drop --agents-md, or use --harness codex"));
    }
    let before = status(places, harness, scope)?;
    let section_path = places.agents_md(scope);
    let section_before = if agents_md {
        Some(section_state(
            &section_path,
            harness,
            read_record(&places.skill_dir(harness, scope))?.as_ref(),
        )?)
    } else {
        None
    };
    // Check everything before writing anything: a refusal leaves every file as it was.
    if before.state == FileState::Modified && !force {
        return Err(refuse_modified(&before.path, "overwrite"));
    }
    if section_before == Some(FileState::Modified) && !force {
        return Err(refuse_modified(
            &section_path,
            "rewrite the baton section of",
        ));
    }

    let dir = places.skill_dir(harness, scope);
    let text = skill_text(harness);
    let mut changes = Vec::new();
    let action = match before.state {
        FileState::Current => Action::Unchanged,
        FileState::Absent => Action::Installed,
        FileState::Outdated | FileState::Modified => Action::Updated,
    };
    if action != Action::Unchanged {
        create_dirs(&dir)?;
        fsutil::write_atomic(&before.path, text.as_bytes())?;
    }
    changes.push(Change {
        path: before.path.clone(),
        action,
    });

    let old_record = read_record(&dir)?;
    let mut recorded_section = old_record.and_then(|r| r.agents_md);
    if let Some(state) = section_before {
        let action = write_section(&section_path, harness, state)?;
        recorded_section = Some(RecordedSection {
            path: section_path.clone(),
            hash: hash(section_text(harness).trim_matches('\n').as_bytes()),
        });
        changes.push(Change {
            path: section_path,
            action,
        });
    }
    let record = Record {
        format: RECORD_FORMAT,
        baton_version: env!("CARGO_PKG_VERSION").to_string(),
        skill_md: hash(text.as_bytes()),
        agents_md: recorded_section,
    };
    let bytes = serde_json::to_vec_pretty(&record)
        .map_err(|e| Error::other(format!("cannot encode the install record: {e}")))?;
    let record_path = dir.join(RECORD_FILE);
    if read_optional(&record_path)?.as_deref() != Some(bytes.as_slice()) {
        fsutil::write_atomic(&record_path, &bytes)?;
    }
    Ok(changes)
}

fn write_section(path: &Path, harness: Harness, state: FileState) -> Result<Action> {
    if state == FileState::Current {
        return Ok(Action::Unchanged);
    }
    let old = read_optional(path)?.unwrap_or_default();
    let old = String::from_utf8(old).map_err(|_| {
        Error::usage(format!("{} is not UTF-8 text", path.display()))
            .with_hint("fix or move the file, then run the command again")
    })?;
    let block = format!(
        "{SECTION_BEGIN}\n{}\n{SECTION_END}",
        section_text(harness).trim_matches('\n')
    );
    let new = match find_section(&old) {
        Some((range, _)) => format!("{}{block}{}", &old[..range.start], &old[range.end..]),
        None if old.is_empty() => format!("{block}\n"),
        None => format!("{}\n\n{block}\n", old.trim_end_matches('\n')),
    };
    if let Some(parent) = path.parent() {
        create_dirs(parent)?;
    }
    fsutil::write_atomic(path, new.as_bytes())?;
    Ok(if state == FileState::Absent {
        Action::Installed
    } else {
        Action::Updated
    })
}

/// Remove the skill (and the AGENTS.md section it recorded). A modified file is refused
/// unless `force`; nothing else in the directories is touched.
pub fn remove(places: &Places, harness: Harness, scope: Scope, force: bool) -> Result<Vec<Change>> {
    let before = status(places, harness, scope)?;
    let dir = places.skill_dir(harness, scope);
    let record = read_record(&dir)?;
    let section = record
        .as_ref()
        .and_then(|r| r.agents_md.as_ref())
        .map(|s| s.path.clone());
    let section_state = match &section {
        Some(path) => Some(section_state(path, harness, record.as_ref())?),
        None => None,
    };
    if before.state == FileState::Modified && !force {
        return Err(refuse_modified(&before.path, "remove"));
    }
    if let (Some(path), Some(FileState::Modified)) = (&section, section_state)
        && !force
    {
        return Err(refuse_modified(path, "remove the baton section of"));
    }
    let mut changes = Vec::new();
    let action = if before.state == FileState::Absent {
        Action::NotInstalled
    } else {
        remove_file(&before.path)?;
        Action::Removed
    };
    changes.push(Change {
        path: before.path.clone(),
        action,
    });
    if let (Some(path), Some(state)) = (section, section_state) {
        let action = if state == FileState::Absent {
            Action::NotInstalled
        } else {
            strip_section(&path)?;
            Action::Removed
        };
        changes.push(Change { path, action });
    }
    remove_file(&dir.join(RECORD_FILE))?;
    // Only an empty directory goes: anything a user put beside the skill stays.
    match fs::remove_dir(&dir) {
        Ok(()) => {}
        Err(e) if matches!(e.kind(), IoKind::NotFound | IoKind::DirectoryNotEmpty) => {}
        Err(e) => return Err(Error::io("cannot remove directory", &dir, e)),
    }
    Ok(changes)
}

fn remove_file(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() == IoKind::NotFound => Ok(()),
        other => other.ctx("cannot remove", path),
    }
}

fn strip_section(path: &Path) -> Result<()> {
    let Some(bytes) = read_optional(path)? else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let Some((range, _)) = find_section(&text) else {
        return Ok(());
    };
    let before = text[..range.start].trim_end_matches('\n');
    let after = text[range.end..].trim_start_matches('\n');
    let new = match (before.is_empty(), after.is_empty()) {
        (true, true) => String::new(),
        (true, false) => after.to_string(),
        (false, true) => format!("{before}\n"),
        (false, false) => format!("{before}\n\n{after}"),
    };
    if new.is_empty() {
        return remove_file(path);
    }
    fsutil::write_atomic(path, new.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(root: &Path) -> Places {
        Places {
            home: root.join("home"),
            claude_dir: root.join("home/.claude"),
            codex_home: root.join("home/.codex"),
            project: root.join("project"),
        }
    }

    #[test]
    fn the_skill_names_its_harness_and_has_frontmatter() {
        for harness in Harness::ALL {
            let text = skill_text(harness);
            assert!(text.starts_with("---\nname: baton\ndescription: "));
            assert!(text.contains(&format!("--transcript {}:latest", harness.name())));
            assert!(!text.contains("{{"));
        }
    }

    #[test]
    fn an_edited_section_is_kept_and_the_rest_of_agents_md_survives_removal() {
        let root = tempfile::tempdir().unwrap();
        let p = places(root.path());
        fs::create_dir_all(&p.project).unwrap();
        let agents = p.agents_md(Scope::Project);
        fs::write(&agents, "# Rules\n\nBe brief.\n").unwrap();
        install(&p, Harness::Codex, Scope::Project, true, false).unwrap();
        let text = fs::read_to_string(&agents).unwrap();
        assert!(text.starts_with("# Rules\n\nBe brief.\n\n<!-- baton skill: begin"));
        // Idempotent: a second install changes nothing.
        let changes = install(&p, Harness::Codex, Scope::Project, true, false).unwrap();
        assert!(changes.iter().all(|c| c.action == Action::Unchanged));
        assert_eq!(fs::read_to_string(&agents).unwrap(), text);

        fs::write(&agents, text.replace("never read", "please never read")).unwrap();
        let err = install(&p, Harness::Codex, Scope::Project, true, false).unwrap_err();
        assert_eq!(err.kind, baton_error::ErrorKind::StoreConflict);
        let err = remove(&p, Harness::Codex, Scope::Project, false).unwrap_err();
        assert_eq!(err.kind, baton_error::ErrorKind::StoreConflict);
        remove(&p, Harness::Codex, Scope::Project, true).unwrap();
        assert_eq!(
            fs::read_to_string(&agents).unwrap(),
            "# Rules\n\nBe brief.\n"
        );
        assert!(!p.skill_dir(Harness::Codex, Scope::Project).exists());
    }

    #[test]
    fn text_an_older_baton_wrote_is_updated_without_force() {
        let root = tempfile::tempdir().unwrap();
        let p = places(root.path());
        install(&p, Harness::ClaudeCode, Scope::User, false, false).unwrap();
        let dir = p.skill_dir(Harness::ClaudeCode, Scope::User);
        // Pretend an older release wrote different text and recorded it.
        let old = "---\nname: baton\ndescription: old\n---\nold text\n";
        fs::write(dir.join(SKILL_FILE), old).unwrap();
        let mut record: Record =
            serde_json::from_slice(&fs::read(dir.join(RECORD_FILE)).unwrap()).unwrap();
        record.skill_md = hash(old.as_bytes());
        fs::write(dir.join(RECORD_FILE), serde_json::to_vec(&record).unwrap()).unwrap();
        assert_eq!(
            status(&p, Harness::ClaudeCode, Scope::User).unwrap().state,
            FileState::Outdated
        );
        let changes = install(&p, Harness::ClaudeCode, Scope::User, false, false).unwrap();
        assert_eq!(changes[0].action, Action::Updated);
        assert_eq!(
            fs::read_to_string(dir.join(SKILL_FILE)).unwrap(),
            skill_text(Harness::ClaudeCode)
        );
    }
}
