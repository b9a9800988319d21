//! `baton export` / `baton import`: round trips, fast-forward rules and hostile archives.

use crate::common;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Env, snapshot_files};
use tar::{EntryType, Header};

/// A store with two bundles (a parent and a child), returned with their ids.
fn source() -> (Env, String, String) {
    let env = Env::new();
    env.init();
    env.write_tree(
        "w",
        &[
            ("a.txt", b"alpha\n"),
            ("sub/b.txt", b"beta\n"),
            ("sub/deep/c.bin", &[0u8, 1, 2, 3, 255]),
        ],
    );
    let first = env.save("w", &["--summary", "first"]);
    env.write_tree("w", &[("a.txt", b"alpha two\n"), ("new.txt", b"new\n")]);
    let second = env.save("w", &["--summary", "second"]);
    (env, first, second)
}

fn fresh() -> Env {
    let env = Env::new();
    env.init();
    env
}

fn export(env: &Env, args: &[&str]) -> PathBuf {
    let out = env.path().join(format!("export-{}.tar", args.join("-")));
    let out_s = out.to_str().unwrap().to_string();
    let mut full = vec!["export"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", &out_s]);
    env.ok(&full);
    out
}

fn import(env: &Env, file: &Path) -> (i32, serde_json::Value) {
    env.json(&["import", file.to_str().unwrap()])
}

fn checkout(env: &Env, rev: &str, dir: &str) -> Vec<(PathBuf, Vec<u8>)> {
    env.ok(&["checkout", rev, dir]);
    snapshot_files(&env.path().join(dir))
}

fn tar_list(file: &Path) -> Vec<String> {
    let out = Command::new("tar").arg("-tf").arg(file).output().unwrap();
    assert!(out.status.success(), "tar -tf failed: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn current(env: &Env) -> Option<String> {
    common::disk_current(&env.store())
}

#[test]
fn export_import_round_trip_with_history() {
    let (src, first, second) = source();
    let file = export(&src, &["--history"]);
    let names = tar_list(&file);
    assert_eq!(names[0], "baton-archive.json");
    assert_eq!(names.last().unwrap(), "log");
    let objects: Vec<&String> = names.iter().filter(|n| n.starts_with("objects/")).collect();
    let mut sorted = objects.clone();
    sorted.sort();
    assert_eq!(objects, sorted, "objects are in id order");
    assert!(names.contains(&format!("objects/{first}")));
    assert!(names.contains(&format!("objects/{second}")));
    // Deterministic: the same export twice gives the same bytes.
    let again = src.path().join("again.tar");
    src.ok(&["export", "--history", "-o", again.to_str().unwrap()]);
    assert_eq!(fs::read(&file).unwrap(), fs::read(&again).unwrap());

    let dst = fresh();
    let (code, doc) = import(&dst, &file);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["report"]["outcome"], "initial");
    assert_eq!(current(&dst).as_deref(), Some(second.as_str()));
    dst.ok(&["verify"]);
    assert_eq!(
        checkout(&src, &second, "out2"),
        checkout(&dst, &second, "out2")
    );
    assert_eq!(
        checkout(&src, &first, "out1"),
        checkout(&dst, &first, "out1")
    );
    let log = fs::read_to_string(dst.store().join("log")).unwrap();
    assert!(log.contains("\"action\":\"import\""), "{log}");

    // A second import changes nothing.
    let before = snapshot_files(&dst.store());
    let (code, doc) = import(&dst, &file);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["report"]["outcome"], "up-to-date");
    assert_eq!(doc["report"]["objects_published"], 0);
    assert_eq!(before, snapshot_files(&dst.store()));
}

