//! Unit tests of the SFTP session against an in-memory channel: a small scripted SFTP
//! server (a state machine over a file map) answering every request as it is written.

mod fake;
mod guessing;
mod lanes;
mod read_ahead;

use std::io::Write;

use russh_sftp::protocol::{Attrs, Data, File, Handle, Name, Packet, StatusCode};

use super::{MAX_PACKET, batch};
use crate::{Pipelined, Published, Remote};
use baton_error::ErrorKind;
use fake::{fake, file_attrs, frame, status};

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn opens(packet: &Packet, path: &str) -> bool {
    matches!(packet, Packet::Open(o) if o.filename == path)
}

#[test]
fn replies_out_of_order_are_matched_by_id() {
    let (mut remote, fake) = fake(&[("a", b"one"), ("b", b"two"), ("objects/c", b"three")]);
    fake.with(|s| s.reorder = true);
    let (files, dirs) = remote
        .read_many(
            &strings(&["b", "missing", "a"]),
            &strings(&["objects", "nope"]),
            100,
        )
        .expect("read_many");
    assert_eq!(
        files,
        vec![Some(b"two".to_vec()), None, Some(b"one".to_vec())]
    );
    let listing = dirs[0].as_ref().expect("objects is listed");
    assert_eq!(listing.len(), 1);
    assert_eq!((listing[0].name.as_str(), listing[0].size), ("c", 5));
    assert!(dirs[1].is_none());
    let mut out = Vec::new();
    assert_eq!(
        remote.read_file("objects/c", &mut out).expect("read_file"),
        5
    );
    assert_eq!(out, b"three");
}

#[test]
fn a_deferred_failure_surfaces_at_the_next_wait() {
    let (mut remote, fake) = fake(&[("a", b"one"), ("b", b"two")]);
    fake.hook(|p| match p {
        Packet::Close(c) => Some(vec![frame(status(c.id, StatusCode::PermissionDenied))]),
        _ => None,
    });
    let mut out = Vec::new();
    // The close is deferred: reading a succeeds without waiting for its reply.
    remote.read_file("a", &mut out).expect("read a");
    let err = remote
        .read_file("b", &mut out)
        .expect_err("the failed close");
    assert!(err.message.contains("close a"), "{}", err.message);
    assert_eq!(err.kind, ErrorKind::Security);
    // Reported once: the session goes on.
    fake.with(|s| s.hook = None);
    out.clear();
    remote.read_file("b", &mut out).expect("read b again");
    assert_eq!(out, b"two");
}

/// A reply to the open of `s/a` replaced by `bytes`: the read fails as a transport error
/// whose message contains `says`, and the session is broken: the next request fails at
/// once (the fake would answer it).
fn breaks_the_session(bytes: Vec<u8>, says: &str) {
    let (mut remote, fake) = fake(&[("a", b"one"), ("b", b"two")]);
    let mut once = Some(bytes);
    fake.hook(move |p| opens(p, "s/a").then(|| once.take().into_iter().collect()));
    let mut out = Vec::new();
    let err = remote.read_file("a", &mut out).expect_err("a bad frame");
    assert_eq!(err.kind, ErrorKind::Transport, "{}", err.message);
    assert!(err.message.contains(says), "{}", err.message);
    let before = fake.with(|s| s.seen.len());
    let err = remote
        .read_file("b", &mut out)
        .expect_err("the session is broken");
    assert_eq!(err.kind, ErrorKind::Transport);
    assert!(err.message.contains("already failed"), "{}", err.message);
    assert_eq!(fake.with(|s| s.seen.len()), before, "nothing more was sent");
    assert!(fake.with(|s| s.cut), "the connection is cut at the failure");
    // Dropped broken, it does not wait on the server to finish (no end of input sent).
    drop(remote);
    assert!(!fake.with(|s| s.eof));
}

