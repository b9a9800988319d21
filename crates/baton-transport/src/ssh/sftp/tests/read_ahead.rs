//! Files read tail first in an announced order (`expect_tails`): opened and read ahead,
//! the same bytes whatever the order they are asked for in.

use super::fake::{Naming, fake};
use crate::ssh::sftp::{CHUNK, SftpRemote};
use crate::{Pipelined, Remote};

/// Packs `packs/p0`.. of `sizes` bytes (byte i of pack k is `(i + k) % 251`).
fn packs(naming: Naming, sizes: &[usize]) -> (SftpRemote, super::fake::Fake, Vec<Vec<u8>>) {
    let contents: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(k, n)| (0..*n).map(|i| ((i + k) % 251) as u8).collect())
        .collect();
    let (remote, fake) = fake(&[]);
    fake.with(|s| {
        s.naming = naming;
        s.dirs.insert("s/packs".to_string());
        for (k, bytes) in contents.iter().enumerate() {
            s.files.insert(format!("s/packs/p{k}"), bytes.clone());
        }
    });
    (remote, fake, contents)
}

fn plan(sizes: &[usize]) -> Vec<(String, u64, u64, bool)> {
    sizes
        .iter()
        .enumerate()
        .map(|(k, n)| (format!("packs/p{k}"), *n as u64, 64, true))
        .collect()
}

/// Read pack `k` tail first, then whole (or close it after its tail when `whole` is
/// false): its bytes.
fn read(remote: &mut SftpRemote, k: usize, size: usize, whole: bool) -> Vec<u8> {
    let path = format!("packs/p{k}");
    let (tail, token) = remote
        .open_tail(&path, size as u64, 64, true)
        .expect("open_tail");
    if !whole {
        remote.close_tail(token, &path);
        return tail;
    }
    let mut out = Vec::new();
    remote
        .read_rest(token, &path, size as u64, &tail, &mut out)
        .expect("read_rest");
    out
}

#[test]
fn packs_read_in_the_announced_order_take_two_round_trips() {
    let sizes = [300, 90, 5000, 120, 2 * CHUNK + 7, 64];
    for naming in [Naming::OpenSsh, Naming::Counted, Naming::Random(5)] {
        let (mut remote, fake, contents) = packs(naming, &sizes);
        remote.expect_tails(&plan(&sizes));
        for (k, size) in sizes.iter().enumerate() {
            assert_eq!(
                read(&mut remote, k, *size, k != 3),
                if k == 3 {
                    contents[k][size - 64..].to_vec()
                } else {
                    contents[k].clone()
                }
            );
        }
        if naming == Naming::OpenSsh {
            // The first pack on a guessed handle with the others' opens; their reads
            // once those are answered.
            assert_eq!(remote.round_trips, 2);
        }
        remote
            .read_many(&[], &[], 0)
            .expect("the session is healthy");
        assert!(fake.with(|s| s.handles.is_empty()), "every pack is closed");
    }
}

#[test]
fn packs_asked_for_out_of_the_announced_order_read_the_same() {
    let sizes = [300, 90, 5000, 120];
    let (mut remote, fake, contents) = packs(Naming::OpenSsh, &sizes);
    remote.expect_tails(&plan(&sizes));
    assert_eq!(read(&mut remote, 0, sizes[0], true), contents[0]);
    // Not the one expected next: what was opened ahead is closed, and each is read
    // on its own.
    for k in [2, 1, 3] {
        assert_eq!(read(&mut remote, k, sizes[k], true), contents[k]);
    }
    // A missing pack announced ahead fails when it is asked for, and only then.
    remote.expect_tails(&[
        ("packs/p1".to_string(), 90, 64, true),
        ("packs/gone".to_string(), 100, 64, true),
    ]);
    assert_eq!(read(&mut remote, 1, 90, true), contents[1]);
    let err = remote
        .open_tail("packs/gone", 100, 64, true)
        .expect_err("a missing pack");
    assert!(err.message.contains("packs/gone"), "{}", err.message);
    remote
        .read_many(&[], &[], 0)
        .expect("the session is healthy");
    assert!(fake.with(|s| s.handles.is_empty()), "every pack is closed");
}

/// Reads, uploads and packs read ahead, one after another in one session, against
/// servers that hand out slots at random: every answer and every staged byte is what an
/// OpenSSH-like server gives, and nothing is left open.
#[test]
fn mixed_work_on_random_handles_matches_openssh() {
    let sizes = [200, 3000, 70, CHUNK + 9];
    let run = |naming: Naming| {
        let (mut remote, fake, _) = packs(naming, &sizes);
        fake.with(|s| {
            s.dirs.insert("s/tmp".to_string());
            s.files.insert("s/config".to_string(), b"config".to_vec());
        });
        let mut seen = Vec::new();
        for round in 0..3 {
            let files = vec![
                "config".to_string(),
                format!("tmp/{round}"),
                "nope".to_string(),
            ];
            let (got, listed) = remote
                .read_many(&files, &["packs".to_string(), "tmp".to_string()], 1 << 20)
                .expect("read_many");
            seen.push(format!(
                "{got:?} {:?}",
                listed
                    .iter()
                    .map(|l| l.as_ref().map(|e| e.len()))
                    .collect::<Vec<_>>()
            ));
            let beside = vec![(
                format!("tmp/{round}.ref"),
                format!("ref {round}").into_bytes(),
            )];
            let mut upload = remote
                .create_with(&format!("tmp/{round}"), &beside)
                .expect("create");
            let data: Vec<u8> = (0..(round + 1) * 40_000).map(|i| (i % 7) as u8).collect();
            std::io::Write::write_all(&mut upload, &data).expect("write");
            let receipt = upload.finish(&[(0, 3)]).expect("finish");
            seen.push(format!("{} {:?}", receipt.size, receipt.readback));
            remote.expect_tails(&plan(&sizes));
            for (k, size) in sizes.iter().enumerate() {
                let bytes = read(&mut remote, k, *size, (k + round) % 3 != 0);
                seen.push(format!("{k}: {} {:?}", bytes.len(), blake3::hash(&bytes)));
            }
        }
        remote
            .read_many(&[], &[], 0)
            .expect("the session is healthy");
        let open = fake.with(|s| s.handles.len());
        let files = fake.with(|s| s.files.clone());
        (seen, files, open)
    };
    let want = run(Naming::OpenSsh);
    assert_eq!(want.2, 0, "nothing is left open");
    for seed in 0..12 {
        assert_eq!(run(Naming::Random(seed)), want, "seed {seed}");
    }
    assert_eq!(run(Naming::Counted), want);
}
