//! S3 targets when things go wrong, against a real S3 server (tests/common/s3.rs): four
//! pushers racing on one prefix, the connection cut mid-push (the server's state
//! survives, as a real store's would), the server SIGKILLed mid-push, wrong or missing
//! credentials, a bucket that does not exist, and a server that ignores `If-None-Match`
//! (a proxy strips it), which the backend's probe must refuse before writing anything.

use std::process::{Command, Output};
use std::sync::Barrier;

use serde_json::Value;

use crate::common::{self, Env, random_bytes, s, snapshot_files, text};
use crate::faultproxy::{Dir, Fault, FaultProxy};
use crate::s3::{S3Server, StripProxy};

/// A `baton` command in `env` reaching `server` through loopback port `port` with the
/// server's credentials (and the backend's default retry deadline).
fn cmd_via(env: &Env, server: &S3Server, port: u16) -> Command {
    let mut cmd = env.cmd();
    cmd.envs(server.env_via(port));
    cmd
}

/// The same with a 2 s retry deadline, for a push that is meant to fail on the network.
fn cmd_failing(env: &Env, server: &S3Server, port: u16) -> Command {
    let mut cmd = cmd_via(env, server, port);
    cmd.env("BATON_S3_RETRY_TIMEOUT", "2");
    cmd
}

fn cmd(env: &Env, server: &S3Server) -> Command {
    cmd_via(env, server, server.port())
}

/// A finished `baton --json` run.
struct Run {
    code: i32,
    doc: Value,
    out: Output,
}

impl Run {
    fn describe(&self) -> String {
        format!("exit {}: {}", self.code, text(&self.out))
    }

    fn error_code(&self) -> &str {
        self.doc["error"]["code"].as_str().unwrap_or("")
    }

    fn message(&self) -> &str {
        self.doc["error"]["message"].as_str().unwrap_or("")
    }
}

fn run_json(mut cmd: Command, args: &[&str]) -> Run {
    let out = cmd.arg("--json").args(args).output().expect("run baton");
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", text(&out)));
    Run {
        code: out.status.code().unwrap_or(-1),
        doc,
        out,
    }
}

fn must(run: Run, what: &str) -> Run {
    assert_eq!(run.code, 0, "{what}: {}", run.describe());
    run
}

/// A new store in its own environment with one saved bundle; its id.
fn seeded(seed: u64) -> (Env, String) {
    let env = Env::new();
    env.init();
    env.write_tree(
        "work",
        &[("handoff.md", format!("# handoff {seed}\n").as_bytes())],
    );
    let id = env.save("work", &["--summary", &format!("seed {seed}")]);
    (env, id)
}

/// The keys of `current`'s generations under `prefix`, oldest first.
fn generations(server: &S3Server, prefix: &str) -> Vec<String> {
    server.keys(&format!("{prefix}/refs/current/"))
}

