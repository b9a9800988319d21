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

// ---------------------------------------------------------------------------------------
// 1. Corruption of each object kind
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A small file's blob (verified in memory by `cat`).
    Blob,
    /// A blob larger than `cat`'s in-memory limit (8 MiB), which it streams via a spool.
    LargeBlob,
    /// A subdirectory's tree.
    Tree,
    /// A bundle manifest (the one `current` names).
    Bundle,
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    /// Flip one byte of the compressed file in place.
    FlipByte,
    /// Replace the file with a valid zstd frame of different (same-length, near-identical)
    /// content.
    OtherFrame,
    Delete,
    Truncate,
}

const DAMAGES: [Damage; 4] = [
    Damage::FlipByte,
    Damage::OtherFrame,
    Damage::Delete,
    Damage::Truncate,
];

/// A store with two bundles: B1 (`old`) and B2 (`new`, current), where B2 adds a small
/// file, a large file and a subdirectory that B1's history never saw.
struct TwoBundles {
    env: Env,
    old: String,
    new: String,
}

fn two_bundles(seed: u64, large: bool) -> TwoBundles {
    let env = Env::new();
    env.init();
    let mut rng = Rng::new(seed);
    let keep = rng.text(3000);
    let shared = rng.random_bytes(5000);
    env.write_tree(
        "work",
        &[("keep.txt", &keep), ("common/shared.bin", &shared)],
    );
    let old = env.save("work", &["--summary", "first"]);
    let new_small = rng.random_bytes(40_000);
    let sub_a = rng.text(2000);
    let sub_b = rng.random_bytes(700);
    let mut files: Vec<(&str, &[u8])> = vec![
        ("new.bin", &new_small),
        ("sub/a.txt", &sub_a),
        ("sub/b.bin", &sub_b),
    ];
    let big;
    if large {
        big = rng.random_bytes(10 << 20);
        files.push(("big.bin", &big));
    }
    env.write_tree("work", &files);
    let new = env.save("work", &["--summary", "second"]);
    // Every object in its own file, as saves stored them before they wrote packs (such
    // stores still read), so that one object's file can be damaged.
    common::unpack_to_loose(&env.store());
    TwoBundles { env, old, new }
}

/// Change a byte of `content` without changing its length; for JSON (trees, manifests)
/// replace the last hex digit, so the result still parses and only the hash disagrees.
fn near_copy(content: &[u8]) -> Vec<u8> {
    let mut out = content.to_vec();
    let hex = b"0123456789abcdef";
    match out.iter().rposition(|b| hex.contains(b)) {
        Some(i) if content.first() == Some(&b'{') => {
            out[i] = if out[i] == b'0' { b'1' } else { b'0' }
        }
        _ => {
            let i = out.len() / 2;
            out[i] ^= 0x01;
        }
    }
    assert_ne!(out, content);
    out
}

/// Apply `damage` to the object file at `path`. Returns the bad content, if any decodes.
fn damage_object(path: &Path, damage: Damage) -> Option<Vec<u8>> {
    let original_file = fs::read(path).unwrap();
    let original = zstd::decode_all(&original_file[..]).unwrap();
    assert_eq!(mode_of(path), 0o600, "objects are written 0600");
    // Objects are 0600 (owner-writable); should a future store make them read-only,
    // widen for the edit and restore the exact mode afterwards.
    let mode = mode_of(path);
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    let bad = match damage {
        Damage::FlipByte => {
            // Flip a byte whose change the decoder must notice: it either fails or yields
            // different bytes (a flip in, say, the window descriptor could be harmless).
            let n = original_file.len();
            let candidates = (n / 2..n).chain(0..n / 2);
            let mut chosen = None;
            for i in candidates {
                let mut bytes = original_file.clone();
                bytes[i] ^= 0xff;
                match zstd::decode_all(&bytes[..]) {
                    Ok(decoded) if decoded == original => continue,
                    result => {
                        chosen = Some((i, result.ok()));
                        break;
                    }
                }
            }
            let (i, decoded) = chosen.expect("some byte flip changes the object");
            let mut file = OpenOptions::new().write(true).open(path).unwrap();
            file.seek(SeekFrom::Start(i as u64)).unwrap();
            file.write_all(&[original_file[i] ^ 0xff]).unwrap();
            decoded
        }
        Damage::OtherFrame => {
            let other = near_copy(&original);
            let frame = zstd::encode_all(&other[..], 3).unwrap();
            let mut file = OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)
                .unwrap();
            file.write_all(&frame).unwrap();
            Some(other)
        }
        Damage::Delete => {
            fs::remove_file(path).unwrap();
            return None;
        }
        Damage::Truncate => {
            let file = OpenOptions::new().write(true).open(path).unwrap();
            file.set_len(original_file.len() as u64 / 2).unwrap();
            None
        }
    };
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    assert_eq!(mode_of(path), 0o600, "damaged object keeps mode 0600");
    assert_ne!(
        fs::read(path).unwrap(),
        original_file,
        "{damage:?} changed the file"
    );
    bad
}

