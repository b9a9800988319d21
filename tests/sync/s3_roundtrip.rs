//! Round trips through an S3 target on a real S3-compatible server (tests/common/s3.rs):
//! push, clone, pull, a lost race and `--force EXPECTED`, the hub audit over S3, an
//! encrypted store (ciphertext only in the bucket), an archive of what was pulled, and
//! the bucket itself: its keys under the prefix are a store's files, so a copy of them
//! verifies as a store.

use crate::common;
use crate::s3::S3Server;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Env, Via, random_bytes, s, snapshot_files, text};
use serde_json::Value;

/// A `baton` command in `env` with the server's credentials (and its endpoint in
/// `AWS_ENDPOINT_URL` unless `endpoint_from_env` is false: the target's own then).
fn cmd(env: &Env, server: &S3Server, endpoint_from_env: bool) -> Command {
    let mut cmd = server.cmd(env);
    if !endpoint_from_env {
        cmd.env_remove("AWS_ENDPOINT_URL");
    }
    cmd
}

fn tree(env: &Env, seed: u64) {
    env.write_tree(
        "work",
        &[
            ("handoff.md", format!("# handoff {seed}\n").as_bytes()),
            ("empty", b""),
            ("data/big.bin", &random_bytes(seed, 300_000)),
        ],
    );
}

fn checkout(env: &Env, rev: &str, extra: &[&str]) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = env.path().join(format!("co-{}", rev.replace('/', "_")));
    let _ = fs::remove_dir_all(&dir);
    let mut args = extra.to_vec();
    args.extend(["checkout", rev, s(&dir)]);
    env.ok(&args);
    snapshot_files(&dir)
}

/// Every object under `prefix/` copied into a directory: the store the bucket holds.
fn bucket_copy(server: &S3Server, prefix: &str, into: &Path) -> PathBuf {
    let dest = into.join(format!("bucket-{}", prefix.replace('/', "_")));
    server.copy_store(prefix, &dest);
    dest
}

