//! Fuzzes log lines and ref generation files: the pure decoders, then the same bytes as a
//! store's `log` and as the newest generation file of `current`.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use baton::format::LogEntry;
use baton::format::names::{
    RefName, generation_name, parse_generation, validate_entry_name, validate_target_name,
};
use baton::store::Store;
use libfuzzer_sys::fuzz_target;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        Store::init(&root).expect("init store");
        Fixture { _dir: dir, root }
    })
}

fuzz_target!(|data: &[u8]| {
    let line = data.strip_suffix(b"\n").unwrap_or(data);
    if let Ok(entry) = LogEntry::decode_line(line, 1) {
        let mut expected = line.to_vec();
        expected.push(b'\n');
        assert_eq!(entry.encode_line(), expected, "log line is not canonical");
        assert!(!line.contains(&b'\n'));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(name) = RefName::parse(text) {
            assert_eq!(name.as_string(), text);
        }
        if validate_target_name(text).is_ok() {
            assert_eq!(
                RefName::parse(&format!("targets/{text}")).ok(),
                Some(RefName::Target(text.to_string()))
            );
        }
        if validate_entry_name(text).is_ok() {
            assert!(!text.contains('/') && !text.is_empty());
        }
        if let Some(g) = parse_generation(text) {
            assert_eq!(generation_name(g), text);
        }
    }

    // The same bytes through the store's readers, which must agree with the decoder.
    let fx = fixture();
    let store = Store::open(&fx.root).expect("open store");
    std::fs::write(fx.root.join("log"), data).expect("write log");
    if let Ok(entries) = store.read_log() {
        let mut again = Vec::new();
        for e in &entries {
            again.extend_from_slice(&e.encode_line());
        }
        let committed = data.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        assert_eq!(again, &data[..committed], "log does not re-encode");
    }
    let generation = fx
        .root
        .join("refs")
        .join("current")
        .join(generation_name(1));
    std::fs::write(&generation, data).expect("write generation");
    match store.ref_generation(&RefName::Current) {
        Ok(Some(g)) => {
            assert_eq!(g.number, 1);
            assert_eq!(g.entry.ref_name, "current");
            assert_eq!(store.read_ref(&RefName::Current).ok(), Some(g.entry.new));
            assert_eq!(
                store.ref_history(&RefName::Current).ok(),
                Some(vec![g.entry])
            );
        }
        Ok(None) => panic!("a generation file exists"),
        Err(_) => assert!(store.read_ref(&RefName::Current).is_err()),
    }
});
