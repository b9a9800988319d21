//! Shared test harness: run the real `baton` binary in an isolated temporary environment.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;

/// A temporary world: its own HOME, working directory and store, no inherited BATON_*.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Env {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn store(&self) -> PathBuf {
        self.path().join(".baton")
    }

    /// A `baton` command running in the environment's directory.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::cargo_bin("baton").expect("baton binary");
        cmd.current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("USER", "tester")
            .env("TZ", "UTC");
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run baton")
    }

    /// Run and require success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "baton {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Run with --json and parse the one document on stdout.
    pub fn json(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let out = self.run(&full);
        let text = String::from_utf8_lossy(&out.stdout);
        let doc = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
            panic!(
                "not one JSON document ({e}): {text:?} stderr {:?}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), doc)
    }

    pub fn init(&self) {
        self.ok(&["init"]);
    }

    /// Write `files` (path, content) under `dir`, creating parents.
    pub fn write_tree(&self, dir: &str, files: &[(&str, &[u8])]) -> PathBuf {
        let root = self.path().join(dir);
        for (rel, content) in files {
            let path = root.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, content).unwrap();
        }
        fs::create_dir_all(&root).unwrap();
        root
    }

    /// Save `dir` and return the new bundle id.
    pub fn save(&self, dir: &str, extra: &[&str]) -> String {
        let mut args = vec!["save", dir];
        args.extend_from_slice(extra);
        let out = self.ok(&args);
        let id = out.trim().to_string();
        assert_eq!(id.len(), 64, "save prints one 64-hex id: {out:?}");
        id
    }
}

/// Every file under `root` with its bytes, sorted: compare whole stores byte for byte.
pub fn snapshot_files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let meta = fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if meta.is_dir() {
                out.push((rel, b"<dir>".to_vec()));
                walk(&path, root, out);
            } else if meta.file_type().is_symlink() {
                out.push((
                    rel,
                    fs::read_link(&path)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            } else {
                out.push((rel, fs::read(&path).unwrap()));
            }
        }
    }
    walk(root, root, &mut out);
    out
}

/// Decompress a stored object file (zstd) to its content.
pub fn read_object_file(path: &Path) -> Vec<u8> {
    zstd::decode_all(fs::File::open(path).unwrap()).unwrap()
}

/// The path of object `id` in a store.
pub fn object_path(store: &Path, id: &str) -> PathBuf {
    store.join("objects").join(&id[..2]).join(&id[2..])
}
