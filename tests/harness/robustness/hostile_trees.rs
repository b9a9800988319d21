//! Robustness: hostile trees and a huge log (bounded stack, memory and time).

use super::concurrency_memory::RSS_LIMIT_KIB;
use super::concurrency_memory::RSS_PROBE_STDOUT;
use super::concurrency_memory::peak_rss_kib;
use super::*;

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