#[test]
fn without_history_needs_the_parents() {
    let (src, first, second) = source();
    let file = export(&src, &[]);
    let names = tar_list(&file);
    assert!(!names.contains(&"log".to_string()));
    assert!(!names.contains(&format!("objects/{first}")));
    let (code, doc) = src.json(&["export", "-o", "/dev/null/x.tar"]);
    assert_ne!(code, 0, "{doc}");

    // A store lacking the parent refuses it, unchanged, with a hint.
    let dst = fresh();
    let before = snapshot_files(&dst.store());
    let (code, doc) = import(&dst, &file);
    assert_eq!(code, 4, "{doc}");
    assert!(
        doc["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("export --history"),
        "{doc}"
    );
    assert_eq!(before, snapshot_files(&dst.store()));

    // With the parent present (from an earlier archive), it fast-forwards.
    let parent = export(&src, &[&first]);
    assert_eq!(import(&dst, &parent).0, 0);
    assert_eq!(current(&dst).as_deref(), Some(first.as_str()));
    let (code, doc) = import(&dst, &file);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["report"]["outcome"], "fast-forward");
    assert_eq!(current(&dst).as_deref(), Some(second.as_str()));
    dst.ok(&["verify"]);
    assert_eq!(
        checkout(&src, "current", "o"),
        checkout(&dst, "current", "o")
    );

    // An older archive leaves a descendant current alone.
    let before = snapshot_files(&dst.store());
    let (code, doc) = import(&dst, &parent);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["report"]["outcome"], "local-ahead");
    assert_eq!(before, snapshot_files(&dst.store()));
}

