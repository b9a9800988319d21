//! Requests sent on a guessed handle (`guess`, `chain`): one round trip against a server
//! that names handles as OpenSSH does, the same answers against any other.

use super::fake::{Naming, fake};
use super::strings;
use crate::transport::Remote;
use crate::transport::ssh::sftp::{CHUNK, SftpRemote};

type Answers = (Vec<Option<Vec<u8>>>, Vec<Option<Vec<String>>>);

fn names(
    answers: (
        Vec<Option<Vec<u8>>>,
        Vec<Option<Vec<crate::transport::RemoteEntry>>>,
    ),
) -> Answers {
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
