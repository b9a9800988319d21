//! Running git read-only: one program bound to a directory, a scrubbed environment, and
//! the small byte helpers the parsers share.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why a git invocation gave no output.
#[derive(Debug)]
pub(crate) enum GitError {
    /// The program could not be found.
    Missing,
    /// The program could not be started for another reason.
    Spawn(String),
    /// git ran and exited unsuccessfully.
    Failed { code: Option<i32>, message: String },
}

impl GitError {
    pub(crate) fn describe(&self) -> String {
        match self {
            GitError::Missing => "git not found".to_string(),
            GitError::Spawn(m) => format!("git could not be run: {m}"),
            GitError::Failed { message, .. } => message.clone(),
        }
    }
}

/// Environment variables that would point git somewhere other than `-C DIR`.
const REDIRECTING_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
];

/// A git program bound to a directory; every call is read-only.
pub(crate) struct Git {
    program: PathBuf,
    dir: PathBuf,
}

impl Git {
    pub(crate) fn new(program: &Path, dir: &Path) -> Self {
        Git {
            program: program.to_path_buf(),
            dir: dir.to_path_buf(),
        }
    }

    /// The directory it runs in.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn command(&self, args: &[&str], in_dir: bool) -> Command {
        let mut cmd = Command::new(&self.program);
        if in_dir {
            cmd.arg("-C").arg(&self.dir);
        }
        cmd.args([
            "-c",
            "core.quotepath=false",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "color.ui=false",
            "-c",
            "log.showSignature=false",
        ]);
        cmd.args(args);
        for var in REDIRECTING_ENV {
            cmd.env_remove(var);
        }
        cmd.env("GIT_OPTIONAL_LOCKS", "0")
            .env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null());
        cmd
    }

    fn exec(&self, args: &[&str], in_dir: bool) -> Result<Vec<u8>, GitError> {
        self.start_in(args, in_dir)?.wait()
    }

    fn start_in(&self, args: &[&str], in_dir: bool) -> Result<Running, GitError> {
        let mut command = self.command(args, in_dir);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        match command.spawn() {
            Ok(child) => Ok(Running {
                child: Some(child),
                args: args.iter().map(|a| a.to_string()).collect(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(GitError::Missing),
            Err(e) => Err(GitError::Spawn(e.to_string())),
        }
    }

    /// Start `git -C DIR ARGS...`; [`Running::wait`] gives what [`Git::run`] would.
    pub(crate) fn start(&self, args: &[&str]) -> Result<Running, GitError> {
        self.start_in(args, true)
    }

    /// Run `git -C DIR ARGS...` and return its standard output.
    pub(crate) fn run(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        self.exec(args, true)
    }

    /// Run without `-C` (for `--version`).
    pub(crate) fn run_plain(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        self.exec(args, false)
    }

    /// Run a yes/no query: exit 0 is yes, exit 1 is no, anything else an error.
    pub(crate) fn test(&self, args: &[&str]) -> Result<bool, GitError> {
        match self.run(args) {
            Ok(_) => Ok(true),
            Err(GitError::Failed { code: Some(1), .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// A git process started by [`Git::start`]; dropped unwaited (its answer no longer
/// wanted), its pipes are closed and it is waited for, so that none outlives the command.
pub(crate) struct Running {
    child: Option<std::process::Child>,
    args: Vec<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            drop(child.stdout.take());
            drop(child.stderr.take());
            let _ = child.wait();
        }
    }
}

impl Running {
    /// Wait for it: its standard output, or why it gave none.
    pub(crate) fn wait(mut self) -> Result<Vec<u8>, GitError> {
        let args = std::mem::take(&mut self.args);
        let Some(child) = self.child.take() else {
            return Err(GitError::Spawn("waited for twice".to_string()));
        };
        let output = child.wait_with_output();
        let output = match output {
            Ok(output) => output,
            Err(e) => return Err(GitError::Spawn(e.to_string())),
        };
        if output.status.success() {
            return Ok(output.stdout);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| {
                l.trim_start_matches("fatal: ")
                    .trim_start_matches("error: ")
            })
            .map(str::to_string)
            .unwrap_or_else(|| format!("git {} exited with {}", args.join(" "), output.status));
        Err(GitError::Failed {
            code: output.status.code(),
            message: first,
        })
    }
}

/// Whether `text` looks like a full git object id (SHA-1 or SHA-256 hex). Ids taken from
/// evidence are checked with this before they reach a git command line.
pub(crate) fn is_object_id(text: &str) -> bool {
    (text.len() == 40 || text.len() == 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

pub(crate) fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(crate) fn trim_newline(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

#[cfg(unix)]
pub(crate) fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

#[cfg(not(unix))]
pub(crate) fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(lossy(bytes))
}

/// The absolute, symlink-resolved form of `dir` when it exists.
pub(crate) fn absolute(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir)
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_path_buf())
}

/// Whether `git` can be run.
pub fn git_available() -> bool {
    Git::new(Path::new("git"), Path::new("."))
        .run_plain(&["--version"])
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ids_are_checked() {
        assert!(is_object_id(&"a".repeat(40)));
        assert!(is_object_id(&"0".repeat(64)));
        assert!(!is_object_id("--output=/tmp/x"));
        assert!(!is_object_id(&"g".repeat(40)));
    }
}
