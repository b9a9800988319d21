//! Crash harness: import of export --history archives, and gc with garbage present.

use super::*;

// ---------------------------------------------------------------------------------------
// import (of `export --history` archives)
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct ImportCase {
    src: Option<World>,
    dst: Option<World>,
    expected: Expected,
    duration: Duration,
    tar: PathBuf,
    before: (Option<String>, Fingerprint),
    staging_seen: usize,
}

impl ImportCase {
    fn src(&self) -> &World {
        self.src.as_ref().unwrap()
    }

    fn dst(&self) -> &World {
        self.dst.as_ref().unwrap()
    }

    fn export(&mut self, rng: &mut Rng, step: usize) {
        let root = self.src().path().join("src");
        mutate(&root, rng, scaled(MIB), step);
        let id = self.src().save("src");
        self.expected.insert(id, tree_digest(&root));
        let _ = fs::remove_file(&self.tar);
        self.tar = self.src().path().join(format!("history-{step}.tar"));
        self.src().ok(&["export", "--history", "-o", s(&self.tar)]);
    }

    fn import_cmd(&self) -> Command {
        let mut cmd = self.dst().cmd();
        cmd.args(["import", s(&self.tar)]);
        cmd
    }
}

impl Scenario for ImportCase {
    const NAME: &'static str = "import";

    fn new_world(&mut self, rng: &mut Rng) {
        let src = World::new(None);
        src.ok(&["init"]);
        let root = src.path().join("src");
        make_tree(&root, rng, 60, scaled(8 * MIB));
        let id = src.save("src");
        self.expected.insert(id, tree_digest(&root));
        let dst = World::new(None);
        dst.ok(&["init"]);
        self.src = Some(src);
        self.dst = Some(dst);
        self.export(rng, 9998);
        timed(self.import_cmd(), "first import");
        self.export(rng, 9999);
        self.duration = timed(self.import_cmd(), "import");
    }

    fn prepare(&mut self, rng: &mut Rng, step: usize) {
        self.export(rng, step);
    }

    fn duration(&self) -> Duration {
        self.duration
    }

    fn command(&self) -> Command {
        self.import_cmd()
    }

    fn before(&mut self) {
        let store = self.dst().store();
        self.before = (disk_current(&store), fingerprint(&store));
    }

    fn landed(&mut self, ended: &Ended) -> Landed {
        let killed = ended.killed();
        let store = self.dst().store();
        let committed = disk_current(&store) != self.before.0;
        classify(killed, fingerprint(&store) != self.before.1, committed)
    }

    fn check(&mut self, problems: &mut Vec<String>) {
        let d = self.dst();
        check_store(d, &d.store(), &self.expected, "destination", problems);
        self.staging_seen += entries_of(&d.store().join("staging")).len();
    }

    fn recover(&mut self, problems: &mut Vec<String>) {
        let t = Instant::now();
        let out = self.import_cmd().output().unwrap();
        if !out.status.success() {
            problems.push(format!("recovery import failed\n{}", text(&out)));
            return;
        }
        // The archives grow with the history: an import of the same archive, even one
        // with nothing left to publish, reads and checks all of it, so its time is the
        // next run's.
        self.duration = t.elapsed();
        let (ours, theirs) = (
            disk_current(&self.dst().store()),
            disk_current(&self.src().store()),
        );
        if ours != theirs {
            problems.push(format!(
                "after the recovery import current is {ours:?}, the archive's {theirs:?}"
            ));
        }
    }

    fn end_world(&mut self, problems: &mut Vec<String>) {
        let d = self.dst();
        let store = d.store();
        // docs/archives.md: a killed import's staging directory is removed by a later
        // import after an hour, or by gc after its grace period.
        let out = d.run(&["gc", "--grace", "0s"]);
        if !out.status.success() {
            problems.push(format!("gc\n{}", text(&out)));
        }
        let left = entries_of(&store.join("staging"));
        if !left.is_empty() {
            problems.push(format!("staging left after gc --grace 0s: {left:?}"));
        }
        let found = check_store(d, &store, &self.expected, "destination after gc", problems);
        if found.temp_files != 0 {
            problems.push(format!("{} temp files survive gc", found.temp_files));
        }
        let s = self.src();
        check_store(s, &s.store(), &self.expected, "source", problems);
    }
}

#[test]
fn crash_import() {
    crash_loop(&mut ImportCase::default(), 0x1390_0005);
}

// ---------------------------------------------------------------------------------------
// gc (with garbage present)
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct GcCase {
    w: Option<World>,
    /// Unreachable objects to plant: path in the store, stored bytes.
    garbage: Vec<(PathBuf, Vec<u8>)>,
    temps: Vec<PathBuf>,
    expected: Expected,
    duration: Duration,
    before: (usize, Fingerprint),
}

impl GcCase {
    fn w(&self) -> &World {
        self.w.as_ref().unwrap()
    }