fn check_damage(kind: Kind, damage: Damage, seed: u64) {
    let what = format!("{kind:?}/{damage:?}");
    let TwoBundles { env, old, new } = two_bundles(seed, matches!(kind, Kind::LargeBlob));
    assert_eq!(
        env.ok(&["verify"])
            .lines()
            .last()
            .map(|l| l.ends_with("ok")),
        Some(true)
    );

    let (victim, cat_path) = match kind {
        Kind::Blob => (entry_id(&env, "current", "new.bin"), "new.bin"),
        Kind::LargeBlob => (entry_id(&env, "current", "big.bin"), "big.bin"),
        Kind::Tree => (entry_id(&env, "current", "sub"), "sub/a.txt"),
        Kind::Bundle => (new.clone(), "keep.txt"),
    };
    let path = object_path(&env.store(), &victim);
    assert!(path.is_file(), "{what}: object file {}", path.display());
    let bad = damage_object(&path, damage);

    // Whole-store verify: exit 4 and the id named, in human text and in JSON problems.
    let out = env.run(&["verify"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{what}: verify\n{}",
        text_of(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&victim),
        "{what}: verify names {victim}\n{}",
        text_of(&out)
    );
    let (code, doc) = env.json(&["verify"]);
    assert_eq!(code, 4, "{what}: verify --json {doc}");
    assert_eq!(doc["ok"], false);
    let problems = doc["report"]["problems"].as_array().expect("problems");
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap_or("").contains(&victim)),
        "{what}: JSON problems name {victim}: {doc}"
    );

    // The damaged bundle's own history.
    let out = env.run(&["verify", "current"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{what}: verify current\n{}",
        text_of(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&victim),
        "{what}: verify current names {victim}\n{}",
        text_of(&out)
    );

    // cat: exit 4, not one byte on stdout (human and JSON).
    let spec = format!("current:{cat_path}");
    let out = env.run(&["cat", &spec]);
    assert_eq!(out.status.code(), Some(4), "{what}: cat\n{}", text_of(&out));
    assert!(
        out.stdout.is_empty(),
        "{what}: cat printed {} bytes on failure",
        out.stdout.len()
    );
    if let Some(bad) = &bad {
        let needle = &bad[..bad.len().min(64)];
        assert!(!out.stdout.windows(needle.len()).any(|w| w == needle));
    }
    let (code, doc) = env.json(&["cat", &spec]);
    assert_eq!(code, 4, "{what}: cat --json {doc}");
    assert!(
        doc.get("content").is_none() && doc.get("content_base64").is_none(),
        "{what}: {doc}"
    );

    // checkout: exit 4, no destination, no staging directory left behind.
    let out = env.run(&["checkout", "current", "out"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{what}: checkout\n{}",
        text_of(&out)
    );
    assert!(
        !env.path().join("out").exists(),
        "{what}: checkout left a partial destination"
    );
    assert_eq!(
        staging_leftovers(env.path()),
        Vec::<String>::new(),
        "{what}: staging left behind"
    );
    // Also into an existing empty directory: it stays, empty.
    fs::create_dir(env.path().join("empty")).unwrap();
    let out = env.run(&["checkout", "current", "empty"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{what}: checkout into empty dir\n{}",
        text_of(&out)
    );
    assert_eq!(
        fs::read_dir(env.path().join("empty")).unwrap().count(),
        0,
        "{what}: empty dir filled"
    );
    assert_eq!(
        staging_leftovers(env.path()),
        Vec::<String>::new(),
        "{what}: staging left behind"
    );

    // The older bundle never referred to the damaged object: it still verifies, by full id
    // and by a unique prefix, and still checks out.
    let out = env.run(&["verify", &old]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: verify of undamaged {old}\n{}",
        text_of(&out)
    );
    env.ok(&["checkout", &old, "old-out"]);
    let restored = snapshot_files(&env.path().join("old-out"));
    assert_eq!(
        restored.len(),
        3,
        "{what}: keep.txt, common/, common/shared.bin"
    );
    assert_ne!(old, new);
}

#[test]
fn corrupt_blob() {
    let start = Instant::now();
    for (i, damage) in DAMAGES.into_iter().enumerate() {
        check_damage(Kind::Blob, damage, 0x0b10_b000 + i as u64);
    }
    elapsed_note("corrupt_blob", start);
}

#[test]
fn corrupt_large_blob() {
    let start = Instant::now();
    for (i, damage) in DAMAGES.into_iter().enumerate() {
        check_damage(Kind::LargeBlob, damage, 0x1a26_e000 + i as u64);
    }
    elapsed_note("corrupt_large_blob", start);
}

#[test]
fn corrupt_tree() {
    let start = Instant::now();
    for (i, damage) in DAMAGES.into_iter().enumerate() {
        check_damage(Kind::Tree, damage, 0x7ee0_0000 + i as u64);
    }
    elapsed_note("corrupt_tree", start);
}

#[test]
fn corrupt_bundle_manifest() {
    let start = Instant::now();
    for (i, damage) in DAMAGES.into_iter().enumerate() {
        check_damage(Kind::Bundle, damage, 0xb0d1_e000 + i as u64);
    }
    elapsed_note("corrupt_bundle_manifest", start);
}

// ---------------------------------------------------------------------------------------
// 2. SIGKILL during save, repeatedly
// ---------------------------------------------------------------------------------------

/// Write a tree of `count` files under `root`: most small, every 17th one 1-4 MiB, nested
/// a few levels, plus an empty file, an executable and a symlink. Returns the file paths.
fn generate_tree(root: &Path, rng: &mut Rng, count: usize) -> Vec<PathBuf> {
    let mut files = Vec::with_capacity(count);
    for i in 0..count {
        let rel = match i % 4 {
            0 => format!("f{i:03}.txt"),
            1 => format!("d{}/f{i:03}.bin", i % 5),
            2 => format!("d{}/s{}/f{i:03}.dat", i % 5, i % 3),
            _ => format!("deep/a/b/c{}/f{i:03}", i % 2),
        };
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let len = if i % 17 == 0 {
            rng.range(1 << 20, 4 << 20)
        } else {
            rng.below(48 << 10)
        };
        fs::write(&path, rng.content(len as usize)).unwrap();
        files.push(path);
    }
    fs::write(root.join("empty"), b"").unwrap();
    let exec = root.join("run.sh");
    fs::write(&exec, b"#!/bin/sh\necho hi\n").unwrap();
    fs::set_permissions(&exec, fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("f000.txt", root.join("link")).unwrap();
    files
}

/// Rewrite `n` random files with new content (sometimes a big one, so a save has real
/// compression work to be killed in).
fn modify_some(files: &[PathBuf], rng: &mut Rng, n: usize) {
    for _ in 0..n {
        let path = &files[rng.below(files.len() as u64) as usize];
        let len = if rng.below(3) == 0 {
            rng.range(1 << 20, 3 << 20)
        } else {
            rng.below(32 << 10)
        };
        fs::write(path, rng.content(len as usize)).unwrap();
    }
}

/// The store is whole: `verify` passes (temp files allowed), every ref the audit log ever
/// mentioned names a complete bundle, and the audit log parses. Returns the temp count.
fn assert_store_whole(env: &Env, when: &str) -> u64 {
    let (code, doc) = env.json(&["verify"]);
    assert_eq!(code, 0, "{when}: verify failed: {doc}");
    let temp_files = doc["report"]["temp_files"].as_u64().expect("temp_files");
    let (code, audit) = env.json(&["log", "--audit"]);
    assert_eq!(code, 0, "{when}: log --audit failed: {audit}");
    let entries = audit["entries"].as_array().expect("audit entries");
    let mut refs: BTreeSet<String> = entries
        .iter()
        .map(|e| e["ref"].as_str().unwrap().to_string())
        .collect();
    refs.insert("current".into());
    for name in refs {
        if rev_id(env, &name).is_some() {
            let out = env.run(&["verify", &name]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{when}: ref {name} is not a complete bundle\n{}",
                text_of(&out)
            );
        }
    }
    temp_files
}

#[test]
fn sigkill_during_save_never_damages_the_store() {
    let start = Instant::now();
    let iters: usize = std::env::var("BATON_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let env = Env::new();
    env.init();
    let mut rng = Rng::new(0xc2a5_4000);
    let src = env.path().join("src");
    let files = generate_tree(&src, &mut rng, 200);
    // One complete save first, so the loop kills incremental saves (the common case, ~0.1 s
    // unloaded) rather than a first save (~2 s), and kills land both before and after the
    // ref moves.
    let t = Instant::now();
    env.save("src", &["--summary", "baseline"]);
    let baseline = t.elapsed();
    // For reading the counts below: how long an uninterrupted incremental save takes here.
    // Under load it can exceed the 150 ms kill window, and then nearly every kill lands
    // mid-save.
    modify_some(&files, &mut rng, 3);
    let t = Instant::now();
    env.save("src", &["--summary", "incremental"]);
    let incremental = t.elapsed();

    let (mut mid_save, mut moved_then_killed, mut finished) = (0, 0, 0);
    let mut max_temp = 0;
    for i in 0..iters {
        modify_some(&files, &mut rng, 3);
        let before = rev_id(&env, "current");
        let mut child = env
            .cmd()
            .args(["save", "src"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.below(151)));
        // The child is not reaped until `wait` below, so its pid cannot have been reused:
        // at worst this signals a zombie, which is harmless.
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
        let status = child.wait().unwrap();
        let after = rev_id(&env, "current");
        match (status.signal(), after == before) {
            (Some(libc::SIGKILL), true) => mid_save += 1,
            (Some(libc::SIGKILL), false) => moved_then_killed += 1,
            (None, _) => {
                assert!(
                    status.success(),
                    "iteration {i}: save failed on its own: {status:?}"
                );
                assert_ne!(
                    after, before,
                    "iteration {i}: a finished save moves current"
                );
                finished += 1;
            }
            (Some(sig), _) => panic!("iteration {i}: save died of signal {sig}"),
        }
        max_temp = max_temp.max(assert_store_whole(&env, &format!("after kill {i}")));
    }
    println!(
        "[robustness] crash loop: {iters} iterations (uninterrupted saves: first {baseline:.2?}, incremental {incremental:.2?}): \
         {mid_save} killed mid-save (ref unchanged), {moved_then_killed} killed after the ref \
         moved, {finished} finished before the kill; up to {max_temp} temp files seen"
    );
    assert!(
        iters == 0 || mid_save > 0,
        "no kill landed mid-save: the test proved nothing"
    );

    // A final save after all that succeeds and restores the tree exactly.
    let id = env.save("src", &["--summary", "after the storm"]);
    assert_eq!(rev_id(&env, "current").as_deref(), Some(id.as_str()));
    env.ok(&["checkout", "current", "restored"]);
    assert!(
        snapshot_files(&src) == snapshot_files(&env.path().join("restored")),
        "checkout differs from source"
    );
    assert_store_whole(&env, "after the final save");
    // gc clears the leftovers of the killed saves; the store stays whole.
    env.ok(&["gc", "--grace", "0s"]);
    let temp_after_gc = assert_store_whole(&env, "after gc");
    assert_eq!(temp_after_gc, 0, "gc removes stale temp files");
    elapsed_note("sigkill_during_save_never_damages_the_store", start);
}

// ---------------------------------------------------------------------------------------
// 3. Concurrent savers
// ---------------------------------------------------------------------------------------

#[test]
fn concurrent_savers_form_one_chain() {
    let start = Instant::now();
    const SAVERS: usize = 8;
    let env = Env::new();
    env.init();
    let mut rng = Rng::new(0xc0c0_0008);
    for s in 0..SAVERS {
        let dir = env.path().join(format!("agent{s}"));
        for f in 0..40 {
            let path = dir.join(format!("part{}/file{f:02}", f % 4));
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let len = rng.range(1 << 10, 96 << 10) as usize;
            fs::write(path, rng.content(len)).unwrap();
        }
    }
    let children: Vec<_> = (0..SAVERS)
        .map(|s| {
            env.cmd()
                .args(["save", &format!("agent{s}"), "--from", &format!("agent{s}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ids = Vec::new();
    for (s, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "saver {s}\n{}", text_of(&out));
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert_eq!(id.len(), 64, "saver {s} printed {id:?}");
        ids.push(id);
    }
    let distinct: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), SAVERS, "every saver made its own bundle");

    // The audit log: exactly 8 saves, each one's old the previous one's new.
    let (code, audit) = env.json(&["log", "--audit"]);
    assert_eq!(code, 0, "{audit}");
    let saves: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "save")
        .collect();
    assert_eq!(saves.len(), SAVERS, "{audit}");
    assert!(
        saves[0]["old"].is_null(),
        "the first save starts from nothing: {audit}"
    );
    for pair in saves.windows(2) {
        assert_eq!(pair[1]["old"], pair[0]["new"], "lost update: {audit}");
    }
    let logged: BTreeSet<&str> = saves.iter().map(|e| e["new"].as_str().unwrap()).collect();
    assert_eq!(
        logged,
        ids.iter().map(String::as_str).collect(),
        "the log records exactly the printed ids"
    );
    assert_eq!(
        rev_id(&env, "current").as_deref(),
        saves.last().unwrap()["new"].as_str()
    );

    // History from current walks through all of them.
    let history = env.ok(&["log"]);
    for id in &ids {
        assert!(
            history.contains(id.as_str()),
            "log from current misses {id}:\n{history}"
        );
    }
    let (code, log) = env.json(&["log"]);
    assert_eq!(code, 0);
    let chain: Vec<&str> = log["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(chain.len(), SAVERS, "{log}");
    for (i, b) in log["bundles"].as_array().unwrap().iter().enumerate() {
        let parents = b["parents"].as_array().unwrap();
        if i + 1 < SAVERS {
            assert_eq!(parents.len(), 1);
            assert_eq!(
                parents[0].as_str(),
                Some(chain[i + 1]),
                "parent chain: {log}"
            );
        } else {
            assert!(parents.is_empty());
        }
    }
    env.ok(&["verify"]);
    elapsed_note("concurrent_savers_form_one_chain", start);
}

// ---------------------------------------------------------------------------------------
// 4. Bounded memory on a 2 GiB file
// ---------------------------------------------------------------------------------------

const RSS_LIMIT_KIB: i64 = 64 << 10;
const RSS_PROBE_VAR: &str = "BATON_ROBUSTNESS_RSS_PROBE";
/// Where the probe leaves the measured command's stdout, in the environment directory.
const RSS_PROBE_STDOUT: &str = ".rss-probe-stdout";

/// A `baton` command set up exactly like `Env::cmd` for the environment directory `dir`.
fn baton_at(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("USER", "tester")
        .env("TZ", "UTC");
    cmd
}

/// Peak RSS (KiB) and exit code of `baton ARGS` run in `env`.
///
/// How, and why this way: `ru_maxrss` from `wait4(2)` (equivalently
/// `getrusage(RUSAGE_CHILDREN)` with a single waited-for child) is exact for that child,
/// and unlike polling `VmHWM` in /proc it cannot miss a peak just before exit. But Linux
/// carries the high-water mark of the *pre-exec* address space into it: `exec` records the
/// old mm's peak in the child's maxrss, and before exec that mm is the parent's (vfork /
/// posix_spawn, which `Command::spawn` uses) or a copy of it (fork). Measured: from a
/// Python parent holding 300 MiB, `baton --version` is charged ~310 MiB either way, while
/// time(1) reports 4.5 MiB. Spawned from this test process, whose RSS other tests in the
/// same binary inflate (the crash test holds tens of MiB of file contents), baton would be
/// charged for our memory. So the measurement runs
/// in a fresh, small process: this test binary re-executed to run only `rss_probe_helper`,
/// which spawns baton, reaps it with `wait4`, and prints its `ru_maxrss`. The number is then
/// max(helper's RSS at spawn — a few MiB, baton's own peak): a tight, safe upper bound.
fn peak_rss_kib(env: &Env, args: &[&str]) -> (i64, i32) {
    let mut spec = env.path().to_str().expect("utf-8 temp path").to_string();
    for arg in args {
        spec.push('\x1f');
        spec.push_str(arg);
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "robustness::rss_probe_helper",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(RSS_PROBE_VAR, spec)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("RSS_PROBE ").map(|(_, rest)| rest.to_string()))
        .unwrap_or_else(|| panic!("the RSS probe reported nothing\n{}", text_of(&out)));
    let field = |name: &str| -> i64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
    };
    (field("maxrss_kib="), field("exit=") as i32)
}

/// Not a test of its own: the measuring process for `peak_rss_kib` (which re-executes this
/// binary with the probe variable set). Without the variable it does nothing.
#[test]
#[ignore = "helper process for memory_stays_bounded_on_a_2gib_file; does nothing when run directly"]
fn rss_probe_helper() {
    let Ok(spec) = std::env::var(RSS_PROBE_VAR) else {
        return;
    };
    let mut parts = spec.split('\x1f');
    let dir = PathBuf::from(parts.next().unwrap());
    let args: Vec<&str> = parts.collect();
    // Its stdout is kept for `peak_rss_and_output`.
    let stdout = File::create(dir.join(RSS_PROBE_STDOUT)).unwrap();
    let child = baton_at(&dir)
        .args(&args)
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = loop {
        // SAFETY: valid pointers to locals; `pid` is our unreaped child (`Child` never
        // waits on drop, so nothing else reaps it).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break r;
    };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // Cross-check: with exactly one waited-for child, RUSAGE_CHILDREN is the same number.
    // SAFETY: as above.
    let mut children: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut children) },
        0
    );
    assert_eq!(children.ru_maxrss, usage.ru_maxrss);
    println!("RSS_PROBE exit={code} maxrss_kib={}", usage.ru_maxrss);
    drop(child);
}

fn blake3_file(path: &Path) -> (u64, blake3::Hash) {
    let mut hasher = blake3::Hasher::new();
    let mut file = File::open(path).unwrap();
    let n = std::io::copy(&mut file, &mut hasher).unwrap();
    (n, hasher.finalize())
}

#[test]
fn memory_stays_bounded_on_a_2gib_file() {
    let start = Instant::now();
    const SIZE: u64 = 2 << 30;
    let env = Env::new();
    env.init();
    let dir = env.path().join("huge");
    fs::create_dir(&dir).unwrap();
    let big = dir.join("big.img");
    {
        // Sparse, with incompressible islands at a few offsets (start, middle, an odd
        // unaligned spot, the very end) so it is not trivially all zeros.
        let mut file = File::create(&big).unwrap();
        file.set_len(SIZE).unwrap();
        let mut rng = Rng::new(0x2_6b00);
        for offset in [0, 700 << 20, (1 << 30) + 12_345, SIZE - (1 << 20)] {
            file.seek(SeekFrom::Start(offset)).unwrap();
            file.write_all(&rng.random_bytes(1 << 20)).unwrap();
        }
        assert_eq!(file.metadata().unwrap().len(), SIZE);
    }
    fs::write(dir.join("small.txt"), b"a small neighbour\n").unwrap();
    let (size, source_hash) = blake3_file(&big);
    assert_eq!(size, SIZE);
    let prepared = start.elapsed();

    let t = Instant::now();
    let (save_rss, code) = peak_rss_kib(&env, &["save", "huge"]);
    assert_eq!(code, 0, "save of the 2 GiB file failed");
    let save_time = t.elapsed();
    let t = Instant::now();
    let (checkout_rss, code) = peak_rss_kib(&env, &["checkout", "current", "restored"]);
    assert_eq!(code, 0, "checkout of the 2 GiB file failed");
    let checkout_time = t.elapsed();
    println!(
        "[robustness] 2 GiB: prepare {prepared:.2?}, save {save_time:.2?} (peak RSS {save_rss} KiB), \
         checkout {checkout_time:.2?} (peak RSS {checkout_rss} KiB)"
    );

    let restored = env.path().join("restored/big.img");
    let (size, restored_hash) = blake3_file(&restored);
    assert_eq!(size, SIZE, "restored size");
    assert_eq!(restored_hash, source_hash, "restored content");
    assert_eq!(
        fs::read(env.path().join("restored/small.txt")).unwrap(),
        b"a small neighbour\n"
    );
    fs::remove_file(&restored).unwrap();
    fs::remove_file(&big).unwrap();

    assert!(
        save_rss > 0 && checkout_rss > 0,
        "the probe measured something"
    );
    assert!(
        save_rss < RSS_LIMIT_KIB,
        "save peaked at {save_rss} KiB (limit {RSS_LIMIT_KIB})"
    );
    assert!(
        checkout_rss < RSS_LIMIT_KIB,
        "checkout peaked at {checkout_rss} KiB (limit {RSS_LIMIT_KIB})"
    );
    elapsed_note("memory_stays_bounded_on_a_2gib_file", start);
}

// ---------------------------------------------------------------------------------------
// 5. Write ordering, observed with strace
// ---------------------------------------------------------------------------------------

/// One traced system call: where its line started and where it completed (the same line
/// unless strace split it into `<unfinished ...>` and `<... resumed>`).
#[derive(Debug)]
struct Call {
    name: String,
    args: String,
    start: usize,
    end: usize,
    ok: bool,
}

/// `ARGS) = RET` (strace pads short lines before `=`): the arguments and whether RET is 0.
fn split_result(tail: &str) -> (&str, bool) {
    match tail.rsplit_once(" = ") {
        Some((head, ret)) => (
            head.trim_end().strip_suffix(')').unwrap_or(head),
            ret.trim_start().starts_with('0'),
        ),
        None => (tail, false),
    }
}

fn parse_strace(text: &str) -> Vec<Call> {
    let mut pending: std::collections::HashMap<String, (String, String, usize)> =
        Default::default();
    let mut calls = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(resumed) = rest.strip_prefix("<... ") {
            let Some((name, tail)) = resumed.split_once(" resumed>") else {
                continue;
            };
            if let Some((pname, args, start)) = pending.remove(pid) {
                assert_eq!(pname, name, "strace resumed a different call: {line}");
                let (rest_args, ok) = split_result(tail);
                calls.push(Call {
                    name: pname,
                    args: format!("{args}{rest_args}"),
                    start,
                    end: i,
                    ok,
                });
            }
        } else if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            if let Some((name, args)) = head.split_once('(') {
                pending.insert(pid.to_string(), (name.to_string(), args.to_string(), i));
            }
        } else if let Some((name, args)) = rest.split_once('(')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            let (args, ok) = split_result(args);
            calls.push(Call {
                name: name.to_string(),
                args: args.to_string(),
                start: i,
                end: i,
                ok,
            });
        }
    }
    calls.sort_by_key(|c| c.start);
    calls
}