#[test]
fn a_healthy_session_ends_its_input_when_dropped() {
    let (mut remote, fake) = fake(&[("a", b"one")]);
    remote.read_file("a", &mut Vec::new()).expect("read a");
    assert!(!fake.with(|s| s.eof));
    drop(remote);
    assert!(
        fake.with(|s| s.eof),
        "the outstanding close is carried out before the end"
    );
}

#[test]
fn a_zero_length_frame_breaks_the_session() {
    breaks_the_session(vec![0, 0, 0, 0], "SFTP packet of 0 bytes");
}

#[test]
fn an_oversized_frame_breaks_the_session() {
    let len = MAX_PACKET + 1;
    breaks_the_session(
        len.to_be_bytes().to_vec(),
        &format!("SFTP packet of {len} bytes"),
    );
}

#[test]
fn end_of_file_mid_frame_breaks_the_session() {
    let mut cut = frame(status(2, StatusCode::Ok));
    cut.truncate(cut.len() - 3);
    breaks_the_session(cut, "failed");
}

#[test]
fn an_undecodable_frame_is_a_transport_error() {
    let (mut remote, fake) = fake(&[("a", b"one"), ("b", b"two")]);
    fake.hook(|p| opens(p, "s/a").then(|| vec![vec![0, 0, 0, 2, 250, 1]]));
    let mut out = Vec::new();
    let err = remote
        .read_file("a", &mut out)
        .expect_err("an unknown packet type");
    assert_eq!(err.kind, ErrorKind::Transport);
    assert!(err.message.contains("bad SFTP packet"), "{}", err.message);
    // The frame was whole, so the stream is still in step.
    remote.read_file("b", &mut out).expect("read b");
    assert_eq!(out, b"two");
}

#[test]
fn a_reply_with_an_unknown_id_is_set_aside() {
    let (mut remote, server) = fake(&[("a", b"one")]);
    server.hook(|p| match p {
        Packet::Open(_) => Some(vec![frame(status(9999, StatusCode::Ok))]),
        _ => None,
    });
    // Only the stray reply comes: the wait ends at end of file, it does not hang.
    let mut out = Vec::new();
    let err = remote
        .read_file("a", &mut out)
        .expect_err("no reply to the open");
    assert_eq!(err.kind, ErrorKind::Transport);
    // With the real reply after it, the stray one is stashed and the read succeeds.
    let (mut remote, server) = fake(&[("a", b"one")]);
    server.hook(|p| opens(p, "s/a").then(|| vec![frame(status(9999, StatusCode::Ok)), Vec::new()]));
    remote
        .read_file("a", &mut out)
        .expect("read after a stray reply");
    assert_eq!(out, b"one");
    assert!(
        remote.stash.contains_key(&9999),
        "the stray reply is kept, not matched"
    );
}

#[test]
fn a_batch_writes_its_requests_together() {
    let names: Vec<String> = (0..100).map(|i| format!("objects/f{i:03}")).collect();
    let files: Vec<(String, Vec<u8>)> = names
        .iter()
        .map(|n| (n.clone(), n.as_bytes().to_vec()))
        .collect();
    let (mut remote, fake) = fake(
        &files
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_slice()))
            .collect::<Vec<_>>(),
    );
    // The session's INIT is written at once, before any batch.
    assert_eq!(
        fake.with(|s| (s.writes, s.seen.clone())),
        (1, vec!["Init".to_string()])
    );
    for round in 0..2 {
        let before = fake.with(|s| (s.writes, s.seen.len()));
        let (got, _) = remote.read_many(&names, &[], 1 << 20).expect("read_many");
        assert!(got.iter().all(Option::is_some), "round {round}");
        let (writes, requests) = fake.with(|s| (s.writes - before.0, s.seen.len() - before.1));
        // An open, reads and a close for each file: hundreds of requests in a few
        // writes (each request was a write of its own).
        assert!(requests >= 300, "round {round}: {requests} requests");
        assert!(
            writes <= 12,
            "round {round}: {requests} requests in {writes} writes"
        );
        // Every close is written before read_many returns.
        assert_eq!(fake.with(|s| s.handles.len()), 0, "round {round}");
    }
}

