//! The stat cache of `save DIR`: unchanged files are taken from it without being read,
//! and every kind of change (touch, a same-second rewrite with a forced mtime, a new
//! inode, a deletion, a new secret) is read again; a damaged cache is ignored.

use crate::common;

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use common::{Env, json_ok};
use serde_json::Value;

/// Longer than the cache's racy window on a file system with sub-second timestamps.
const SETTLE: Duration = Duration::from_millis(200);

fn save(env: &Env, extra: &[&str]) -> Value {
    let mut args = vec!["save", "w"];
    args.extend_from_slice(extra);
    json_ok(env, &args)
}

fn cached(doc: &Value) -> u64 {
    doc["files_cached"]
        .as_u64()
        .unwrap_or_else(|| panic!("no files_cached in {doc}"))
}

fn mtime(path: &Path) -> SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

fn set_mtime(path: &Path, time: SystemTime) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(time)
        .unwrap();
}

/// A store and a directory `w` of three files, saved once and settled.
fn saved_env() -> Env {
    let env = Env::new();
    env.init();
    env.write_tree(
        "w",
        &[
            ("a.txt", b"alpha\n"),
            ("b.txt", b"bravo\n"),
            ("sub/c.txt", b"charlie\n"),
        ],
    );
    std::thread::sleep(SETTLE);
    let first = save(&env, &[]);
    assert_eq!(cached(&first), 0, "{first}");
    env
}

#[test]
fn an_unchanged_tree_is_resaved_from_the_cache_without_reading_a_file() {
    let env = saved_env();
    let first_tree = env.ok(&["--json", "show", "current"]);
    let again = save(&env, &[]);
    assert_eq!(cached(&again), 3, "{again}");
    assert_eq!(again["objects_written"], 0, "{again}");
    assert!(first_tree.contains(again["tree"].as_str().unwrap()));
    assert!(env.ok(&["verify"]).contains("ok"));
    assert_eq!(env.ok(&["cat", "current:sub/c.txt"]), "charlie\n");
}

#[test]
fn a_touched_file_is_read_again() {
    let env = saved_env();
    let a = env.path().join("w/a.txt");
    set_mtime(&a, SystemTime::now());
    let doc = save(&env, &[]);
    assert_eq!(cached(&doc), 2, "{doc}");
}

#[test]
fn a_same_size_rewrite_with_its_old_mtime_forced_back_is_read_again() {
    let env = saved_env();
    let a = env.path().join("w/a.txt");
    let old = mtime(&a);
    fs::write(&a, b"ALPHA\n").unwrap();
    set_mtime(&a, old);
    let doc = save(&env, &[]);
    assert_eq!(cached(&doc), 2, "{doc}");
    assert_eq!(env.ok(&["cat", "current:a.txt"]), "ALPHA\n");
}

#[test]
fn a_change_within_the_racy_window_of_the_save_is_read_again() {
    let env = Env::new();
    env.init();
    // Saved right after being written: the entry is too new to be trusted next time,
    // even though a same-size rewrite keeps the mtime.
    let root = env.write_tree("w", &[("a.txt", b"alpha\n")]);
    let a = root.join("a.txt");
    let old = mtime(&a);
    save(&env, &[]);
    fs::write(&a, b"ALPHA\n").unwrap();
    set_mtime(&a, old);
    let doc = save(&env, &[]);
    assert_eq!(cached(&doc), 0, "{doc}");
    assert_eq!(env.ok(&["cat", "current:a.txt"]), "ALPHA\n");
}

#[test]
fn a_new_inode_with_the_same_size_and_mtime_is_read_again() {
    let env = saved_env();
    let a = env.path().join("w/a.txt");
    let old = mtime(&a);
    let fresh = env.path().join("w/.new");
    fs::write(&fresh, b"ALPHA\n").unwrap();
    set_mtime(&fresh, old);
    fs::rename(&fresh, &a).unwrap();
    let doc = save(&env, &[]);
    assert_eq!(cached(&doc), 2, "{doc}");
    assert_eq!(env.ok(&["cat", "current:a.txt"]), "ALPHA\n");
}

#[test]
fn a_deleted_file_is_gone_from_the_resaved_tree() {
    let env = saved_env();
    fs::remove_file(env.path().join("w/b.txt")).unwrap();
    let doc = save(&env, &[]);
    assert_eq!(doc["files"], 2, "{doc}");
    assert_eq!(cached(&doc), 2, "{doc}");
    let out = env.run(&["cat", "current:b.txt"]);
    assert!(!out.status.success());
}

#[test]
fn a_secret_written_into_a_cached_file_is_found_and_refused() {
    let env = saved_env();
    let a = env.path().join("w/a.txt");
    let old = mtime(&a);
    let token = format!("ghp_{}", "a1B2c3D4e5".repeat(4).get(..36).unwrap());
    fs::write(&a, format!("token = {token}\n")).unwrap();
    set_mtime(&a, old);
    let err = common::json_err(&env, &["save", "w"], 6);
    assert!(err.to_string().contains("github_token"), "{err}");
}

#[test]
fn a_file_with_secrets_is_scanned_and_reported_on_every_save() {
    let env = Env::new();
    env.init();
    let token = format!("ghp_{}", "a1B2c3D4e5".repeat(4).get(..36).unwrap());
    env.write_tree(
        "w",
        &[
            ("clean.txt", b"nothing\n"),
            ("leaky.txt", format!("token = {token}\n").as_bytes()),
        ],
    );
    std::thread::sleep(SETTLE);
    for expect_cached in [0, 1] {
        let doc = save(&env, &["--secrets", "redact"]);
        assert_eq!(cached(&doc), expect_cached, "{doc}");
        assert_eq!(doc["secrets"][0]["path"], "leaky.txt", "{doc}");
        assert!(!env.ok(&["cat", "current:leaky.txt"]).contains(&token));
    }
}