    /// Garbage objects and temp files still present.
    fn left(&self) -> usize {
        let store = self.w().store();
        self.garbage
            .iter()
            .map(|(p, _)| p)
            .chain(&self.temps)
            .filter(|p| store.join(p).exists())
            .count()
    }

    /// Write the garbage objects in, and plant stale temp files everywhere gc
    /// promises to clean (fanouts, packs/, a ref directory, staging/), all an hour old.
    fn plant(&mut self, step: usize) {
        let store = self.w().store();
        let old = SystemTime::now() - Duration::from_secs(3600);
        let private_dir = |d: &Path| {
            if !d.exists() {
                fs::create_dir_all(d).unwrap();
                fs::set_permissions(d, fs::Permissions::from_mode(0o700)).unwrap();
            }
        };
        for (rel, bytes) in &self.garbage {
            let dest = store.join(rel);
            if dest.exists() {
                continue;
            }
            private_dir(dest.parent().unwrap());
            fs::write(&dest, bytes).unwrap();
            fs::set_permissions(&dest, fs::Permissions::from_mode(0o600)).unwrap();
            fs::File::options()
                .write(true)
                .open(&dest)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        let fanout = self.garbage[0].0.parent().unwrap().to_path_buf();
        self.temps = vec![
            fanout.join(format!(".tmp-crash{step}")),
            PathBuf::from(format!("packs/.tmp-crash{step}")),
            PathBuf::from(format!("refs/current/.tmp-crash{step}")),
            PathBuf::from(format!("staging/gone-1-{step}/pack")),
        ];
        for rel in &self.temps {
            let path = store.join(rel);
            private_dir(path.parent().unwrap());
            fs::write(&path, b"left by a killed writer").unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
            fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        let staged = store.join(format!("staging/gone-1-{step}"));
        fs::File::open(&staged).unwrap().set_modified(old).unwrap();
    }
}

impl Scenario for GcCase {
    const NAME: &'static str = "gc";

    fn new_world(&mut self, rng: &mut Rng) {
        let w = World::new(None);
        w.ok(&["init"]);
        let src = w.path().join("src");
        make_tree(&src, rng, 80, scaled(8 * MIB));
        for step in 0..2 {
            mutate(&src, rng, scaled(2 * MIB), step);
            let id = w.save("src");
            self.expected.insert(id, tree_digest(&src));
        }
        // Garbage: valid loose objects (one zstd frame whose content hashes to the
        // name) that nothing refers to, as a killed save leaves them.
        let mut garbage = Vec::new();
        for _ in 0..scaled(3000) {
            let len = 200 + rng.below(3000) as usize;
            let content = rng.content(len);
            let id = blake3::hash(&content).to_hex().to_string();
            let rel = PathBuf::from("objects").join(&id[..2]).join(&id[2..]);
            garbage.push((rel, zstd::encode_all(&content[..], 3).unwrap()));
        }
        garbage.sort();
        self.w = Some(w);
        self.garbage = garbage;
        self.plant(9999);
        let mut cmd = self.w().cmd();
        cmd.args(["gc", "--grace", "0s"]);
        self.duration = timed(cmd, "gc");
        assert_eq!(
            self.left(),
            0,
            "an uninterrupted gc removes all the garbage"
        );
    }

    fn prepare(&mut self, _rng: &mut Rng, step: usize) {
        self.plant(step);
    }

    fn duration(&self) -> Duration {
        self.duration
    }

    fn command(&self) -> Command {
        let mut cmd = self.w().cmd();
        cmd.args(["gc", "--grace", "0s"]);
        cmd
    }

    fn before(&mut self) {
        self.before = (self.left(), fingerprint(&self.w().store()));
    }

    fn landed(&mut self, ended: &Ended) -> Landed {
        let killed = ended.killed();
        let left = self.left();
        classify(
            killed,
            fingerprint(&self.w().store()) != self.before.1,
            left == 0,
        )
    }

    fn finished_in(&mut self, took: Duration) {
        self.duration = took;
    }

    fn check(&mut self, problems: &mut Vec<String>) {
        let w = self.w();
        check_store(w, &w.store(), &self.expected, "store", problems);
    }

    fn recover(&mut self, problems: &mut Vec<String>) {
        let out = self.w().run(&["gc", "--grace", "0s"]);
        if !out.status.success() {
            problems.push(format!("recovery gc failed\n{}", text(&out)));
            return;
        }
        let left = self.left();
        if left != 0 {
            problems.push(format!(
                "{left} garbage objects or temp files survive the recovery gc"
            ));
        }
        let staging = entries_of(&self.w().store().join("staging"));
        if !staging.is_empty() {
            problems.push(format!("staging left after gc: {staging:?}"));
        }
    }

    fn end_world(&mut self, problems: &mut Vec<String>) {
        let w = self.w();
        let found = check_store(w, &w.store(), &self.expected, "store", problems);
        if found.temp_files != 0 {
            problems.push(format!("{} temp files survive gc", found.temp_files));
        }
    }
}

#[test]
fn crash_gc() {
    crash_loop(&mut GcCase::default(), 0x6c00_0006);
}
