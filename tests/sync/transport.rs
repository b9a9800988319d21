//! The `Transport` fixture of the shared sync scenarios: a local-path target, or a real
//! OpenSSH `sshd` on loopback (the remote store is on this machine either way, so the
//! scenarios inspect it on disk). The `_permissive` ones run under umask 000: the client
//! locally, the server's sftp-server over SSH.

use crate::common;
use crate::sshd::Sshd;

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
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

    /// The remote store's directory on this machine.
    pub fn remote(&self) -> PathBuf {
        match self {
            Transport::Local { holder, .. } => holder.path().join("r"),
            Transport::Ssh { server } => server.scratch().join("remote"),
        }
    }

    /// The URL `target add` is given (the scp-like form over SSH).
    pub fn url(&self) -> String {
        match self {
            Transport::Local { .. } => s(&self.remote()).to_string(),
            Transport::Ssh { server } => format!("{}:{}", server.alias(), s(&self.remote())),
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
        }
    }

    /// The sshd log over SSH.
    fn context(&self) -> String {
        match self {
            Transport::Local { .. } => String::new(),
            Transport::Ssh { server } => server.context(),
        }
    }
}
