//! The fd-relative walk against a model: random trees with symlinks (absolute, relative,
//! `..`, dangling, looping, into the tree), FIFOs and deep directories, random paths into
//! them, each answered by `openat2` and by the fallback walk exactly as a model that
//! follows no symlink answers, and nothing read ever from outside the root. Then the same
//! while a thread swaps a directory and a symlink to outside.

use super::*;

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::sync::Arc;

/// A small deterministic generator (splitmix64): the seed reproduces a failing case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What the model holds at a name.
enum Node {
    Dir(BTreeMap<String, Node>),
    File(String),
    Link(String),
    Fifo,
}

const OUTSIDE: &str = "OUTSIDE";

/// Build a random tree at `at` (and in the model), `depth` levels at most.
fn grow(rng: &mut Rng, at: &Path, rel: &str, depth: usize, outside: &Path) -> Node {
    let mut children = BTreeMap::new();
    let count = rng.below(5) + usize::from(depth > 0);
    for i in 0..count {
        let name = format!("{}{i}", rng.pick(&["d", "f", "l", "x"]));
        let path = at.join(&name);
        let child_rel = format!("{rel}{name}/");
        let node = match rng.below(10) {
            0..=3 if depth > 0 => {
                fs::create_dir(&path).unwrap();
                grow(rng, &path, &child_rel, depth - 1, outside)
            }
            0..=5 => {
                let text = format!("inside:{rel}{name}");
                fs::write(&path, &text).unwrap();
                Node::File(text)
            }
            6..=8 => {
                let targets = [
                    outside.display().to_string(),
                    outside.join("secret").display().to_string(),
                    "../outside".to_string(),
                    "../../../../../../../../outside/secret".to_string(),
                    "..".to_string(),
                    "nowhere/at/all".to_string(),
                    name.clone(),
                    ".".to_string(),
                    "/etc".to_string(),
                ];
                let target = rng.pick(&targets).clone();
                std::os::unix::fs::symlink(&target, &path).unwrap();
                Node::Link(target)
            }
            _ => {
                rustix::fs::mkfifoat(rustix::fs::CWD, &path, Mode::from_raw_mode(0o600)).unwrap();
                Node::Fifo
            }
        };
        children.insert(name, node);
    }
    Node::Dir(children)
}

/// What resolving `parts` must give: the model's node, or why not.
enum Expect<'a> {
    Found(&'a Node),
    Outside,
    Symlink,
    NotFound,
    NotDir,
}

fn model<'a>(root: &'a Node, parts: &[String]) -> Expect<'a> {
    if parts.iter().any(|p| p == ".." || p.starts_with('/')) {
        return Expect::Outside;
    }
    let parts: Vec<&String> = parts.iter().filter(|p| *p != ".").collect();
    let mut at = root;
    for (i, part) in parts.iter().enumerate() {
        let Node::Dir(children) = at else {
            return Expect::NotDir;
        };
        let Some(child) = children.get(part.as_str()) else {
            return Expect::NotFound;
        };
        let last = i + 1 == parts.len();
        if !last && matches!(child, Node::Link(_)) {
            return Expect::Symlink;
        }
        at = child;
    }
    Expect::Found(at)
}

/// A random path: names from the tree (at any level), `.`, `..`, missing names, now and
/// then a leading `/`.
fn random_path(rng: &mut Rng, root: &Node, outside: &Path) -> Vec<String> {
    let mut parts = Vec::new();
    if rng.below(12) == 0 {
        parts.push(format!("{}", outside.display()));
        return parts;
    }
    let mut at = Some(root);
    for _ in 0..rng.below(7) + 1 {
        let choice = rng.below(10);
        let name = match (choice, at) {
            (0, _) => "..".to_string(),
            (1, _) => ".".to_string(),
            (2, _) => "missing".to_string(),
            (_, Some(Node::Dir(children))) if !children.is_empty() => {
                let names: Vec<&String> = children.keys().collect();
                (*rng.pick(&names)).clone()
            }
            _ => "f0".to_string(),
        };
        at = match at {
            Some(Node::Dir(children)) => children.get(&name),
            _ => None,
        };
        parts.push(name);
    }
    parts
}

fn read_all(mut file: File) -> String {
    let mut text = String::new();
    file.read_to_string(&mut text).unwrap();
    assert!(!text.contains(OUTSIDE), "read from outside: {text}");
    text
}