#[test]
fn batches_keep_at_most_the_handle_window_open() {
    let names: Vec<String> = (0..100).map(|i| format!("objects/f{i:03}")).collect();
    let files: Vec<(String, Vec<u8>)> = names
        .iter()
        .map(|n| (n.clone(), n.as_bytes().to_vec()))
        .collect();
    let (mut remote, fake) = fake(&[]);
    remote.put_files(&files).expect("put_files");
    assert!(fake.with(|s| s.max_open) <= batch::HANDLE_WINDOW);
    assert_eq!(fake.with(|s| s.files.len()), 100);
    fake.with(|s| s.max_open = 0);
    let mut wanted = names.clone();
    wanted.insert(50, "objects/missing".into());
    let (got, _) = remote.read_many(&wanted, &[], 1 << 20).expect("read_many");
    assert_eq!(got.iter().filter(|g| g.is_some()).count(), 100);
    assert!(got[50].is_none());
    assert_eq!(got[0].as_deref(), Some(b"objects/f000".as_slice()));
    let max = fake.with(|s| s.max_open);
    assert!(max <= batch::HANDLE_WINDOW, "{max} handles open at once");
    assert!(
        max >= batch::HANDLE_WINDOW / 2,
        "the batch is pipelined ({max})"
    );
    // Every handle was closed (the closes are deferred, but sent).
    assert_eq!(fake.with(|s| s.handles.len()), 0);
}

#[test]
fn put_files_into_a_missing_directory_is_not_found() {
    let (mut remote, fake) = fake(&[]);
    let files = vec![
        ("objects/a".to_string(), b"a".to_vec()),
        ("nodir/b".to_string(), b"b".to_vec()),
    ];
    let err = remote.put_files(&files).expect_err("no such directory");
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(err.message.contains("nodir/b"), "{}", err.message);
    assert!(err.message.contains("no such directory"), "{}", err.message);
    assert_eq!(
        fake.with(|s| s.files.get("s/objects/a").cloned()),
        Some(b"a".to_vec())
    );
}

#[test]
fn publish_many_reports_existing_targets() {
    let (mut remote, fake) = fake(&[("objects/new", b"n"), ("objects/dup", b"d"), ("x", b"x")]);
    let moves = vec![
        ("objects/new".to_string(), "objects/n1".to_string()),
        ("objects/dup".to_string(), "x".to_string()),
    ];
    remote
        .prepare_publish(&strings(&["objects"]))
        .expect("prepare");
    let outcomes = remote.publish_many(&moves).expect("publish_many");
    assert!(matches!(outcomes[..], [Published::Done, Published::Exists]));
    assert_eq!(
        fake.with(|s| s.files.get("s/objects/n1").cloned()),
        Some(b"n".to_vec())
    );
    assert_eq!(
        fake.with(|s| s.files.get("s/x").cloned()),
        Some(b"x".to_vec())
    );
    let err = remote
        .publish_many(&[("objects/gone".to_string(), "objects/g".to_string())])
        .expect_err("a missing source");
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(
        fake.with(|s| s.seen.iter().any(|r| r == "Extended")),
        "directories are fsynced"
    );
}

#[test]
fn a_failed_write_on_a_full_disk_says_so() {
    let (mut remote, fake) = fake(&[]);
    fake.with(|s| s.free = 10);
    fake.hook(|p| match p {
        Packet::Write(w) => Some(vec![frame(status(w.id, StatusCode::Failure))]),
        _ => None,
    });
    let err = remote
        .put_files(&[("objects/a".to_string(), b"a".to_vec())])
        .expect_err("the disk is full");
    assert!(
        err.message.contains("the remote disk is full"),
        "{}",
        err.message
    );
    assert!(err.message.contains("10 bytes free"), "{}", err.message);
}

