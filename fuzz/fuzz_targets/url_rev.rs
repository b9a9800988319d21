//! Fuzzes target URLs and revisions (`REV`, `REV~N`) against a tiny store of three
//! bundles, built once per process.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use baton::format::ObjectId;
use baton::store::Store;
use baton::transport::url::TargetUrl;
use libfuzzer_sys::fuzz_target;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// Oldest first.
    chain: Vec<ObjectId>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let store = Store::init(&root).expect("init store");
        let tree = ObjectId::of(b"no such tree: resolve reads manifests only");
        let chain = (0..3)
            .map(|i| {
                store
                    .commit_bundle(tree, "save", |b| b.summary = format!("bundle {i}"))
                    .expect("commit")
                    .0
            })
            .collect();
        Fixture {
            _dir: dir,
            root,
            chain,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(url) = TargetUrl::parse(text) {
        let shown = url.to_string();
        match TargetUrl::parse(&shown) {
            Ok(again) => assert_eq!(again, url, "{text:?} shows as {shown:?}"),
            Err(e) => panic!("{text:?} parses but its display {shown:?} does not: {e}"),
        }
    }

    let fx = fixture();
    let store = Store::open(&fx.root).expect("open store");
    if let Ok(id) = store.resolve(text) {
        assert!(
            fx.chain.contains(&id),
            "{text:?} resolved to a stranger {id}"
        );
        assert_eq!(store.resolve(&id.to_hex()).ok(), Some(id));
        let depth = fx
            .chain
            .iter()
            .rev()
            .position(|c| *c == id)
            .expect("in chain");
        assert_eq!(store.resolve(&format!("current~{depth}")).ok(), Some(id));
    }
});
