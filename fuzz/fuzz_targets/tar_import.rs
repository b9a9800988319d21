//! Fuzzes `baton import ARCHIVE`: the bytes are an archive file imported into a fresh
//! store. One store serves every rejected input; a new one replaces it after a success.
#![no_main]

use std::cell::RefCell;
use std::path::PathBuf;

use baton::format::names::RefName;
use baton::store::Store;
use baton::archive::import;
use libfuzzer_sys::fuzz_target;

struct Fixture {
    dir: tempfile::TempDir,
    generation: u64,
    root: PathBuf,
}

impl Fixture {
    fn fresh_store(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
        self.generation += 1;
        self.root = self.dir.path().join(format!("store-{}", self.generation));
        Store::init(&self.root).expect("init store");
    }
}

thread_local! {
    static FIXTURE: RefCell<Option<Fixture>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    FIXTURE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let fx = slot.get_or_insert_with(|| {
            let mut fx = Fixture {
                dir: tempfile::tempdir().expect("temp dir"),
                generation: 0,
                root: PathBuf::new(),
            };
            fx.fresh_store();
            fx
        });
        let file = fx.dir.path().join("input.tar");
        std::fs::write(&file, data).expect("write archive");
        let store = Store::open(&fx.root).expect("open store");
        match import(&store, &file, None) {
            Ok(report) => {
                let current = report.archive_current.expect("an import names a current");
                assert_eq!(report.current_after, Some(current));
                assert_eq!(store.read_ref(&RefName::Current).ok(), Some(Some(current)));
                assert!(report.bundles.contains(&current));
                for bundle in &report.bundles {
                    store
                        .read_bundle(bundle)
                        .expect("imported bundle reads back");
                }
                let verify = store.verify_all(&|_| {}).expect("verify runs");
                assert!(
                    verify.is_clean(),
                    "import left a damaged store: {:?}",
                    verify.problems
                );
                fx.fresh_store();
            }
            Err(_) => {
                // A refused archive leaves nothing behind.
                assert_eq!(store.read_ref(&RefName::Current).ok(), Some(None));
                assert!(
                    store.objects.is_empty().expect("list objects"),
                    "refused import left objects"
                );
            }
        }
    });
});
