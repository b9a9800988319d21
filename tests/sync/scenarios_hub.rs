//! A hub's packs merged in place (`gc --target`, SPEC 17.1), over every transport: the
//! merge keeps every bundle, pushes and pulls go on across it, and a damaged pack stops
//! it with nothing deleted. Racing pushers and pullers and a kill -9 mid-merge are in
//! sync_local/hub_compact.rs.

use super::{clone_env, save_change, store_with_target, verify};
use crate::common;
use crate::transport::Transport;

use common::{Via, corrupt_pack_data, pack_files, random_bytes, snapshot_files};

/// A store pushed to `t` `pushes` times (a pack each): the env and its bundles, oldest
/// first.
pub(super) fn hub_of_pushes(t: &Transport, pushes: u64) -> (common::Env, Vec<String>) {
    let (a, base) = store_with_target(t, 40);
    t.json_ok(&a, &["push"]);
    let mut bundles = vec![base];
    for i in 1..pushes {
        let name = format!("notes/{i}.txt");
        bundles.push(save_change(&a, &name, &random_bytes(i, 2_000)));
        t.json_ok(&a, &["push"]);
    }
    (a, bundles)
}

pub(super) fn gc_target_merges_a_hubs_packs_and_every_bundle_stays(t: &Transport) {
    let (a, bundles) = hub_of_pushes(t, 20);
    let b = clone_env(t, &t.url());
    assert_eq!(pack_files(&t.remote()).len(), 20);

    // Geometric: the first push's pack (a 300 KB file) is larger than the nineteen
    // after it together and stays; they go into one.
    let dry = t.json_ok(&a, &["gc", "--target", "r", "--dry-run"]);
    assert_eq!(dry["report"]["packs_merged"], 19, "{dry}");
    assert_eq!(
        pack_files(&t.remote()).len(),
        20,
        "a dry run merges nothing"
    );

    let merged = t.json_ok(&a, &["gc", "--target", "r"]);
    let report = &merged["report"];
    assert_eq!(report["packs_before"], 20, "{merged}");
    assert_eq!(report["packs_after"], 2, "{merged}");
    assert_eq!(pack_files(&t.remote()).len(), 2);
    verify(&t.remote());
    // Nothing more to merge, then pushes and a pull go on over the merged pack.
    let again = t.json_ok(&a, &["gc", "--target", "r"]);
    assert_eq!(again["report"]["packs_merged"], 0, "{again}");
    let next = save_change(&a, "after.txt", b"after the merge\n");
    t.json_ok(&a, &["push"]);
    let pulled = t.json_ok(&b, &["pull"]);
    assert_eq!(pulled["report"]["current_after"], next.as_str(), "{pulled}");

    // Every pack into one, and every bundle ever pushed still checks out of a clone.
    let all = t.json_ok(&a, &["gc", "--target", "r", "--all"]);
    assert_eq!(all["report"]["packs_after"], 1, "{all}");
    assert_eq!(pack_files(&t.remote()).len(), 1);
    verify(&t.remote());
    let c = clone_env(t, &t.url());
    for id in bundles.iter().chain([&next]) {
        common::json_ok(&c, &["verify", id]);
    }
    verify(&c.store());
}

pub(super) fn gc_target_refuses_a_damaged_pack_and_deletes_nothing(t: &Transport) {
    let (a, _) = hub_of_pushes(t, 4);
    let remote = t.remote();
    let packs = pack_files(&remote);
    corrupt_pack_data(&packs[1]);
    t.upload(&remote);
    let before = snapshot_files(&t.remote());
    let err = t.json_err(&a, &["gc", "--target", "r", "--all"], 4);
    assert_eq!(err["code"], "integrity", "{err}");
    let message = err["message"].as_str().unwrap_or_default();
    assert!(message.contains("refusing to merge packs"), "{err}");
    assert_eq!(snapshot_files(&t.remote()), before, "nothing changed there");
}