/// Check every operation on `parts` against the model.
fn check(dir: &Dir, root: &Node, parts: &[String], seed: u64) {
    let rel: PathBuf = parts.iter().collect();
    let what = format!("seed {seed}: {}", rel.display());
    let expect = model(root, parts);
    let file = dir.open_file(&rel);
    let entry = dir.entry(&rel);
    match expect {
        Expect::Outside => {
            assert!(matches!(file, Err(Refused::Outside)), "{what}: {file:?}");
            assert!(matches!(entry, Err(Refused::Outside)), "{what}");
        }
        Expect::Symlink => {
            assert!(matches!(file, Err(Refused::Symlink)), "{what}: {file:?}");
            assert!(matches!(entry, Err(Refused::Symlink)), "{what}");
            assert!(matches!(dir.lstat(&rel), Err(Refused::Symlink)), "{what}");
        }
        Expect::NotFound | Expect::NotDir => {
            let errno = if matches!(expect, Expect::NotFound) {
                libc::ENOENT
            } else {
                libc::ENOTDIR
            };
            let is = |r: &Refused| matches!(r, Refused::Io(e) if e.raw_os_error() == Some(errno));
            assert!(file.as_ref().err().is_some_and(is), "{what}: {file:?}");
            assert!(
                entry.as_ref().err().is_some_and(is),
                "{what}: {:?}",
                entry.as_ref().err()
            );
        }
        Expect::Found(node) => match node {
            Node::File(text) => {
                assert_eq!(read_all(file.expect(&what)), *text, "{what}");
                let Ok(Entry::File(file, meta)) = entry else {
                    panic!("{what}: not opened as a file");
                };
                assert!(meta.is_file());
                assert_eq!(read_all(file), *text, "{what}");
            }
            Node::Link(target) => {
                assert!(matches!(file, Err(Refused::Symlink)), "{what}: {file:?}");
                let Ok(Entry::Symlink(got)) = entry else {
                    panic!("{what}: not read as a symlink");
                };
                assert_eq!(got, target.as_bytes(), "{what}");
                assert_eq!(dir.read_link(&rel).unwrap(), target.as_bytes(), "{what}");
                assert!(dir.lstat(&rel).unwrap().file_type().is_symlink(), "{what}");
            }
            Node::Fifo => {
                assert!(matches!(file, Err(Refused::NotRegular)), "{what}: {file:?}");
                assert!(
                    matches!(entry, Ok(Entry::Other(k)) if k.is_fifo()),
                    "{what}"
                );
            }
            Node::Dir(children) => {
                assert!(matches!(file, Err(Refused::NotRegular)), "{what}: {file:?}");
                let Ok(Entry::Dir(sub)) = entry else {
                    panic!("{what}: not opened as a directory");
                };
                let names: Vec<OsString> = children.keys().map(OsString::from).collect();
                assert_eq!(sub.names().unwrap(), names, "{what}");
                // Everything below, walked by fd from the opened directory only.
                walk_all(&sub, node, &what);
            }
        },
    }
}

use std::os::unix::fs::FileTypeExt;

/// Walk `dir` by fd, each entry as the model has it.
fn walk_all(dir: &Dir, node: &Node, what: &str) {
    let Node::Dir(children) = node else {
        panic!("{what}: not a directory in the model");
    };
    for (name, child) in children {
        match (dir.entry(Path::new(name)), child) {
            (Ok(Entry::Dir(sub)), Node::Dir(_)) => walk_all(&sub, child, what),
            (Ok(Entry::File(file, _)), Node::File(text)) => assert_eq!(read_all(file), *text),
            (Ok(Entry::Symlink(got)), Node::Link(target)) => assert_eq!(got, target.as_bytes()),
            (Ok(Entry::Other(k)), Node::Fifo) => assert!(k.is_fifo()),
            _ => panic!("{what}: {name} is not what the model holds"),
        }
    }
}

/// A world: `outside/` (holding what must never be read) beside `root/`.
fn world(rng: &mut Rng) -> (tempfile::TempDir, Node) {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret"), OUTSIDE).unwrap();
    fs::create_dir(outside.join("d0")).unwrap();
    fs::write(outside.join("d0/f0"), OUTSIDE).unwrap();
    fs::write(outside.join("f0"), OUTSIDE).unwrap();
    let root = tmp.path().join("root");
    fs::create_dir(&root).unwrap();
    let model = grow(rng, &root, "", 5, &outside);
    (tmp, model)
}

#[test]
fn random_trees_and_paths_resolve_as_the_model_and_never_outside() {
    for seed in 0..150u64 {
        let mut rng = Rng(seed);
        let (tmp, model) = world(&mut rng);
        let dir = Dir::open(&tmp.path().join("root")).unwrap();
        let outside = tmp.path().join("outside");
        let paths: Vec<Vec<String>> = (0..40)
            .map(|_| random_path(&mut rng, &model, &outside))
            .collect();
        for parts in &paths {
            check(&dir, &model, parts, seed);
        }
        without_openat2(|| {
            for parts in &paths {
                check(&dir, &model, parts, seed);
            }
        });
    }
}

