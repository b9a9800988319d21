//! Requests sent on a guessed handle (`handle_guess`, `chained_reads`): one round trip against a server
//! that names handles as OpenSSH does, the same answers against any other.

use super::fake::{Naming, fake};
use super::strings;
use crate::ssh::sftp::{CHUNK, SftpRemote};
use crate::{Pipelined, Published, Remote};

type Answers = (Vec<Option<Vec<u8>>>, Vec<Option<Vec<String>>>);

/// What `read_many` answers.
type Read = (Vec<Option<Vec<u8>>>, Vec<Option<Vec<crate::RemoteEntry>>>);

fn names(answers: Read) -> Answers {
    let (files, dirs) = answers;
    let dirs = dirs
        .into_iter()
        .map(|d| d.map(|entries| entries.into_iter().map(|e| e.name).collect()))
        .collect();
    (files, dirs)
}

fn long() -> Vec<u8> {
    (0..2 * CHUNK + 5).map(|i| (i % 253) as u8).collect()
}

/// A store of a config, two generations, a pack and a file longer than two reads.
fn store(naming: Naming) -> (SftpRemote, super::fake::Fake) {
    let long = long();
    let (remote, fake) = fake(&[
        ("config", b"config"),
        ("refs/1", b"one"),
        ("refs/2", b"two"),
        ("packs/p", b"0123456789abcdef"),
        ("long", &long),
    ]);
    fake.with(|s| {
        s.naming = naming;
        s.dirs.extend(["s/refs".to_string(), "s/packs".to_string()]);
    });
    (remote, fake)
}

/// The state reads of a pull, a pack's tail and body, and a probe: their answers, and
/// the round trips each took.
fn look(remote: &mut SftpRemote) -> (Vec<Answers>, Vec<u8>, Vec<u64>) {
    let files = strings(&["config", "refs/1", "refs/2", "refs/3", "long"]);
    let dirs = strings(&["packs", "refs", "nope"]);
    let mut trips = Vec::new();
    let mut answers = Vec::new();
    let mut before = remote.round_trips;
    let mut took = |remote: &SftpRemote| {
        trips.push(remote.round_trips - before);
        before = remote.round_trips;
    };
    answers.push(names(
        remote.read_many(&files, &dirs, 1 << 20).expect("read_many"),
    ));
    took(remote);
    let (tail, token) = remote.open_tail("packs/p", 16, 6, true).expect("open_tail");
    assert_eq!(tail, b"abcdef");
    let mut pack = Vec::new();
    remote
        .read_rest(token, "packs/p", 16, &tail, &mut pack)
        .expect("read_rest");
    took(remote);
    let token = remote
        .start_reads(&files[..3], &dirs[..1], 1 << 20)
        .expect("start_reads")
        .expect("a probe");
    answers.push(names(remote.collect_reads(token).expect("collect_reads")));
    took(remote);
    answers.push(names(
        remote.read_many(&files, &dirs, 1 << 20).expect("read_many"),
    ));
    took(remote);
    (answers, pack, trips)
}

fn expected() -> Vec<Answers> {
    let full: Answers = (
        vec![
            Some(b"config".to_vec()),
            Some(b"one".to_vec()),
            Some(b"two".to_vec()),
            None,
            Some(long()),
        ],
        vec![Some(strings(&["p"])), Some(strings(&["1", "2"])), None],
    );
    let probe: Answers = (full.0[..3].to_vec(), full.1[..1].to_vec());
    vec![full.clone(), probe, full]
}

#[test]
fn reads_on_a_guessed_handle_take_the_round_trip_of_their_opens() {
    let (mut remote, fake) = store(Naming::OpenSsh);
    let (answers, pack, trips) = look(&mut remote);
    assert_eq!(answers, expected());
    assert_eq!(pack, b"0123456789abcdef");
    // The file longer than two reads is read again: 2 more round trips of the first
    // and last batch; the pack's open and tail, and the probe, take one each.
    assert_eq!(trips, vec![3, 1, 1, 3]);
    assert!(!remote.handles.is_off(), "every guess was right");
    assert_eq!(remote.handles.held(), 0);
    assert!(
        fake.with(|s| s.handles.is_empty()),
        "every handle is closed"
    );
}

#[test]
fn a_server_that_names_handles_otherwise_gives_the_same_answers() {
    for naming in [
        Naming::Counted,
        Naming::Random(1),
        Naming::Random(7),
        Naming::Random(42),
    ] {
        let (mut remote, fake) = store(naming);
        let (answers, pack, _) = look(&mut remote);
        assert_eq!(answers, expected());
        assert_eq!(pack, b"0123456789abcdef");
        assert_eq!(remote.handles.held(), 0);
        assert!(
            fake.with(|s| s.handles.is_empty()),
            "every handle is closed"
        );
        // A failed close (of a handle named by a wrong guess) is dropped, never reported.
        remote
            .read_many(&strings(&["config"]), &[], 100)
            .expect("the session is healthy");
    }
    let (mut remote, _) = store(Naming::Counted);
    look(&mut remote);
    assert!(remote.handles.is_off(), "a wrong guess ends guessing");
}

