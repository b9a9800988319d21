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
