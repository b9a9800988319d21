//! The store format test vectors (`store-format/vectors/*.json`, described in
//! `store-format/SPEC.md`) checked against baton's own encoders and decoders: every
//! encoding byte for byte, every id, every decode round trip, every required rejection.
//!
//! `store-format/check_vectors.py` checks the same files against an independent Python
//! implementation, so a change that breaks the format fails here, not just there.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use baton::format::bundle::parse_time;
use baton::format::names::{self, RefName};
use baton::format::{Bundle, EntryKind, LogEntry, ObjectId, StoreConfig, Tree, TreeEntry};
use baton::store::Store;
use baton::store::codec::decode_verified;
use baton::store::objects::Objects;
use baton::store::packs::read_index;
use serde_json::Value;

/// Every file in `store-format/vectors/`; each one has a test below.
const VECTOR_FILES: &[&str] = &[
    "blobs.json",
    "bundles.json",
    "config.json",
    "invalid.json",
    "key_wrap.json",
    "log.json",
    "objects.json",
    "packs.json",
    "refs.json",
    "times.json",
    "trees.json",
];

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("store-format")
        .join("vectors")
}

fn load(name: &str) -> Value {
    let path = vectors_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn list<'a>(value: &'a Value, key: &str) -> &'a Vec<Value> {
    value[key]
        .as_array()
        .unwrap_or_else(|| panic!("'{key}' is not an array"))
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("'{key}' is not a string in {value}"))
}

fn number(value: &Value, key: &str) -> u64 {
    value[key]
        .as_u64()
        .unwrap_or_else(|| panic!("'{key}' is not an unsigned integer in {value}"))
}

