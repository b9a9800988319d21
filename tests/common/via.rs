//! How a test runs `baton --json` and reads its one document: the one pair of helpers
//! (`json_ok`, `json_err`) every test module uses, over whatever a command needs to reach
//! a server (an sshd's HOME and agent, an S3 server's credentials) and what to show of
//! that server when it fails.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use super::{Env, text};

/// A way to run `baton` in an [`Env`]: the command (with whatever variables a server
/// wants) and the context a failure message adds (a server's log).
pub trait Via {
    /// A `baton` command in `env`.
    fn cmd(&self, env: &Env) -> Command;

    /// What to add to a failure message.
    fn context(&self) -> String {
        String::new()
    }

    /// `baton --json ARGS`: the exit code, the one document on stdout, the output.
    fn json(&self, env: &Env, args: &[&str]) -> (i32, Value, Output) {
        let out = self
            .cmd(env)
            .arg("--json")
            .args(args)
            .output()
            .expect("run baton");
        let doc = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", text(&out)));
        (out.status.code().unwrap_or(-1), doc, out)
    }

    /// `--json ARGS`, required to succeed; the document.
    fn json_ok(&self, env: &Env, args: &[&str]) -> Value {
        let (code, doc, out) = self.json(env, args);
        assert_eq!(code, 0, "baton {args:?}: {}{}", text(&out), self.context());
        assert_eq!(doc["ok"], true, "{doc}");
        doc
    }

    /// `--json ARGS`, required to fail with `exit`; the document's `error`.
    fn json_err(&self, env: &Env, args: &[&str], exit: i32) -> Value {
        let (code, doc, out) = self.json(env, args);
        assert_eq!(
            code,
            exit,
            "baton {args:?} should exit {exit}: {}{}",
            text(&out),
            self.context()
        );
        assert_eq!(doc["ok"], false, "{doc}");
        assert_eq!(doc["error"]["exit_code"], exit, "{doc}");
        doc["error"].clone()
    }
}

/// The environment as it is: no server.
pub struct Here;

impl Via for Here {
    fn cmd(&self, env: &Env) -> Command {
        env.cmd()
    }
}

/// The environment with another working directory.
pub struct InDir<'a>(pub &'a Path);

impl Via for InDir<'_> {
    fn cmd(&self, env: &Env) -> Command {
        let mut cmd = env.cmd();
        cmd.current_dir(self.0);
        cmd
    }
}
