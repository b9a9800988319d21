//! Faults: a full disk, remote and local.

use super::dropped::pull_world;
use super::*;

// ---------------------------------------------------------------------------------------
// 4. A full disk, remote and local
// ---------------------------------------------------------------------------------------

/// A tmpfs mounted for one test (needs root), unmounted on drop.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// `None` (after saying so) when mounting is refused.
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output();
        match out {
            Ok(out) if out.status.success() => Some(Tmpfs {
                dir: dir.to_path_buf(),
            }),
            other => {
                // CI runs as root: there a failed mount is a failure, not a skip.
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "cannot mount tmpfs: {other:?}"
                );
                None
            }
        }
    }

    fn resize(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "remount: {}", text(&out));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            // Busy (a server process not yet gone): detach it now, freed when unused.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).output();
        }
    }
}

/// The error of a run that hit a full disk: a documented exit code, one line that says
/// the disk is full and what to do.
fn assert_disk_full_error(run: &Run, side: &str) {
    // docs/exit-codes.md: a full disk is exit 1 (`other`), on either side.
    run.assert_one_error_line(1);
    let line = run.stderr().to_lowercase();
    assert!(
        line.contains("disk is full") || line.contains("no space left"),
        "the error does not say the {side} disk is full: {}",
        text(&run.out)
    );
    assert!(
        line.contains("free"),
        "the error does not say what to do: {}",
        text(&run.out)
    );
}

#[test]
fn full_remote_disk_fails_push_cleanly() {
    full_remote_disk(2, 4);
}

/// A push large enough to share its writes with a second SFTP channel: both channels'
/// writes meet the full disk.
#[test]
fn full_remote_disk_fails_a_two_channel_push_cleanly() {
    full_remote_disk(12, 24);
}

/// Push a bundle of `bundle_mib` MiB into a remote tmpfs of `fs_mib` MiB.
fn full_remote_disk(fs_mib: usize, bundle_mib: usize) {
    let w = World::new();
    let mount = w.server.scratch().join("small");
    // Declared after the world: dropped (unmounted) before the server's temp dir goes.
    let Some(tmpfs) = Tmpfs::mount(&mount, &format!("{fs_mib}m")) else {
        return;
    };
    let remote = mount.join("store");
    let a = Env::new();
    a.init();
    a.write_tree("work", &[("handoff.md", b"# base\n")]);
    let base = a.save("work", &["--summary", "base"]);
    a.ok(&["target", "add", "r", &format!("{FAULT}:{}", s(&remote))]);
    w.ok(&a, &["push", "r"]);
    let refs_before = snapshot_files(&remote.join("refs"));

    let big = save_big(&a, 5000 + bundle_mib as u64, bundle_mib << 20);
    let run = w.run_faulted(
        &a,
        &["push", "r", "--timeout", TIMEOUT],
        Fault::Pass,
        RUN_LIMIT,
    );
    eprintln!(
        "| push | remote tmpfs {fs_mib} MiB, {bundle_mib} MiB bundle | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    );
    assert_disk_full_error(&run, "remote");
    assert_eq!(disk_current(&remote).as_deref(), Some(base.as_str()));
    assert_eq!(snapshot_files(&remote.join("refs")), refs_before);
    // The failed push removed its partial upload itself, as its error line says.
    assert_staging_cleaned(&remote, run.pid);
    verify(&remote);

    // Room again: the same push succeeds and leaves no staging behind.
    tmpfs.resize("64m");
    w.ok(&a, &["push", "r"]);
    assert_eq!(disk_current(&remote).as_deref(), Some(big.as_str()));
    assert_staging_cleaned(&remote, run.pid);
    verify(&remote);
}

#[test]
fn full_local_disk_fails_pull_and_clone_cleanly() {
    let (w, a, _b) = pull_world(64 << 10);
    let remote = w.remote();
    let local = Env::new();
    let Some(pull_fs) = Tmpfs::mount(&local.path().join("small-pull"), "2m") else {
        return;
    };
    let Some(clone_fs) = Tmpfs::mount(&local.path().join("small-clone"), "2m") else {
        return;
    };
    let store = pull_fs.dir.join("store");
    w.ok(&local, &["clone", &w.url(FAULT), s(&store)]);
    let big = save_big(&a, 6000, 4 << 20);
    w.ok(&a, &["push", "r"]);

    let before = refs_and_log(&store);
    let run = w.run_faulted(
        &local,
        &["--store", s(&store), "pull"],
        Fault::Pass,
        RUN_LIMIT,
    );
    eprintln!(
        "| pull | local tmpfs 2 MiB, 4 MiB bundle | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    );
    assert_disk_full_error(&run, "local");
    assert_eq!(refs_and_log(&store), before);
    verify(&store);
    assert_no_local_temps(&store);
    pull_fs.resize("64m");
    w.ok(&local, &["--store", s(&store), "pull"]);
    assert_eq!(disk_current(&store).as_deref(), Some(big.as_str()));
    verify(&store);

    let dest = clone_fs.dir.join("clone");
    let run = w.run_faulted(
        &local,
        &["clone", &w.url(FAULT), s(&dest)],
        Fault::Pass,
        RUN_LIMIT,
    );
    eprintln!(
        "| clone | local tmpfs 2 MiB, 4 MiB bundle | exit {} after {:.2} s | {} |",
        run.code(),
        run.elapsed.as_secs_f64(),
        run.stderr().trim()
    );
    assert_disk_full_error(&run, "local");
    assert!(!dest.exists(), "a failed clone left {}", dest.display());
    clone_fs.resize("64m");
    w.ok(&local, &["clone", &w.url(FAULT), s(&dest)]);
    assert_eq!(disk_current(&dest).as_deref(), Some(big.as_str()));
    verify(&dest);
    verify(&remote);
}