fn name(case: &Value) -> String {
    case.get("name")
        .or_else(|| case.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

fn id(value: &Value, key: &str) -> ObjectId {
    ObjectId::parse(text(value, key)).unwrap_or_else(|e| panic!("bad id in vector: {}", e.message))
}

/// Bytes i = i mod 251: the input pattern of the official BLAKE3 test vectors.
fn pattern(len: u64) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn from_hex(hex: &str) -> Vec<u8> {
    assert!(hex.len().is_multiple_of(2), "odd-length hex");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digits"))
        .collect()
}

/// A byte string given as `<key>` (UTF-8 text), `<key>_hex` or `<key>_pattern_len`.
fn bytes(case: &Value, key: &str) -> Vec<u8> {
    if let Some(t) = case[key].as_str() {
        return t.as_bytes().to_vec();
    }
    if let Some(h) = case[format!("{key}_hex")].as_str() {
        return from_hex(h);
    }
    if let Some(n) = case[format!("{key}_pattern_len")].as_u64() {
        return pattern(n);
    }
    panic!("no '{key}' bytes in {case}")
}

#[test]
fn every_vector_file_is_checked() {
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(vectors_dir()).expect("vectors directory") {
        found.insert(
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    let expected: BTreeSet<String> = VECTOR_FILES.iter().map(|s| s.to_string()).collect();
    assert_eq!(found, expected, "add a test for each new vector file");
}

#[test]
fn blob_ids_are_plain_blake3() {
    let file = load("blobs.json");
    for case in list(&file, "vectors") {
        let data = if let Some(t) = case["utf8"].as_str() {
            t.as_bytes().to_vec()
        } else if let Some(h) = case["hex"].as_str() {
            from_hex(h)
        } else {
            pattern(number(case, "pattern_len"))
        };
        assert_eq!(data.len() as u64, number(case, "size"), "{}", name(case));
        assert_eq!(ObjectId::of(&data), id(case, "id"), "{}", name(case));
        assert_eq!(
            ObjectId::of(&data).to_hex(),
            text(case, "id"),
            "{}",
            name(case)
        );
    }
}

#[test]
fn trees_encode_decode_and_hash_exactly() {
    let file = load("trees.json");
    let cases = list(&file, "vectors");
    let tree_sizes: Vec<(ObjectId, u64)> = cases
        .iter()
        .map(|c| (id(c, "id"), number(c, "size")))
        .collect();
    for case in cases {
        let what = name(case);
        let entries: Vec<TreeEntry> =
            serde_json::from_value(case["entries"].clone()).expect("entries");
        let canonical = text(case, "canonical").as_bytes();
        let tree = Tree::new(entries.clone()).unwrap_or_else(|e| panic!("{what}: {}", e.message));
        assert_eq!(
            String::from_utf8_lossy(&tree.encode()),
            text(case, "canonical"),
            "{what}"
        );
        assert_eq!(canonical.len() as u64, number(case, "size"), "{what}");
        assert_eq!(tree.id(), id(case, "id"), "{what}");
        assert_eq!(ObjectId::of(canonical), id(case, "id"), "{what}");
        assert!(canonical.starts_with(b"{\"type\":\"tree\""), "{what}");
        assert!(!Bundle::looks_like(canonical), "{what}");

        let decoded = Tree::decode(canonical).unwrap_or_else(|e| panic!("{what}: {}", e.message));
        assert_eq!(decoded, tree, "{what}");
        let mut sorted = entries;
        sorted.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        assert_eq!(
            decoded.entries, sorted,
            "{what}: entries sort by name bytes"
        );

        // A dir entry naming another tree of the file records that tree's encoded length.
        for entry in decoded.entries.iter().filter(|e| e.kind == EntryKind::Dir) {
            if let Some((_, size)) = tree_sizes.iter().find(|(t, _)| *t == entry.id) {
                assert_eq!(
                    entry.size, *size,
                    "{what}: size of dir entry {}",
                    entry.name
                );
            }
        }
    }
}

#[test]
fn bundles_encode_decode_and_hash_exactly() {
    let file = load("bundles.json");
    for case in list(&file, "vectors") {
        let what = name(case);
        let bundle: Bundle = serde_json::from_value(case["fields"].clone()).expect("fields");
        let canonical = text(case, "canonical").as_bytes();
        assert_eq!(
            String::from_utf8_lossy(&bundle.encode()),
            text(case, "canonical"),
            "{what}"
        );
        assert_eq!(canonical.len() as u64, number(case, "size"), "{what}");
        assert_eq!(bundle.id(), id(case, "id"), "{what}");
        assert_eq!(ObjectId::of(canonical), id(case, "id"), "{what}");
        assert!(Bundle::looks_like(canonical), "{what}");
        let decoded = Bundle::decode(canonical).unwrap_or_else(|e| panic!("{what}: {}", e.message));
        assert_eq!(decoded, bundle, "{what}");
        assert!(
            Tree::decode(canonical).is_err(),
            "{what}: a bundle is not a tree"
        );
    }
}

#[test]
fn log_lines_encode_and_decode_exactly() {
    let file = load("log.json");
    for case in list(&file, "vectors") {
        let what = name(case);
        let entry: LogEntry = serde_json::from_value(case["entry"].clone()).expect("entry");
        let line = text(case, "line").as_bytes();
        assert_eq!(
            String::from_utf8_lossy(&entry.encode_line()),
            text(case, "line"),
            "{what}"
        );
        let body = line.strip_suffix(b"\n").expect("line ends in a newline");
        assert!(!body.contains(&b'\n'), "{what}: one line");
        let decoded =
            LogEntry::decode_line(body, 1).unwrap_or_else(|e| panic!("{what}: {}", e.message));
        assert_eq!(decoded, entry, "{what}");
    }
}

#[test]
fn times_are_whole_utc_seconds() {
    let file = load("times.json");
    for case in list(&file, "valid") {
        let t = parse_time(text(case, "text")).unwrap_or_else(|e| panic!("{}", e.message));
        let secs = t.duration_since(std::time::UNIX_EPOCH).expect("after 1970");
        assert_eq!(
            secs.as_secs(),
            number(case, "unix_seconds"),
            "{}",
            text(case, "text")
        );
        assert_eq!(baton::format::bundle::format_time(t), text(case, "text"));
    }
    for case in list(&file, "invalid") {
        assert!(
            parse_time(text(case, "text")).is_err(),
            "time {:?} must be rejected: {}",
            text(case, "text"),
            text(case, "reason")
        );
    }
}

#[test]
fn invalid_encodings_are_rejected() {
    let file = load("invalid.json");
    for case in list(&file, "trees") {
        let data = bytes(case, "bytes");
        assert!(
            Tree::decode(&data).is_err(),
            "tree must be rejected: {}",
            name(case)
        );
    }
    for case in list(&file, "bundles") {
        let data = bytes(case, "bytes");
        assert!(
            Bundle::decode(&data).is_err(),
            "bundle must be rejected: {}",
            name(case)
        );
    }
    for case in list(&file, "log_lines") {
        let data = bytes(case, "line");
        assert!(
            LogEntry::decode_line(&data, 1).is_err(),
            "log line must be rejected: {}",
            name(case)
        );
    }
}

#[test]
fn ref_names_and_generation_files() {
    let file = load("refs.json");
    let ref_names = &file["ref_names"];
    for case in list(ref_names, "valid") {
        let parsed = RefName::parse(text(case, "ref")).unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(parsed.as_string(), text(case, "ref"));
        assert_eq!(format!("refs/{}", parsed.as_string()), text(case, "dir"));
        if let RefName::Target(target) = &parsed {
            assert!(names::validate_target_name(target).is_ok());
        }
    }
    for case in list(ref_names, "invalid") {
        assert!(
            RefName::parse(text(case, "ref")).is_err(),
            "ref name {:?} must be rejected: {}",
            text(case, "ref"),
            text(case, "reason")
        );
    }
    let generations = &file["generation_files"];
    for case in list(generations, "valid") {
        let generation = number(case, "generation");
        assert_eq!(
            names::parse_generation(text(case, "file")),
            Some(generation)
        );
        assert_eq!(names::generation_name(generation), text(case, "file"));
    }
    for case in list(generations, "invalid") {
        assert_eq!(
            names::parse_generation(text(case, "file")),
            None,
            "{}",
            text(case, "reason")
        );
    }
}

#[test]
fn ref_directories_resolve_to_their_newest_generation() {
    let file = load("refs.json");
    for case in list(&file, "ref_dirs") {
        let what = name(case);
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::init(&tmp.path().join("store")).expect("init");
        let ref_name = RefName::parse(text(case, "ref")).expect("ref name");
        let dir = store.root().join("refs").join(ref_name.as_string());
        std::fs::create_dir_all(&dir).expect("ref directory");
        for f in list(case, "files") {
            std::fs::write(dir.join(text(f, "file")), text(f, "content")).expect("write");
        }
        let result = store.read_ref(&ref_name);
        if case["error"].as_bool() == Some(true) {
            // What `verify` runs for each ref: the listing, then the value.
            assert!(
                store
                    .ref_history(&ref_name)
                    .and_then(|_| store.read_ref(&ref_name))
                    .is_err(),
                "{what}: verify must report it as damaged"
            );
            match case["probe_value"].as_str() {
                // A stray entry is invisible to a reader that probes (SPEC 8.3).
                Some(hex) => assert_eq!(
                    result.unwrap_or_else(|e| panic!("{what}: {}", e.message)),
                    Some(ObjectId::parse(hex).expect("id")),
                    "{what}: probing reader"
                ),
                None => assert!(result.is_err(), "{what}: must be reported as damaged"),
            }
            continue;
        }
        let value = result.unwrap_or_else(|e| panic!("{what}: {}", e.message));
        let expected = case["value"]
            .as_str()
            .map(|h| ObjectId::parse(h).expect("id"));
        assert_eq!(value, expected, "{what}");
    }
}

#[test]
fn loose_objects_are_exactly_one_zstd_frame() {
    let file = load("objects.json");
    for case in list(&file, "vectors") {
        let what = name(case);
        let object = id(case, "id");
        let content = bytes(case, "content");
        let size = number(case, "size");
        assert_eq!(ObjectId::of(&content), object, "{what}");
        assert_eq!(content.len() as u64, size, "{what}");

        let tmp = tempfile::tempdir().expect("tempdir");
        let objects = Objects::new(tmp.path().join("objects"), tmp.path().join("packs"));
        let path = objects.path(&object);
        assert_eq!(
            path.strip_prefix(tmp.path()).expect("under the store"),
            Path::new(text(case, "path")),
            "{what}"
        );
        std::fs::create_dir_all(path.parent().expect("fanout")).expect("fanout");
        std::fs::write(&path, from_hex(text(case, "file_hex"))).expect("write object");

        let mut out = Vec::new();
        let result = objects.copy_to(&object, None, &mut out);
        if case["valid"].as_bool() != Some(true) {
            assert!(result.is_err(), "{what}: must be rejected");
            assert!(
                objects
                    .copy_to(&object, Some(size), &mut Vec::new())
                    .is_err(),
                "{what}: must be rejected with a declared size too"
            );
            continue;
        }
        assert_eq!(result.map_err(|e| e.message), Ok(size), "{what}");
        assert!(out == content, "{what}: decompressed content differs");
        let declared = objects.copy_to(&object, Some(size), &mut Vec::new());
        assert!(declared.is_ok(), "{what}: declared size");
        let wrong = objects.copy_to(&object, Some(size + 1), &mut Vec::new());
        assert!(
            wrong.is_err(),
            "{what}: a wrong declared size is corruption"
        );
        if size > 0 {
            let short = objects.copy_to(&object, Some(size - 1), &mut Vec::new());
            assert!(
                short.is_err(),
                "{what}: a wrong declared size is corruption"
            );
        }
    }
}

#[test]
fn store_config() {
    let file = load("config.json");
    let written = StoreConfig::default().encode();
    assert_eq!(String::from_utf8_lossy(&written), text(&file, "written"));
    assert_eq!(
        StoreConfig::decode(&written).ok(),
        Some(StoreConfig::default())
    );
    let bytes = text(&file, "written_with_target").as_bytes();
    let config = StoreConfig::decode(bytes).unwrap_or_else(|e| panic!("{}", e.message));
    let default = config.default_target.clone().expect("a default target");
    assert!(config.targets.contains_key(&default));
    assert!(names::validate_target_name(&default).is_ok());
    assert_eq!(
        String::from_utf8_lossy(&config.encode()),
        text(&file, "written_with_target")
    );
    for case in list(&file, "accept") {
        let config = StoreConfig::decode(text(case, "bytes").as_bytes())
            .unwrap_or_else(|e| panic!("{}: {}", name(case), e.message));
        assert_eq!(config, StoreConfig::default(), "{}", name(case));
    }
    for case in list(&file, "reject") {
        assert!(
            StoreConfig::decode(text(case, "bytes").as_bytes()).is_err(),
            "config must be rejected: {}",
            name(case)
        );
    }
}

#[test]
fn packs_index_and_hash_exactly() {
    let file = load("packs.json");
    let read = |data: &[u8]| read_index(&mut std::io::Cursor::new(data), data.len() as u64);
    for case in list(&file, "valid") {
        let what = name(case);
        let data = from_hex(text(case, "pack_hex"));
        let pack = id(case, "id");
        assert_eq!(
            ObjectId::of(&data),
            pack,
            "{what}: a pack is named by its BLAKE3"
        );
        assert_eq!(text(case, "file"), format!("packs/{pack}.pack"), "{what}");
        let entries = read(&data).unwrap_or_else(|e| panic!("{what}: {}", e.message));
        let expected = list(case, "entries");
        assert_eq!(entries.len(), expected.len(), "{what}");
        let index_offset = number(case, "index_offset");
        assert_eq!(
            data.len() as u64 - 32 - 48 * entries.len() as u64,
            index_offset
        );
        for (entry, want) in entries.iter().zip(expected) {
            assert_eq!(entry.id, id(want, "id"), "{what}");
            assert_eq!(entry.offset, number(want, "offset"), "{what}");
            assert_eq!(entry.length, number(want, "length"), "{what}");
            let stored = &data[entry.offset as usize..(entry.offset + entry.length) as usize];
            let size = number(want, "size");
            let decoded = decode_verified(&entry.id, stored, Some(size), &mut std::io::sink());
            assert_eq!(decoded.map_err(|e| e.message), Ok(size), "{what}");
        }
    }
    for case in list(&file, "invalid") {
        let data = from_hex(text(case, "pack_hex"));
        assert!(
            read(&data).is_err(),
            "pack must be rejected: {}",
            name(case)
        );
    }
    for case in list(&file, "corrupt_objects") {
        let what = name(case);
        let data = from_hex(text(case, "pack_hex"));
        assert_eq!(ObjectId::of(&data), id(case, "id"), "{what}");
        let entries = read(&data).unwrap_or_else(|e| panic!("{what}: {}", e.message));
        for entry in entries {
            let stored = &data[entry.offset as usize..(entry.offset + entry.length) as usize];
            let decoded = decode_verified(&entry.id, stored, None, &mut std::io::sink());
            assert!(
                decoded.is_err(),
                "{what}: object {} must be rejected",
                entry.id
            );
        }
    }
}

/// The baton-wrap stanza of encrypted stores opens with the store's key (derived from the
/// name key) and yields the vector's file key; any other name key does not open it.
#[test]
fn key_wrap_stanza_opens_to_the_file_key() {
    use age::Identity;
    use age::secrecy::ExposeSecret;
    use baton::store::key_wrap::{StoreKeyWrap, TAG};
    let v = load("key_wrap.json");
    let hex = |k: &str| from_hex(v[k].as_str().unwrap());
    let name_key: [u8; 32] = hex("name_key").try_into().unwrap();
    assert_eq!(v["tag"], TAG);
    let stanza = age_core::format::Stanza {
        tag: TAG.to_string(),
        args: vec![v["arg"].as_str().unwrap().to_string()],
        body: hex("body"),
    };
    let key = StoreKeyWrap::from_name_key(&name_key)
        .unwrap_stanza(&stanza)
        .expect("the stanza is ours")
        .expect("it opens");
    assert_eq!(key.expose_secret().to_vec(), hex("file_key"));
    let mut other = name_key;
    other[0] ^= 1;
    assert!(
        StoreKeyWrap::from_name_key(&other)
            .unwrap_stanza(&stanza)
            .is_none()
    );
}
