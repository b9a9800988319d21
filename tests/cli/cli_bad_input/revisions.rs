//! Bad input: revisions.

use super::*;

// ---------------------------------------------------------------------------------------
// Revisions
// ---------------------------------------------------------------------------------------

#[test]
fn rev_matching_nothing() {
    let env = populated();
    refuse(
        &env,
        &["show", "deadbeef"],
        3,
        "not_found",
        "no bundle matches 'deadbeef'",
    );
    refuse(
        &env,
        &["show", &"0".repeat(64)],
        3,
        "not_found",
        "no bundle matches",
    );
    refuse(&env, &["log", "deadbeef00"], 3, "not_found", "deadbeef00");
    refuse(
        &env,
        &["show", "targets/devbox"],
        3,
        "not_found",
        "targets/devbox",
    );
    refuse(&env, &["show", "current~2"], 3, "not_found", "current~2");
    refuse(
        &env,
        &["cat", "deadbeef:handoff.md"],
        3,
        "not_found",
        "deadbeef",
    );
    refuse(
        &env,
        &["checkout", "deadbeef", "out"],
        3,
        "not_found",
        "deadbeef",
    );
    assert!(!env.path().join("out").exists());
    refuse(
        &env,
        &["diff", "current", "deadbeef"],
        3,
        "not_found",
        "deadbeef",
    );
}

#[test]
fn rev_too_short_or_malformed() {
    let env = populated();
    let id = env.ok(&["show", "current", "--json"]);
    let id = serde_json::from_str::<Value>(&id).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Ambiguity below 8 digits is not even attempted: a 7-digit prefix is a usage error
    // although it matches exactly one bundle here.
    refuse(&env, &["show", &id[..7]], 2, "usage", "too short");
    refuse(&env, &["show", "abc"], 2, "usage", "too short");
    refuse(
        &env,
        &["show", &format!("{id}0")],
        2,
        "usage",
        "longer than an id",
    );
    refuse(&env, &["show", "current~x"], 2, "usage", "not a number");
    refuse(&env, &["show", "HEAD"], 2, "usage", "is not a revision");
    refuse(
        &env,
        &["show", &id.to_uppercase()],
        2,
        "usage",
        "is not a revision",
    );
    refuse(
        &env,
        &["show", "targets/../x"],
        2,
        "usage",
        "invalid target name",
    );
}

/// A bundle manifest in canonical form, as `save` writes it.
fn manifest(tree: &str, summary: &str) -> Vec<u8> {
    format!(
        "{{\"type\":\"bundle\",\"version\":1,\"tree\":\"{tree}\",\"parents\":[],\"created\":\"2020-01-01T00:00:00Z\",\
         \"from\":\"\",\"to\":\"\",\"summary\":\"{summary}\",\"note\":\"\",\"metadata\":{{}}}}"
    )
    .into_bytes()
}

fn plant(store: &Path, content: &[u8]) -> String {
    let id = blake3::hash(content).to_hex().to_string();
    let path = object_path(store, &id);
    let fanout = path.parent().unwrap();
    fs::create_dir_all(fanout).unwrap();
    fs::set_permissions(fanout, fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(&path, zstd::encode_all(content, 3).unwrap()).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    id
}

#[test]
fn rev_prefix_matching_two_bundles_is_ambiguous() {
    let env = Env::new();
    env.init();
    fs::create_dir(env.path().join("empty")).unwrap();
    let id = env.save("empty", &[]);
    let shown: Value = serde_json::from_str(&env.ok(&["--json", "show", &id])).unwrap();
    let tree = shown["tree"].as_str().unwrap().to_string();
    // Our own manifest encoding must match save's byte for byte, or the planted bundles
    // below would be refused as non-canonical rather than found ambiguous.
    assert_eq!(
        common::read_object_file(&object_path(&env.store(), &id)).len(),
        manifest(&tree, "").len()
    );

    // Two valid bundles whose ids share 8 hex digits (32 bits): a birthday search over
    // summaries needs ~2^16 hashes, which takes a moment in-process.
    let mut seen: HashMap<[u8; 4], u32> = HashMap::new();
    let (a, b) = (0u32..)
        .find_map(|i| {
            let hash = blake3::hash(&manifest(&tree, &format!("n{i}")));
            let key: [u8; 4] = hash.as_bytes()[..4].try_into().unwrap();
            seen.insert(key, i).map(|j| (j, i))
        })
        .unwrap();
    let id_a = plant(&env.store(), &manifest(&tree, &format!("n{a}")));
    let id_b = plant(&env.store(), &manifest(&tree, &format!("n{b}")));
    assert_eq!(id_a[..8], id_b[..8]);
    let common_len = id_a
        .bytes()
        .zip(id_b.bytes())
        .take_while(|(x, y)| x == y)
        .count();

    // Both are real bundles: each resolves by its full id and by a long enough prefix.
    for (full, summary) in [(&id_a, format!("n{a}")), (&id_b, format!("n{b}"))] {
        let doc: Value =
            serde_json::from_str(&env.ok(&["--json", "show", &full[..common_len + 1]])).unwrap();
        assert_eq!(doc["id"], json!(full));
        assert_eq!(doc["summary"], json!(summary));
    }
    let prefix = &id_a[..8];
    refuse(
        &env,
        &["show", prefix],
        3,
        "ambiguous",
        &format!("'{prefix}' matches 2 bundles"),
    );
    refuse(
        &env,
        &["cat", &format!("{prefix}:x")],
        3,
        "ambiguous",
        "matches 2 bundles",
    );
    refuse(
        &env,
        &["show", &id_a[..common_len]],
        3,
        "ambiguous",
        "matches 2 bundles",
    );
}