#[test]
fn uploads_stream_and_read_back() {
    let (mut remote, fake) = fake(&[]);
    let data: Vec<u8> = (0..3 * super::CHUNK + 17)
        .map(|i| (i % 251) as u8)
        .collect();
    let mut upload = remote.create("objects/big").expect("create");
    upload.write_all(&data).expect("write");
    let receipt = upload
        .finish(&[(0, 4), (super::CHUNK as u64, 3)])
        .expect("finish");
    assert_eq!(receipt.size, data.len() as u64);
    assert_eq!(
        receipt.readback,
        vec![
            data[..4].to_vec(),
            data[super::CHUNK..super::CHUNK + 3].to_vec()
        ]
    );
    assert_eq!(
        fake.with(|s| s.files.get("s/objects/big").cloned()),
        Some(data.clone())
    );
    let mut out = Vec::new();
    remote
        .read_file_sized("objects/big", data.len() as u64, &mut out)
        .expect("read_file_sized");
    assert_eq!(out, data);
    let err = remote
        .read_file_sized("objects/big", 5, &mut Vec::new())
        .expect_err("a wrong declared size");
    assert_eq!(err.kind, ErrorKind::Integrity);
    assert!(
        remote.create("objects/big").is_err(),
        "create never clobbers"
    );
}

#[test]
fn random_server_streams_never_panic_or_hang() {
    // The fuzz target's function over deterministic pseudo-random streams: frames of
    // plausible replies (ids near the ones used) mixed with garbage.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..400 {
        let mut input = Vec::new();
        for _ in 0..(next() % 24) {
            let id = (next() % 40) as u32;
            let packet = match next() % 8 {
                0 => status(id, StatusCode::Ok),
                1 => status(id, StatusCode::Eof),
                2 => status(id, StatusCode::Failure),
                3 => Packet::Handle(Handle {
                    id,
                    handle: format!("h{}", next() % 4),
                }),
                4 => Packet::Data(Data {
                    id,
                    data: vec![7; (next() % 300) as usize],
                }),
                5 => Packet::Name(Name {
                    id,
                    files: vec![File::new("n", file_attrs(next() % 9, next() % 2 == 0))],
                }),
                6 => Packet::Attrs(Attrs {
                    id,
                    attrs: file_attrs(next() % 5, false),
                }),
                _ => {
                    let len = (next() % 12) as usize;
                    let mut raw = (len as u32).to_be_bytes().to_vec();
                    raw.extend((0..len).map(|_| next() as u8));
                    input.extend(raw);
                    continue;
                }
            };
            input.extend(frame(packet));
        }
        if next() % 4 == 0 {
            let cut = (next() as usize) % (input.len() + 1);
            input.truncate(cut);
        }
        super::fuzzing::session(&input);
    }
}

#[test]
fn the_fuzz_entry_point_replays_a_recorded_server() {
    let (mut remote, fake) = fake(&[
        ("config", b"c"),
        ("refs/current", b"r"),
        ("packs/p.pack", &[9; 1000]),
    ]);
    // Handles named as OpenSSH names them: the guessed ones are right, as on a real server.
    fake.with(|s| {
        s.naming = fake::Naming::OpenSsh;
        s.dirs
            .extend(["s/packs".into(), "s/tmp".into(), "s/refs".into()])
    });
    assert_eq!(super::fuzzing::operations(&mut remote), [true; 4]);
    // What the server said after its VERSION, replayed: the same requests, the same ids.
    let said = fake.with(|s| s.output.clone());
    let version = u32::from_be_bytes(said[..4].try_into().expect("4 bytes")) as usize + 4;
    assert_eq!(super::fuzzing::session(&said[version..]), [true; 4]);
    // It is the seed fuzz/seeds.py gives the sftp_session target (and that
    // tests/fuzz_regressions.rs replays): BATON_UPDATE_SEEDS=1 writes it anew.
    let seed = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/seeds/sftp_session.bin"
    );
    if std::env::var_os("BATON_UPDATE_SEEDS").is_some() {
        std::fs::write(seed, &said[version..]).expect("write the seed");
    }
    let stored = std::fs::read(seed).expect("the stored seed");
    assert!(
        stored == said[version..],
        "{seed} is out of date: run this test with BATON_UPDATE_SEEDS=1"
    );
    // Cut short anywhere, it fails (end of file) instead of hanging.
    for cut in [version, version + 3, said.len() / 2] {
        assert_ne!(super::fuzzing::session(&said[version..cut]), [true; 4]);
    }
}

