//! The entry point of the `beneath_walk` fuzz target: the input builds a tree (directories,
//! files, symlinks to outside, up, dangling, to themselves) and then names paths in it
//! (names of the tree, `.`, `..`, absolute); each path is opened every way [`Dir`] opens
//! one, through `openat2` and through the fallback walk. Whatever the bytes: the two give
//! the same answer, nothing read comes from outside the root, and no call panics.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{Dir, Entry, Refused, without_openat2};

/// What every file outside the root holds.
const OUTSIDE: &[u8] = b"OUTSIDE";
const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// Build the tree `data` describes under a fresh temp directory and check every path it
/// names; panics on a violation.
#[doc(hidden)]
pub fn walk(data: &[u8]) {
    let Ok(tmp) = tempfile::tempdir() else {
        return;
    };
    let outside = tmp.path().join("outside");
    let root = tmp.path().join("root");
    if fs::create_dir_all(outside.join("a")).is_err() || fs::create_dir(&root).is_err() {
        return;
    }
    for name in ["a/a", "a/b", "b", "c"] {
        let _ = fs::write(outside.join(name), OUTSIDE);
    }
    let targets = [
        outside.display().to_string(),
        "../outside".to_string(),
        "../outside/b".to_string(),
        "..".to_string(),
        ".".to_string(),
        "a".to_string(),
        "missing".to_string(),
        "/".to_string(),
    ];
    let Ok(dir) = Dir::open(&root) else {
        return;
    };
    let mut at = root.clone();
    let mut bytes = data.iter().copied();
    while let Some(op) = bytes.next() {
        let name = NAMES[usize::from(bytes.next().unwrap_or(0)) % NAMES.len()];
        let path = at.join(name);
        match op % 6 {
            0 => {
                let _ = fs::create_dir(&path);
            }
            1 => {
                let _ = fs::write(&path, format!("inside {}", path.display()));
            }
            2 => {
                let target = &targets[usize::from(bytes.next().unwrap_or(0)) % targets.len()];
                let _ = std::os::unix::fs::symlink(target, &path);
            }
            3 => {
                if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                    at = path;
                }
            }
            4 => at = root.clone(),
            _ => {
                let len = usize::from(bytes.next().unwrap_or(0)) % 8;
                let rel = query(&mut bytes, len, &outside);
                let direct = answers(&dir, &rel);
                let walked = without_openat2(|| answers(&dir, &rel));
                assert_eq!(direct, walked, "{}", rel.display());
            }
        }
    }
}

/// A path of `len` components drawn from the tree's names, `.`, `..`, or (first) the
/// outside directory's absolute path.
fn query(bytes: &mut impl Iterator<Item = u8>, len: usize, outside: &Path) -> PathBuf {
    let mut rel = PathBuf::new();
    for i in 0..len {
        match bytes.next().unwrap_or(0) % 8 {
            0..=3 => rel.push(NAMES[usize::from(bytes.next().unwrap_or(0)) % NAMES.len()]),
            4 => rel.push("."),
            5 => rel.push(".."),
            6 if i == 0 => rel.push(outside),
            _ => rel.push(NAMES[0]),
        }
    }
    rel
}

/// What each way of opening `rel` gives, in a form the two resolvers must agree on;
/// every byte read checked not to come from outside.
fn answers(dir: &Dir, rel: &Path) -> Vec<String> {
    let mut out = Vec::new();
    out.push(match dir.open_file(rel) {
        Ok(file) => format!("file {}", read(file)),
        Err(r) => refused(&r),
    });
    out.push(match dir.entry(rel) {
        Ok(entry) => describe(entry, 0),
        Err(r) => refused(&r),
    });
    out.push(match dir.lstat(rel) {
        Ok(meta) => format!("{:?}", meta.file_type()),
        Err(r) => refused(&r),
    });
    out.push(match dir.read_link(rel) {
        Ok(target) => String::from_utf8_lossy(&target).into_owned(),
        Err(r) => refused(&r),
    });
    out
}

/// An entry and, for a directory, everything below it walked by fd.
fn describe(entry: Entry, depth: usize) -> String {
    match entry {
        Entry::File(file, _) => format!("file {}", read(file)),
        Entry::Symlink(target) => format!("link {}", String::from_utf8_lossy(&target)),
        Entry::Other(kind) => format!("other {kind:?}"),
        Entry::Dir(sub) if depth < 8 => {
            let mut text = String::from("dir [");
            for name in sub.names().unwrap_or_default() {
                let child = match sub.entry(Path::new(&name)) {
                    Ok(child) => describe(child, depth + 1),
                    Err(r) => refused(&r),
                };
                text.push_str(&format!("{} {child}, ", name.to_string_lossy()));
            }
            text + "]"
        }
        Entry::Dir(_) => "dir".to_string(),
    }
}

fn read(mut file: fs::File) -> String {
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    assert!(
        !bytes.windows(OUTSIDE.len()).any(|w| w == OUTSIDE),
        "read from outside the root"
    );
    String::from_utf8_lossy(&bytes).into_owned()
}

fn refused(r: &Refused) -> String {
    match r {
        Refused::Io(e) => format!("io {:?}", e.raw_os_error()),
        other => format!("{other:?}"),
    }
}
