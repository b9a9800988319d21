//! A re-save of an unchanged tree leaves the stat cache file as it is (issue 14): the
//! same entries are not encoded, written to a temp file and renamed again. Any change
//! (a file edited or added, a racy entry) still rewrites it.

use crate::common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use common::{Env, json_ok};

/// Longer than the cache's racy window on a file system with sub-second timestamps.
const SETTLE: Duration = Duration::from_millis(200);

/// The stat cache file's inode and contents (a rewrite renames a new file over it).
fn cache_file(store: &Path) -> (u64, Vec<u8>) {
    let path = store.join("statcache");
    (fs::metadata(&path).unwrap().ino(), fs::read(&path).unwrap())
}

#[test]
fn an_unchanged_resave_does_not_rewrite_the_stat_cache() {
    let env = Env::new();
    env.init();
    let files: Vec<(String, Vec<u8>)> = (0..40)
        .map(|i| {
            (
                format!("d{}/f{i}.txt", i % 4),
                format!("file {i}\n").into_bytes(),
            )
        })
        .collect();
    env.write_files("w", &files);
    std::thread::sleep(SETTLE);
    let first = json_ok(&env, &["save", "w"]);
    assert_eq!(first["files_cached"], 0, "{first}");
    let written = cache_file(&env.store());

    // Nothing changed: every file from the cache, the same cache file.
    let again = json_ok(&env, &["save", "w"]);
    assert_eq!(again["files_cached"], 40, "{again}");
    assert_ne!(
        again["bundle"], first["bundle"],
        "a re-save still records a bundle"
    );
    assert_eq!(
        cache_file(&env.store()),
        written,
        "the stat cache was rewritten"
    );
    let third = json_ok(&env, &["save", "w"]);
    assert_eq!(third["files_cached"], 40, "{third}");
    assert_eq!(cache_file(&env.store()), written);

    // An edited file: rewritten, with its new entry.
    fs::write(env.path().join("w/d1/f1.txt"), b"changed\n").unwrap();
    let changed = json_ok(&env, &["save", "w"]);
    assert_eq!(changed["files_cached"], 39, "{changed}");
    let after_edit = cache_file(&env.store());
    assert_ne!(after_edit, written);
    // The edit was racy when that save recorded it: the next save reads it once more
    // and records it again (now trusted); the one after leaves the file alone.
    std::thread::sleep(SETTLE);
    let settled = json_ok(&env, &["save", "w"]);
    assert_eq!(settled["files_cached"], 39, "{settled}");
    let after_settle = cache_file(&env.store());
    assert_ne!(after_settle, after_edit, "a racy entry is recorded again");
    let last = json_ok(&env, &["save", "w"]);
    assert_eq!(last["files_cached"], 40, "{last}");
    assert_eq!(cache_file(&env.store()), after_settle);

    // A new file: rewritten.
    fs::write(env.path().join("w/new.txt"), b"new\n").unwrap();
    let added = json_ok(&env, &["save", "w"]);
    assert_eq!(added["files"], 41, "{added}");
    assert_ne!(cache_file(&env.store()), after_settle);
    env.ok(&["verify"]);
}
