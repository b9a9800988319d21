//! Tests of the path adapter: the publish chain of a push, and deletion.

use super::*;
use crate::local::LocalRemote;
use baton_error::ErrorKind;
use baton_format::names::RefName;

/// A begun pack with a ref line staged beside it, in a store at `dir`.
fn staged(dir: &std::path::Path) -> (LocalRemote, NewItem) {
    let mut remote = LocalRemote::new(dir.to_path_buf());
    let item = remote.begin_new(Some(b"config".to_vec())).unwrap();
    let mut upload = remote
        .upload_with(&item, &[("ref".to_string(), b"line\n".to_vec())])
        .unwrap();
    upload.write_all(b"pack bytes").unwrap();
    upload.finish(&[]).unwrap();
    (remote, item)
}

const GENERATION: Kind = Kind::Generation(RefName::Current);

#[test]
fn the_chain_publishes_the_store_then_the_pack_then_the_ref() {
    let dir = tempfile::tempdir().unwrap();
    let (mut remote, item) = staged(dir.path());
    let chain = remote
        .publish_chain(&item, &Kind::Pack, "p.pack", ("ref", &GENERATION, "1"))
        .unwrap();
    assert_eq!(
        chain,
        Chain {
            store: Some(Published::Done),
            item: Published::Done,
            then: Published::Done
        }
    );
    let staging = std::fs::read_dir(dir.path().join(layout::STAGING)).unwrap();
    assert_eq!(
        staging.count(),
        0,
        "the chain's own last steps remove the staging directory"
    );
    remote.close_new(item, true);
    let read = |p: &str| std::fs::read(dir.path().join(p)).unwrap();
    assert_eq!(read("config"), b"config");
    assert_eq!(read("packs/p.pack"), b"pack bytes");
    assert_eq!(read(&layout::path(&GENERATION, "1")), b"line\n");
    let staging = std::fs::read_dir(dir.path().join(layout::STAGING)).unwrap();
    assert_eq!(staging.count(), 0, "the staging directory is removed");
}

#[test]
fn a_taken_pack_name_stops_the_chain_before_the_ref() {
    let dir = tempfile::tempdir().unwrap();
    let (mut remote, item) = staged(dir.path());
    std::fs::write(dir.path().join("packs/p.pack"), b"someone else's").unwrap();
    let chain = remote
        .publish_chain(&item, &Kind::Pack, "p.pack", ("ref", &GENERATION, "1"))
        .unwrap();
    assert_eq!(
        (chain.item, chain.then),
        (Published::Exists, Published::Exists)
    );
    let generation = dir.path().join(layout::path(&GENERATION, "1"));
    assert!(!generation.exists(), "no ref without its pack");
    assert_eq!(
        std::fs::read(dir.path().join("packs/p.pack")).unwrap(),
        b"someone else's"
    );
    // Once the caller has checked the existing pack, the ref goes on its own.
    let published = remote
        .publish_beside(&item, "ref", &GENERATION, "1")
        .unwrap();
    assert_eq!(published, Published::Done);
    assert_eq!(std::fs::read(&generation).unwrap(), b"line\n");
    remote.close_new(item, true);
}

#[test]
fn a_taken_generation_is_reported_and_the_pack_stays_published() {
    let dir = tempfile::tempdir().unwrap();
    let (mut remote, item) = staged(dir.path());
    let generation = dir.path().join(layout::path(&GENERATION, "1"));
    std::fs::write(&generation, b"the winner\n").unwrap();
    let chain = remote
        .publish_chain(&item, &Kind::Pack, "p.pack", ("ref", &GENERATION, "1"))
        .unwrap();
    assert_eq!(
        (chain.item, chain.then),
        (Published::Done, Published::Exists)
    );
    assert_eq!(std::fs::read(&generation).unwrap(), b"the winner\n");
    remote.close_new(item, false);
    let staging = std::fs::read_dir(dir.path().join(layout::STAGING)).unwrap();
    assert_eq!(staging.count(), 0, "what is left of the staging is removed");
}

#[test]
fn a_local_backend_deletes_packs_and_loose_objects_but_never_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    for d in ["packs", "objects/ab", "refs/current"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    for f in ["packs/p1.pack", "objects/ab/cdef", "config", "log"] {
        std::fs::write(root.join(f), f).expect("write");
    }
    std::fs::write(root.join("refs/current/00000000000000000001"), "g").expect("write");
    let mut backend: Box<dyn BackendExt> = Box::new(LocalRemote::new(root.to_path_buf()));
    assert!(backend.delete(&Kind::Pack, "p1.pack").expect("delete pack"));
    assert!(
        !backend
            .delete(&Kind::Pack, "p1.pack")
            .expect("already gone")
    );
    assert!(
        backend
            .delete(&Kind::Loose, "abcdef")
            .expect("delete loose")
    );
    assert!(!root.join("packs/p1.pack").exists() && !root.join("objects/ab/cdef").exists());
    for (kind, name) in [
        (Kind::Config, ""),
        (Kind::Log, ""),
        (Kind::Generation(RefName::Current), "00000000000000000001"),
    ] {
        let err = backend.delete(&kind, name).expect_err("history stays");
        assert_eq!(err.kind, ErrorKind::Internal, "{}", err.message);
    }
    for f in ["config", "log", "refs/current/00000000000000000001"] {
        assert!(root.join(f).exists(), "{f} kept");
    }
}