/// Split strace arguments at top-level commas (not inside quotes or `<fd path>`).
fn split_args(args: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted, mut angle, mut escaped) =
        (Vec::new(), String::new(), false, 0, false);
    for c in args.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '<' if !quoted => angle += 1,
            '>' if !quoted && angle > 0 => angle -= 1,
            ',' if !quoted && angle == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// The path in an `-y` fd annotation: `5</a/b>` -> `/a/b`.
fn fd_path(arg: &str) -> Option<PathBuf> {
    let (_, rest) = arg.split_once('<')?;
    Some(PathBuf::from(rest.strip_suffix('>')?))
}

fn unquote(arg: &str) -> Option<String> {
    let inner = arg.strip_prefix('"')?.strip_suffix('"')?;
    Some(inner.replace("\\\"", "\"").replace("\\\\", "\\"))
}

/// (from, to) of a rename/link-family call, made absolute against its directory fds.
fn moved_paths(call: &Call) -> Option<(PathBuf, PathBuf)> {
    let args = split_args(&call.args);
    let at = |dirfd: &str, path: &str| -> Option<PathBuf> {
        let path = PathBuf::from(unquote(path)?);
        if path.is_absolute() {
            Some(path)
        } else {
            Some(fd_path(dirfd)?.join(path))
        }
    };
    match call.name.as_str() {
        "rename" | "link" => Some((
            PathBuf::from(unquote(&args[0])?),
            PathBuf::from(unquote(&args[1])?),
        )),
        "renameat" | "renameat2" | "linkat" => {
            Some((at(&args[0], &args[1])?, at(&args[2], &args[3])?))
        }
        _ => None,
    }
}

