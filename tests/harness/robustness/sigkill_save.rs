//! Robustness: SIGKILL during save, repeatedly.

use super::*;

// ---------------------------------------------------------------------------------------
// 2. SIGKILL during save, repeatedly
// ---------------------------------------------------------------------------------------

/// Write a tree of `count` files under `root`: most small, every 17th one 1-4 MiB, nested
/// a few levels, plus an empty file, an executable and a symlink. Returns the file paths.
fn generate_tree(root: &Path, rng: &mut Rng, count: usize) -> Vec<PathBuf> {
    let mut files = Vec::with_capacity(count);
    for i in 0..count {
        let rel = match i % 4 {
            0 => format!("f{i:03}.txt"),
            1 => format!("d{}/f{i:03}.bin", i % 5),
            2 => format!("d{}/s{}/f{i:03}.dat", i % 5, i % 3),
            _ => format!("deep/a/b/c{}/f{i:03}", i % 2),
        };
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let len = if i % 17 == 0 {
            rng.range(1 << 20, 4 << 20)
        } else {
            rng.below(48 << 10)
        };
        fs::write(&path, rng.content(len as usize)).unwrap();
        files.push(path);
    }
    fs::write(root.join("empty"), b"").unwrap();
    let exec = root.join("run.sh");
    fs::write(&exec, b"#!/bin/sh\necho hi\n").unwrap();
    fs::set_permissions(&exec, fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("f000.txt", root.join("link")).unwrap();
    files
}

/// Rewrite `n` random files with new content (sometimes a big one, so a save has real
/// compression work to be killed in).
fn modify_some(files: &[PathBuf], rng: &mut Rng, n: usize) {
    for _ in 0..n {
        let path = &files[rng.below(files.len() as u64) as usize];
        let len = if rng.below(3) == 0 {
            rng.range(1 << 20, 3 << 20)
        } else {
            rng.below(32 << 10)
        };
        fs::write(path, rng.content(len as usize)).unwrap();
    }
}

/// The store is whole: `verify` passes (temp files allowed), every ref the audit log ever
/// mentioned names a complete bundle, and the audit log parses. Returns the temp count.
fn assert_store_whole(env: &Env, when: &str) -> u64 {
    let (code, doc) = env.json(&["verify"]);
    assert_eq!(code, 0, "{when}: verify failed: {doc}");
    let temp_files = doc["report"]["temp_files"].as_u64().expect("temp_files");
    let (code, audit) = env.json(&["log", "--audit"]);
    assert_eq!(code, 0, "{when}: log --audit failed: {audit}");
    let entries = audit["entries"].as_array().expect("audit entries");
    let mut refs: BTreeSet<String> = entries
        .iter()
        .map(|e| e["ref"].as_str().unwrap().to_string())
        .collect();
    refs.insert("current".into());
    for name in refs {
        if rev_id(env, &name).is_some() {
            let out = env.run(&["verify", &name]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{when}: ref {name} is not a complete bundle\n{}",
                text_of(&out)
            );
        }
    }
    temp_files
}

#[test]
fn sigkill_during_save_never_damages_the_store() {
    let start = Instant::now();
    let iters: usize = std::env::var("BATON_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let env = Env::new();
    env.init();
    let mut rng = Rng::new(0xc2a5_4000);
    let src = env.path().join("src");
    let files = generate_tree(&src, &mut rng, 200);
    // One complete save first, so the loop kills incremental saves (the common case, ~0.1 s
    // unloaded) rather than a first save (~2 s), and kills land both before and after the
    // ref moves.
    let t = Instant::now();
    env.save("src", &["--summary", "baseline"]);
    let baseline = t.elapsed();
    // For reading the counts below: how long an uninterrupted incremental save takes here.
    // Under load it can exceed the 150 ms kill window, and then nearly every kill lands
    // mid-save.
    modify_some(&files, &mut rng, 3);
    let t = Instant::now();
    env.save("src", &["--summary", "incremental"]);
    let incremental = t.elapsed();

    let (mut mid_save, mut moved_then_killed, mut finished) = (0, 0, 0);
    let mut max_temp = 0;
    for i in 0..iters {
        modify_some(&files, &mut rng, 3);
        let before = rev_id(&env, "current");
        let mut child = env
            .cmd()
            .args(["save", "src"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.below(151)));
        // The child is not reaped until `wait` below, so its pid cannot have been reused:
        // at worst this signals a zombie, which is harmless.
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
        let status = child.wait().unwrap();
        let after = rev_id(&env, "current");
        match (status.signal(), after == before) {
            (Some(libc::SIGKILL), true) => mid_save += 1,
            (Some(libc::SIGKILL), false) => moved_then_killed += 1,
            (None, _) => {
                assert!(
                    status.success(),
                    "iteration {i}: save failed on its own: {status:?}"
                );
                assert_ne!(
                    after, before,
                    "iteration {i}: a finished save moves current"
                );
                finished += 1;
            }
            (Some(sig), _) => panic!("iteration {i}: save died of signal {sig}"),
        }
        max_temp = max_temp.max(assert_store_whole(&env, &format!("after kill {i}")));
    }
    println!(
        "[robustness] crash loop: {iters} iterations (uninterrupted saves: first {baseline:.2?}, incremental {incremental:.2?}): \
         {mid_save} killed mid-save (ref unchanged), {moved_then_killed} killed after the ref \
         moved, {finished} finished before the kill; up to {max_temp} temp files seen"
    );
    assert!(
        iters == 0 || mid_save > 0,
        "no kill landed mid-save: the test proved nothing"
    );

    // A final save after all that succeeds and restores the tree exactly.
    let id = env.save("src", &["--summary", "after the storm"]);
    assert_eq!(rev_id(&env, "current").as_deref(), Some(id.as_str()));
    env.ok(&["checkout", "current", "restored"]);
    assert!(
        snapshot_files(&src) == snapshot_files(&env.path().join("restored")),
        "checkout differs from source"
    );
    assert_store_whole(&env, "after the final save");
    // gc clears the leftovers of the killed saves; the store stays whole.
    env.ok(&["gc", "--grace", "0s"]);
    let temp_after_gc = assert_store_whole(&env, "after gc");
    assert_eq!(temp_after_gc, 0, "gc removes stale temp files");
    elapsed_note("sigkill_during_save_never_damages_the_store", start);
}