/// An upload past the write window with two small files beside it, into a directory
/// prepared for the publish: what the server holds after it, and its round trips.
fn upload(naming: Naming) -> (SftpRemote, super::fake::Fake, u64) {
    let (mut remote, fake) = fake(&[]);
    fake.with(|s| {
        s.naming = naming;
        s.dirs.extend(["s/tmp".to_string(), "s/packs".to_string()]);
    });
    remote
        .prepare_publish(&strings(&["packs"]))
        .expect("prepare");
    let data = big();
    let beside = vec![
        ("tmp/ref".to_string(), b"a ref line\n".to_vec()),
        ("tmp/config".to_string(), b"config\n".to_vec()),
    ];
    let mut upload = remote
        .create_with("tmp/item", &beside)
        .expect("create_with");
    std::io::Write::write_all(&mut upload, &data).expect("write");
    let receipt = upload.finish(&[(0, 4), (CHUNK as u64, 3)]).expect("finish");
    assert_eq!(receipt.size, data.len() as u64);
    assert_eq!(
        receipt.readback,
        vec![data[..4].to_vec(), data[CHUNK..CHUNK + 3].to_vec()]
    );
    let trips = remote.round_trips;
    (remote, fake, trips)
}

/// Past the write window: its first wait finds the reply to the open.
fn big() -> Vec<u8> {
    static BIG: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BIG.get_or_init(|| {
        let pattern: Vec<u8> = (0..=250).collect();
        pattern
            .iter()
            .copied()
            .cycle()
            .take((super::super::WINDOW + 3) * CHUNK + 11)
            .collect()
    })
    .clone()
}

fn staged(fake: &super::fake::Fake) -> Vec<(String, usize)> {
    fake.with(|s| {
        s.files
            .iter()
            .map(|(path, bytes)| (path.clone(), bytes.len()))
            .collect()
    })
}

#[test]
fn an_upload_on_guessed_handles_waits_for_no_open() {
    let (mut remote, fake, trips) = upload(Naming::OpenSsh);
    // The opens, writes, fsyncs, stats and read-backs: one round trip (the window's
    // waits are bandwidth).
    assert_eq!(trips, 1);
    assert!(!remote.handles.is_off());
    assert_eq!(
        fake.with(|s| s.files.get("s/tmp/item").cloned()),
        Some(big())
    );
    assert_eq!(
        fake.with(|s| s.files.get("s/tmp/ref").cloned()),
        Some(b"a ref line\n".to_vec())
    );
    // The prepared directory was opened behind the upload: its fsync needs no open.
    let before = remote.round_trips;
    let outcomes = remote
        .publish_many(&[("tmp/item".to_string(), "packs/p".to_string())])
        .expect("publish");
    assert!(matches!(outcomes[..], [Published::Done]));
    assert_eq!(
        remote.round_trips - before,
        1,
        "rename and fsync in one round trip"
    );
    assert_eq!(
        remote.handles.held(),
        1,
        "only the prepared directory is open"
    );
}

#[test]
fn an_upload_on_wrong_guesses_stages_the_same_files() {
    let want = staged(&upload(Naming::OpenSsh).1);
    for naming in [
        Naming::Counted,
        Naming::Random(3),
        Naming::Random(11),
        Naming::Random(99),
    ] {
        let (mut remote, server, _) = upload(naming);
        let fake = server;
        assert_eq!(staged(&fake), want);
        assert_eq!(
            fake.with(|s| s.files.get("s/tmp/item").cloned()),
            Some(big())
        );
        assert_eq!(
            fake.with(|s| s.files.get("s/tmp/config").cloned()),
            Some(b"config\n".to_vec())
        );
        remote
            .publish_many(&[("tmp/item".to_string(), "packs/p".to_string())])
            .expect("publish");
        assert_eq!(
            fake.with(|s| s.handles.len()),
            1,
            "only the prepared directory is open"
        );
    }
    // Creating over an existing file fails, guessed or not.
    for naming in [Naming::OpenSsh, Naming::Counted] {
        let (mut remote, fake) = fake(&[("tmp/item", b"there")]);
        fake.with(|s| {
            s.naming = naming;
            s.dirs.insert("s/tmp".to_string());
        });
        let failed = match remote.create_with("tmp/item", &[]) {
            Err(e) => e,
            Ok(mut upload) => {
                let _ = std::io::Write::write_all(&mut upload, b"new");
                upload.finish(&[]).expect_err("the file exists")
            }
        };
        assert!(failed.message.contains("tmp/item"), "{}", failed.message);
        assert_eq!(
            fake.with(|s| s.files.get("s/tmp/item").cloned()),
            Some(b"there".to_vec()),
            "never written over"
        );
    }
}

#[test]
fn once_a_guess_was_right_a_long_batch_is_one_chain() {
    let names: Vec<String> = (0..120).map(|i| format!("refs/{i}")).collect();
    let (mut remote, fake) = store(Naming::OpenSsh);
    fake.with(|s| {
        for n in &names[3..100] {
            s.files.insert(format!("s/{n}"), n.as_bytes().to_vec());
        }
    });
    // Not yet: a first batch past the handle window goes the long way.
    let (files, _) = remote.read_many(&names, &[], 100).expect("read_many");
    assert!(remote.round_trips > 1);
    // A short batch: its guess is right.
    remote.read_many(&names[..3], &[], 100).expect("read_many");
    let before = remote.round_trips;
    fake.with(|s| s.max_open = 0);
    let (again, _) = remote.read_many(&names, &[], 100).expect("read_many");
    assert_eq!(again, files);
    assert_eq!(remote.round_trips - before, 1, "one chain, one round trip");
    assert_eq!(fake.with(|s| s.max_open), 1, "one handle at a time");
    assert_eq!(files.iter().filter(|f| f.is_some()).count(), 99);
    assert_eq!(files[50].as_deref(), Some(b"refs/50".as_slice()));
}
