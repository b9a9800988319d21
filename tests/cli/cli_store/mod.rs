//! Happy paths of the local store, through the real binary: init, save, show, log, cat,
//! checkout, diff, gc, revisions, JSON output, completions and the man page.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use base64::Engine;
use common::{Env, object_path, read_object_file, snapshot_files};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Run the child with `mask` as its umask.
fn with_umask(mut cmd: Command, mask: libc::mode_t) -> Command {
    // SAFETY: umask is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(move || {
            libc::umask(mask);
            Ok(())
        });
    }
    cmd
}

fn output_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run baton");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Ids of every object file in the store.
/// Every object id the store holds, loose or packed (a save packs its blobs and trees).
fn object_ids(store: &Path) -> BTreeSet<String> {
    common::stored_ids(store)
}

/// Replace every RFC 3339 timestamp (`2026-11-29T21:26:12Z`) with `<TIME>`.
fn normalise_times(text: &str) -> String {
    let bytes = text.as_bytes();
    let shape = b"dddd-dd-ddTdd:dd:ddZ";
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let matches = bytes.len() - i >= shape.len()
            && shape.iter().zip(&bytes[i..]).all(|(s, b)| {
                if *s == b'd' {
                    b.is_ascii_digit()
                } else {
                    s == b
                }
            });
        if matches {
            out.push_str("<TIME>");
            i += shape.len();
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn b3(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// What a directory holds, exactly: kinds, contents, link targets, the owner's exec bit.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Dir,
    File { exec: bool, bytes: Vec<u8> },
    Link(PathBuf),
}

fn describe(root: &Path) -> BTreeMap<String, Item> {
    let mut out = BTreeMap::new();
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, Item>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            let meta = fs::symlink_metadata(&path).unwrap();
            let item = if meta.file_type().is_symlink() {
                Item::Link(fs::read_link(&path).unwrap())
            } else if meta.is_dir() {
                walk(&path, root, out);
                Item::Dir
            } else {
                Item::File {
                    exec: meta.permissions().mode() & 0o100 != 0,
                    bytes: fs::read(&path).unwrap(),
                }
            };
            out.insert(rel, item);
        }
    }
    walk(root, root, &mut out);
    out
}

fn set_exec(path: &Path, exec: bool) {
    fs::set_permissions(
        path,
        fs::Permissions::from_mode(if exec { 0o755 } else { 0o644 }),
    )
    .unwrap();
}

fn all_bytes() -> Vec<u8> {
    (0..=255u8).cycle().take(3000).collect()
}

/// A tree with every kind of entry: text, binary, executable, empty and nested dirs, and
/// symlinks that dangle, stay inside, or point outside the tree (at a file and a dir).
fn rich_tree(env: &Env) -> PathBuf {
    let outside = env.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.txt"), b"not to be saved").unwrap();
    let root = env.write_tree(
        "work",
        &[
            ("handoff.md", b"# Handoff\n\nall done\n"),
            ("bin.dat", &all_bytes()),
            ("tool.sh", b"#!/bin/sh\necho hi\n"),
            ("deep/nested/dir/file.md", b"nested\n"),
            ("name with spaces & \u{fc}nicode.txt", b"u\n"),
            ("zero", b""),
        ],
    );
    set_exec(&root.join("tool.sh"), true);
    fs::create_dir_all(root.join("empty")).unwrap();
    fs::create_dir_all(root.join("deep/nested/empty2")).unwrap();
    fs::create_dir_all(root.join("links")).unwrap();
    symlink("does/not/exist", root.join("links/dangling")).unwrap();
    symlink("../../outside/secret.txt", root.join("links/outside-file")).unwrap();
    symlink("../../outside", root.join("links/outside-dir")).unwrap();
    symlink("/etc", root.join("links/absolute")).unwrap();
    symlink("../handoff.md", root.join("links/inside")).unwrap();
    root
}

use crate::common::json_ok;

mod checkout_show;
mod dedup_json;
mod gc_help;
mod init_save;