#[test]
fn diverged_current_is_a_conflict() {
    let (src, _, second) = source();
    let file = export(&src, &["--history"]);
    let dst = fresh();
    dst.write_tree("mine", &[("m.txt", b"mine\n")]);
    let mine = dst.save("mine", &[]);
    let (code, doc) = import(&dst, &file);
    assert_eq!(code, 5, "{doc}");
    assert_eq!(doc["error"]["code"], "store_conflict");
    assert_eq!(current(&dst).as_deref(), Some(mine.as_str()));
    // The objects are published, unreferenced; the store verifies.
    assert!(common::object_path(&dst.store(), &second).is_file());
    dst.ok(&["verify"]);
    assert!(
        fs::read_dir(dst.store().join("staging"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[test]
fn exports_packed_objects_and_refuses_a_corrupt_store() {
    let (src, _, second) = source();
    let remote = src.path().join("remote");
    src.ok(&["target", "add", "r", remote.to_str().unwrap()]);
    src.ok(&["push"]);
    // The pushed store holds its objects in packs.
    assert!(!common::pack_files(&remote).is_empty());
    let file = src.path().join("packed.tar");
    src.ok(&[
        "--store",
        remote.to_str().unwrap(),
        "export",
        "--history",
        "-o",
        file.to_str().unwrap(),
    ]);
    let dst = fresh();
    assert_eq!(import(&dst, &file).0, 0);
    dst.ok(&["verify"]);
    assert_eq!(current(&dst).as_deref(), Some(second.as_str()));

    // Damage one loose object of the source: export refuses, and writes no file.
    let obj = common::object_path(&src.store(), &second);
    let mut bytes = fs::read(&obj).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    fs::write(&obj, bytes).unwrap();
    let bad = src.path().join("bad.tar");
    let (code, doc) = src.json(&["export", "-o", bad.to_str().unwrap()]);
    assert_eq!(code, 4, "{doc}");
    assert!(!bad.exists());
    let leftovers: Vec<_> = fs::read_dir(src.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".baton-export-") || n.starts_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

// ---------------------------------------------------------------------------------------
// Hostile archives
// ---------------------------------------------------------------------------------------

struct Entry {
    name: Vec<u8>,
    kind: EntryType,
    data: Vec<u8>,
    link: Vec<u8>,
}

fn entry(name: &str, data: Vec<u8>) -> Entry {
    Entry {
        name: name.as_bytes().to_vec(),
        kind: EntryType::Regular,
        data,
        link: Vec::new(),
    }
}

/// The entries of a (valid) archive, in order.
fn read_entries(file: &Path) -> Vec<Entry> {
    let mut archive = tar::Archive::new(fs::File::open(file).unwrap());
    let mut out = Vec::new();
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path_bytes().into_owned();
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        out.push(Entry {
            name,
            kind: EntryType::Regular,
            data,
            link: Vec::new(),
        });
    }
    out
}

/// A tar with exactly these headers: names written raw, so that absolute paths and
/// `..` components get through (the tar crate's own `set_path` refuses them).
fn build(entries: &[Entry]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = Header::new_ustar();
        let bytes = h.as_mut_bytes();
        bytes[..100].fill(0);
        bytes[..e.name.len()].copy_from_slice(&e.name);
        bytes[157..257].fill(0);
        bytes[157..157 + e.link.len()].copy_from_slice(&e.link);
        h.set_entry_type(e.kind);
        h.set_size(e.data.len() as u64);
        h.set_mode(0o600);
        h.set_mtime(0);
        h.set_cksum();
        builder.append(&h, &e.data[..]).unwrap();
    }
    builder.into_inner().unwrap()
}

/// Import `bytes` as an archive into `dst`: it must fail with `code` and change nothing.
fn refused(dst: &Env, what: &str, bytes: &[u8], code: i32) -> serde_json::Value {
    let file = dst.path().join("hostile.tar");
    fs::write(&file, bytes).unwrap();
    let before = snapshot_files(&dst.store());
    let (got, doc) = import(dst, &file);
    assert_eq!(got, code, "{what}: {doc}");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    eprintln!("{what}: exit {got}: {message}");
    assert!(!message.contains('\n'), "{what}: {message}");
    assert_eq!(
        before,
        snapshot_files(&dst.store()),
        "{what}: store changed"
    );
    doc
}

/// Rewrite the size field of the header at `pos` (and its checksum).
fn set_size_raw(bytes: &mut [u8], pos: usize, size: u64) {
    let h = &mut bytes[pos..pos + 512];
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

#[test]
fn hostile_archives_are_refused_and_change_nothing() {
    let (src, _, _) = source();
    let file = export(&src, &["--history"]);
    let good = read_entries(&file);
    let object_index = 1;
    let obj_name = String::from_utf8(good[object_index].name.clone()).unwrap();
    let obj_data = good[object_index].data.clone();

    // The target already holds a bundle of its own, so "unchanged" means something.
    let dst = fresh();
    dst.write_tree("mine", &[("m.txt", b"mine\n")]);
    dst.save("mine", &[]);

    let with = |extra: Entry| {
        let mut v: Vec<Entry> = read_entries(&file);
        v.insert(1, extra);
        build(&v)
    };
    // Rebuilt from its entries, the archive is still accepted by a fresh store.
    let rebuilt = build(&read_entries(&file));
    let ok_store = fresh();
    let ok_file = ok_store.path().join("rebuilt.tar");
    fs::write(&ok_file, &rebuilt).unwrap();
    assert_eq!(import(&ok_store, &ok_file).0, 0);

    let abs = format!("/{obj_name}");
    refused(&dst, "absolute", &with(entry(&abs, obj_data.clone())), 2);
    refused(
        &dst,
        "dotdot",
        &with(entry("objects/../../evil", b"x".to_vec())),
        2,
    );
    refused(
        &dst,
        "unknown name",
        &with(entry("notes.txt", b"x".to_vec())),
        2,
    );
    refused(
        &dst,
        "uppercase id",
        &with(entry(
            &obj_name.to_uppercase().replace("OBJECTS", "objects"),
            obj_data.clone(),
        )),
        2,
    );
    for (kind, label) in [
        (EntryType::Symlink, "symlink"),
        (EntryType::Link, "hard link"),
        (EntryType::Char, "char device"),
        (EntryType::Block, "block device"),
        (EntryType::Fifo, "fifo"),
        (EntryType::Directory, "directory"),
        (EntryType::XHeader, "pax header"),
        (EntryType::GNULongName, "gnu long name"),
    ] {
        let e = Entry {
            name: obj_name.as_bytes().to_vec(),
            kind,
            data: Vec::new(),
            link: b"/etc/passwd".to_vec(),
        };
        let doc = refused(&dst, label, &with(e), 2);
        assert!(
            doc["error"]["message"].as_str().unwrap().contains("is a"),
            "{label}: {doc}"
        );
    }
    refused(
        &dst,
        "directory objects/",
        &with(Entry {
            name: b"objects/".to_vec(),
            kind: EntryType::Directory,
            data: Vec::new(),
            link: Vec::new(),
        }),
        2,
    );

    // Duplicates: identical bytes are fine, different bytes are not.
    let mut dup_ok = read_entries(&file);
    dup_ok.push(entry(&obj_name, obj_data.clone()));
    let dup_store = fresh();
    let dup_file = dup_store.path().join("dup.tar");
    fs::write(&dup_file, build(&dup_ok)).unwrap();
    assert_eq!(import(&dup_store, &dup_file).0, 0);
    let mut dup_bad = read_entries(&file);
    let other = dup_bad[2].data.clone();
    dup_bad.push(entry(&obj_name, other.clone()));
    refused(&dst, "duplicate, different bytes", &build(&dup_bad), 4);

    // An object whose bytes are another object's.
    let mut swapped = read_entries(&file);
    swapped[object_index].data = other;
    let doc = refused(&dst, "wrong content", &build(&swapped), 4);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("hashes to")
    );
    // Not zstd at all.
    let mut garbage = read_entries(&file);
    garbage[object_index].data = b"not a zstd frame".to_vec();
    refused(&dst, "not zstd", &build(&garbage), 4);

    // Manifest problems.
    let mut v = read_entries(&file);
    v[0].data = b"{not json".to_vec();
    refused(&dst, "manifest does not parse", &build(&v), 2);
    let mut v = read_entries(&file);
    let manifest = String::from_utf8(v[0].data.clone()).unwrap();
    let missing = "0".repeat(64);
    v[0].data = manifest
        .replace("\"bundles\":[", &format!("\"bundles\":[\"{missing}\","))
        .into_bytes();
    refused(&dst, "manifest names a missing bundle", &build(&v), 4);
    let mut v = read_entries(&file);
    v.swap(0, 1);
    refused(&dst, "manifest not first", &build(&v), 2);
    let mut v = read_entries(&file);
    v.remove(object_index);
    refused(&dst, "object missing", &build(&v), 4);

    // Sizes that disagree with the data, found by editing raw bytes.
    let bytes = fs::read(&file).unwrap();
    let (pos, size) = {
        let mut archive = tar::Archive::new(&bytes[..]);
        let e = archive
            .entries()
            .unwrap()
            .nth(object_index)
            .unwrap()
            .unwrap();
        (e.raw_header_position() as usize, e.size())
    };
    let mut longer = bytes.clone();
    set_size_raw(&mut longer, pos, size + 700);
    refused(&dst, "header declares more than the data", &longer, 2);
    let mut shorter = bytes.clone();
    set_size_raw(&mut shorter, pos, size.saturating_sub(3).max(1));
    refused(&dst, "header declares less than the data", &shorter, 2);
    let mut huge = bytes.clone();
    set_size_raw(&mut huge, pos, 1 << 32);
    refused(&dst, "header declares far more than the file", &huge, 2);

    // Truncations: inside an entry's data, at an entry boundary, inside the end marker.
    refused(&dst, "cut in data", &bytes[..pos + 512 + 5], 2);
    refused(&dst, "cut in header", &bytes[..pos + 100], 2);
    refused(&dst, "cut at boundary", &bytes[..pos], 2);
    let end = bytes.len() - 1024;
    refused(&dst, "no end marker", &bytes[..end], 2);
    refused(&dst, "half an end marker", &bytes[..end + 512], 2);
    let mut trailing = bytes.clone();
    trailing.extend_from_slice(b"junk");
    refused(&dst, "junk after the end", &trailing, 2);
    refused(&dst, "empty file", b"", 2);

    // The target is still exactly as it was and still verifies.
    dst.ok(&["verify"]);
    assert!(
        fs::read_dir(dst.store().join("staging"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[test]
fn decompression_bomb_is_refused_by_default() {
    let (src, _, _) = source();
    let file = export(&src, &["--history"]);
    let zeros = vec![0u8; 200 << 20];
    let frame = zstd::bulk::compress(&zeros, 19).unwrap();
    assert!(frame.len() < 64 << 10, "{}", frame.len());
    let id = blake3::hash(&zeros).to_hex().to_string();
    drop(zeros);
    let mut v = read_entries(&file);
    v.insert(1, entry(&format!("objects/{id}"), frame));
    let bytes = build(&v);

    let dst = fresh();
    let doc = refused(&dst, "bomb", &bytes, 4);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("decompression bomb"),
        "{doc}"
    );
    assert!(
        doc["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("--max-expansion")
    );

    // Raising the bound lets it be decompressed and checked: it is then refused only
    // because no bundle of the archive reaches it.
    let bomb = dst.path().join("hostile.tar");
    let before = snapshot_files(&dst.store());
    let (code, doc) = dst.json(&[
        "import",
        bomb.to_str().unwrap(),
        "--max-expansion",
        "100000000",
    ]);
    assert_eq!(code, 4, "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("none of its bundles reaches"),
        "{doc}"
    );
    assert_eq!(before, snapshot_files(&dst.store()));
}

/// An archive of one bundle over a tree nested `levels` directories deep (`a/a/a/...`),
/// written entry by entry as a forger would (baton's export refuses to write it).
fn deep_archive(levels: usize) -> Vec<u8> {
    use baton::format::{Bundle, EntryKind, ObjectId, Tree, TreeEntry};
    let tree_entry = |name: &str, kind, bytes: &[u8]| TreeEntry {
        name: name.into(),
        kind,
        size: bytes.len() as u64,
        id: ObjectId::of(bytes),
    };
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
    let bundle = Bundle::new(root, vec![], std::time::SystemTime::now()).encode();
    let id = ObjectId::of(&bundle).to_hex();
    contents.push(bundle);
    let manifest = serde_json::json!({
        "format": "baton-archive", "version": 1, "bundles": [id], "history": false, "current": id,
    });
    let mut entries = vec![entry(
        "baton-archive.json",
        manifest.to_string().into_bytes(),
    )];
    for bytes in contents {
        let name = format!("objects/{}", ObjectId::of(&bytes).to_hex());
        entries.push(entry(&name, zstd::bulk::compress(&bytes, 3).unwrap()));
    }
    build(&entries)
}

/// Import `deep_archive(levels)`: refused with exit 4 naming the limit, nothing imported.
fn import_refuses_a_tree_nested(levels: usize) {
    let dst = fresh();
    let t = std::time::Instant::now();
    let doc = refused(&dst, &format!("{levels} levels"), &deep_archive(levels), 4);
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("MAX_TREE_DEPTH"), "{levels}: {message}");
    println!(
        "[archive] import of a tree {levels} levels deep: refused in {:.2?}",
        t.elapsed()
    );
}

#[test]
fn import_refuses_a_tree_nested_30000_deep() {
    // Import accepted trees nested 30,000 and 100,000 levels deep, which then overflowed
    // the stack of verify, show, checkout (and at 100,000 gc and export). Now refused,
    // like pull and clone, past MAX_TREE_DEPTH (4,096 levels), with nothing imported.
    import_refuses_a_tree_nested(30_000);
}

#[test]
#[ignore = "slow: stages 100,000 objects as files (about 2 minutes in a debug build); run with --ignored"]
fn import_refuses_a_tree_nested_100000_deep() {
    import_refuses_a_tree_nested(100_000);
}