#[test]
fn push_clone_pull_race_and_force_through_an_s3_target() {
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    let a = Env::new();
    a.init();
    tree(&a, 1);
    let base = a.save("work", &["--summary", "base"]);
    // The endpoint from the target's config (none in the environment).
    let url = server.url("team/main");
    a.ok(&[
        "target",
        "add",
        "hub",
        &url,
        "--endpoint",
        &server.endpoint(),
    ]);
    let config = fs::read_to_string(a.store().join("config")).unwrap();
    assert!(config.contains(&server.endpoint()), "{config}");
    assert!(!config.contains(server.secret_key()), "{config}");
    let doc = common::json_ok(&a, &["target", "list"]);
    assert_eq!(doc["targets"][0]["endpoint"], server.endpoint(), "{doc}");
    let out = cmd(&a, &server, false)
        .env("BATON_TRACE", "json")
        .args(["--json", "push"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["report"]["created_remote"], true, "{doc}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (_, summary) = requests(&out);
    assert!(summary["put"].is_u64(), "{summary}");
    assert!(!stderr.contains(server.secret_key()), "{stderr}");
    // Exactly one pack and one ref generation, under the prefix, at the layout's paths.
    let keys = server.keys("team/main/");
    assert!(keys.contains(&"team/main/config".to_string()), "{keys:?}");
    assert!(
        keys.contains(&"team/main/refs/current/00000000000000000001".to_string()),
        "{keys:?}"
    );
    assert_eq!(
        keys.iter().filter(|k| k.ends_with(".pack")).count(),
        1,
        "{keys:?}"
    );
    assert!(
        !keys.iter().any(|k| k.contains("probe")),
        "probe left: {keys:?}"
    );

    // Clone (the URL directly, the endpoint on the command line and recorded with
    // origin) and compare trees.
    let b = Env::new();
    let clone_dir = b.store();
    let endpoint = server.endpoint();
    let out = cmd(&b, &server, false)
        .args([
            "--json",
            "clone",
            &url,
            s(&clone_dir),
            "--endpoint",
            &endpoint,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["report"]["outcome"], "initial", "{doc}");
    let config = fs::read_to_string(clone_dir.join("config")).unwrap();
    assert!(config.contains(&endpoint), "{config}");
    assert_eq!(checkout(&b, &base, &[]), checkout(&a, &base, &[]));

    // a pushes a change, b pulls it (fast-forward).
    a.write_tree("work", &[("more.txt", b"more\n")]);
    let second = a.save("work", &["--summary", "second"]);
    server.json_ok(&a, &["push"]);
    let out = cmd(&b, &server, false)
        .args(["--json", "pull"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["report"]["outcome"], "fast-forward", "{doc}");
    assert_eq!(
        common::disk_current(&b.store()).as_deref(),
        Some(second.as_str())
    );

    // Both save on top of `second`; b pushes first, a loses the race: store_conflict,
    // and the bucket keeps b's generation 3.
    b.write_tree("work", &[("b.txt", b"b\n")]);
    let b_id = b.save("work", &["--summary", "b"]);
    server.json_ok(&b, &["push"]);
    a.write_tree("work", &[("a.txt", b"a\n")]);
    let a_id = a.save("work", &["--summary", "a"]);
    let err = server.json_err(&a, &["push"], 5);
    assert_eq!(err["code"], "store_conflict", "{err}");
    let gen3 = server
        .get("team/main/refs/current/00000000000000000003")
        .unwrap();
    assert!(
        String::from_utf8_lossy(&gen3).contains(&b_id),
        "generation 3 is b's"
    );
    // --force with the wrong expectation is refused; with b's id it replaces b's.
    let err = server.json_err(&a, &["push", "--force", &second], 5);
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("--force expected"),
        "{err}"
    );
    server.json_ok(&a, &["push", "--force", &b_id]);
    let gen4 = server
        .get("team/main/refs/current/00000000000000000004")
        .unwrap();
    assert!(
        String::from_utf8_lossy(&gen4).contains(&a_id),
        "generation 4 is a's"
    );
    // Generations are created, never overwritten.
    assert_eq!(
        server
            .get("team/main/refs/current/00000000000000000003")
            .unwrap(),
        gen3
    );

    // The hub audit over S3: every move, oldest first.
    let doc = server.json_ok(&a, &["log", "--audit", "--target", "hub"]);
    let entries = doc["entries"].as_array().unwrap();
    let news: Vec<&str> = entries.iter().map(|e| e["new"].as_str().unwrap()).collect();
    assert_eq!(news, [base.as_str(), &second, &b_id, &a_id], "{doc}");

    // The bucket is a store: a copy of its keys verifies and shows the same audit.
    let copy = bucket_copy(&server, "team/main", a.path());
    let out = Env::new().run(&["--store", s(&copy), "verify"]);
    assert!(out.status.success(), "{}", text(&out));
    let doc = common::json_ok(&Env::new(), &["--store", s(&copy), "log", "--audit"]);
    assert_eq!(doc["entries"].as_array().unwrap().len(), 4, "{doc}");
}

#[test]
fn an_encrypted_store_puts_only_ciphertext_in_the_bucket_and_pulls_into_an_archive() {
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    let a = Env::new();
    let (key, public) = common::age_keygen(&a, "key.txt");
    a.ok(&["init", "--encrypt", "--recipient", &public]);
    a.write_tree(
        "work",
        &[(
            "ZQXJname.txt",
            "secret ZQXJcontent\n".repeat(1000).as_bytes(),
        )],
    );
    let id = a.save("work", &["--identity", s(&key), "--summary", "ZQXJsummary"]);
    let url = server.url("enc");
    a.ok(&["--identity", s(&key), "target", "add", "hub", &url]);
    server.json_ok(&a, &["--identity", s(&key), "push"]);
    for (k, _) in server.list("enc/") {
        let bytes = server.get(&k).unwrap();
        let mut views = vec![bytes.clone()];
        if let Ok(plain) = zstd::stream::decode_all(&bytes[..]) {
            views.push(plain);
        }
        for view in views {
            assert!(
                !view.windows(4).any(|w| w == b"ZQXJ"),
                "plaintext marker in {k}"
            );
        }
    }
    // A clone with the key reads it back; without it the store stays locked.
    let b = Env::new();
    let dest = b.store();
    server.json_ok(&b, &["--identity", s(&key), "clone", &url, s(&dest)]);
    let co = checkout(&b, &id, &["--identity", s(&key)]);
    assert_eq!(co, checkout(&a, &id, &["--identity", s(&key)]));
    // What was pulled goes into an archive, which a store at the older state imports.
    let c = Env::new();
    let c_store = c.store();
    server.json_ok(&c, &["--identity", s(&key), "clone", &url, s(&c_store)]);
    a.write_tree("work", &[("later.txt", b"ZQXJlater\n")]);
    let second = a.save("work", &["--identity", s(&key), "--summary", "ZQXJsecond"]);
    server.json_ok(&a, &["--identity", s(&key), "push"]);
    let doc = server.json_ok(&b, &["--identity", s(&key), "pull"]);
    assert_eq!(doc["report"]["outcome"], "fast-forward", "{doc}");
    let tar = b.path().join("pulled.tar");
    b.ok(&["--identity", s(&key), "export", "-o", s(&tar)]);
    let bytes = fs::read(&tar).unwrap();
    assert!(
        !bytes.windows(4).any(|w| w == b"ZQXJ"),
        "plaintext in the archive"
    );
    c.ok(&["--identity", s(&key), "import", s(&tar)]);
    assert_eq!(
        common::disk_current(&c.store()).as_deref(),
        Some(second.as_str())
    );
    assert_eq!(
        checkout(&c, &second, &["--identity", s(&key)]),
        checkout(&a, &second, &["--identity", s(&key)])
    );
    // The bucket copy is an encrypted store that verifies with the key.
    let copy = bucket_copy(&server, "enc", a.path());
    let out = Env::new().run(&["--store", s(&copy), "--identity", s(&key), "verify"]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn bad_s3_targets_are_refused_with_one_clear_line() {
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    let a = Env::new();
    a.init();
    tree(&a, 3);
    a.save("work", &[]);
    for (args, exit) in [
        (vec!["target", "add", "x", "s3://Bad_Bucket/p"], 2),
        (vec!["target", "add", "x", "s3://team/a//b"], 2),
        (
            vec![
                "target",
                "add",
                "x",
                "s3://team/p",
                "--endpoint",
                "http://k:s@h:1",
            ],
            2,
        ),
        (
            vec!["target", "add", "x", "/tmp/p", "--region", "us-east-1"],
            2,
        ),
    ] {
        let err = server.json_err(&a, &args, exit);
        assert!(!err["message"].as_str().unwrap().contains('\n'), "{err}");
    }
    let before = fs::read(a.store().join("config")).unwrap();
    // A bucket that does not exist: exit 3, naming the bucket problem; nothing created.
    a.ok(&["target", "add", "nb", "s3://no-such-bucket-here/p"]);
    let err = server.json_err(&a, &["push", "nb"], 3);
    assert!(
        err["message"].as_str().unwrap().contains("no such bucket"),
        "{err}"
    );
    // No credentials anywhere: exit 6 before any request.
    let out = a
        .cmd()
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env("HOME", a.path())
        .env("AWS_ENDPOINT_URL", server.endpoint())
        .args(["--json", "clone", &server.url("p"), s(&a.path().join("c"))])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", text(&out));
    assert!(!a.path().join("c").exists());
    // A wrong secret: exit 6, the secret never printed.
    let out = cmd(&a, &server, true)
        .env("AWS_SECRET_ACCESS_KEY", "wrong-secret-ZQXJ")
        .args(["--json", "clone", &server.url("p"), s(&a.path().join("c"))])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", text(&out));
    assert!(!text(&out).contains("ZQXJ"), "{}", text(&out));
    assert!(!a.path().join("c").exists());
    let after = fs::read(a.store().join("config")).unwrap();
    assert_ne!(before, after, "the nb target was added");
}

/// The request counts of a `BATON_TRACE=json` run (its `requests` event): (total, the
/// event).
fn requests(out: &Output) -> (u64, Value) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let events = crate::round_trips::trace_events(&stderr);
    let found: Vec<&Value> = events.iter().filter(|e| e["kind"] == "requests").collect();
    assert_eq!(found.len(), 1, "one request summary expected: {stderr}");
    let total = found[0]["total"].as_u64().expect("a total");
    (total, found[0].clone())
}

#[test]
fn a_push_costs_the_same_requests_for_one_file_or_five_hundred() {
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    let mut seen = Vec::new();
    for (prefix, files) in [("one", 1usize), ("many", 500)] {
        let env = Env::new();
        env.init();
        let tree: Vec<(String, Vec<u8>)> = (0..files)
            .map(|i| {
                (
                    format!("d{}/f{i}.txt", i % 16),
                    format!("file {i}\n").into_bytes(),
                )
            })
            .collect();
        env.write_files("work", &tree);
        env.save("work", &[]);
        env.ok(&["target", "add", "hub", &server.url(prefix)]);
        let push = |env: &Env| {
            let out = cmd(env, &server, true)
                .env("BATON_TRACE", "json")
                .arg("push")
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out));
            requests(&out)
        };
        let first = push(&env);
        env.write_tree("work", &[("later.txt", b"later\n")]);
        env.save("work", &[]);
        let second = push(&env);
        seen.push((prefix, first, second));
    }
    let (_, (one_first, l1), (one_second, l2)) = &seen[0];
    let (_, (many_first, l3), (many_second, l4)) = &seen[1];
    assert_eq!(one_first, many_first, "{l1} / {l3}");
    assert_eq!(one_second, many_second, "{l2} / {l4}");
    // One pack, one ref generation: the PUTs do not grow with the objects either.
    // Probe twice, .gitignore, log, lock, config, the pack, the ref generation.
    assert_eq!(l3["put"], 8, "{l3}");
}

#[test]
fn a_silent_s3_endpoint_ends_in_exit_7_within_the_timeout() {
    // Accepts connections and never answers (a frozen server).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for conn in listener.incoming().take(64) {
            match conn {
                Ok(c) => open.push(c),
                Err(_) => break,
            }
        }
    });
    let env = Env::new();
    let started = std::time::Instant::now();
    let out = env
        .cmd()
        .envs(crate::s3::no_metadata_env())
        .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("BATON_S3_RETRY_TIMEOUT", "1")
        .args(["--json", "clone", "s3://frozen/p", "--timeout", "1"])
        .arg(env.path().join("c"))
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    // Without --timeout each request would wait 300 s.
    assert!(took < std::time::Duration::from_secs(60), "took {took:?}");
    assert!(!env.path().join("c").exists());
    drop(held);
}

