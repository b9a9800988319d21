//! Robustness: concurrent savers, and bounded memory on a 2 GiB file.

use super::*;

// ---------------------------------------------------------------------------------------
// 3. Concurrent savers
// ---------------------------------------------------------------------------------------

#[test]
fn concurrent_savers_form_one_chain() {
    let start = Instant::now();
    const SAVERS: usize = 8;
    let env = Env::new();
    env.init();
    let mut rng = Rng::new(0xc0c0_0008);
    for s in 0..SAVERS {
        let dir = env.path().join(format!("agent{s}"));
        for f in 0..40 {
            let path = dir.join(format!("part{}/file{f:02}", f % 4));
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let len = rng.range(1 << 10, 96 << 10) as usize;
            fs::write(path, rng.content(len)).unwrap();
        }
    }
    let children: Vec<_> = (0..SAVERS)
        .map(|s| {
            env.cmd()
                .args(["save", &format!("agent{s}"), "--from", &format!("agent{s}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ids = Vec::new();
    for (s, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "saver {s}\n{}", text_of(&out));
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert_eq!(id.len(), 64, "saver {s} printed {id:?}");
        ids.push(id);
    }
    let distinct: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), SAVERS, "every saver made its own bundle");

    // The audit log: exactly 8 saves, each one's old the previous one's new.
    let (code, audit) = env.json(&["log", "--audit"]);
    assert_eq!(code, 0, "{audit}");
    let saves: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "save")
        .collect();
    assert_eq!(saves.len(), SAVERS, "{audit}");
    assert!(
        saves[0]["old"].is_null(),
        "the first save starts from nothing: {audit}"
    );
    for pair in saves.windows(2) {
        assert_eq!(pair[1]["old"], pair[0]["new"], "lost update: {audit}");
    }
    let logged: BTreeSet<&str> = saves.iter().map(|e| e["new"].as_str().unwrap()).collect();
    assert_eq!(
        logged,
        ids.iter().map(String::as_str).collect(),
        "the log records exactly the printed ids"
    );
    assert_eq!(
        rev_id(&env, "current").as_deref(),
        saves.last().unwrap()["new"].as_str()
    );

    // History from current walks through all of them.
    let history = env.ok(&["log"]);
    for id in &ids {
        assert!(
            history.contains(id.as_str()),
            "log from current misses {id}:\n{history}"
        );
    }
    let (code, log) = env.json(&["log"]);
    assert_eq!(code, 0);
    let chain: Vec<&str> = log["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(chain.len(), SAVERS, "{log}");
    for (i, b) in log["bundles"].as_array().unwrap().iter().enumerate() {
        let parents = b["parents"].as_array().unwrap();
        if i + 1 < SAVERS {
            assert_eq!(parents.len(), 1);
            assert_eq!(
                parents[0].as_str(),
                Some(chain[i + 1]),
                "parent chain: {log}"
            );
        } else {
            assert!(parents.is_empty());
        }
    }
    env.ok(&["verify"]);
    elapsed_note("concurrent_savers_form_one_chain", start);
}

// ---------------------------------------------------------------------------------------
// 4. Bounded memory on a 2 GiB file
// ---------------------------------------------------------------------------------------

pub(super) const RSS_LIMIT_KIB: i64 = 64 << 10;
const RSS_PROBE_VAR: &str = "BATON_ROBUSTNESS_RSS_PROBE";
/// Where the probe leaves the measured command's stdout, in the environment directory.
pub(super) const RSS_PROBE_STDOUT: &str = ".rss-probe-stdout";

/// A `baton` command set up exactly like `Env::cmd` for the environment directory `dir`.
fn baton_at(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("USER", "tester")
        .env("TZ", "UTC");
    cmd
}

/// Peak RSS (KiB) and exit code of `baton ARGS` run in `env`.
///
/// How, and why this way: `ru_maxrss` from `wait4(2)` (equivalently
/// `getrusage(RUSAGE_CHILDREN)` with a single waited-for child) is exact for that child,
/// and unlike polling `VmHWM` in /proc it cannot miss a peak just before exit. But Linux
/// carries the high-water mark of the *pre-exec* address space into it: `exec` records the
/// old mm's peak in the child's maxrss, and before exec that mm is the parent's (vfork /
/// posix_spawn, which `Command::spawn` uses) or a copy of it (fork). Measured: from a
/// Python parent holding 300 MiB, `baton --version` is charged ~310 MiB either way, while
/// time(1) reports 4.5 MiB. Spawned from this test process, whose RSS other tests in the
/// same binary inflate (the crash test holds tens of MiB of file contents), baton would be
/// charged for our memory. So the measurement runs
/// in a fresh, small process: this test binary re-executed to run only `rss_probe_helper`,
/// which spawns baton, reaps it with `wait4`, and prints its `ru_maxrss`. The number is then
/// max(helper's RSS at spawn — a few MiB, baton's own peak): a tight, safe upper bound.
pub(super) fn peak_rss_kib(env: &Env, args: &[&str]) -> (i64, i32) {
    let mut spec = env.path().to_str().expect("utf-8 temp path").to_string();
    for arg in args {
        spec.push('\x1f');
        spec.push_str(arg);
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "robustness::concurrency_memory::rss_probe_helper",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(RSS_PROBE_VAR, spec)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("RSS_PROBE ").map(|(_, rest)| rest.to_string()))
        .unwrap_or_else(|| panic!("the RSS probe reported nothing\n{}", text_of(&out)));
    let field = |name: &str| -> i64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
    };
    (field("maxrss_kib="), field("exit=") as i32)
}

/// Not a test of its own: the measuring process for `peak_rss_kib` (which re-executes this
/// binary with the probe variable set). Without the variable it does nothing.
#[test]
#[ignore = "helper process for memory_stays_bounded_on_a_2gib_file; does nothing when run directly"]
fn rss_probe_helper() {
    let Ok(spec) = std::env::var(RSS_PROBE_VAR) else {
        return;
    };
    let mut parts = spec.split('\x1f');
    let dir = PathBuf::from(parts.next().unwrap());
    let args: Vec<&str> = parts.collect();
    // Its stdout is kept for `peak_rss_and_output`.
    let stdout = File::create(dir.join(RSS_PROBE_STDOUT)).unwrap();
    let child = baton_at(&dir)
        .args(&args)
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = loop {
        // SAFETY: valid pointers to locals; `pid` is our unreaped child (`Child` never
        // waits on drop, so nothing else reaps it).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break r;
    };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // Cross-check: with exactly one waited-for child, RUSAGE_CHILDREN is the same number.
    // SAFETY: as above.
    let mut children: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut children) },
        0
    );
    assert_eq!(children.ru_maxrss, usage.ru_maxrss);
    println!("RSS_PROBE exit={code} maxrss_kib={}", usage.ru_maxrss);
    drop(child);
}