#[test]
fn deferred_replies_past_the_bound_are_read_and_checked() {
    let (mut remote, fake) = fake(&[("a", b"one")]);
    let dirs: Vec<String> = (0..200).map(|i| format!("objects/d{i}")).collect();
    fake.hook(|p| match p {
        Packet::SetStat(s) if s.path == "s/objects/d150" => {
            Some(vec![frame(status(s.id, StatusCode::PermissionDenied))])
        }
        _ => None,
    });
    // 400 deferred requests (mkdir and chmod each): past MAX_DEFERRED the oldest replies
    // are read as more are sent, and the failure among them is kept for the next wait.
    remote.make_dirs(&dirs).expect("make_dirs defers");
    assert!(remote.deferred.len() <= super::MAX_DEFERRED);
    assert_eq!(fake.with(|s| s.dirs.len()), 202);
    let err = remote
        .read_file("a", &mut Vec::new())
        .expect_err("the failed chmod");
    assert!(
        err.message.contains("chmod objects/d150"),
        "{}",
        err.message
    );
    assert_eq!(err.kind, ErrorKind::Security);
}

#[test]
fn the_backend_deletes_packs_and_loose_objects_but_never_history() {
    use crate::backend::Backend;
    use baton_format::layout::Kind;
    use baton_format::names::RefName;

    let (mut remote, fake) = fake(&[
        ("packs/p1.pack", b"pack"),
        ("objects/ab/cdef", b"obj"),
        ("config", b"c"),
        ("log", b"l"),
        ("refs/current/00000000000000000001", b"g"),
    ]);
    assert!(Backend::delete(&mut remote, &Kind::Pack, "p1.pack").expect("delete pack"));
    assert!(!Backend::delete(&mut remote, &Kind::Pack, "p1.pack").expect("already gone"));
    assert!(Backend::delete(&mut remote, &Kind::Loose, "abcdef").expect("delete loose"));
    for (kind, name) in [
        (Kind::Config, ""),
        (Kind::Log, ""),
        (Kind::Generation(RefName::Current), "00000000000000000001"),
    ] {
        let err = Backend::delete(&mut remote, &kind, name).expect_err("history stays");
        assert_eq!(err.kind, ErrorKind::Internal, "{}", err.message);
    }
    let left: Vec<String> = fake.with(|s| s.files.keys().cloned().collect());
    assert_eq!(
        left,
        strings(&["s/config", "s/log", "s/refs/current/00000000000000000001"])
    );
}

#[test]
fn the_greeting_is_read_with_the_first_batch() {
    let (mut remote, fake) = fake(&[("a", b"one")]);
    // INIT is out and its VERSION unread: starting the session waited for nothing.
    assert_eq!(
        fake.with(|s| (s.seen.clone(), s.read_at)),
        (strings(&["Init"]), 0)
    );
    let (files, _) = remote
        .read_many(&strings(&["a"]), &[], 100)
        .expect("read_many");
    assert_eq!(files, vec![Some(b"one".to_vec())]);
    // The extensions the VERSION named are known: the upload's file is fsynced.
    remote
        .put_files(&[("objects/n".to_string(), b"n".to_vec())])
        .expect("put_files");
    assert!(fake.with(|s| s.seen.iter().any(|r| r == "Extended")));
}

