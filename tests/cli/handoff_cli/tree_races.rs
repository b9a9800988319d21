//! Handoff CLI: commands that walk or write a tree a hostile process changes while they
//! run. `export-handoff` writes only into its directory whatever is planted in it during
//! the export; `save DIR` and `save --attach DIR` read only beneath DIR while a directory
//! of it is swapped with a symlink to outside (`renameat2(RENAME_EXCHANGE)`).

use super::mcp_paths::{Swapper, objects_holding};
use super::*;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Plants a symlink at each of `names` below `dir` (to the same name below `victim`) in a
/// loop, as soon as `dir` exists, until dropped.
struct Planter {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Planter {
    fn start(dir: PathBuf, victim: PathBuf, names: Vec<String>) -> Planter {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut planted = 0;
                while !stop.load(Ordering::Relaxed) {
                    for name in &names {
                        if std::os::unix::fs::symlink(victim.join(name), dir.join(name)).is_ok() {
                            planted += 1;
                        }
                    }
                }
                planted
            })
        };
        Planter {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().map_or(0, |t| t.join().expect("planter"))
    }
}

impl Drop for Planter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Every path below `dir`, relative, sorted.
fn tree_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in fs::read_dir(&at).expect("read_dir") {
            let path = entry.expect("entry").path();
            out.push(s(path.strip_prefix(dir).expect("prefix")));
            if fs::symlink_metadata(&path).expect("meta").is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn export_handoff_never_writes_through_a_symlink_planted_during_the_export() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    for agent in ["a", "b", "c", "d"] {
        ok(
            baton_in(
                &env,
                &ws,
                &[
                    "save",
                    "--brief",
                    &s(&brief),
                    "--from",
                    agent,
                    "--to",
                    "next",
                ],
            ),
            "save",
        );
    }
    const RUNS: usize = 100;
    let victim = env.path().join("victim");
    // `archive` exists there, so that a planted `archive` symlink leads somewhere.
    fs::create_dir_all(victim.join("archive")).expect("mkdir");
    let (mut exported, mut refused, mut planted) = (0, 0, 0);
    let mut other = Vec::new();
    let started = std::time::Instant::now();
    for format in ["prowl", "frontmatter"] {
        // The names an export writes, to plant as symlinks to the victim directory.
        // (Its parents do not exist yet: they are made as named.)
        let probe = env.path().join(format!("probe-{format}/below/here"));
        let args = |dir: &Path| -> Vec<String> {
            ["export-handoff", "current", "--format", format, "--history"]
                .iter()
                .map(|a| a.to_string())
                .chain([s(dir)])
                .collect()
        };
        let probe_args = args(&probe);
        ok(
            baton_in(
                &env,
                env.path(),
                &probe_args.iter().map(String::as_str).collect::<Vec<_>>(),
            ),
            "probe export",
        );
        // The top-level names: below a planted `archive`, the planter would write into
        // the victim directory itself.
        let names: Vec<String> = tree_names(&probe)
            .into_iter()
            .filter(|n| !n.contains('/'))
            .collect();
        for i in 0..RUNS {
            let dir = env.path().join(format!("out-{format}-{i}"));
            let planter = Planter::start(dir.clone(), victim.clone(), names.clone());
            let run_args = args(&dir);
            let out = baton_in(
                &env,
                env.path(),
                &run_args.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            planted += planter.stop();
            match code(&out) {
                0 => exported += 1,
                6 => {
                    refused += 1;
                    assert!(stderr(&out).contains("appeared in"), "{}", stderr(&out));
                    // What the refused export wrote is gone again (the planted
                    // symlinks are the planter's).
                    let left: Vec<String> = tree_names(&dir)
                        .into_iter()
                        .filter(|n| fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_file()))
                        .collect();
                    assert!(left.is_empty(), "left behind: {left:?}");
                }
                code => other.push(format!("exit {code}: {}", stderr(&out))),
            }
        }
    }
    eprintln!(
        "{} exports in {:?}: {exported} written, {refused} refused, {} failed otherwise, {planted} symlinks planted",
        2 * RUNS,
        started.elapsed(),
        other.len()
    );
    assert!(planted > 0, "the planter never got a symlink in");
    let written: Vec<String> = tree_names(&victim)
        .into_iter()
        .filter(|n| !victim.join(n).is_dir())
        .collect();
    assert!(
        written.is_empty(),
        "written outside the export: {written:?}"
    );
    // Every export either wrote its files or was refused as security.
    assert!(other.is_empty(), "{other:?}");
}

#[test]
fn save_dir_and_attach_raced_by_a_directory_symlink_swap_read_only_beneath_dir() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("top.txt", b"top\n")]);
    let tree = ws.join("tree");
    fs::create_dir_all(tree.join("d/deeper")).expect("mkdir");
    fs::write(tree.join("d/f.txt"), "inside the tree\n").expect("write");
    fs::write(tree.join("d/deeper/g.txt"), "inside the tree too\n").expect("write");
    let outside = env.path().join("outside");
    fs::create_dir_all(outside.join("deeper")).expect("mkdir");
    const MARKER: &str = "OUTSIDE-MARKER-90d2b4";
    fs::write(outside.join("f.txt"), format!("{MARKER} f\n")).expect("write");
    fs::write(outside.join("deeper/g.txt"), format!("{MARKER} g\n")).expect("write");
    std::os::unix::fs::symlink(&outside, tree.join("l")).expect("symlink");
    const RUNS: usize = 80;
    let swapper = Swapper::start(&tree.join("d"), &tree.join("l"));
    let started = std::time::Instant::now();
    let (mut saved, mut failed) = (0, 0);
    for i in 0..RUNS {
        // Each save a new file, so that the stat cache vouches for nothing.
        fs::write(ws.join("top.txt"), format!("top {i}\n")).expect("write");
        for args in [
            vec!["save".to_string(), s(&tree), "--no-ignore".into()],
            vec![
                "save".into(),
                "--no-brief".into(),
                "--attach".into(),
                s(&tree),
            ],
        ] {
            let out = baton_in(
                &env,
                &ws,
                &args.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            if out.status.success() {
                saved += 1;
            } else {
                failed += 1;
            }
        }
    }
    let swaps = swapper.stop();
    eprintln!(
        "{} saves in {:?}, {swaps} swaps: {saved} saved, {failed} refused",
        2 * RUNS,
        started.elapsed()
    );
    assert!(swaps > 100, "the swapper ran ({swaps} swaps)");
    let leaked = objects_holding(&env.store(), MARKER.as_bytes());
    assert!(leaked.is_empty(), "outside bytes in {leaked:?}");
    assert!(saved > 0, "no save went through");
    assert!(
        !objects_holding(&env.store(), b"inside the tree").is_empty(),
        "no save stored the tree's own files"
    );
}