/// A backend of the core alone, over a path store: what a new backend writes, and what a
/// wrapper forwards; `BackendExt` is its defaults only.
struct CoreOnly(LocalRemote);

impl Backend for CoreOnly {
    fn describe(&self) -> String {
        Backend::describe(&self.0)
    }
    fn read_and_list(
        &mut self,
        reads: &[(Kind, String)],
        lists: &[Listing],
        limit: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        self.0.read_and_list(reads, lists, limit)
    }
    fn read_range(&mut self, kind: &Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        Backend::read_range(&mut self.0, kind, name, offset, len)
    }
    fn read_sized(
        &mut self,
        kind: &Kind,
        name: &str,
        len: u64,
        sink: &mut dyn Write,
    ) -> Result<()> {
        self.0.read_sized(kind, name, len, sink)
    }
    fn begin_new(&mut self, store: Option<Vec<u8>>) -> Result<NewItem> {
        self.0.begin_new(store)
    }
    fn upload_with(
        &mut self,
        item: &NewItem,
        beside: &[(String, Vec<u8>)],
    ) -> Result<Box<dyn Upload + '_>> {
        self.0.upload_with(item, beside)
    }
    fn publish_chain(
        &mut self,
        item: &NewItem,
        kind: &Kind,
        name: &str,
        then: (&str, &Kind, &str),
    ) -> Result<Chain> {
        self.0.publish_chain(item, kind, name, then)
    }
    fn publish_beside(
        &mut self,
        item: &NewItem,
        staged: &str,
        kind: &Kind,
        name: &str,
    ) -> Result<Published> {
        self.0.publish_beside(item, staged, kind, name)
    }
    fn publish_item(&mut self, item: &NewItem, kind: &Kind, name: &str) -> Result<Published> {
        self.0.publish_item(item, kind, name)
    }
    fn close_new(&mut self, item: NewItem, all: bool) {
        self.0.close_new(item, all)
    }
    fn delete(&mut self, kind: &Kind, name: &str) -> Result<bool> {
        Backend::delete(&mut self.0, kind, name)
    }
}

impl BackendExt for CoreOnly {}

#[test]
fn the_extension_defaults_read_and_abandon_over_the_core_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut remote: Box<dyn BackendExt> = Box::new(CoreOnly(LocalRemote::new(dir.path().into())));
    assert!(!remote.retries_itself());
    let item = remote.begin_new(Some(b"config".to_vec())).unwrap();
    let mut upload = remote
        .upload_with(&item, &[("ref".to_string(), b"line\n".to_vec())])
        .unwrap();
    upload.write_all(b"pack bytes").unwrap();
    upload.finish(&[]).unwrap();
    let chain = remote
        .publish_chain(&item, &Kind::Pack, "p.pack", ("ref", &GENERATION, "1"))
        .unwrap();
    assert_eq!((chain.item, chain.then), (Published::Done, Published::Done));
    remote.close_new(item, true);

    // Started reads are read whole when collected.
    let reads = [(Kind::Config, String::new()), (GENERATION, "1".to_string())];
    let pending = remote
        .start_reads(&reads, &[Listing::Of(Kind::Pack)], 1 << 20)
        .unwrap();
    let (read, listed) = remote.collect_reads(pending).unwrap();
    assert_eq!(read, [Some(b"config".to_vec()), Some(b"line\n".to_vec())]);
    let packs = listed[0].as_ref().expect("packs listed");
    assert!(packs.iter().any(|e| e.name == "p.pack" && e.size == 10));

    // An item's tail, the bytes before it, and the whole item, each read again.
    let tail = remote
        .open_tail(&Kind::Pack, "p.pack", 10, 4, true)
        .unwrap();
    assert_eq!((tail.tail.as_slice(), tail.tail_start()), (&b"ytes"[..], 6));
    let before = remote.read_before_tail(&tail, 0, 6).unwrap();
    assert_eq!(before, b"pack b");
    let mut whole = Vec::new();
    remote.read_rest(tail, &mut whole).unwrap();
    assert_eq!(whole, b"pack bytes");
    let all = remote
        .open_tail(&Kind::Pack, "p.pack", 10, 64, false)
        .unwrap();
    assert_eq!(
        (all.tail.as_slice(), all.tail_start()),
        (&b"pack bytes"[..], 0)
    );
    remote.close_tail(all);

    // Nothing to prepare by default, and an abandoned item leaves no staging behind.
    remote.prepare_in_existing_dirs(&[Kind::Pack]).unwrap();
    let item = remote.begin_new(None).unwrap();
    let mut upload = remote.upload_with(&item, &[]).unwrap();
    upload.write_all(b"never published").unwrap();
    upload.finish(&[]).unwrap();
    remote.abandon(item);
    let staging = std::fs::read_dir(dir.path().join(layout::STAGING)).unwrap();
    assert_eq!(
        staging.count(),
        0,
        "the abandoned item's staging is removed"
    );
    let err = remote
        .read_range(&Kind::Pack, "missing.pack", 0, 1)
        .expect_err("a missing item");
    assert_eq!(err.kind, ErrorKind::NotFound, "{}", err.message);
}
