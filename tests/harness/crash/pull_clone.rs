//! Crash harness: pull over SSH, and clone over SSH and from a local path.

use super::*;

// ---------------------------------------------------------------------------------------
// pull (over SSH)
// ---------------------------------------------------------------------------------------

/// An upstream store that publishes to `remote` by local path; a downstream store that
/// pulls from it over SSH.
struct PullCase {
    sshd: Sshd,
    up: Option<World>,
    down: Option<World>,
    expected: Expected,
    duration: Duration,
    /// The killed run did not commit, so the recovery run redoes all of it.
    redo: bool,
    before: (Option<String>, Fingerprint),
}

impl PullCase {
    fn up(&self) -> &World {
        self.up.as_ref().unwrap()
    }

    fn down(&self) -> &World {
        self.down.as_ref().unwrap()
    }

    fn remote(&self) -> PathBuf {
        self.up().path().join("remote")
    }

    fn publish(&mut self, rng: &mut Rng, step: usize) {
        let src = self.up().path().join("src");
        mutate(&src, rng, scaled(4 * MIB), step);
        let id = self.up().save("src");
        self.expected.insert(id, tree_digest(&src));
        self.up().ok(&["push", "up"]);
    }
}

impl Scenario for PullCase {
    const NAME: &'static str = "pull (ssh)";

    fn new_world(&mut self, rng: &mut Rng) {
        let up = World::new(None);
        up.ok(&["init"]);
        let src = up.path().join("src");
        make_tree(&src, rng, 60, scaled(8 * MIB));
        let id = up.save("src");
        self.expected.insert(id, tree_digest(&src));
        up.ok(&["target", "add", "up", s(&up.path().join("remote"))]);
        up.ok(&["push", "up"]);
        let down = World::new(Some(&self.sshd));
        down.ok(&["init"]);
        let url = format!("{}:{}", self.sshd.alias(), s(&up.path().join("remote")));
        down.ok(&["target", "add", "r", &url]);
        down.ok(&["pull", "r"]);
        self.up = Some(up);
        self.down = Some(down);
        self.publish(rng, 9999);
        let mut cmd = self.down().cmd();
        cmd.args(["pull", "r"]);
        self.duration = timed(cmd, "pull");
    }

    fn prepare(&mut self, rng: &mut Rng, step: usize) {
        self.publish(rng, step);
    }

    fn duration(&self) -> Duration {
        self.duration
    }

    fn command(&self) -> Command {
        let mut cmd = self.down().cmd();
        cmd.args(["pull", "r"]);
        cmd
    }

    fn before(&mut self) {
        let store = self.down().store();
        self.before = (disk_current(&store), fingerprint(&store));
    }

    fn landed(&mut self, ended: &Ended) -> Landed {
        let killed = ended.killed();
        let store = self.down().store();
        let committed = disk_current(&store) != self.before.0;
        self.redo = !committed;
        classify(killed, fingerprint(&store) != self.before.1, committed)
    }

    fn check(&mut self, problems: &mut Vec<String>) {
        let d = self.down();
        check_store(d, &d.store(), &self.expected, "local", problems);
        check_store(d, &self.remote(), &self.expected, "remote", problems);
    }

    fn recover(&mut self, problems: &mut Vec<String>) {
        let t = Instant::now();
        let out = self.down().run(&["pull", "r"]);
        if !out.status.success() {
            problems.push(format!("recovery pull failed\n{}", text(&out)));
            return;
        }
        if self.redo {
            // A killed pull keeps no partial pack: the recovery run is a whole pull.
            self.duration = t.elapsed();
        }
        let d = self.down();
        let (local, remote) = (disk_current(&d.store()), disk_current(&self.remote()));
        if local != remote {
            problems.push(format!(
                "after the recovery pull current is {local:?}, remote {remote:?}"
            ));
        }
        // SPEC Appendix B item 6: a pull removes the temp files of earlier pulls whose
        // process is gone.
        let temps: Vec<String> = entries_of(&d.store().join("packs"))
            .into_iter()
            .filter(|n| n.starts_with(".tmp-"))
            .collect();
        if !temps.is_empty() {
            problems.push(format!(
                "temp files left in packs/ after the recovery pull: {temps:?}"
            ));
        }
    }

    fn end_world(&mut self, problems: &mut Vec<String>) {
        let d = self.down();
        let out = d.run(&["gc", "--grace", "0s"]);
        if !out.status.success() {
            problems.push(format!("gc\n{}", text(&out)));
        }
        let found = check_store(d, &d.store(), &self.expected, "local after gc", problems);
        if found.temp_files != 0 {
            problems.push(format!("{} temp files survive gc", found.temp_files));
        }
    }
}

#[test]
fn crash_pull_ssh() {
    let mut case = PullCase {
        sshd: Sshd::start(),
        up: None,
        down: None,
        expected: Expected::new(),
        duration: Duration::ZERO,
        redo: false,
        before: Default::default(),
    };
    crash_loop(&mut case, 0x9011_0003);
}

// ---------------------------------------------------------------------------------------
// clone (over SSH and from a local path, alternately)
// ---------------------------------------------------------------------------------------

struct CloneCase {
    sshd: Sshd,
    up: Option<World>,
    /// Where the clones are made (with the sshd's HOME).
    cw: Option<World>,
    expected: Expected,
    durations: [Duration; 2],
    step: usize,
    /// Entries of the clones' parent directory before the run.
    before: Vec<String>,
}