#[test]
fn credentials_endpoint_and_region_come_from_an_aws_profile() {
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    let a = Env::new();
    a.init();
    tree(&a, 5);
    let id = a.save("work", &[]);
    a.ok(&["target", "add", "hub", &server.url("prof")]);
    // HOME is the Env's directory: ~/.aws holds a named profile, nothing else is set.
    let aws = a.path().join(".aws");
    fs::create_dir_all(&aws).unwrap();
    fs::write(
        aws.join("credentials"),
        format!(
            "[default]\naws_access_key_id = AKIANOTTHISONE\naws_secret_access_key = wrong\n\n[team]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            server.access_key(),
            server.secret_key()
        ),
    )
    .unwrap();
    fs::write(
        aws.join("config"),
        format!(
            "[profile team]\nregion = us-east-1\nendpoint_url = {}\n",
            server.endpoint()
        ),
    )
    .unwrap();
    let run = |profile: Option<&str>| {
        let mut cmd = a.cmd();
        cmd.env("BATON_S3_RETRY_TIMEOUT", "5");
        for (k, v) in crate::s3::no_metadata_env() {
            if k != "AWS_REGION" {
                cmd.env(k, v);
            }
        }
        if let Some(p) = profile {
            cmd.env("AWS_PROFILE", p);
        }
        cmd.args(["--json", "push"]).output().unwrap()
    };
    // The default profile has no endpoint (AWS itself would be asked): give it the
    // server through the environment, where its wrong key is refused.
    let out = {
        let mut cmd = a.cmd();
        cmd.envs(crate::s3::no_metadata_env())
            .env("AWS_ENDPOINT_URL", server.endpoint())
            .env("BATON_S3_RETRY_TIMEOUT", "5")
            .args(["--json", "push"]);
        cmd.output().unwrap()
    };
    assert_eq!(out.status.code(), Some(6), "{}", text(&out));
    let out = run(Some("team"));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        server
            .get("prof/refs/current/00000000000000000001")
            .map(|b| String::from_utf8_lossy(&b).contains(&id)),
        Some(true)
    );
}
