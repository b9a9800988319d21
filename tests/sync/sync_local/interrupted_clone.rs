//! Local-path targets: interrupted, stale and concurrent pushes, the audit log, clone.

use super::*;

// ---------------------------------------------------------------------------------------
// Interrupted, stale and concurrent pushes
// ---------------------------------------------------------------------------------------

#[test]
fn killed_push_leaves_the_remote_current_unchanged_and_verifying() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, mut base) = store_with_target(&remote, 13);
    json_ok(&a, &["push"]);
    let total: u64 = 200 << 20;
    let mut killed = None;
    for attempt in 0..3u64 {
        let big_file = a.path().join("work").join("big.bin");
        fs::write(&big_file, random_bytes(13 + attempt, total as usize)).unwrap();
        let big = a.save("work", &["--secrets", "allow"]);
        let refs_before = refs_snapshot(&remote);
        let packs_before = pack_files(&remote);
        let mut child = a
            .cmd()
            .args(["--json", "push"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let caught = loop {
            let staged = staged_pack_size(&remote).unwrap_or(0);
            if staged > 16 << 20 && staged < total - (16 << 20) {
                child.kill().unwrap(); // SIGKILL, mid-upload
                break true;
            }
            if child.try_wait().unwrap().is_some() {
                break false;
            }
            assert!(Instant::now() < deadline, "push did not finish");
            std::thread::sleep(Duration::from_micros(200));
        };
        let status = child.wait().unwrap();
        if caught {
            killed = Some((big, refs_before, packs_before));
            break;
        }
        // Too fast to catch: it is the new base; try again with another bundle.
        assert!(status.success(), "push failed on its own: {status:?}");
        eprintln!("attempt {attempt}: the push finished before it could be killed");
        base = big;
    }
    let (big, refs_before, packs_before) = killed.expect("could not catch the push mid-upload");

    assert_eq!(refs_snapshot(&remote), refs_before, "the remote ref moved");
    assert_eq!(disk_current(&remote).as_deref(), Some(base.as_str()));
    assert_eq!(
        pack_files(&remote),
        packs_before,
        "a partial pack was published"
    );
    verify(&a, &remote);
    assert_eq!(
        json_ok(&a, &["show", "targets/r"])["id"],
        base.as_str(),
        "the killed push moved targets/r"
    );
    verify(&a, &a.store());

    // The leftover staging was made on this host by a process that is gone: the next
    // push removes it at once, and succeeds.
    let leftovers = staging_entries(&remote);
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    let doc = json_ok(&a, &["push"]);
    assert_eq!(doc["report"]["remote_before"], base.as_str());
    assert_eq!(disk_current(&remote).as_deref(), Some(big.as_str()));
    assert!(
        staging_entries(&remote).is_empty(),
        "{:?}",
        staging_entries(&remote)
    );
    verify(&a, &remote);
}

#[test]
fn stale_staging_is_removed_by_the_next_push_and_fresh_staging_kept() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 14);
    json_ok(&a, &["push"]);
    let stale = remote.join("staging/otherhost-123-1");
    let fresh = remote.join("staging/otherhost-456-2");
    for dir in [&stale, &fresh] {
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join("pack"), b"partial").unwrap();
        fs::write(dir.join("sub/x"), b"x").unwrap();
    }
    touch_back(&stale, "2 hours ago");
    touch_back(&fresh, "30 minutes ago");
    save_change(&a, "z", b"z");
    json_ok(&a, &["push"]);
    assert!(!stale.exists(), "stale staging survived the push");
    assert!(fresh.join("pack").exists(), "fresh staging was removed");
    assert_eq!(
        staging_entries(&remote),
        vec!["otherhost-456-2".to_string()]
    );
    // An up-to-date push cleans too.
    touch_back(&fresh, "3 hours ago");
    let doc = json_ok(&a, &["push"]);
    assert_eq!(doc["report"]["up_to_date"], true);
    assert!(staging_entries(&remote).is_empty());
    verify(&a, &remote);
}

#[test]
fn concurrent_pushes_exactly_one_wins() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 15);
    json_ok(&a, &["push"]);
    for round in 0..3u64 {
        // Two stores on top of the same remote base, each with its own new bundle.
        let base = disk_current(&remote);
        let b = clone_env(&remote);
        let c = clone_env(&remote);
        let b_id = save_change(&b, "b.bin", &random_bytes(1000 + round, 4 << 20));
        let c_id = save_change(&c, "c.bin", &random_bytes(2000 + round, 4 << 20));
        let (ob, oc) = race_pushes(&b, &c);
        let (winner, loser) = match (ob.status.code(), oc.status.code()) {
            (Some(0), Some(5)) => (b_id, &oc),
            (Some(5), Some(0)) => (c_id, &ob),
            other => panic!(
                "round {round}: exit codes {other:?}\nB: {}\nC: {}",
                text(&ob),
                text(&oc)
            ),
        };
        let err: Value = serde_json::from_slice(&loser.stdout).unwrap();
        assert_eq!(err["error"]["code"], "store_conflict", "{err}");
        assert_ne!(disk_current(&remote), base);
        assert_eq!(disk_current(&remote).as_deref(), Some(winner.as_str()));
        verify(&a, &remote);
    }
    // Whoever lost can still catch up.
    let d = clone_env(&remote);
    verify(&d, &d.store());
}