impl CloneCase {
    fn up(&self) -> &World {
        self.up.as_ref().unwrap()
    }

    fn cw(&self) -> &World {
        self.cw.as_ref().unwrap()
    }

    fn remote(&self) -> PathBuf {
        self.up().path().join("remote")
    }

    fn url(&self, step: usize) -> String {
        if step.is_multiple_of(2) {
            format!("{}:{}", self.sshd.alias(), s(&self.remote()))
        } else {
            s(&self.remote()).to_string()
        }
    }

    fn parent(&self) -> PathBuf {
        self.cw().path().join("clones")
    }

    fn dest(&self) -> PathBuf {
        self.parent().join(format!("c{:04}", self.step))
    }

    fn clone_cmd(&self, step: usize, dest: &Path) -> Command {
        let mut cmd = self.cw().cmd();
        cmd.args(["clone", &self.url(step), s(dest)]);
        cmd
    }
}

impl Scenario for CloneCase {
    const NAME: &'static str = "clone (ssh + local)";

    fn new_world(&mut self, rng: &mut Rng) {
        let up = World::new(None);
        up.ok(&["init"]);
        let src = up.path().join("src");
        make_tree(&src, rng, 80, scaled(16 * MIB));
        for step in 0..3 {
            mutate(&src, rng, scaled(4 * MIB), step);
            let id = up.save("src");
            self.expected.insert(id, tree_digest(&src));
        }
        up.ok(&["target", "add", "up", s(&up.path().join("remote"))]);
        up.ok(&["push", "up"]);
        let cw = World::new(Some(&self.sshd));
        fs::create_dir(cw.path().join("clones")).unwrap();
        self.up = Some(up);
        self.cw = Some(cw);
        for t in 0..2 {
            let dest = self.cw().path().join(format!("calibrate{t}"));
            self.durations[t] = timed(self.clone_cmd(t, &dest), "clone");
            fs::remove_dir_all(&dest).unwrap();
        }
    }

    fn prepare(&mut self, _rng: &mut Rng, step: usize) {
        self.step = step;
    }

    fn duration(&self) -> Duration {
        self.durations[self.step % 2]
    }

    fn command(&self) -> Command {
        self.clone_cmd(self.step, &self.dest())
    }

    fn before(&mut self) {
        self.before = entries_of(&self.parent());
    }

    fn landed(&mut self, ended: &Ended) -> Landed {
        let killed = ended.killed();
        let dest = self.dest();
        let committed = dest.join("config").exists()
            && disk_current(&dest).is_some()
            && disk_current(&dest) == disk_current(&self.remote());
        classify(killed, entries_of(&self.parent()) != self.before, committed)
    }

    fn check(&mut self, problems: &mut Vec<String>) {
        let dest = self.dest();
        if dest.join("config").exists() {
            check_store(self.cw(), &dest, &self.expected, "clone", problems);
        } else if dest.exists() {
            problems.push(format!("{} exists but is not a store", dest.display()));
        }
    }

    fn recover(&mut self, problems: &mut Vec<String>) {
        let mut dest = self.dest();
        if dest.exists() {
            // The killed clone completed: the same command must now refuse (exit 2)
            // and leave that store alone; the next clone goes beside it.
            let before = fingerprint(&dest);
            let out = self.clone_cmd(self.step, &dest).output().unwrap();
            if out.status.code() != Some(2) || fingerprint(&dest) != before {
                problems.push(format!("a clone onto a complete clone\n{}", text(&out)));
            }
            let _ = fs::remove_dir_all(&dest);
            dest = self.parent().join(format!("c{:04}-again", self.step));
        }
        let t = Instant::now();
        let out = self.clone_cmd(self.step, &dest).output().unwrap();
        // The kill two steps on uses this transport again.
        self.durations[self.step % 2] = t.elapsed();
        if !out.status.success() {
            problems.push(format!(
                "recovery clone into {} failed\n{}",
                dest.display(),
                text(&out)
            ));
        } else {
            if disk_current(&dest) != disk_current(&self.remote()) {
                problems.push("the recovery clone's current is not the remote's".into());
            }
            let mut dummy = Vec::new();
            let found = check_store(
                self.cw(),
                &dest,
                &self.expected,
                "recovered clone",
                &mut dummy,
            );
            problems.extend(dummy);
            if found.temp_files != 0 {
                problems.push(format!(
                    "the recovery clone holds {} temp files",
                    found.temp_files
                ));
            }
        }
        // Whatever the killed clone left beside its destination must be gone once the
        // next clone into that directory has run.
        let _ = fs::remove_dir_all(&dest);
        let left = entries_of(&self.parent());
        if !left.is_empty() {
            problems.push(format!(
                "left beside the clones after the recovery clone: {left:?}"
            ));
            for name in left {
                let _ = fs::remove_dir_all(self.parent().join(name));
            }
        }
    }

    fn end_world(&mut self, problems: &mut Vec<String>) {
        let up = self.up();
        check_store(up, &self.remote(), &self.expected, "remote", problems);
    }
}

#[test]
fn crash_clone() {
    let mut case = CloneCase {
        sshd: Sshd::start(),
        up: None,
        cw: None,
        expected: Expected::new(),
        durations: [Duration::ZERO; 2],
        step: 0,
        before: Vec::new(),
    };
    crash_loop(&mut case, 0xc10e_0004);
}
