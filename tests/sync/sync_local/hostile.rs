//! Local-path targets: hostile remote files (oversized packs, devices, FIFOs).

use super::*;

// ---------------------------------------------------------------------------------------
// Hostile remote files: packs larger than declared, devices, FIFOs
// ---------------------------------------------------------------------------------------

/// How a hostile remote replaces one of its files.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Hostile {
    /// A sparse file of 1 TiB (zeros: no pack trailer).
    SparseTiB,
    /// A symlink to /dev/zero (endless zeros).
    DevZero,
    /// A FIFO nobody writes to (an open for reading blocks for ever).
    Fifo,
}

pub(crate) fn make_hostile(path: &Path, how: Hostile) {
    fs::remove_file(path).unwrap();
    match how {
        Hostile::SparseTiB => fs::File::create(path).unwrap().set_len(1 << 40).unwrap(),
        Hostile::DevZero => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
        Hostile::Fifo => {
            let c = std::ffi::CString::new(s(path)).unwrap();
            // SAFETY: mkfifo reads the NUL-terminated path only.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }
    }
}

/// `baton --json ARGS` in `env`, capped (files at 64 MiB, 30 s): the exit code, the
/// error document and the time it took.
fn capped_json(env: &Env, args: &[&str]) -> (Option<i32>, Value, Duration) {
    let mut cmd = env.cmd();
    cmd.arg("--json").args(args);
    let (out, took) = common::capped_output(cmd, Duration::from_secs(30));
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(doc.is_object(), "{args:?}: {}", text(&out));
    (out.status.code(), doc, took)
}

/// A clone of `remote` that must be refused as an integrity error, fast, leaving
/// nothing where the clone would have gone.
fn assert_clone_refused(remote: &Path, what: &str) -> Value {
    let env = Env::new();
    let (code, doc, took) = capped_json(&env, &["clone", s(remote), "c"]);
    assert_eq!(code, Some(4), "clone with {what}: {doc}");
    assert!(
        took < Duration::from_secs(10),
        "clone with {what} took {took:?}"
    );
    let left: Vec<String> = fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n == "c" || n.starts_with(".baton-clone-"))
        .collect();
    assert!(left.is_empty(), "clone with {what} left {left:?}");
    doc["error"].clone()
}

#[test]
fn clone_refuses_a_pack_with_bytes_its_index_does_not_declare() {
    let remote_env = Env::new();
    let remote = remote_dir(&remote_env);
    let (a, _) = store_with_target(&remote, 42);
    a.ok(&["push"]);
    // A gap of 8 MiB before the index: the footer and index still fit the file, but the
    // object area holds bytes no entry declares.
    let pack = pack_files(&remote).pop().unwrap();
    let bytes = fs::read(&pack).unwrap();
    let footer = &bytes[bytes.len() - 32..];
    let count = u64::from_be_bytes(footer[0..8].try_into().unwrap());
    let index_offset = u64::from_be_bytes(footer[8..16].try_into().unwrap()) as usize;
    let gap = 8usize << 20;
    let mut hostile = bytes[..index_offset].to_vec();
    hostile.resize(index_offset + gap, 0);
    hostile.extend_from_slice(&bytes[index_offset..bytes.len() - 32]);
    hostile.extend_from_slice(&count.to_be_bytes());
    hostile.extend_from_slice(&((index_offset + gap) as u64).to_be_bytes());
    hostile.extend_from_slice(&footer[16..]);
    let named = pack.with_file_name(format!("{}.pack", blake3::hash(&hostile).to_hex()));
    fs::remove_file(&pack).unwrap();
    fs::write(&named, &hostile).unwrap();
    let err = assert_clone_refused(&remote, "an undeclared gap");
    assert!(
        err["message"].as_str().unwrap().contains("object area"),
        "{err}"
    );
}

#[test]
fn a_fifo_in_a_local_remote_is_refused_instead_of_hanging() {
    let remote_env = Env::new();
    let remote = remote_dir(&remote_env);
    let (a, _) = store_with_target(&remote, 43);
    a.ok(&["push"]);
    let newest = fs::read_dir(remote.join("refs/current"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .max()
        .unwrap();
    let pack = pack_files(&remote).pop().unwrap();
    for (path, what) in [
        (remote.join("config"), "config"),
        (newest, "ref generation"),
        (pack, "pack"),
    ] {
        let saved = fs::read(&path).unwrap();
        make_hostile(&path, Hostile::Fifo);
        let err = assert_clone_refused(&remote, &format!("a FIFO at the {what}"));
        let message = err["message"].as_str().unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(message.contains(name), "{what}: {err}");
        fs::remove_file(&path).unwrap();
        fs::write(&path, saved).unwrap();
    }
    // The remote itself is fine again.
    clone_env(&remote);
}

#[test]
fn clone_stops_a_pack_download_at_its_first_bad_object() {
    use std::io::{Seek, SeekFrom, Write};
    let remote_env = Env::new();
    let remote = remote_dir(&remote_env);
    let (a, _) = store_with_target(&remote, 46);
    a.ok(&["push"]);
    // A sparse 1 TiB pack whose magic, index and footer are all valid: its one declared
    // object fills the whole object area, and is zeros (not a zstd frame).
    let pack = pack_files(&remote).pop().unwrap();
    fs::remove_file(&pack).unwrap();
    let size: u64 = 1 << 40;
    let index_offset = size - 48 - 32;
    let mut file = fs::File::create(&pack).unwrap();
    file.set_len(size).unwrap();
    file.write_all(b"baton-pack-v1\n\0\0").unwrap();
    file.seek(SeekFrom::Start(index_offset)).unwrap();
    file.write_all(blake3::hash(b"anything").as_bytes())
        .unwrap();
    file.write_all(&16u64.to_be_bytes()).unwrap();
    file.write_all(&(index_offset - 16).to_be_bytes()).unwrap();
    file.write_all(&1u64.to_be_bytes()).unwrap();
    file.write_all(&index_offset.to_be_bytes()).unwrap();
    file.write_all(b"baton-pack-end\n\0").unwrap();
    drop(file);
    let err = assert_clone_refused(&remote, "a 1 TiB object of zeros");
    assert!(
        err["message"].as_str().unwrap().contains("corrupt"),
        "{err}"
    );
}