// ---------------------------------------------------------------------------------------
// Audit log
// ---------------------------------------------------------------------------------------

#[test]
fn every_ref_move_lands_in_the_audit_log() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, base) = store_with_target(&remote, 16);
    json_ok(&a, &["push"]);
    let entries = audit(&a);
    let last = entries.last().unwrap();
    assert_eq!(last["ref"], "targets/r", "{last}");
    assert_eq!(last["action"], "push");
    assert_eq!(last["old"], Value::Null);
    assert_eq!(last["new"], base.as_str());
    // An up-to-date push moves nothing and logs nothing.
    let n = entries.len();
    json_ok(&a, &["push"]);
    assert_eq!(audit(&a).len(), n);

    let b = clone_env(&remote);
    let entries = audit(&b);
    let find = |entries: &[Value], r: &str, action: &str, new: &str| {
        entries
            .iter()
            .any(|e| e["ref"] == r && e["action"] == action && e["new"] == new)
    };
    assert!(
        find(&entries, "targets/origin", "fetch", &base),
        "{entries:#?}"
    );
    assert!(find(&entries, "current", "pull", &base), "{entries:#?}");

    let next = save_change(&a, "n", b"n");
    json_ok(&a, &["push"]);
    let entries = audit(&a);
    let last = entries.last().unwrap();
    assert_eq!(last["ref"], "targets/r");
    assert_eq!(last["action"], "push");
    assert_eq!(last["old"], base.as_str());
    assert_eq!(last["new"], next.as_str());

    let before = audit(&b).len();
    json_ok(&b, &["pull"]);
    let entries = audit(&b);
    assert_eq!(entries.len(), before + 2, "{entries:#?}");
    let fetched = entries
        .iter()
        .find(|e| e["ref"] == "targets/origin" && e["new"] == next.as_str())
        .unwrap_or_else(|| panic!("no fetch entry: {entries:#?}"));
    assert_eq!(fetched["action"], "fetch");
    assert_eq!(fetched["old"], base.as_str());
    let pulled = entries
        .iter()
        .find(|e| e["ref"] == "current" && e["new"] == next.as_str())
        .unwrap_or_else(|| panic!("no pull entry: {entries:#?}"));
    assert_eq!(pulled["action"], "pull");
    assert_eq!(pulled["old"], base.as_str());

    // The remote's own ref file is a log line of the push.
    let line = fs::read_to_string(remote.join("refs/current/00000000000000000002")).unwrap();
    let entry: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(entry["action"], "push");
    assert_eq!(entry["old"], base.as_str());
    assert_eq!(entry["new"], next.as_str());
    assert!(line.ends_with('\n'));
}

// ---------------------------------------------------------------------------------------
// Clone
// ---------------------------------------------------------------------------------------

#[test]
fn clone_into_an_existing_path_is_refused() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 17);
    json_ok(&a, &["push"]);
    let b = Env::new();
    let dest = b.path().join("taken");
    fs::create_dir(&dest).unwrap();
    fs::write(dest.join("mine"), b"keep me").unwrap();
    let err = json_err(&b, &["clone", s(&remote), s(&dest)], 2);
    assert!(err["message"].as_str().unwrap().contains("exists"), "{err}");
    assert_eq!(
        snapshot_files(&dest),
        vec![(PathBuf::from("mine"), b"keep me".to_vec())]
    );
    // The default path too: an existing ./.baton is never cloned over.
    b.init();
    let before = snapshot_files(&b.store());
    json_err(&b, &["clone", s(&remote)], 2);
    assert_eq!(snapshot_files(&b.store()), before);
}

#[test]
fn clone_of_a_missing_store_is_not_found_and_leaves_nothing() {
    let b = Env::new();
    let missing = b.path().join("nothing-here");
    let err = json_err(&b, &["clone", s(&missing)], 3);
    assert_eq!(err["code"], "not_found");
    assert!(!b.store().exists(), "a failed clone left ./.baton");
    let dest = b.path().join("dest");
    json_err(&b, &["clone", s(&missing), s(&dest)], 3);
    assert!(!dest.exists());
    assert!(!missing.exists(), "clone created the remote");
    // A directory that is not a store is not a store either.
    fs::create_dir(&missing).unwrap();
    json_err(&b, &["clone", s(&missing), s(&dest)], 3);
    assert!(!dest.exists());
    // A malformed URL is a usage error, and nothing is created.
    json_err(&b, &["clone", "relative/path", s(&dest)], 2);
    assert!(!dest.exists());
}

#[test]
fn push_into_a_store_made_by_init_and_into_missing_parent_directories() {
    for fresh in ["made-by-init", "missing/parents/store"] {
        let scratch = Env::new();
        let remote = scratch.path().join(fresh);
        if fresh == "made-by-init" {
            scratch.ok(&["--store", s(&remote), "init"]);
        }
        let (env, id) = store_with_target(&remote, 7);
        let doc = json_ok(&env, &["push"]);
        assert_eq!(doc["report"]["bundle"], id.as_str(), "{fresh}");
        assert_eq!(
            disk_current(&remote).as_deref(),
            Some(id.as_str()),
            "{fresh}"
        );
        verify(&env, &remote);
    }
}