/// The bundle ids of the remote's hub audit, oldest first (through `env`'s target).
fn audit_news(env: &Env, server: &S3Server, target: &str) -> Vec<String> {
    let run = must(
        run_json(cmd(env, server), &["log", "--audit", "--target", target]),
        "log --audit",
    );
    run.doc["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["new"].as_str().expect("new").to_string())
        .collect()
}

/// A fresh clone of `url` verifies clean; its current.
fn clone_verifies(server: &S3Server, url: &str) -> Option<String> {
    let env = Env::new();
    let store = env.store();
    must(
        run_json(cmd(&env, server), &["clone", url, s(&store)]),
        "clone",
    );
    let out = env.run(&["verify"]);
    assert!(out.status.success(), "the clone verifies: {}", text(&out));
    common::disk_current(&store)
}

#[test]
fn four_pushers_racing_on_one_prefix_exactly_one_wins_each_round() {
    const PUSHERS: usize = 4;
    const ROUNDS: usize = 3;
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    let url = server.url("team/race");
    let (seed, seed_id) = seeded(0);
    seed.ok(&["target", "add", "origin", &url]);
    must(run_json(cmd(&seed, &server), &["push"]), "the first push");

    let pushers: Vec<Env> = (0..PUSHERS)
        .map(|_| {
            let env = Env::new();
            let store = env.store();
            must(
                run_json(cmd(&env, &server), &["clone", &url, s(&store)]),
                "clone",
            );
            env
        })
        .collect();
    let mut winners = vec![seed_id.clone()];
    for round in 0..ROUNDS {
        let ids: Vec<String> = pushers
            .iter()
            .enumerate()
            .map(|(p, env)| {
                env.write_tree(
                    "work",
                    &[(
                        "round.txt",
                        format!("pusher {p} round {round}\n").as_bytes(),
                    )],
                );
                env.save("work", &["--summary", &format!("pusher {p} round {round}")])
            })
            .collect();
        // All four push at once, from the same remote generation.
        let barrier = Barrier::new(PUSHERS);
        let runs: Vec<Run> = std::thread::scope(|scope| {
            let handles: Vec<_> = pushers
                .iter()
                .map(|env| {
                    let (barrier, server) = (&barrier, &server);
                    scope.spawn(move || {
                        let cmd = cmd(env, server);
                        barrier.wait();
                        run_json(cmd, &["push"])
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("pusher"))
                .collect()
        });
        let won: Vec<usize> = (0..PUSHERS).filter(|&p| runs[p].code == 0).collect();
        assert_eq!(
            won.len(),
            1,
            "round {round}: exactly one push wins: {:?}",
            runs.iter().map(Run::describe).collect::<Vec<_>>()
        );
        for (p, run) in runs.iter().enumerate().filter(|(p, _)| *p != won[0]) {
            assert_eq!(
                (run.code, run.error_code()),
                (5, "store_conflict"),
                "round {round} pusher {p}: {}",
                run.describe()
            );
            assert!(!run.message().contains('\n'), "{}", run.message());
        }
        winners.push(ids[won[0]].clone());
        // The losers recover: pull fetches the winner into targets/origin (their
        // histories diverged, so it does not move current), reset moves onto it.
        for (p, env) in pushers.iter().enumerate().filter(|(p, _)| *p != won[0]) {
            let pull = run_json(cmd(env, &server), &["pull"]);
            assert!(
                pull.code == 0 || (pull.code, pull.error_code()) == (5, "store_conflict"),
                "round {round} pusher {p} pull: {}",
                pull.describe()
            );
            must(
                run_json(env.cmd(), &["reset", "targets/origin"]),
                "reset onto the winner",
            );
            assert_eq!(
                common::disk_current(&env.store()).as_deref(),
                Some(ids[won[0]].as_str()),
                "round {round} pusher {p} is on the winner after reset"
            );
        }
    }

    // No lost or duplicated generation: one per winning push, in order, and the audit
    // names exactly the winners.
    assert_eq!(
        generations(&server, "team/race").len(),
        ROUNDS + 1,
        "{:?}",
        server.keys("team/race/refs/")
    );
    assert_eq!(audit_news(&seed, &server, "origin"), winners);
    assert_eq!(
        clone_verifies(&server, &url).as_deref(),
        winners.last().map(String::as_str)
    );
}

#[test]
fn a_connection_cut_mid_push_publishes_nothing_and_the_next_push_succeeds() {
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    let proxy = FaultProxy::start(server.port());
    let url = server.url("team/cut");
    let (env, base) = seeded(1);
    env.ok(&["target", "add", "origin", &url]);
    must(
        run_json(cmd_via(&env, &server, proxy.port()), &["push"]),
        "the first push",
    );
    let before = server.list("team/cut/refs/");

    // A bundle with 3 MB that does not compress: its pack upload is cut after 256 KiB,
    // on every connection (retries too), as a link that died would.
    env.write_tree("work", &[("big.bin", &random_bytes(7, 3 << 20))]);
    let big = env.save("work", &["--summary", "big"]);
    let local_before = snapshot_files(&env.store());
    proxy.set_fault(Fault::Drop {
        dir: Dir::Up,
        after: 256 << 10,
    });
    let cut = run_json(cmd_failing(&env, &server, proxy.port()), &["push"]);
    assert_eq!(
        (cut.code, cut.error_code()),
        (7, "transport"),
        "{}",
        cut.describe()
    );
    assert!(
        proxy.connections().iter().any(|c| c.fired()),
        "the proxy cut a connection"
    );
    // Nothing published: the refs are as they were, current is still the base.
    assert_eq!(server.list("team/cut/refs/"), before);
    assert_eq!(audit_news(&env, &server, "origin"), vec![base.clone()]);
    assert_eq!(
        snapshot_files(&env.store()),
        local_before,
        "the local store is left exactly as it was"
    );

    // The link is back: the next push succeeds and a clone has the big bundle.
    proxy.set_fault(Fault::Pass);
    must(
        run_json(cmd_via(&env, &server, proxy.port()), &["push"]),
        "the push after the cut",
    );
    assert_eq!(audit_news(&env, &server, "origin"), vec![base, big.clone()]);
    assert_eq!(clone_verifies(&server, &url).as_deref(), Some(big.as_str()));
}

#[test]
fn a_server_killed_mid_push_gives_exit_7_and_leaves_the_local_store_as_it_was() {
    let Some(mut server) = S3Server::start_or_skip() else {
        return;
    };
    let proxy = FaultProxy::start(server.port());
    let url = server.url("team/kill");
    let (env, _) = seeded(5);
    env.ok(&["target", "add", "origin", &url]);
    must(
        run_json(cmd_via(&env, &server, proxy.port()), &["push"]),
        "the first push",
    );
    env.write_tree("work", &[("big.bin", &random_bytes(8, 3 << 20))]);
    let big = env.save("work", &["--summary", "big"]);
    let local_before = snapshot_files(&env.store());
    // Hold the upload 256 KiB in, SIGKILL the server there, then let the bytes go on
    // into the dead server's closed socket; every retry finds the port refusing.
    proxy.set_fault(Fault::Stall {
        dir: Dir::Up,
        after: 256 << 10,
    });
    let push = cmd_failing(&env, &server, proxy.port());
    let started = std::time::Instant::now();
    let killed = std::thread::scope(|scope| {
        let pushing = scope.spawn(move || run_json(push, &["push"]));
        assert!(
            proxy
                .wait_fired(std::time::Duration::from_secs(60))
                .is_some(),
            "the push reached the upload"
        );
        server.kill();
        proxy.release();
        pushing.join().expect("push thread")
    });
    assert_eq!(
        (killed.code, killed.error_code()),
        (7, "transport"),
        "{}",
        killed.describe()
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "the push gave up within its retry deadline: {:?}",
        started.elapsed()
    );
    assert_eq!(snapshot_files(&env.store()), local_before);
    // moto's objects died with it (in memory): a new server on the same proxy is an empty
    // bucket, and the next push creates the store there whole.
    let server = S3Server::start();
    proxy.set_fault(Fault::Pass);
    proxy.set_upstream(server.port());
    must(
        run_json(cmd_via(&env, &server, proxy.port()), &["push"]),
        "the push after the restart",
    );
    assert_eq!(clone_verifies(&server, &url).as_deref(), Some(big.as_str()));
}

#[test]
fn wrong_or_missing_credentials_exit_6_and_never_print_a_secret() {
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    let url = server.url("team/creds");
    let (env, _) = seeded(2);
    env.ok(&["target", "add", "origin", &url]);
    let local_before = snapshot_files(&env.store());
    let wrong_secret = "ZQXJwrongSecretKeyValue0123456789abcdefgh";
    let cases: [(&str, Option<(&str, &str)>); 3] = [
        ("a wrong secret", Some((server.access_key(), wrong_secret))),
        (
            "an unknown key",
            Some(("AKIAZQXJUNKNOWNKEY00", server.secret_key())),
        ),
        ("no credentials", None),
    ];
    for (what, creds) in cases {
        let mut cmd = cmd(&env, &server);
        cmd.env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY");
        if let Some((key, secret)) = creds {
            cmd.env("AWS_ACCESS_KEY_ID", key)
                .env("AWS_SECRET_ACCESS_KEY", secret);
        }
        let started = std::time::Instant::now();
        let run = run_json(cmd, &["push"]);
        assert_eq!(
            (run.code, run.error_code()),
            (6, "security"),
            "{what}: {}",
            run.describe()
        );
        let all = text(&run.out);
        assert!(
            all.to_lowercase().contains("credential"),
            "{what}: the message names the credentials: {all}"
        );
        for secret in [wrong_secret, server.secret_key()] {
            assert!(!all.contains(secret), "{what}: a secret was printed: {all}");
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{what}: no wait on an instance-metadata endpoint"
        );
    }
    assert!(server.keys("team/creds/").is_empty(), "nothing written");
    assert_eq!(snapshot_files(&env.store()), local_before);
}

#[test]
fn a_bucket_that_does_not_exist_exits_3_and_changes_nothing() {
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    let (env, _) = seeded(3);
    let missing = "s3://baton-no-such-bucket/team";
    env.ok(&["target", "add", "origin", missing]);
    let local_before = snapshot_files(&env.store());
    let push = run_json(cmd(&env, &server), &["push"]);
    assert_eq!(
        (push.code, push.error_code()),
        (3, "not_found"),
        "{}",
        push.describe()
    );
    assert!(
        push.message().contains("no such bucket"),
        "{}",
        push.describe()
    );
    assert_eq!(snapshot_files(&env.store()), local_before);

    let other = Env::new();
    let dest = other.path().join("clone");
    let clone = run_json(cmd(&other, &server), &["clone", missing, s(&dest)]);
    assert_eq!(clone.code, 3, "{}", clone.describe());
    assert!(!dest.exists(), "a failed clone leaves no store behind");
    assert!(server.list("").is_empty(), "{:?}", server.list(""));
}

#[test]
fn the_probe_refuses_a_server_that_ignores_if_none_match() {
    if !S3Server::skip_unless_available() {
        return;
    }
    // Without authentication: the proxy removes a signed header.
    let server = S3Server::builder().no_auth().start();
    let proxy = StripProxy::start(server.port(), "if-none-match");
    let (env, _) = seeded(4);
    let url = server.url("team/probe");
    env.ok(&["target", "add", "origin", &url]);
    let local_before = snapshot_files(&env.store());
    let refused = run_json(cmd_via(&env, &server, proxy.port()), &["push"]);
    assert_eq!(
        (refused.code, refused.error_code()),
        (6, "security"),
        "{}",
        refused.describe()
    );
    assert!(
        refused.message().contains("If-None-Match"),
        "the message names the server's behaviour: {}",
        refused.describe()
    );
    assert!(
        proxy.stripped() >= 2,
        "the probe's creates went through the proxy"
    );
    assert!(
        server.keys("").is_empty(),
        "nothing is left under the prefix: {:?}",
        server.keys("")
    );
    assert_eq!(snapshot_files(&env.store()), local_before);

    // The same server without the proxy passes the probe: the refusal was the proxy's.
    must(run_json(cmd(&env, &server), &["push"]), "a direct push");
    assert_eq!(generations(&server, "team/probe").len(), 1);
}

/// A baton command with an S3 endpoint of `endpoint` and made-up credentials (nothing
/// answers, so none is checked), and the default retry deadline.
fn cmd_to_endpoint(env: &Env, endpoint: &str) -> Command {
    let mut cmd = env.cmd();
    cmd.envs(crate::s3::no_metadata_env())
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        .env("AWS_SECRET_ACCESS_KEY", "not-a-secret");
    cmd
}

#[test]
fn a_refused_connection_says_how_often_and_how_long_it_was_tried() {
    // A loopback port that was just free: nothing listens, every connect is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let (env, _) = seeded(21);
    env.ok(&["target", "add", "origin", "s3://bucket/team"]);
    let started = std::time::Instant::now();
    let run = run_json(
        cmd_to_endpoint(&env, &format!("http://127.0.0.1:{port}")),
        &["push"],
    );
    let took = started.elapsed();
    assert_eq!(
        (run.code, run.error_code()),
        (7, "transport"),
        "{}",
        run.describe()
    );
    let message = run.message();
    assert!(
        message.to_lowercase().contains("connection refused"),
        "{message}"
    );
    // The hint says to check the endpoint: the message names the one that refused.
    assert!(
        message.contains(&format!("(endpoint http://127.0.0.1:{port})")),
        "{message}"
    );
    // "failed after N tries in X s": N more than one, X no more than the run took.
    let (tries, secs) = message
        .split_once(" failed after ")
        .and_then(|(_, rest)| rest.split_once(" tries in "))
        .and_then(|(n, rest)| Some((n.parse::<u64>().ok()?, rest.split_once(" s")?.0)))
        .unwrap_or_else(|| panic!("no count of tries: {message}"));
    assert!(tries > 1, "{message}");
    let secs: f64 = secs.parse().expect("seconds");
    assert!(
        secs <= took.as_secs_f64() + 0.05,
        "{message} (the run took {took:?})"
    );
    assert!(tries <= 11, "at most 10 retries of one request: {message}");
    let hint = run.doc["error"]["hint"].as_str().unwrap_or("");
    assert!(!hint.contains("retried for"), "{hint}");
}

#[test]
fn a_host_name_that_does_not_resolve_is_not_retried() {
    let (env, _) = seeded(22);
    env.ok(&["target", "add", "origin", "s3://bucket/team"]);
    let run = run_json(
        cmd_to_endpoint(&env, "http://nosuch.invalid:9000"),
        &["push"],
    );
    assert_eq!(
        (run.code, run.error_code()),
        (7, "transport"),
        "{}",
        run.describe()
    );
    let message = run.message();
    assert!(
        message.contains("cannot resolve the host name nosuch.invalid")
            && message.contains("not retried"),
        "{message}"
    );
}