fn blake3_file(path: &Path) -> (u64, blake3::Hash) {
    let mut hasher = blake3::Hasher::new();
    let mut file = File::open(path).unwrap();
    let n = std::io::copy(&mut file, &mut hasher).unwrap();
    (n, hasher.finalize())
}

#[test]
fn memory_stays_bounded_on_a_2gib_file() {
    let start = Instant::now();
    const SIZE: u64 = 2 << 30;
    let env = Env::new();
    env.init();
    let dir = env.path().join("huge");
    fs::create_dir(&dir).unwrap();
    let big = dir.join("big.img");
    {
        // Sparse, with incompressible islands at a few offsets (start, middle, an odd
        // unaligned spot, the very end) so it is not trivially all zeros.
        let mut file = File::create(&big).unwrap();
        file.set_len(SIZE).unwrap();
        let mut rng = Rng::new(0x2_6b00);
        for offset in [0, 700 << 20, (1 << 30) + 12_345, SIZE - (1 << 20)] {
            file.seek(SeekFrom::Start(offset)).unwrap();
            file.write_all(&rng.random_bytes(1 << 20)).unwrap();
        }
        assert_eq!(file.metadata().unwrap().len(), SIZE);
    }
    fs::write(dir.join("small.txt"), b"a small neighbour\n").unwrap();
    let (size, source_hash) = blake3_file(&big);
    assert_eq!(size, SIZE);
    let prepared = start.elapsed();

    let t = Instant::now();
    let (save_rss, code) = peak_rss_kib(&env, &["save", "huge"]);
    assert_eq!(code, 0, "save of the 2 GiB file failed");
    let save_time = t.elapsed();
    let t = Instant::now();
    let (checkout_rss, code) = peak_rss_kib(&env, &["checkout", "current", "restored"]);
    assert_eq!(code, 0, "checkout of the 2 GiB file failed");
    let checkout_time = t.elapsed();
    println!(
        "[robustness] 2 GiB: prepare {prepared:.2?}, save {save_time:.2?} (peak RSS {save_rss} KiB), \
         checkout {checkout_time:.2?} (peak RSS {checkout_rss} KiB)"
    );

    let restored = env.path().join("restored/big.img");
    let (size, restored_hash) = blake3_file(&restored);
    assert_eq!(size, SIZE, "restored size");
    assert_eq!(restored_hash, source_hash, "restored content");
    assert_eq!(
        fs::read(env.path().join("restored/small.txt")).unwrap(),
        b"a small neighbour\n"
    );
    fs::remove_file(&restored).unwrap();
    fs::remove_file(&big).unwrap();

    assert!(
        save_rss > 0 && checkout_rss > 0,
        "the probe measured something"
    );
    assert!(
        save_rss < RSS_LIMIT_KIB,
        "save peaked at {save_rss} KiB (limit {RSS_LIMIT_KIB})"
    );
    assert!(
        checkout_rss < RSS_LIMIT_KIB,
        "checkout peaked at {checkout_rss} KiB (limit {RSS_LIMIT_KIB})"
    );
    elapsed_note("memory_stays_bounded_on_a_2gib_file", start);
}