#[test]
fn a_first_upload_waits_for_no_greeting() {
    let (mut remote, fake) = fake::fake_with(&[], |s| s.naming = fake::Naming::OpenSsh);
    let mut upload = remote.create("objects/x").expect("create");
    upload.write_all(b"payload").expect("write");
    // The upload's open, write and fsync are out; nothing was read, the VERSION neither.
    assert_eq!(fake.with(|s| s.read_at), 0);
    let receipt = upload.finish(&[]).expect("finish");
    assert_eq!(receipt.size, 7);
    assert!(fake.with(|s| s.seen.iter().any(|r| r == "Extended")));
    assert_eq!(
        remote.round_trips, 1,
        "the greeting shares the upload's round trip"
    );
}

#[test]
fn a_server_without_fsync_refuses_only_the_fsyncs_sent_before_its_greeting() {
    let (mut remote, fake) = fake::fake_with(&[], |s| s.no_fsync = true);
    let mut upload = remote.create("objects/x").expect("create");
    upload.write_all(b"first").expect("write");
    upload
        .finish(&[])
        .expect("the refused early fsync is no failure");
    let sent_early = fake.with(|s| s.seen.iter().filter(|r| *r == "Extended").count());
    assert_eq!(
        sent_early, 1,
        "the fsync went out before the VERSION was read"
    );
    remote
        .put_files(&[("objects/y".to_string(), b"second".to_vec())])
        .expect("put_files");
    let mut upload = remote.create("objects/z").expect("create");
    upload.write_all(b"third").expect("write");
    upload.finish(&[]).expect("finish");
    assert_eq!(
        fake.with(|s| s.seen.iter().filter(|r| *r == "Extended").count()),
        sent_early,
        "once the VERSION said so, no fsync is sent"
    );
    assert_eq!(
        fake.with(
            |s| ["s/objects/x", "s/objects/y", "s/objects/z"].map(|f| s.files.contains_key(f))
        ),
        [true; 3]
    );
}

#[test]
fn a_refused_fsync_fails_where_the_server_offers_fsync() {
    let (mut remote, fake) = fake(&[]);
    fake.hook(|request| match request {
        Packet::Extended(e) if e.request == super::FSYNC_EXTENSION => {
            Some(vec![fake::frame(status(e.id, StatusCode::OpUnsupported))])
        }
        _ => None,
    });
    let mut upload = remote.create("objects/x").expect("create");
    upload.write_all(b"payload").expect("write");
    let err = upload
        .finish(&[])
        .expect_err("an fsync the VERSION offered and then refused");
    assert!(err.message.contains("fsync"), "{}", err.message);
}

/// A server that answers INIT with something other than VERSION.
struct Refuser(std::io::Cursor<Vec<u8>>);

impl std::io::Read for Refuser {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Refuser {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl super::Channel for Refuser {}

#[test]
fn a_bad_greeting_fails_the_first_wait() {
    let reply = fake::frame(status(0, StatusCode::OpUnsupported));
    let channel = Refuser(std::io::Cursor::new(reply));
    let mut remote = super::SftpRemote::over(Box::new(channel), None, "s", "refuser:s".into())
        .expect("nothing is read yet");
    let err = remote
        .read_file("a", &mut Vec::new())
        .expect_err("the greeting is refused");
    assert_eq!(err.kind, ErrorKind::Transport);
    assert!(
        err.message.contains("unexpected SFTP greeting"),
        "{}",
        err.message
    );
}

#[test]
fn a_home_relative_store_is_named_as_given_not_as_absolute() {
    let describe = super::describe;
    assert_eq!(
        describe("alice", "devbox", 22, "work/.baton"),
        "alice@devbox:work/.baton"
    );
    assert_eq!(
        describe("alice", "devbox", 2222, "work/.baton"),
        "ssh://alice@devbox:2222/~/work/.baton"
    );
    assert_eq!(
        describe("alice", "devbox", 22, "/srv/.baton"),
        "ssh://alice@devbox:22/srv/.baton"
    );
}
