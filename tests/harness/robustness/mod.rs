//! Robustness: damaged objects, crashes mid-save, concurrent savers, bounded memory,
//! write ordering (strace) and private modes, all through the real `baton` binary.

use crate::common;

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Env, object_path, snapshot_files};
use serde_json::Value;

// ---------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------

/// splitmix64: a tiny deterministic PRNG, seeded per test, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        common::splitmix64(&mut self.0)
    }

    /// Uniform-ish in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn range(&mut self, lo: u64, hi_inclusive: u64) -> u64 {
        lo + self.below(hi_inclusive - lo + 1)
    }

    /// `len` incompressible bytes.
    fn random_bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// `len` bytes of compressible, text-like content.
    fn text(&mut self, len: usize) -> Vec<u8> {
        const WORDS: &[&str] = &[
            "handoff", "agent", "baton", "store", "tree", "blob", "note", "plan", "todo", "done",
        ];
        let mut out = Vec::with_capacity(len + 16);
        let mut line = 0u64;
        while out.len() < len {
            line += 1;
            out.extend_from_slice(format!("{line:06} ").as_bytes());
            for _ in 0..8 {
                out.extend_from_slice(WORDS[self.below(WORDS.len() as u64) as usize].as_bytes());
                out.push(b' ');
            }
            out.extend_from_slice(format!("{:016x}\n", self.next()).as_bytes());
        }
        out.truncate(len);
        out
    }

    /// Random or text-like content, chosen at random.
    fn content(&mut self, len: usize) -> Vec<u8> {
        if self.below(2) == 0 {
            self.random_bytes(len)
        } else {
            self.text(len)
        }
    }
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn text_of(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The bundle id REV names, or `None` when it names nothing yet (exit 3).
fn rev_id(env: &Env, rev: &str) -> Option<String> {
    let (code, doc) = env.json(&["show", rev]);
    match code {
        0 => Some(
            doc["id"]
                .as_str()
                .expect("show --json has an id")
                .to_string(),
        ),
        3 => None,
        _ => panic!("show {rev} failed with exit {code}: {doc}"),
    }
}

/// `show --json REV`: its entries as (path, kind, id).
fn entries(env: &Env, rev: &str) -> Vec<(String, String, String)> {
    let (code, doc) = env.json(&["show", rev]);
    assert_eq!(code, 0, "show {rev}: {doc}");
    doc["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
                e["id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn entry_id(env: &Env, rev: &str, path: &str) -> String {
    entries(env, rev)
        .into_iter()
        .find(|(p, _, _)| p == path)
        .unwrap_or_else(|| panic!("{path} is not in {rev}"))
        .2
}

/// Leftover checkout staging directories (`.NAME.baton-checkout-*`) in `parent`.
fn staging_leftovers(parent: &Path) -> Vec<String> {
    fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".baton-checkout-"))
        .collect()
}

fn elapsed_note(name: &str, start: Instant) {
    println!("[robustness] {name}: {:.2?}", start.elapsed());
}

mod concurrency_memory;
mod corruption;
mod hostile_trees;
mod private_modes;
mod sigkill_save;
mod write_order;
