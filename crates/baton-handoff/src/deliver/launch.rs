//! `baton resume --launch claude|codex`: the harness started in the workspace with the
//! kickoff as its first prompt, through its own command-line prompt argument (`claude
//! "PROMPT"`, `codex "PROMPT"`: both start the interactive session with that prompt). The
//! program is found on PATH, or named by `BATON_CLAUDE_BIN` / `BATON_CODEX_BIN`; the
//! prompt is one argv element, never seen by a shell. baton then becomes the harness
//! (exec(2)): the harness has the terminal, its signals and its exit status.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Harness;
use baton_error::{Error, Result};

/// What to launch, as plain values.
pub struct LaunchOptions<'a> {
    pub harness: Harness,
    /// The directory the harness starts in (the resumed workspace).
    pub workspace: &'a Path,
    /// The program to run instead of the harness's name on PATH (`BATON_CLAUDE_BIN`): a
    /// path, or a name looked up on PATH.
    pub program: Option<OsString>,
    /// The PATH to search.
    pub path: Option<OsString>,
}

impl<'a> LaunchOptions<'a> {
    /// The options with the program override and PATH taken from the environment.
    pub fn from_env(harness: Harness, workspace: &'a Path) -> Self {
        LaunchOptions {
            harness,
            workspace,
            program: std::env::var_os(harness.bin_env()).filter(|v| !v.is_empty()),
            path: std::env::var_os("PATH"),
        }
    }
}

/// A launch made ready: the program found, the workspace checked.
#[derive(Debug)]
pub struct Launch {
    pub harness: Harness,
    pub program: PathBuf,
    pub workspace: PathBuf,
}

/// Find the program and check the workspace, so that every refusal comes before anything
/// is pulled, printed or started.
pub fn prepare(opts: &LaunchOptions<'_>) -> Result<Launch> {
    let harness = opts.harness;
    let program = match &opts.program {
        Some(named) => find_named(harness, named, opts.path.as_deref())?,
        None => on_path(OsStr::new(harness.name()), opts.path.as_deref()).ok_or_else(|| {
            Error::not_found(format!(
                "{} is not on PATH: --launch {} runs it",
                harness.name(),
                harness.name()
            ))
            .with_hint(format!(
                "install {}, or set {} to the program to run",
                harness.name(),
                harness.bin_env()
            ))
        })?,
    };
    let workspace = std::fs::canonicalize(opts.workspace)
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| {
            Error::not_found(format!(
                "workspace {} is not a directory: --launch starts {} there",
                opts.workspace.display(),
                harness.name()
            ))
            .with_hint("give --workspace DIR of an existing directory")
        })?;
    Ok(Launch {
        harness,
        program,
        workspace,
    })
}

impl Launch {
    /// Become the harness: exec(2) of the program with `prompt` (the first prompt,
    /// [`super::delivered_text`] of the kickoff's) as its one argument, in the workspace,
    /// with this process's stdio and environment. Returns only on failure.
    pub fn exec(self, prompt: &str) -> Error {
        let err = Command::new(&self.program)
            .arg(prompt)
            .current_dir(&self.workspace)
            .exec();
        Error::other(format!(
            "cannot start {} ({}): {err}",
            self.harness.name(),
            self.program.display()
        ))
        .with_hint(format!(
            "check that {} runs, or set {} to a program that does",
            self.program.display(),
            self.harness.bin_env()
        ))
    }
}

fn find_named(harness: Harness, named: &OsStr, path: Option<&OsStr>) -> Result<PathBuf> {
    let found = if named.as_encoded_bytes().contains(&b'/') {
        Some(PathBuf::from(named)).filter(|p| executable(p))
    } else {
        on_path(named, path)
    };
    found.ok_or_else(|| {
        Error::not_found(format!(
            "{} names {}, which is not an executable file{}",
            harness.bin_env(),
            Path::new(named).display(),
            if named.as_encoded_bytes().contains(&b'/') {
                ""
            } else {
                " on PATH"
            }
        ))
        .with_hint(format!(
            "set {} to the path of the {} program, or unset it to run {} from PATH",
            harness.bin_env(),
            harness.name(),
            harness.name()
        ))
    })
}

/// The first executable file named `name` in the directories of `path`.
fn on_path(name: &OsStr, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| executable(candidate))
}

fn executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_error::ErrorKind;

    fn opts<'a>(ws: &'a Path, program: Option<&str>, path: &Path) -> LaunchOptions<'a> {
        LaunchOptions {
            harness: Harness::Claude,
            workspace: ws,
            program: program.map(OsString::from),
            path: Some(path.as_os_str().to_owned()),
        }
    }

    #[test]
    fn programs_are_found_on_path_or_by_the_override() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let ws = dir.path();
        let e = prepare(&opts(ws, None, &bin)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert!(
            e.message.starts_with("claude is not on PATH"),
            "{}",
            e.message
        );
        assert!(e.hint.unwrap().contains("BATON_CLAUDE_BIN"));
        // Not executable: passed over.
        std::fs::write(bin.join("claude"), "#!/bin/sh\n").unwrap();
        assert!(prepare(&opts(ws, None, &bin)).is_err());
        std::fs::set_permissions(bin.join("claude"), PermissionsExt::from_mode(0o755)).unwrap();
        let found = prepare(&opts(ws, None, &bin)).unwrap();
        assert_eq!(found.program, bin.join("claude"));
        let named = bin.join("claude").to_string_lossy().into_owned();
        assert_eq!(
            prepare(&opts(ws, Some(&named), Path::new("/nowhere")))
                .unwrap()
                .program,
            bin.join("claude")
        );
        let e = prepare(&opts(ws, Some("/no/such/claude"), &bin)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert!(
            e.message
                .starts_with("BATON_CLAUDE_BIN names /no/such/claude")
        );
        let e = prepare(&opts(&ws.join("gone"), None, &bin)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
    }
}
