//! The `Transport` fixture of the shared sync scenarios: a local-path target, a real
//! OpenSSH `sshd` on loopback, or a real S3 server (moto, tests/common/s3.rs). The
//! scenarios inspect the remote store on disk: locally and over SSH it is on this
//! machine; on S3 `remote()` copies the bucket's keys into a directory and `upload`
//! writes a changed copy back. The `_permissive` ones run under umask 000: the client
//! locally, the server's sftp-server over SSH.

use crate::common;
use crate::s3::S3Server;
use crate::sshd::Sshd;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Env, Via, s, text};
use serde_json::Value;

/// Where the remote store lives and how `baton` reaches it.
pub enum Transport {
    /// A plain path target; `holder` owns the directory the remote store goes in.
    /// `permissive`: every `baton` runs under umask 000.
    Local { holder: Env, permissive: bool },
    /// An `ssh://` / scp-like target on a per-test sshd.
    Ssh { server: Sshd },
    /// An `s3://BUCKET/PREFIX` target: a prefix of its own on the S3 server the
    /// scenarios share (one server start instead of one a test); `copy` holds the
    /// directory `remote()` copies the bucket into.
    S3 {
        server: &'static S3Server,
        prefix: String,
        copy: Env,
    },
}

/// The S3 server of this test process, started by the first S3 scenario. It is never
/// dropped: its launcher exits when this process does (its standard input closes).
fn shared_s3() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    SERVER.get_or_init(S3Server::start)
}

impl Transport {
    pub fn local() -> Self {
        Transport::Local {
            holder: Env::new(),
            permissive: false,
        }
    }

    pub fn ssh() -> Self {
        Transport::Ssh {
            server: Sshd::start(),
        }
    }

    /// An S3 target on a fresh moto server, or `None` (after the note) when moto is not
    /// installed here (under `CI=true` that fails the test: `common::precondition`).
    pub fn s3() -> Option<Self> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        S3Server::skip_unless_available().then(|| Transport::S3 {
            server: shared_s3(),
            prefix: format!("scenario{}/r", NEXT.fetch_add(1, Ordering::SeqCst)),
            copy: Env::new(),
        })
    }

    /// Local with every `baton` under umask 000.
    pub fn local_permissive() -> Self {
        Transport::Local {
            holder: Env::new(),
            permissive: true,
        }
    }

    /// SSH with the server's sftp-server under umask 000.
    pub fn ssh_permissive() -> Self {
        Transport::Ssh {
            server: Sshd::builder().sftp_umask(0o000).start(),
        }
    }

    pub fn is_ssh(&self) -> bool {
        matches!(self, Transport::Ssh { .. })
    }

    /// The remote store's directory on this machine; on S3 a copy of the bucket's keys
    /// made now (so call it again after baton changed the remote).
    pub fn remote(&self) -> PathBuf {
        match self {
            Transport::Local { holder, .. } => holder.path().join("r"),
            Transport::Ssh { server } => server.scratch().join("remote"),
            Transport::S3 {
                server,
                prefix,
                copy,
            } => {
                let dir = copy.path().join("r");
                server.copy_store(prefix, &dir);
                dir
            }
        }
    }

    /// After a change made behind baton's back to the directory `remote()` returned: on
    /// S3 the bucket takes the copy's files (changed ones written, removed ones deleted);
    /// elsewhere that directory is the remote already.
    pub fn upload(&self, dir: &Path) {
        if let Transport::S3 { server, prefix, .. } = self {
            server.upload_store(dir, prefix);
        }
    }

    /// The URL `target add` is given (the scp-like form over SSH).
    pub fn url(&self) -> String {
        match self {
            Transport::Local { .. } => s(&self.remote()).to_string(),
            Transport::Ssh { server } => format!("{}:{}", server.alias(), s(&self.remote())),
            Transport::S3 { server, prefix, .. } => server.url(prefix),
        }
    }

    /// The URL `clone` is given, and the form every target URL is stored and reported
    /// in (`ssh://HOST/PATH` over SSH, the plain path locally).
    pub fn clone_url(&self) -> String {
        match self {
            Transport::Local { .. } => s(&self.remote()).to_string(),
            Transport::Ssh { server } => {
                format!("ssh://{}{}", server.alias(), s(&self.remote()))
            }
            Transport::S3 { server, prefix, .. } => server.url(prefix),
        }
    }

    /// `baton --json ARGS` in `env`, capped (files at 64 MiB, 30 s): the exit code, the
    /// document and the time it took.
    pub fn capped_json(&self, env: &Env, args: &[&str]) -> (Option<i32>, Value, Duration) {
        let mut cmd = self.cmd(env);
        cmd.arg("--json").args(args);
        let (out, took) = common::capped_output(cmd, Duration::from_secs(30));
        let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert!(doc.is_object(), "{args:?}: {}", text(&out));
        (out.status.code(), doc, took)
    }
}

impl Via for Transport {
    /// A `baton` command in `env` that reaches the remote (over SSH: the server's HOME
    /// and agent socket).
    fn cmd(&self, env: &Env) -> Command {
        match self {
            Transport::Ssh { server } => server.cmd(env),
            Transport::Local {
                permissive: true, ..
            } => {
                let mut cmd = env.cmd();
                // SAFETY: umask is async-signal-safe and touches no memory.
                unsafe {
                    cmd.pre_exec(|| {
                        libc::umask(0);
                        Ok(())
                    });
                }
                cmd
            }
            Transport::Local { .. } => env.cmd(),
            Transport::S3 { server, .. } => server.cmd(env),
        }
    }

    /// The server's log over SSH and S3.
    fn context(&self) -> String {
        match self {
            Transport::Local { .. } => String::new(),
            Transport::Ssh { server } => server.context(),
            Transport::S3 { server, .. } => server.context(),
        }
    }
}
