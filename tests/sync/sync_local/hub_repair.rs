//! Local-path targets: the hub audit and pull --repair.

use super::*;

// ---------------------------------------------------------------------------------------
// Hub audit and repair (issue 12)
// ---------------------------------------------------------------------------------------

/// `log --audit` entries of the store at `store`, read by a fresh env.
pub(crate) fn store_audit(store: &Path, extra: &[&str]) -> Vec<Value> {
    let env = Env::new();
    let mut args = vec!["--store", s(store), "log", "--audit"];
    args.extend_from_slice(extra);
    json_ok(&env, &args)["entries"].as_array().unwrap().clone()
}

pub(crate) fn pushes(entries: &[Value]) -> Vec<(String, String, String, String)> {
    entries
        .iter()
        .filter(|e| e["action"] == "push" && e["ref"] == "current")
        .map(|e| {
            (
                e["old"].as_str().unwrap_or("none").to_string(),
                e["new"].as_str().unwrap().to_string(),
                e["user"].as_str().unwrap().to_string(),
                e["from"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

pub(crate) fn hostname_of(entry: &Value) -> String {
    entry["host"].as_str().unwrap_or("").to_string()
}

#[test]
fn a_push_that_loses_the_race_leaves_no_move_in_the_hub_audit() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 42);
    json_ok(&a, &["push"]);
    for round in 0..2u64 {
        let b = clone_env(&remote);
        let c = clone_env(&remote);
        let b_id = save_change(&b, "b.bin", &random_bytes(3000 + round, 2 << 20));
        let c_id = save_change(&c, "c.bin", &random_bytes(4000 + round, 2 << 20));
        let (ob, oc) = race_pushes(&b, &c);
        let (winner, loser) = match (ob.status.code(), oc.status.code()) {
            (Some(0), Some(5)) => (b_id, c_id),
            (Some(5), Some(0)) => (c_id, b_id),
            other => panic!("exit codes {other:?}: {} {}", text(&ob), text(&oc)),
        };
        let moves = pushes(&store_audit(&remote, &[]));
        assert_eq!(moves.len() as u64, round + 2, "{moves:#?}");
        assert_eq!(moves.last().unwrap().1, winner);
        assert!(moves.iter().all(|m| m.1 != loser), "{moves:#?}");
        // Every move starts where the one before it ended.
        for pair in moves.windows(2) {
            assert_eq!(pair[0].1, pair[1].0, "{moves:#?}");
        }
    }
}

/// Every loose object file of a store, sorted.
fn loose_files(store: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for fanout in fs::read_dir(store.join("objects")).unwrap() {
        let fanout = fanout.unwrap().path();
        if fanout.is_dir() {
            for f in fs::read_dir(&fanout).unwrap() {
                out.push(f.unwrap().path());
            }
        }
    }
    out.sort();
    out
}

/// `verify` of the env's store fails with exit 4 and a hint that names the repair.
fn assert_damaged(env: &Env, extra: &[&str]) -> Value {
    let mut args = extra.to_vec();
    args.push("verify");
    let err = json_err(env, &args, 4);
    let hint = err["hint"].as_str().unwrap_or("");
    assert!(hint.contains("baton pull --repair"), "{err}");
    err
}

#[test]
fn pull_repair_from_a_target_that_lacks_the_object_is_exit_4_and_changes_nothing() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 44);
    json_ok(&a, &["push"]);
    // A bundle the target never received, with one of its blobs lost here, and an
    // object the target has, lost too.
    let only_here = random_bytes(4400, 5000);
    save_change(&a, "only-here.bin", &only_here);
    // Every object loose, as saves stored them before they wrote packs.
    common::unpack_to_loose(&a.store());
    let id = blake3::hash(&only_here).to_hex().to_string();
    fs::remove_file(common::object_path(&a.store(), &id)).unwrap();
    let big = random_bytes(44, 300_000);
    fs::remove_file(common::object_path(
        &a.store(),
        blake3::hash(&big).to_hex().as_str(),
    ))
    .unwrap();
    let snap = snapshot_files(&a.store());
    let err = json_err(&a, &["pull", "--repair"], 4);
    let message = err["message"].as_str().unwrap();
    assert!(message.contains(&id), "{err}");
    assert!(message.contains("lacks 1 object"), "{err}");
    assert_eq!(snapshot_files(&a.store()), snap, "the store is unchanged");
}

#[test]
fn pull_repair_refetches_ciphertext_into_an_encrypted_store() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let a = Env::new();
    let (_, public) = common::age_keygen(&a, "key.txt");
    a.ok(&["init", "--encrypt", "--recipient", &public]);
    rich_tree(&a, "work", 45);
    a.save("work", &["--identity", "key.txt", "--summary", "base"]);
    a.ok(&["--identity", "key.txt", "target", "add", "r", s(&remote)]);
    a.ok(&["--identity", "key.txt", "push"]);
    let key = ["--identity", "key.txt"];
    // Every object loose, as saves stored them before they wrote packs.
    common::unpack_to_loose(&a.store());
    // Lose every loose object but one, and damage that one.
    let files = loose_files(&a.store());
    assert!(files.len() > 3, "{files:?}");
    let (last, rest) = files.split_last().unwrap();
    let originals: Vec<Vec<u8>> = files.iter().map(|f| fs::read(f).unwrap()).collect();
    for f in rest {
        fs::remove_file(f).unwrap();
    }
    let mut bytes = fs::read(last).unwrap();
    let end = bytes.len() - 1;
    bytes[end] ^= 0x5a;
    fs::write(last, &bytes).unwrap();
    assert_damaged(&a, &key);
    let doc = json_ok(&a, &["--identity", "key.txt", "pull", "--repair"]);
    assert_eq!(
        doc["repair"]["objects_received"],
        files.len() as u64,
        "{doc}"
    );
    // The same ciphertext as before, byte for byte.
    for (f, original) in files.iter().zip(&originals) {
        assert_eq!(&fs::read(f).unwrap(), original, "{}", f.display());
    }
    let out = a.ok(&["--identity", "key.txt", "verify"]);
    assert!(out.contains(": ok"), "{out}");
}

