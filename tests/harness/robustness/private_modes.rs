//! Robustness: private modes under a permissive umask.

use super::*;

// ---------------------------------------------------------------------------------------
// 6. Private modes under a permissive umask
// ---------------------------------------------------------------------------------------

fn run_with_umask(env: &Env, umask: libc::mode_t, args: &[&str]) -> Output {
    let mut cmd = env.cmd();
    cmd.args(args);
    // SAFETY: umask(2) is async-signal-safe and touches only the child's own state.
    unsafe {
        cmd.pre_exec(move || {
            libc::umask(umask);
            Ok(())
        });
    }
    cmd.output().unwrap()
}

#[test]
fn store_stays_private_under_umask_000() {
    let start = Instant::now();
    let env = Env::new();
    let mut rng = Rng::new(0x0000_0777);
    let big = rng.random_bytes(3 << 20);
    let small = rng.text(500);
    env.write_tree("work", &[("a.txt", &small), ("dir/sub/big.bin", &big)]);
    std::os::unix::fs::symlink("a.txt", env.path().join("work/link")).unwrap();
    for args in [
        &["init"][..],
        &["save", "work", "--from", "a"],
        &["save", "work", "--from", "b"],
        &["checkout", "current", "out"],
        &["gc", "--grace", "0s"],
    ] {
        let out = run_with_umask(&env, 0, args);
        assert!(
            out.status.success(),
            "{args:?} under umask 000\n{}",
            text_of(&out)
        );
    }
    let mut bad = Vec::new();
    let mut counted = (0, 0);
    fn walk(path: &Path, bad: &mut Vec<String>, counted: &mut (usize, usize)) {
        let meta = fs::symlink_metadata(path).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        if meta.is_dir() {
            counted.0 += 1;
            if mode != 0o700 {
                bad.push(format!("dir {} is {mode:o}", path.display()));
            }
            for entry in fs::read_dir(path).unwrap() {
                walk(&entry.unwrap().path(), bad, counted);
            }
        } else {
            counted.1 += 1;
            if mode != 0o600 {
                bad.push(format!("file {} is {mode:o}", path.display()));
            }
        }
    }
    walk(&env.store(), &mut bad, &mut counted);
    assert!(bad.is_empty(), "modes under umask 000:\n{}", bad.join("\n"));
    assert!(
        counted.0 >= 4 && counted.1 >= 8,
        "walked {counted:?} dirs/files"
    );
    let out = run_with_umask(&env, 0, &["verify"]);
    assert!(out.status.success(), "verify\n{}", text_of(&out));
    elapsed_note("store_stays_private_under_umask_000", start);
}

/// Run baton under `strace -f -e trace=mkdir,mkdirat` with `umask`; every mkdir(2) it
/// made, as (path, mode). None when strace cannot run here.
fn mkdirs_under_umask(
    env: &Env,
    umask: libc::mode_t,
    args: &[&str],
) -> Option<(Output, Vec<(String, u32)>)> {
    let log = env.path().join(format!("strace-{}.log", args[0]));
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-e", "trace=mkdir,mkdirat", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .current_dir(env.path())
        .env("BATON_STORE", env.store());
    // SAFETY: umask(2) is async-signal-safe and touches only the child's own state.
    unsafe {
        cmd.pre_exec(move || {
            libc::umask(umask);
            Ok(())
        });
    }
    let out = cmd.output().ok()?;
    let text = fs::read_to_string(&log).ok()?;
    let mut calls = Vec::new();
    for line in text.lines() {
        let Some(at) = line.find("mkdir") else {
            continue;
        };
        let call = &line[at..];
        let Some((args_part, _result)) = call.rsplit_once(") = ") else {
            continue;
        };
        let Some((path, mode)) = args_part.rsplit_once(", ") else {
            continue;
        };
        let mode = u32::from_str_radix(mode.trim_start_matches('0'), 8).unwrap_or(0o7777);
        calls.push((path.to_string(), mode));
    }
    Some((out, calls))
}

/// Under umask 000 the directories a clone or init is built in were made 0777 (the
/// clone's work directory stayed so; init's staging directory until its chmod), so
/// another local user could swap the store being built. Every mkdir(2) of init, save,
/// clone and import now asks for 0700 or less, and the results are private.
#[test]
fn no_directory_is_created_open_to_others_under_umask_000() {
    let strace_works = Command::new("strace")
        .args(["-qq", "-e", "trace=none", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(strace_works, "this test needs strace (.ci/run installs it)");
    let env = Env::new();
    env.write_tree("work", &[("a.txt", b"a\n"), ("d/e/f.txt", b"f\n")]);
    let source = env.path().join("source");
    let pushed = env.path().join("pushed/deep/store");
    let clone_dir = env.path().join("new/parents/clone");
    let archive = env.path().join("a.tar");
    let imported = env.path().join("imported");
    let mut wide = Vec::new();
    let mut seen = 0;
    let runs: Vec<Vec<String>> = vec![
        vec!["init".into()],
        vec!["save".into(), "work".into()],
        vec![
            "--store".into(),
            source.display().to_string(),
            "init".into(),
        ],
        vec![
            "target".into(),
            "add".into(),
            "src".into(),
            source.display().to_string(),
        ],
        vec!["push".into(), "src".into()],
        vec![
            "target".into(),
            "add".into(),
            "new".into(),
            pushed.display().to_string(),
        ],
        vec!["push".into(), "new".into()],
        vec![
            "clone".into(),
            source.display().to_string(),
            clone_dir.display().to_string(),
        ],
        vec!["export".into(), "-o".into(), archive.display().to_string()],
        vec![
            "--store".into(),
            imported.display().to_string(),
            "init".into(),
        ],
        vec![
            "--store".into(),
            imported.display().to_string(),
            "import".into(),
            archive.display().to_string(),
        ],
    ];
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let Some((out, calls)) = mkdirs_under_umask(&env, 0, &args) else {
            panic!("strace ran for the probe but not for {args:?}");
        };
        assert!(out.status.success(), "{args:?}: {}", text_of(&out));
        if args.contains(&"target") {
            continue;
        }
        for (path, mode) in calls {
            seen += 1;
            if mode & 0o077 != 0 {
                wide.push(format!("{args:?}: mkdir({path}, {mode:o})"));
            }
        }
    }
    assert!(seen >= 20, "only {seen} mkdir calls traced");
    assert!(
        wide.is_empty(),
        "directories created open to others:\n{}",
        wide.join("\n")
    );
    for store in [
        env.store(),
        source,
        clone_dir.clone(),
        imported,
        pushed.clone(),
    ] {
        common::assert_private_tree(&store);
    }
    for dir in [env.path().join("pushed"), env.path().join("pushed/deep")] {
        assert_eq!(mode_of(&dir), 0o700, "{}", dir.display());
    }
    // The parents clone had to make are private too.
    for dir in [env.path().join("new"), env.path().join("new/parents")] {
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    // Nothing is left of the work and staging directories.
    let leftovers: Vec<_> = fs::read_dir(env.path().join("new/parents"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "clone")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
