//! Crash harness: verify on a big store, and a clone killed mid-transfer.

use super::*;

// ---------------------------------------------------------------------------------------
// verify (on a store big enough to take a while)
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct VerifyCase {
    w: Option<World>,
    expected: Expected,
    duration: Duration,
    before: Fingerprint,
}

impl VerifyCase {
    fn w(&self) -> &World {
        self.w.as_ref().unwrap()
    }
}

impl Scenario for VerifyCase {
    const NAME: &'static str = "verify";

    fn new_world(&mut self, rng: &mut Rng) {
        // Verify writes nothing, so one world serves every kill.
        if self.w.is_none() {
            let w = World::new(None);
            w.ok(&["init"]);
            let src = w.path().join("src");
            make_tree(&src, rng, 300, scaled(96 * MIB));
            for step in 0..3 {
                mutate(&src, rng, scaled(8 * MIB), step);
                let id = w.save("src");
                self.expected.insert(id, tree_digest(&src));
            }
            self.w = Some(w);
        }
        let mut cmd = self.w().cmd();
        cmd.arg("verify");
        self.duration = timed(cmd, "verify");
    }

    fn prepare(&mut self, _rng: &mut Rng, _step: usize) {}

    fn duration(&self) -> Duration {
        self.duration
    }

    fn command(&self) -> Command {
        let mut cmd = self.w().cmd();
        cmd.arg("verify");
        cmd
    }

    fn before(&mut self) {
        self.before = fingerprint(&self.w().store());
    }

    fn landed(&mut self, ended: &Ended) -> Landed {
        let killed = ended.killed();
        classify(killed, false, false)
    }

    fn check(&mut self, problems: &mut Vec<String>) {
        // A read-only command: not one name, size or mtime may change. (The recovery run
        // below is a full verify, and the last world check runs every promise.)
        if fingerprint(&self.w().store()) != self.before {
            problems.push("a killed verify changed the store".into());
        }
    }

    fn recover(&mut self, problems: &mut Vec<String>) {
        let t = Instant::now();
        let out = self.w().run(&["verify"]);
        if !out.status.success() {
            problems.push(format!("recovery verify failed\n{}", text(&out)));
        }
        self.duration = t.elapsed();
    }

    fn end_world(&mut self, problems: &mut Vec<String>) {
        let w = self.w();
        check_store(w, &w.store(), &self.expected, "store", problems);
    }
}

#[test]
fn crash_verify() {
    crash_loop(&mut VerifyCase::default(), 0x7e21_0007);
}

// ---------------------------------------------------------------------------------------
// Regression: a clone killed mid-transfer
// ---------------------------------------------------------------------------------------

/// Any `.tmp-pull-*` file below `root` (a pack being downloaded).
fn pull_temp_below(root: &Path) -> bool {
    fingerprint(root).iter().any(|(rel, _, _)| {
        rel.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(".tmp-pull-"))
    })
}

/// Found by `crash_clone`: a clone killed mid-transfer used to leave a half-filled store
/// at its destination (docs/sync.md: "a clone that fails leaves nothing behind"), so the
/// same command then failed with "already exists" (exit 2). Caught deterministically
/// here: the server is frozen while the pack downloads, then the client is killed.
#[test]
fn killed_clone_leaves_nothing_at_its_destination() {
    let sshd = Sshd::start();
    let up = World::new(None);
    up.ok(&["init"]);
    let mut rng = Rng(0xdead_c10e);
    make_tree(&up.path().join("src"), &mut rng, 40, 8 * MIB);
    let id = up.save("src");
    let remote = up.path().join("remote");
    up.ok(&["target", "add", "up", s(&remote)]);
    up.ok(&["push", "up"]);
    let cw = World::new(Some(&sshd));
    let parent = cw.path().join("clones");
    fs::create_dir(&parent).unwrap();
    let dest = parent.join("dest");
    let url = format!("{}:{}", sshd.alias(), s(&remote));
    let clone = || {
        let mut cmd = cw.cmd();
        cmd.args(["clone", &url, s(&dest)]);
        cmd
    };

    let mut child = clone()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pull_temp_below(&parent) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the clone ended before its pack download was seen"
        );
        assert!(Instant::now() < deadline, "no pack download seen in 60 s");
        std::thread::sleep(Duration::from_millis(1));
    }
    sshd.freeze();
    // SAFETY: kill(2) on our own, not yet reaped, child.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) },
        0
    );
    let status = child.wait().unwrap();
    sshd.resume();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "killed mid-transfer");
    assert!(
        !dest.exists(),
        "a killed clone left {:?} at its destination",
        entries_of(&dest)
    );

    // The same command now succeeds, and removes what the killed one left beside it.
    let out = clone().output().unwrap();
    assert!(out.status.success(), "clone after the kill\n{}", text(&out));
    assert_eq!(disk_current(&dest).as_deref(), Some(id.as_str()));
    assert_eq!(entries_of(&parent), vec!["dest".to_string()]);
    let mut problems = Vec::new();
    let expected = Expected::from([(id, tree_digest(&up.path().join("src")))]);
    check_store(&cw, &dest, &expected, "clone", &mut problems);
    assert!(problems.is_empty(), "{problems:#?}");
}