#[test]
fn a_damaged_cache_is_ignored_and_rewritten() {
    let env = saved_env();
    let cache = env.store().join("statcache");
    let mut bytes = fs::read(&cache).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    fs::write(&cache, &bytes).unwrap();
    let doc = save(&env, &[]);
    assert_eq!(cached(&doc), 0, "{doc}");
    assert_eq!(cached(&save(&env, &[])), 3);
    fs::write(&cache, b"something else entirely\n").unwrap();
    assert_eq!(cached(&save(&env, &[])), 0);
    assert!(env.ok(&["verify"]).contains("ok"));
}

#[test]
fn a_cached_blob_missing_from_the_store_is_read_and_stored_again() {
    let env = saved_env();
    let id = blake3::hash(b"alpha\n").to_hex().to_string();
    // Saves pack their blobs: unpack the store to loose objects to lose one.
    common::unpack_to_loose(&env.store());
    fs::remove_file(common::object_path(&env.store(), &id)).unwrap();
    let doc = save(&env, &[]);
    assert_eq!(cached(&doc), 2, "{doc}");
    assert!(common::has_object(&env.store(), &id), "stored again");
    assert!(env.ok(&["verify"]).contains("ok"));
}

#[test]
fn an_encrypted_store_keeps_no_stat_cache() {
    let env = Env::new();
    let (_key, public) = common::age_keygen(&env, "key.txt");
    env.ok(&["init", "--encrypt", "--recipient", &public]);
    env.write_tree("w", &[("a.txt", b"alpha\n")]);
    std::thread::sleep(SETTLE);
    for _ in 0..2 {
        let doc = save(&env, &["--identity", "key.txt"]);
        assert_eq!(cached(&doc), 0, "{doc}");
    }
    assert!(!env.store().join("statcache").exists());
}

/// A file mapped shared and writable, as editors, databases and build tools write files.
struct SharedMap {
    ptr: *mut u8,
    len: usize,
}

impl SharedMap {
    fn new(path: &Path) -> SharedMap {
        use std::os::fd::AsRawFd;
        let file = fs::File::options()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let len = file.metadata().unwrap().len() as usize;
        // SAFETY: a fresh mapping of a file open for reading and writing; the mapping
        // outlives the descriptor (closed when `file` drops), as mmap(2) allows.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap");
        SharedMap {
            ptr: ptr.cast(),
            len,
        }
    }

    /// Store `bytes` through the mapping (no write(2), no msync).
    fn write(&self, bytes: &[u8]) {
        assert_eq!(bytes.len(), self.len);
        // SAFETY: `len` bytes are mapped writable at `ptr` until `drop`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr, self.len) };
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// mtime and ctime of `path`, to the nanosecond.
fn times(path: &Path) -> (i64, i64, i64, i64) {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(path).unwrap();
    (m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
}

#[test]
fn a_second_write_through_a_shared_mmap_is_missed_unless_the_cache_is_off() {
    // The kernel stamps a file written through a shared mapping when a clean page is
    // first written (its page fault); further writes to that page while it stays dirty
    // change no timestamp. So a save that read the file after the first write records
    // metadata that the second write leaves as it was: a plain re-save takes the old
    // blob from the stat cache (the limitation docs/reliability.md describes), and
    // `--no-cache` (or BATON_NO_CACHE) reads the file.
    let env = saved_env();
    let a = env.path().join("w/a.txt");
    let map = SharedMap::new(&a);
    // Until the page is written back (30 s of dirty_expire on Linux) nothing stamps the
    // second write; a write-back in between (memory pressure, a sync(1)) is retried.
    let mut attempts = 0;
    loop {
        attempts += 1;
        map.write(b"ALPHA\n");
        std::thread::sleep(SETTLE);
        let doc = save(&env, &[]);
        assert_eq!(cached(&doc), 2, "the first write moved the mtime: {doc}");
        assert_eq!(env.ok(&["cat", "current:a.txt"]), "ALPHA\n");
        let recorded = times(&a);
        std::thread::sleep(SETTLE);
        map.write(b"BRAVO\n");
        if times(&a) == recorded {
            break;
        }
        assert!(
            attempts < 3,
            "every second write through the mapping was stamped"
        );
    }
    assert_eq!(fs::read(&a).unwrap(), b"BRAVO\n");

    let plain = save(&env, &[]);
    assert_eq!(cached(&plain), 3, "{plain}");
    assert_eq!(
        env.ok(&["cat", "current:a.txt"]),
        "ALPHA\n",
        "the documented limitation: the cache vouched for the old bytes"
    );

    let fresh = save(&env, &["--no-cache"]);
    assert_eq!(cached(&fresh), 0, "{fresh}");
    assert_eq!(env.ok(&["cat", "current:a.txt"]), "BRAVO\n");

    // The environment variable does the same, for a workspace that always writes so.
    map.write(b"CHARL\n");
    let out = env
        .cmd()
        .env("BATON_NO_CACHE", "1")
        .args(["--json", "save", "w"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cached(&doc), 0, "{doc}");
    assert_eq!(env.ok(&["cat", "current:a.txt"]), "CHARL\n");
    assert!(env.ok(&["verify"]).contains("ok"));
}