#[test]
fn pull_repair_removes_a_damaged_loose_file_that_shadows_a_healthy_packed_copy() {
    let holder = Env::new();
    let remote = holder.path().join("r");
    let (a, _) = store_with_target(&remote, 46);
    json_ok(&a, &["push"]);
    let b = clone_env(&remote);
    let before = checkout(&b, "current");
    // The clone holds everything packed; a damaged loose file in front of one object.
    let big = random_bytes(46, 300_000);
    let path = common::object_path(&b.store(), blake3::hash(&big).to_hex().as_str());
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::set_permissions(path.parent().unwrap(), fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(&path, b"not an object").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    // And in front of the bundle itself, which the repair walk must read (from the pack).
    let bundle = disk_current(&b.store()).unwrap();
    let bundle_path = common::object_path(&b.store(), &bundle);
    fs::create_dir_all(bundle_path.parent().unwrap()).unwrap();
    fs::set_permissions(
        bundle_path.parent().unwrap(),
        fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    fs::write(&bundle_path, b"not a bundle").unwrap();
    fs::set_permissions(&bundle_path, fs::Permissions::from_mode(0o600)).unwrap();
    assert_damaged(&b, &[]);
    // An empty target suffices: nothing needs fetching.
    let empty = holder.path().join("empty");
    holder.ok(&["--store", s(&empty), "init"]);
    b.ok(&["target", "add", "empty", s(&empty)]);
    let doc = json_ok(&b, &["pull", "--repair", "empty"]);
    assert_eq!(doc["repair"]["shadowed_removed"], 2, "{doc}");
    assert_eq!(doc["repair"]["objects_received"], 0, "{doc}");
    assert!(!path.exists() && !bundle_path.exists());
    verify(&b, &b.store());
    assert_eq!(checkout(&b, "current"), before);
}