#[test]
fn strace_parser_reads_split_and_padded_lines() {
    let text = "\
7 fsync(3</s/objects>)  = 0
8 fsync(4</s/objects/ab/.tmp-x> <unfinished ...>
7 renameat(AT_FDCWD</w>, \"rel/.tmp-y\", AT_FDCWD</w>, \"/s/objects/cd/ef\") = 0
8 <... fsync resumed>) = 0
8 renameat2(AT_FDCWD</w>, \"/s/refs/current/.tmp-z\", AT_FDCWD</w>, \"/s/refs/current/01\", RENAME_NOREPLACE) = -1 EEXIST (File exists)
9 --- SIGCHLD {si_signo=SIGCHLD} ---
";
    let calls = parse_strace(text);
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert_eq!((calls[0].name.as_str(), calls[0].ok), ("fsync", true));
    assert_eq!(fd_path(&calls[0].args), Some(PathBuf::from("/s/objects")));
    // The split fsync started on line 1 and completed on line 3.
    assert_eq!(
        (
            calls[1].name.as_str(),
            calls[1].start,
            calls[1].end,
            calls[1].ok
        ),
        ("fsync", 1, 3, true)
    );
    assert_eq!(
        fd_path(&calls[1].args),
        Some(PathBuf::from("/s/objects/ab/.tmp-x"))
    );
    assert_eq!(
        moved_paths(&calls[2]),
        Some((
            PathBuf::from("/w/rel/.tmp-y"),
            PathBuf::from("/s/objects/cd/ef")
        ))
    );
    assert!(!calls[3].ok, "a failed rename is not a publish");
    assert_eq!(
        moved_paths(&calls[3]).unwrap().1,
        PathBuf::from("/s/refs/current/01")
    );
}

fn strace_usable() -> bool {
    Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Best effort by nature: strace shows the order in which syscalls were issued and
/// completed, which is what the write-ordering rules constrain. What it cannot show is
/// what the file system does with them, so this checks the program's side of the contract.
#[test]
fn save_orders_fsyncs_and_renames_durably() {
    let start = Instant::now();
    if !common::precondition(
        strace_usable(),
        "strace that can trace here (apt-get install -y strace)",
    ) {
        return;
    }
    let env = Env::new();
    env.init();
    let mut rng = Rng::new(0x57ace);
    let files: Vec<(String, Vec<u8>)> = (0..24)
        .map(|i| {
            let len = if i == 0 {
                3 << 20
            } else {
                rng.below(20_000) as usize + 1
            };
            (format!("d{}/f{i}", i % 3), rng.content(len))
        })
        .collect();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_slice()))
        .collect();
    env.write_tree("work", &refs);
    env.save("work", &[]); // an existing parent, so the traced save moves a ref that exists
    env.write_tree("work", &[("d0/f0", b"changed"), ("new/file", b"new")]);

    let trace = env.path().join("trace.txt");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-y", "-s", "4096", "-o"])
        .arg(&trace)
        .args([
            "-e",
            "trace=fsync,fdatasync,rename,renameat,renameat2,link,linkat",
        ])
        .arg(env!("CARGO_BIN_EXE_baton"))
        .args(["save", "work"])
        .current_dir(env.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", env.path())
        .env("USER", "tester")
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(out.status.success(), "traced save\n{}", text_of(&out));
    let text = fs::read_to_string(&trace).unwrap();
    let calls = parse_strace(&text);
    let store = fs::canonicalize(env.store()).unwrap();
    let (objects, refs_dir, log) = (store.join("objects"), store.join("refs"), store.join("log"));
    let packs = store.join("packs");
    let syncs: Vec<(&Call, PathBuf)> = calls
        .iter()
        .filter(|c| c.ok && (c.name == "fsync" || c.name == "fdatasync"))
        .filter_map(|c| Some((c, fd_path(&c.args)?)))
        .collect();
    let publishes: Vec<(&Call, PathBuf, PathBuf)> = calls
        .iter()
        .filter(|c| c.ok)
        .filter_map(|c| moved_paths(c).map(|(from, to)| (c, from, to)))
        .filter(|(_, _, to)| {
            to.starts_with(&objects) || to.starts_with(&packs) || to.starts_with(&refs_dir)
        })
        .collect();
    let ref_publishes: Vec<_> = publishes
        .iter()
        .filter(|(_, _, to)| to.starts_with(&refs_dir))
        .collect();
    // New blobs and trees go into one pack (the 3 MiB file too), the manifest is loose.
    let object_publishes: Vec<_> = publishes
        .iter()
        .filter(|(_, _, to)| to.starts_with(&objects) || to.starts_with(&packs))
        .collect();
    let context = || format!("strace of save:\n{text}");
    assert!(
        !ref_publishes.is_empty(),
        "no ref was published? {}",
        context()
    );
    assert!(
        object_publishes
            .iter()
            .any(|(_, _, to)| to.starts_with(&packs))
            && object_publishes
                .iter()
                .any(|(_, _, to)| to.starts_with(&objects)),
        "expected a pack of new blobs and trees, and a manifest; {}",
        context()
    );

    // Every object and ref file was fsynced (under its temp name) before being renamed.
    for (call, from, to) in &publishes {
        assert!(
            syncs.iter().any(|(s, p)| p == from && s.end < call.start),
            "{} -> {} renamed without a prior fsync of the temp file; {}",
            from.display(),
            to.display(),
            context()
        );
    }
    // The log line is durable before the ref moves, and the ref's directory is fsynced after.
    let log_syncs: Vec<&&Call> = syncs
        .iter()
        .filter(|(_, p)| *p == log)
        .map(|(c, _)| c)
        .collect();
    assert!(
        !log_syncs.is_empty(),
        "the log was never synced; {}",
        context()
    );
    for (call, _, to) in &ref_publishes {
        assert!(
            log_syncs.iter().any(|s| s.end < call.start),
            "ref {} moved before the log was synced; {}",
            to.display(),
            context()
        );
        let dir = to.parent().unwrap();
        assert!(
            syncs.iter().any(|(s, p)| p == dir && s.start > call.end),
            "ref directory {} not fsynced after the ref moved; {}",
            dir.display(),
            context()
        );
    }
    // Every new object's (and pack's) directory entry is durable before the log line
    // naming the bundle.
    let first_log_sync = log_syncs.iter().map(|s| s.start).min().unwrap();
    for (call, _, to) in &object_publishes {
        let fanout = to.parent().unwrap();
        assert!(
            syncs
                .iter()
                .any(|(s, p)| p == fanout && s.start > call.end && s.end < first_log_sync),
            "object {} published but its directory not fsynced before the log append; {}",
            to.display(),
            context()
        );
    }
    println!(
        "[robustness] strace: {} calls, {} object renames, {} ref publishes, {} syncs",
        calls.len(),
        object_publishes.len(),
        ref_publishes.len(),
        syncs.len()
    );
    elapsed_note("save_orders_fsyncs_and_renames_durably", start);
}

// ---------------------------------------------------------------------------------------
// 6. Private modes under a permissive umask
// ---------------------------------------------------------------------------------------

fn run_with_umask(env: &Env, umask: libc::mode_t, args: &[&str]) -> Output {
    let mut cmd = env.cmd();
    cmd.args(args);
    // SAFETY: umask(2) is async-signal-safe and touches only the child's own state.
    unsafe {
        cmd.pre_exec(move || {
            libc::umask(umask);
            Ok(())
        });
    }
    cmd.output().unwrap()
}

#[test]
fn store_stays_private_under_umask_000() {
    let start = Instant::now();
    let env = Env::new();
    let mut rng = Rng::new(0x0000_0777);
    let big = rng.random_bytes(3 << 20);
    let small = rng.text(500);
    env.write_tree("work", &[("a.txt", &small), ("dir/sub/big.bin", &big)]);
    std::os::unix::fs::symlink("a.txt", env.path().join("work/link")).unwrap();
    for args in [
        &["init"][..],
        &["save", "work", "--from", "a"],
        &["save", "work", "--from", "b"],
        &["checkout", "current", "out"],
        &["gc", "--grace", "0s"],
    ] {
        let out = run_with_umask(&env, 0, args);
        assert!(
            out.status.success(),
            "{args:?} under umask 000\n{}",
            text_of(&out)
        );
    }
    let mut bad = Vec::new();
    let mut counted = (0, 0);
    fn walk(path: &Path, bad: &mut Vec<String>, counted: &mut (usize, usize)) {
        let meta = fs::symlink_metadata(path).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        if meta.is_dir() {
            counted.0 += 1;
            if mode != 0o700 {
                bad.push(format!("dir {} is {mode:o}", path.display()));
            }
            for entry in fs::read_dir(path).unwrap() {
                walk(&entry.unwrap().path(), bad, counted);
            }
        } else {
            counted.1 += 1;
            if mode != 0o600 {
                bad.push(format!("file {} is {mode:o}", path.display()));
            }
        }
    }
    walk(&env.store(), &mut bad, &mut counted);
    assert!(bad.is_empty(), "modes under umask 000:\n{}", bad.join("\n"));
    assert!(
        counted.0 >= 4 && counted.1 >= 8,
        "walked {counted:?} dirs/files"
    );
    let out = run_with_umask(&env, 0, &["verify"]);
    assert!(out.status.success(), "verify\n{}", text_of(&out));
    elapsed_note("store_stays_private_under_umask_000", start);
}

/// Run baton under `strace -f -e trace=mkdir,mkdirat` with `umask`; every mkdir(2) it
/// made, as (path, mode). None when strace cannot run here.
fn mkdirs_under_umask(
    env: &Env,
    umask: libc::mode_t,
    args: &[&str],
) -> Option<(Output, Vec<(String, u32)>)> {
    let log = env.path().join(format!("strace-{}.log", args[0]));
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-e", "trace=mkdir,mkdirat", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .current_dir(env.path())
        .env("BATON_STORE", env.store());
    // SAFETY: umask(2) is async-signal-safe and touches only the child's own state.
    unsafe {
        cmd.pre_exec(move || {
            libc::umask(umask);
            Ok(())
        });
    }
    let out = cmd.output().ok()?;
    let text = fs::read_to_string(&log).ok()?;
    let mut calls = Vec::new();
    for line in text.lines() {
        let Some(at) = line.find("mkdir") else {
            continue;
        };
        let call = &line[at..];
        let Some((args_part, _result)) = call.rsplit_once(") = ") else {
            continue;
        };
        let Some((path, mode)) = args_part.rsplit_once(", ") else {
            continue;
        };
        let mode = u32::from_str_radix(mode.trim_start_matches('0'), 8).unwrap_or(0o7777);
        calls.push((path.to_string(), mode));
    }
    Some((out, calls))
}

/// Under umask 000 the directories a clone or init is built in were made 0777 (the
/// clone's work directory stayed so; init's staging directory until its chmod), so
/// another local user could swap the store being built. Every mkdir(2) of init, save,
/// clone and import now asks for 0700 or less, and the results are private.
#[test]
fn no_directory_is_created_open_to_others_under_umask_000() {
    let strace_works = Command::new("strace")
        .args(["-qq", "-e", "trace=none", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(strace_works, "this test needs strace (.ci/run installs it)");
    let env = Env::new();
    env.write_tree("work", &[("a.txt", b"a\n"), ("d/e/f.txt", b"f\n")]);
    let source = env.path().join("source");
    let pushed = env.path().join("pushed/deep/store");
    let clone_dir = env.path().join("new/parents/clone");
    let archive = env.path().join("a.tar");
    let imported = env.path().join("imported");
    let mut wide = Vec::new();
    let mut seen = 0;
    let runs: Vec<Vec<String>> = vec![
        vec!["init".into()],
        vec!["save".into(), "work".into()],
        vec![
            "--store".into(),
            source.display().to_string(),
            "init".into(),
        ],
        vec![
            "target".into(),
            "add".into(),
            "src".into(),
            source.display().to_string(),
        ],
        vec!["push".into(), "src".into()],
        vec![
            "target".into(),
            "add".into(),
            "new".into(),
            pushed.display().to_string(),
        ],
        vec!["push".into(), "new".into()],
        vec![
            "clone".into(),
            source.display().to_string(),
            clone_dir.display().to_string(),
        ],
        vec!["export".into(), "-o".into(), archive.display().to_string()],
        vec![
            "--store".into(),
            imported.display().to_string(),
            "init".into(),
        ],
        vec![
            "--store".into(),
            imported.display().to_string(),
            "import".into(),
            archive.display().to_string(),
        ],
    ];
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let Some((out, calls)) = mkdirs_under_umask(&env, 0, &args) else {
            panic!("strace ran for the probe but not for {args:?}");
        };
        assert!(out.status.success(), "{args:?}: {}", text_of(&out));
        if args.contains(&"target") {
            continue;
        }
        for (path, mode) in calls {
            seen += 1;
            if mode & 0o077 != 0 {
                wide.push(format!("{args:?}: mkdir({path}, {mode:o})"));
            }
        }
    }
    assert!(seen >= 20, "only {seen} mkdir calls traced");
    assert!(
        wide.is_empty(),
        "directories created open to others:\n{}",
        wide.join("\n")
    );
    for store in [
        env.store(),
        source,
        clone_dir.clone(),
        imported,
        pushed.clone(),
    ] {
        common::assert_private_tree(&store);
    }
    for dir in [env.path().join("pushed"), env.path().join("pushed/deep")] {
        assert_eq!(mode_of(&dir), 0o700, "{}", dir.display());
    }
    // The parents clone had to make are private too.
    for dir in [env.path().join("new"), env.path().join("new/parents")] {
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    // Nothing is left of the work and staging directories.
    let leftovers: Vec<_> = fs::read_dir(env.path().join("new/parents"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "clone")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

// ---------------------------------------------------------------------------------------
// 6. Hostile trees and a huge log: bounded stack, memory and time
// ---------------------------------------------------------------------------------------

use baton::format::names::RefName;
use baton::format::{Bundle, EntryKind, LogEntry, ObjectId, Tree, TreeEntry};
use baton::store::Store;
use baton::store::refs::{Expect, MoveReason};

fn tree_entry(name: &str, kind: EntryKind, content: &[u8]) -> TreeEntry {
    TreeEntry {
        name: name.into(),
        kind,
        size: content.len() as u64,
        id: ObjectId::of(content),
    }
}

/// Make `current` of the store at `store` a bundle over the tree `root`, with `contents`
/// (blobs and encoded trees) in one pack: a hostile store built with baton's own encoders
/// and writers, as a forged remote or a damaged disk could hold it. Returns the bundle id.
fn plant(store: &Path, contents: &[Vec<u8>], root: ObjectId) -> String {
    let store = Store::open(store).unwrap();
    let bundle = Bundle::new(root, vec![], std::time::SystemTime::now()).encode();
    let mut pack: Vec<(ObjectId, Vec<u8>)> = contents
        .iter()
        .chain([&bundle])
        .map(|bytes| {
            let (_, name, stored) = store.objects.encode_stored(bytes).unwrap();
            (name, stored)
        })
        .collect();
    pack.sort_by_key(|(name, _)| *name);
    pack.dedup_by(|a, b| a.0 == b.0);
    store.objects.write_pack(&pack).unwrap();
    let id = ObjectId::of(&bundle);
    let reason = MoveReason {
        action: "save".into(),
        ..MoveReason::default()
    };
    store
        .update_ref(&RefName::Current, Expect::Any, Some(id), &reason)
        .unwrap();
    id.to_hex()
}

/// "Billion laughs": `levels` trees of `width` entries all naming the tree below; the
/// bottom one holds one small file. A few KB of objects that name width^levels paths.
fn laughs(levels: usize, width: usize) -> (Vec<Vec<u8>>, ObjectId) {
    let blob = b"ha\n".to_vec();
    let mut top = Tree::new(vec![tree_entry("f", EntryKind::File, &blob)])
        .unwrap()
        .encode();
    let mut contents = vec![blob];
    for _ in 0..levels {
        let entries = (0..width)
            .map(|i| tree_entry(&format!("d{i}"), EntryKind::Dir, &top))
            .collect();
        contents.push(std::mem::replace(
            &mut top,
            Tree::new(entries).unwrap().encode(),
        ));
    }
    let root = ObjectId::of(&top);
    contents.push(top);
    (contents, root)
}

/// A tree nested `levels` directories deep (`a/a/a/...`), one file at the bottom.
fn nested(levels: usize) -> (Vec<Vec<u8>>, ObjectId) {
    let blob = b"bottom\n".to_vec();
    let mut top = Tree::new(vec![tree_entry("f", EntryKind::File, &blob)])
        .unwrap()
        .encode();
    let mut contents = vec![blob];
    for _ in 0..levels {
        let next = Tree::new(vec![tree_entry("a", EntryKind::Dir, &top)])
            .unwrap()
            .encode();
        contents.push(std::mem::replace(&mut top, next));
    }
    let root = ObjectId::of(&top);
    contents.push(top);
    (contents, root)
}

/// Run `baton --json ARGS` in `env` once, measured: its exit code (a signal fails the
/// test), error message, time and peak RSS (in a fresh process, see `peak_rss_kib`).
fn hostile_run(env: &Env, args: &[&str]) -> (i32, String, Duration, i64) {
    let t = Instant::now();
    let (rss, code) = peak_rss_kib(env, &[&["--json"], args].concat());
    let elapsed = t.elapsed();
    let stdout = fs::read(env.path().join(RSS_PROBE_STDOUT)).unwrap();
    let _ = fs::remove_file(env.path().join(RSS_PROBE_STDOUT));
    assert!(code >= 0, "baton {args:?} died of a signal");
    let doc: Value = serde_json::from_slice(&stdout).unwrap_or_else(|e| {
        panic!(
            "baton {args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&stdout)
        )
    });
    let message = doc["error"]["message"].as_str().unwrap_or("").to_string();
    assert!(!message.contains('\n'), "{args:?}: {message}");
    (code, message, elapsed, rss)
}

/// Every command that reads trees, over a store whose `current` is hostile: each exits
/// with `expect(command)` (never a signal), in bounded memory; prints time and memory.
fn run_hostile_commands(
    what: &str,
    env: &Env,
    expect: &dyn Fn(&str) -> i32,
    needle: &str,
    rss_limit_kib: i64,
) {
    let remote = env.store();
    let remote_s = remote.to_str().unwrap().to_string();
    let archive = env.path().join("out.tar");
    let archive_s = archive.to_str().unwrap().to_string();
    let commands: Vec<(&str, Vec<&str>)> = vec![
        ("verify", vec!["verify"]),
        ("verify current", vec!["verify", "current"]),
        ("show", vec!["show", "current"]),
        ("resume", vec!["resume"]),
        ("checkout", vec!["checkout", "current", "restored"]),
        ("diff", vec!["diff", "current", "current"]),
        ("gc", vec!["gc", "--grace", "0s"]),
        ("export", vec!["export", "current", "-o", &archive_s]),
        ("clone", vec!["clone", &remote_s, "cloned"]),
    ];
    for (name, args) in commands {
        let (code, message, time, rss) = hostile_run(env, &args);
        println!(
            "[robustness] {what}: {name}: exit {code} in {time:.2?}, peak RSS {rss} KiB: {message}"
        );
        assert_eq!(code, expect(name), "{what}: {name}: {message}");
        if code == 4 {
            assert!(message.contains(needle), "{what}: {name}: {message}");
        }
        assert!(rss < rss_limit_kib, "{what}: {name} peaked at {rss} KiB");
        if name == "clone" && code != 0 {
            assert!(
                !env.path().join("cloned").exists(),
                "{what}: a refused clone left a store"
            );
        }
        if name == "checkout" && code != 0 {
            assert!(
                !env.path().join("restored").exists(),
                "{what}: a refused checkout left files"
            );
        }
        let _ = fs::remove_dir_all(env.path().join("cloned"));
        let _ = fs::remove_dir_all(env.path().join("restored"));
        let _ = fs::remove_file(&archive);
    }
}

#[test]
fn billion_laughs_tree_is_refused_where_it_would_expand() {
    // 30 levels of 10 entries all naming one subtree: 10^30 paths in 31 small trees.
    // Verify, gc, export and clone visit each distinct tree once and accept it
    // (deduplicated subtrees are legitimate content addressing); every command that
    // expands it into paths refuses it, at once, with exit 4, instead of growing until
    // the allocator aborts.
    let start = Instant::now();
    let env = Env::new();
    env.init();
    let (contents, root) = laughs(30, 10);
    let laughing = plant(&env.store(), &contents, root);
    let expect = |name: &str| match name {
        "show" | "resume" | "checkout" => 4,
        _ => 0,
    };
    run_hostile_commands(
        "billion laughs",
        &env,
        &expect,
        "MAX_EXPANDED_ENTRIES",
        RSS_LIMIT_KIB,
    );
    // A diff against a plain bundle would list every path of it as deleted: refused.
    let empty = Tree::default().encode();
    let plain = plant(
        &env.store(),
        std::slice::from_ref(&empty),
        ObjectId::of(&empty),
    );
    let (code, message, time, rss) = hostile_run(&env, &["diff", &laughing, &plain]);
    println!(
        "[robustness] billion laughs: diff with another bundle: exit {code} in {time:.2?}, peak RSS {rss} KiB: {message}"
    );
    assert_eq!(code, 4, "{message}");
    assert!(message.contains("MAX_EXPANDED_ENTRIES"), "{message}");
    env.ok(&["reset", &laughing]);
    // Its archive imports (each distinct tree checked once), and expands nowhere there.
    env.ok(&["export", "current", "-o", "laughs.tar"]);
    let dst = Env::new();
    dst.init();
    let file = env.path().join("laughs.tar");
    let (code, message, time, rss) = hostile_run(&dst, &["import", file.to_str().unwrap()]);
    println!("[robustness] billion laughs: import: exit {code} in {time:.2?}, peak RSS {rss} KiB");
    assert_eq!(code, 0, "{message}");
    let (code, message, ..) = hostile_run(&dst, &["show", "current"]);
    assert_eq!(code, 4, "{message}");
    // Below the limits the same shape lists normally: 3 levels of 10 directories and a
    // file in each of the 1,000 at the bottom is 2,110 entries.
    let small = Env::new();
    small.init();
    let (contents, root) = laughs(3, 10);
    plant(&small.store(), &contents, root);
    let (_, doc) = small.json(&["show", "current"]);
    assert_eq!(doc["entries"].as_array().map(Vec::len), Some(2110));
    small.ok(&["checkout", "current", "out"]);
    assert_eq!(
        fs::read(small.path().join("out/d9/d0/d5/f")).unwrap(),
        b"ha\n"
    );
    elapsed_note(
        "billion_laughs_tree_is_refused_where_it_would_expand",
        start,
    );
}

fn deep_tree_commands(levels: usize) {
    let start = Instant::now();
    let env = Env::new();
    env.init();
    let (contents, root) = nested(levels);
    plant(&env.store(), &contents, root);
    // gc and diff of a tree with itself need no depth; everything else refuses it.
    let expect = |name: &str| match name {
        "gc" | "diff" => 0,
        _ => 4,
    };
    // Memory grows with the number of trees (100,000 trees: under 100 MiB), never with
    // their depth on the stack.
    run_hostile_commands(
        &format!("{levels} levels"),
        &env,
        &expect,
        "MAX_TREE_DEPTH",
        256 << 10,
    );
    elapsed_note(&format!("deep tree of {levels} levels"), start);
}

#[test]
fn tree_nested_30000_deep_is_refused_without_overflowing_the_stack() {
    // Overflowed the stack (SIGABRT) in verify, show, resume and checkout.
    deep_tree_commands(30_000);
}

#[test]
fn tree_nested_100000_deep_is_refused_without_overflowing_the_stack() {
    // Also crashed clone, gc and export.
    deep_tree_commands(100_000);
}

#[test]
fn a_tree_at_the_depth_limit_works() {
    // 4,096 path components is the limit (MAX_TREE_DEPTH, as git's core.maxTreeDepth):
    // a tree exactly that deep is listed and verified; a checkout fails cleanly on the
    // file system's path length limit, never on the stack.
    let env = Env::new();
    env.init();
    let (contents, root) = nested(4095);
    plant(&env.store(), &contents, root);
    env.ok(&["verify"]);
    let (_, doc) = env.json(&["show", "current"]);
    assert_eq!(doc["entries"].as_array().map(Vec::len), Some(4096));
    let (contents, root) = nested(4096);
    plant(&env.store(), &contents, root);
    let (code, message, ..) = hostile_run(&env, &["show", "current"]);
    assert_eq!(code, 4, "{message}");
}

/// A remote store holding one bundle whose tree declares wrong sizes: `f` names a
/// 5-byte blob with size 4, `d` a subtree with a size one too large.
fn remote_with_wrong_sizes(blob_size_wrong: bool) -> Env {
    let remote = Env::new();
    remote.init();
    let blob = b"hello".to_vec();
    let sub = Tree::new(vec![tree_entry("g", EntryKind::File, &blob)])
        .unwrap()
        .encode();
    let mut f = tree_entry("f", EntryKind::File, &blob);
    let mut d = tree_entry("d", EntryKind::Dir, &sub);
    if blob_size_wrong {
        f.size = 4;
    } else {
        d.size += 1;
    }
    let root = Tree::new(vec![f, d]).unwrap().encode();
    let id = ObjectId::of(&root);
    plant(&remote.store(), &[blob, sub, root], id);
    remote
}

#[test]
fn clone_and_pull_refuse_wrong_declared_sizes() {
    // Import refused these; clone and pull accepted them, and the store then failed
    // `verify current`. Now the same store-level check runs on every receive path.
    for blob_size_wrong in [true, false] {
        let remote = remote_with_wrong_sizes(blob_size_wrong);
        let url = remote.store().to_str().unwrap().to_string();
        let what = if blob_size_wrong { "file" } else { "tree" };

        let env = Env::new();
        let (code, doc) = env.json(&["clone", &url, "cloned"]);
        let message = doc["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(code, 4, "{what}: clone: {doc}");
        assert!(message.contains("its tree entry says"), "{what}: {message}");
        assert!(
            !env.path().join("cloned").exists(),
            "{what}: clone left a store"
        );

        env.init();
        env.ok(&["target", "add", "origin", &url]);
        let before = snapshot_files(&env.store().join("refs"));
        let (code, doc) = env.json(&["pull", "origin"]);
        let message = doc["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(code, 4, "{what}: pull: {doc}");
        assert!(message.contains("its tree entry says"), "{what}: {message}");
        assert_eq!(
            before,
            snapshot_files(&env.store().join("refs")),
            "{what}: a ref moved"
        );
        // What was downloaded is named by no ref: the store verifies clean.
        env.ok(&["verify"]);
    }
}

#[test]
fn save_verify_and_gc_stream_a_large_log() {
    // They read the whole log into memory (3.2 GB RSS for a 1 GB log); now the log is
    // read one line at a time. 80 MiB, not more: a debug build decodes log lines at
    // about 25 MB/s (serde's generic code is compiled unoptimized in this crate), and
    // peak RSS under half the log's size already tells a stream from a whole read.
    let start = Instant::now();
    let env = Env::new();
    env.init();
    env.write_tree("w", &[("a.txt", b"a\n")]);
    let id = ObjectId::parse(&env.save("w", &[])).unwrap();
    // Valid lines naming the real bundle, long ones (4 KiB of `from`) so that a debug
    // build decodes 200 MB quickly.
    let line = LogEntry {
        time: "2026-12-01T09:00:00Z".into(),
        ref_name: "current".into(),
        old: Some(id),
        new: Some(id),
        action: "save".into(),
        from: "x".repeat(4000),
        to: "codex".into(),
        host: "h".into(),
        user: "u".into(),
    }
    .encode_line();
    let mut log = OpenOptions::new()
        .append(true)
        .open(env.store().join("log"))
        .unwrap();
    let lines = (80 << 20) / line.len();
    let mut chunk = Vec::with_capacity(line.len() * 256);
    for _ in 0..256 {
        chunk.extend_from_slice(&line);
    }
    for _ in 0..lines / 256 {
        log.write_all(&chunk).unwrap();
    }
    drop(log);
    let size = fs::metadata(env.store().join("log")).unwrap().len();
    assert!(size > 75 << 20, "log is {size} bytes");
    env.write_tree("w", &[("b.txt", b"b\n")]);
    for args in [&["save", "w"][..], &["verify"], &["gc", "--grace", "0s"]] {
        let t = Instant::now();
        let (rss, code) = peak_rss_kib(&env, args);
        println!(
            "[robustness] {size}-byte log: {args:?}: exit {code} in {:.2?}, peak RSS {rss} KiB",
            t.elapsed()
        );
        assert_eq!(code, 0, "{args:?}");
        let limit_kib = (size / 2 / 1024) as i64;
        assert!(
            rss < limit_kib,
            "{args:?} peaked at {rss} KiB with a {size}-byte log"
        );
    }
    let (_, doc) = env.json(&["log", "--audit", "-n", "1"]);
    assert_eq!(doc["entries"][0]["action"], "save", "{doc}");
    elapsed_note("save_verify_and_gc_stream_a_large_log", start);
}
