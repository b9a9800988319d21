//! Fuzzes the store `config` file: the decoder, and opening a store that holds it.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use baton::format::StoreConfig;
use baton::store::Store;
use baton::store::envelope::parse_recipients;
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
    let decoded = StoreConfig::decode(data);
    if let Ok(config) = &decoded {
        // Not canonical (pretty JSON, unknown fields ignored), but what baton writes must
        // read back as the same value, byte for byte on a second write.
        let encoded = config.encode();
        let again = StoreConfig::decode(&encoded).expect("re-encoded config decodes");
        assert_eq!(&again, config);
        assert_eq!(again.encode(), encoded);
        if let Some(enc) = &config.encryption {
            let _ = parse_recipients(&enc.recipients);
        }
    }
    let fx = fixture();
    std::fs::write(fx.root.join("config"), data).expect("write config");
    match Store::open(&fx.root) {
        Ok(store) => {
            let config = decoded.expect("open accepted a config decode refused");
            assert_eq!(store.config, config);
            assert_eq!(store.is_encrypted(), config.encryption.is_some());
        }
        Err(_) => assert!(decoded.is_err() || data.len() > 1 << 20),
    }
});