#[test]
fn deep_paths_resolve_and_the_root_itself_is_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut deep = tmp.path().to_path_buf();
    let mut rel = PathBuf::new();
    for i in 0..200 {
        deep.push(format!("n{i}"));
        rel.push(format!("n{i}"));
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("leaf"), "leaf").unwrap();
    let dir = Dir::open(tmp.path()).unwrap();
    for forced in [false, true] {
        let run = || {
            let file = dir.open_file(&rel.join("leaf")).unwrap();
            assert_eq!(read_all(file), "leaf");
            assert!(matches!(dir.entry(Path::new(".")), Ok(Entry::Dir(_))));
            assert!(matches!(dir.entry(Path::new("")), Ok(Entry::Dir(_))));
        };
        if forced { without_openat2(run) } else { run() }
    }
}

#[test]
fn a_directory_swapped_with_a_symlink_to_outside_is_never_read_through() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir_all(outside.join("sub")).unwrap();
    fs::write(outside.join("f"), OUTSIDE).unwrap();
    fs::write(outside.join("sub/g"), OUTSIDE).unwrap();
    let root = tmp.path().join("root");
    fs::create_dir_all(root.join("d/sub")).unwrap();
    fs::write(root.join("d/f"), "inside").unwrap();
    fs::write(root.join("d/sub/g"), "inside").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("l")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (a, b) = (root.join("d"), root.join("l"));
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &a,
                    rustix::fs::CWD,
                    &b,
                    RenameFlags::EXCHANGE,
                )
                .unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let dir = Dir::open(&root).unwrap();
    let mut read = 0;
    for i in 0..4000 {
        let run = || {
            let mut got = 0;
            for rel in ["d/f", "d/sub/g"] {
                if let Ok(file) = dir.open_file(Path::new(rel)) {
                    assert_eq!(read_all(file), "inside");
                    got += 1;
                }
            }
            if let Ok(Entry::Dir(d)) = dir.entry(Path::new("d")) {
                // Listed and descended by fd: whatever happens to the names now.
                if let Ok(Entry::File(f, _)) = d.entry(Path::new("f")) {
                    assert_eq!(read_all(f), "inside");
                    got += 1;
                }
                if let Ok(Entry::Dir(sub)) = d.entry(Path::new("sub"))
                    && let Ok(Entry::File(g, _)) = sub.entry(Path::new("g"))
                {
                    assert_eq!(read_all(g), "inside");
                    got += 1;
                }
            }
            got
        };
        read += if i % 2 == 0 {
            run()
        } else {
            without_openat2(run)
        };
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 100, "the swapper ran ({swaps})");
    assert!(
        read > 0,
        "nothing was read while the directory was in place"
    );
}

#[test]
fn creating_refuses_what_is_already_there_and_never_writes_through_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    let dir = Dir::open_nofollow(&out).unwrap();
    dir.create_file(OsStr::new("a.md"), b"a").unwrap();
    assert_eq!(fs::read(out.join("a.md")).unwrap(), b"a");
    assert!(matches!(
        dir.create_file(OsStr::new("a.md"), b"b"),
        Err(Refused::Exists)
    ));
    std::os::unix::fs::symlink(outside.join("x"), out.join("x.md")).unwrap();
    assert!(matches!(
        dir.create_file(OsStr::new("x.md"), b"x"),
        Err(Refused::Exists)
    ));
    std::os::unix::fs::symlink(&outside, out.join("archive")).unwrap();
    assert!(matches!(
        dir.create_dir(OsStr::new("archive")),
        Err(Refused::Exists)
    ));
    let sub = dir.create_dir(OsStr::new("made")).unwrap();
    sub.create_file(OsStr::new("in.md"), b"in").unwrap();
    sub.sync().unwrap();
    assert_eq!(fs::read(out.join("made/in.md")).unwrap(), b"in");
    assert!(matches!(
        dir.create_file(OsStr::new("../escape"), b"x"),
        Err(Refused::Outside)
    ));
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing outside"
    );
    // No temp file left behind by the refusals.
    let names = dir.names().unwrap();
    assert_eq!(names, ["a.md", "archive", "made", "x.md"]);
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    assert!(matches!(Dir::open_nofollow(&link), Err(Refused::Symlink)));
    assert!(Dir::open(&link).is_ok(), "the root is followed as named");
}

#[test]
fn the_fuzz_entry_point_holds_on_random_inputs() {
    for seed in 0..300u64 {
        let mut rng = Rng(seed ^ 0xfeed);
        let len = rng.below(240);
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        super::fuzzing::walk(&data);
    }
}
