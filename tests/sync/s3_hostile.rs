//! Hostile object-storage servers (issue 28): a loopback front (tests/common/s3_hostile.rs)
//! forwards to the real test server and misbehaves on the requests each test picks: an
//! endless listing (paged, and one endless page), a `Content-Length` smaller than its
//! chunked body, an endless error body, redirects (to another host, and to the same
//! one), conditional writes ignored under `refs/` only, a non-atomic conditional create
//! raced by two pushes, and a fake `200` for a ref generation. baton runs under a data
//! rlimit and a wall clock: unbounded growth fails the test, not the machine. Each test
//! prints `[hostile]` lines with the exit, the time to exit and the peak RSS.

use std::process::Command;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::common::{Env, s};
use crate::hostile::{Bounded, Hostile, Recorder, Reply, Request, ask, run_bounded};
use crate::s3::S3Server;

/// baton's data segment in these tests: ten times what any of these commands needs,
/// far below what the machine has (the issue saw aborts at 1.3 to 1.9 GB).
const DATA_LIMIT: u64 = 512 << 20;
/// Every command here ends well within this, or the test fails.
const WALL: Duration = Duration::from_secs(90);

/// A no-auth server (the fronts that change requests break their signatures) with a
/// store under `prefix` holding one pushed bundle; the environment that pushed it.
fn served_store(prefix: &str) -> Option<(Arc<S3Server>, Env, String)> {
    if !S3Server::skip_unless_available() {
        return None;
    }
    let server = Arc::new(S3Server::builder().no_auth().start());
    let env = Env::new();
    env.init();
    env.write_tree("work", &[("handoff.md", b"# the seed\n")]);
    let id = env.save("work", &["--summary", "seed"]);
    env.ok(&["target", "add", "origin", &server.url(prefix)]);
    let out = cmd(&env, &server, server.port())
        .args(["push"])
        .output()
        .expect("push");
    assert!(out.status.success(), "{}", crate::common::text(&out));
    Some((server, env, id))
}

/// `baton` in `env` with the server's credentials, its endpoint on loopback `port`.
fn cmd(env: &Env, server: &S3Server, port: u16) -> Command {
    let mut cmd = env.cmd();
    cmd.envs(server.env_via(port))
        .env("BATON_S3_RETRY_TIMEOUT", "2");
    cmd
}

/// Run `baton --json ARGS` bounded; print the figures.
fn bounded(case: &str, mut cmd: Command, args: &[&str]) -> Bounded {
    cmd.arg("--json").args(args);
    let run = run_bounded(cmd, DATA_LIMIT, WALL);
    eprintln!(
        "[hostile] {case}: exit {:?} signal {:?} in {:.2} s, peak RSS {:.1} MiB: {}",
        run.code,
        run.signal,
        run.elapsed.as_secs_f64(),
        run.max_rss_kib as f64 / 1024.0,
        run.message()
    );
    run
}

fn assert_refused(run: &Bounded, exit: i32, code: &str, words: &[&str]) {
    assert_eq!(run.code, Some(exit), "{}", run.describe());
    assert_eq!(
        run.json()["error"]["code"].as_str(),
        Some(code),
        "{}",
        run.describe()
    );
    let message = run.message();
    assert!(!message.contains('\n'), "one line: {message}");
    for word in words {
        assert!(
            message.contains(word),
            "the message names {word:?}: {}",
            run.describe()
        );
    }
}

/// A clone of `prefix` through `front` into a new directory must be refused with `exit`.
fn clone_refused(
    case: &str,
    server: &S3Server,
    front: &Hostile,
    prefix: &str,
) -> (Bounded, std::path::PathBuf) {
    let other = Env::new();
    let dest = other.path().join("clone");
    let run = bounded(
        case,
        cmd(&other, server, front.port()),
        &["clone", &server.url(prefix), s(&dest)],
    );
    assert!(!dest.exists(), "a refused clone leaves nothing: {case}");
    (run, dest)
}

fn list_page(bucket: &str, prefix: &str, keys: &[String], token: Option<&str>) -> Vec<u8> {
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult \
         xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>{bucket}</Name>\
         <Prefix>{prefix}</Prefix><KeyCount>{}</KeyCount><MaxKeys>1000</MaxKeys>\
         <Delimiter>/</Delimiter><IsTruncated>{}</IsTruncated>",
        keys.len(),
        token.is_some()
    );
    if let Some(token) = token {
        xml.push_str(&format!(
            "<NextContinuationToken>{token}</NextContinuationToken>"
        ));
    }
    for key in keys {
        xml.push_str(&contents(key));
    }
    xml.push_str("</ListBucketResult>");
    xml.into_bytes()
}

fn contents(key: &str) -> String {
    format!(
        "<Contents><Key>{key}</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>\
         <ETag>\"0123456789abcdef0123456789abcdef\"</ETag><Size>4096</Size>\
         <StorageClass>STANDARD</StorageClass></Contents>"
    )
}

fn is_packs_listing(req: &Request) -> bool {
    req.is_list() && req.list_prefix().is_some_and(|p| p.ends_with("/packs/"))
}

#[test]
fn an_endless_paged_listing_is_refused_with_exit_4_at_the_page_limit() {
    let Some((server, _env, _)) = served_store("list/paged") else {
        return;
    };
    let bucket = server.bucket().to_string();
    let pages = Arc::new(Mutex::new(0u64));
    let counter = pages.clone();
    // Every page of packs/ holds 100 new names and promises another page.
    let front = Hostile::start(Some(server.port()), move |req| {
        if !is_packs_listing(req) {
            return Reply::Forward;
        }
        let prefix = req.list_prefix().unwrap_or_default();
        let mut n = counter.lock().expect("pages");
        *n += 1;
        let keys: Vec<String> = (0..100)
            .map(|i| format!("{prefix}{:064x}.pack", *n * 1000 + i))
            .collect();
        let token = format!("page-{n}");
        Reply::with_body(
            200,
            &[("Content-Type", "application/xml")],
            &list_page(&bucket, &prefix, &keys, Some(&token)),
        )
    });
    let (run, _) = clone_refused("endless paged listing", &server, &front, "list/paged");
    assert_refused(&run, 4, "integrity", &["packs", "MAX_LIST_PAGES"]);
    let served = *pages.lock().expect("pages");
    assert!(
        (1000..=1001).contains(&served),
        "baton stopped at the page limit: {served} pages"
    );
}

#[test]
fn an_endless_listing_page_is_refused_with_exit_7_at_the_page_size_limit() {
    let Some((server, _env, _)) = served_store("list/endless") else {
        return;
    };
    // One page that never ends: names for ever, in chunks.
    let chunk: String = (0..64)
        .map(|i| contents(&format!("list/endless/packs/{i:064x}.pack")))
        .collect();
    let front = Hostile::start(Some(server.port()), move |req| {
        if is_packs_listing(req) {
            Reply::endless_chunked(
                200,
                &[("Content-Type", "application/xml")],
                chunk.clone().into_bytes(),
            )
        } else {
            Reply::Forward
        }
    });
    let (run, _) = clone_refused("endless listing page", &server, &front, "list/endless");
    assert_refused(&run, 7, "transport", &["MAX_LIST_PAGE_BYTES"]);
    assert!(
        front.endless_bytes() < 256 << 20,
        "baton hung up soon: {} bytes sent",
        front.endless_bytes()
    );
}

#[test]
fn a_body_longer_than_its_content_length_is_refused_with_exit_7() {
    let Some((server, _env, _)) = served_store("body/cl") else {
        return;
    };
    // `config` declares 10 bytes and then sends chunks for ever; asked for a range (the
    // client retrying the rest), it answers as S3 would, with the same endless body.
    let front = Hostile::start(Some(server.port()), |req| {
        if req.method != "GET" || !req.path().ends_with("/body/cl/config") {
            return Reply::Forward;
        }
        let etag = ("ETag", "\"0123456789abcdef0123456789abcdef\"");
        let modified = ("Last-Modified", "Thu, 01 Jan 2026 00:00:00 GMT");
        let body = vec![b'x'; 64 << 10];
        let asked = req
            .header("range")
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.split_once('-'))
            .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)));
        match asked {
            Some((a, b)) => {
                let (range, len) = (format!("bytes {a}-{b}/10"), (b + 1 - a).to_string());
                Reply::endless_chunked(
                    206,
                    &[
                        ("Content-Length", &len),
                        ("Content-Range", &range),
                        etag,
                        modified,
                    ],
                    body,
                )
            }
            None => Reply::endless_chunked(200, &[("Content-Length", "10"), etag, modified], body),
        }
    });
    let (run, _) = clone_refused(
        "content-length 10, chunked for ever",
        &server,
        &front,
        "body/cl",
    );
    assert_refused(&run, 7, "transport", &["config", "Content-Length"]);
}

#[test]
fn an_endless_error_body_is_refused_with_exit_7_in_bounded_time() {
    let Some((server, _env, _)) = served_store("body/error") else {
        return;
    };
    for status in [500u16, 403] {
        let chunk =
            b"<Error><Code>InternalError</Code><Message>again and again</Message>".repeat(1000);
        let front = Hostile::start(Some(server.port()), move |req| {
            if req.method == "GET" && req.path().ends_with("/body/error/config") {
                Reply::endless_chunked(
                    status,
                    &[("Content-Type", "application/xml")],
                    chunk.clone(),
                )
            } else {
                Reply::Forward
            }
        });
        let (run, _) = clone_refused(
            &format!("endless {status} body"),
            &server,
            &front,
            "body/error",
        );
        assert_refused(&run, 7, "transport", &["MAX_ERROR_BODY"]);
        // The retry deadline is 2 s here; each answer is read no further than the limit.
        assert!(
            run.elapsed < Duration::from_secs(30),
            "{status}: {}",
            run.describe()
        );
    }
}

#[test]
fn a_redirect_is_never_followed_and_no_credential_leaves_the_endpoint() {
    if !S3Server::skip_unless_available() {
        return;
    }
    let token = "FQoGZXIvYXdzEHostileTestSessionToken0123456789";
    for status in [301u16, 302, 307, 308] {
        let elsewhere = Recorder::start();
        let to = format!("http://127.0.0.1:{}", elsewhere.port());
        let front = Hostile::start(None, move |req| {
            let location = format!("{to}{}", req.target);
            Reply::with_body(status, &[("Location", location.as_str())], b"")
        });
        let env = Env::new();
        let mut cmd = env.cmd();
        cmd.envs(crate::s3::no_metadata_env())
            .env("AWS_ACCESS_KEY_ID", "AKIAHOSTILETEST00000")
            .env("AWS_SECRET_ACCESS_KEY", "hostile-test-secret-key")
            .env("AWS_SESSION_TOKEN", token)
            .env(
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", front.port()),
            )
            .env("BATON_S3_RETRY_TIMEOUT", "2");
        let dest = env.path().join("clone");
        let run = bounded(
            &format!("{status} to another host"),
            cmd,
            &["clone", "s3://baton-test/redirected", s(&dest)],
        );
        let heard: Vec<String> = elsewhere
            .received()
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect();
        assert!(
            heard.is_empty(),
            "{status}: the other host heard from baton {} times, the session token {}; the first: {:?}",
            heard.len(),
            if heard.iter().any(|h| h.contains(token)) {
                "among it"
            } else {
                "not"
            },
            heard.first()
        );
        assert_refused(&run, 6, "security", &["redirect", &status.to_string()]);
        assert!(!dest.exists());
        assert!(!run.describe().contains(token), "{}", run.describe());
    }

    // The same host, another path: not followed either (a SigV4 signature covers the
    // path, and a 307 would resend a body to a key the server chose).
    let port = Arc::new(Mutex::new(0u16));
    let own = port.clone();
    let front = Hostile::start(None, move |req| {
        let location = format!(
            "http://127.0.0.1:{}/baton-test/elsewhere{}",
            own.lock().expect("port"),
            req.path()
        );
        Reply::with_body(307, &[("Location", location.as_str())], b"")
    });
    *port.lock().expect("port") = front.port();
    let env = Env::new();
    let mut cmd = env.cmd();
    cmd.envs(crate::s3::no_metadata_env())
        .env("AWS_ACCESS_KEY_ID", "AKIAHOSTILETEST00000")
        .env("AWS_SECRET_ACCESS_KEY", "hostile-test-secret-key")
        .env(
            "AWS_ENDPOINT_URL",
            format!("http://127.0.0.1:{}", front.port()),
        )
        .env("BATON_S3_RETRY_TIMEOUT", "2");
    let dest = env.path().join("clone");
    let run = bounded(
        "307 to the same host",
        cmd,
        &["clone", "s3://baton-test/redirected", s(&dest)],
    );
    assert_refused(&run, 6, "security", &["redirect"]);
    assert!(
        !front.seen().iter().any(|r| r.path().contains("/elsewhere")),
        "the redirect was followed: {:?}",
        front.seen().iter().map(|r| &r.target).collect::<Vec<_>>()
    );
}

/// Two clones of the seeded store, each with a new bundle of its own: their envs and ids.
fn two_pushers(server: &S3Server, prefix: &str) -> Vec<(Env, String)> {
    (0..2)
        .map(|p| {
            let env = Env::new();
            let store = env.store();
            let out = cmd(&env, server, server.port())
                .args(["clone", &server.url(prefix), s(&store)])
                .output()
                .expect("clone");
            assert!(out.status.success(), "{}", crate::common::text(&out));
            env.write_tree("work", &[("mine.txt", format!("pusher {p}\n").as_bytes())]);
            let id = env.save("work", &["--summary", &format!("pusher {p}")]);
            (env, id)
        })
        .collect()
}

/// Both push at once through `front`.
fn race(server: &S3Server, front: &Hostile, pushers: &[(Env, String)]) -> Vec<Bounded> {
    let barrier = std::sync::Barrier::new(pushers.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = pushers
            .iter()
            .enumerate()
            .map(|(p, (env, _))| {
                let barrier = &barrier;
                let cmd = cmd(env, server, front.port());
                scope.spawn(move || {
                    barrier.wait();
                    bounded(&format!("racing pusher {p}"), cmd, &["push"])
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("pusher"))
            .collect()
    })
}

/// The bundle the server's generation `n` of `current` names (read straight from it).
fn generation_names(server: &S3Server, prefix: &str, n: u64) -> Option<String> {
    server
        .get(&format!("{prefix}/refs/current/{n:020}"))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[test]
fn a_server_ignoring_if_none_match_under_refs_only_is_refused_before_anything_is_lost() {
    let Some((server, _seed, seed_id)) = served_store("cas/selective") else {
        return;
    };
    let pushers = two_pushers(&server, "cas/selective");
    // The staging probe is honoured; under refs/ the condition never arrives.
    let front = Hostile::start(Some(server.port()), |req| {
        if req.method == "PUT" && req.path().contains("/refs/") {
            Reply::ForwardAs(req.without("if-none-match"))
        } else {
            Reply::Forward
        }
    });
    let runs = race(&server, &front, &pushers);
    for run in &runs {
        assert_refused(run, 6, "security", &["If-None-Match", "refs/"]);
    }
    assert_eq!(generation_names(&server, "cas/selective", 2), None);
    let first = generation_names(&server, "cas/selective", 1).expect("generation 1");
    assert!(
        first.contains(&seed_id),
        "generation 1 is untouched: {first}"
    );
    for (_, id) in &pushers {
        assert!(!first.contains(id.as_str()));
    }
}

/// A meeting point for `n` threads (or fewer after `timeout`).
struct Gate {
    arrived: Mutex<usize>,
    all: Condvar,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            arrived: Mutex::new(0),
            all: Condvar::new(),
        }
    }

    fn meet(&self, n: usize, timeout: Duration) {
        let mut arrived = self.arrived.lock().expect("gate");
        *arrived += 1;
        self.all.notify_all();
        let _ = self
            .all
            .wait_timeout_while(arrived, timeout, |a| *a < n)
            .expect("gate");
    }
}

#[test]
fn a_non_atomic_conditional_create_raced_by_two_pushes_loses_no_bundle() {
    let Some((server, _seed, _)) = served_store("cas/racy") else {
        return;
    };
    let pushers = two_pushers(&server, "cas/racy");
    let upstream = server.port();
    let (arrive, answered) = (Arc::new(Gate::new()), Arc::new(Gate::new()));
    // Under refs/ the server checks "exists?" and then writes, unlocked: two creates of
    // one new generation both pass the check, both are written, both answered 200.
    let front = Hostile::start(Some(upstream), move |req| {
        if req.method != "PUT" || !req.path().contains("/refs/") {
            return Reply::Forward;
        }
        let mut head = req.without("if-none-match");
        head.method = "HEAD".into();
        head.body.clear();
        if ask(upstream, &head).0 == 200 {
            return Reply::Forward;
        }
        arrive.meet(2, Duration::from_secs(30));
        let (_, raw) = ask(upstream, &req.without("if-none-match"));
        answered.meet(2, Duration::from_secs(30));
        Reply::Raw(raw)
    });
    let runs = race(&server, &front, &pushers);
    let won: Vec<usize> = (0..2).filter(|&p| runs[p].code == Some(0)).collect();
    assert_eq!(
        won.len(),
        1,
        "exactly one push is believed: {:?}\nthe front saw: {:?}",
        runs.iter().map(Bounded::describe).collect::<Vec<_>>(),
        front
            .seen()
            .iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect::<Vec<_>>()
    );
    let lost = 1 - won[0];
    assert_refused(&runs[lost], 5, "store_conflict", &["not to be trusted"]);
    // Nothing lost: the push that exited 0 is the one the server holds.
    let second = generation_names(&server, "cas/racy", 2).expect("generation 2");
    assert!(second.contains(&pushers[won[0]].1), "{second}");
}

#[test]
fn a_fake_200_for_a_ref_generation_is_not_believed() {
    let Some((server, env, _)) = served_store("cas/fake") else {
        return;
    };
    let upstream = server.port();
    // A new generation is "created" without reaching the server; everything else is real.
    let front = Hostile::start(Some(upstream), move |req| {
        if req.method != "PUT" || !req.path().contains("/refs/") {
            return Reply::Forward;
        }
        let mut head = req.without("if-none-match");
        head.method = "HEAD".into();
        head.body.clear();
        if ask(upstream, &head).0 == 200 {
            return Reply::Forward;
        }
        Reply::with_body(
            200,
            &[("ETag", "\"0123456789abcdef0123456789abcdef\"")],
            b"",
        )
    });
    env.write_tree("work", &[("more.txt", b"more\n")]);
    env.save("work", &["--summary", "second"]);
    let run = bounded("fake 200", cmd(&env, &server, front.port()), &["push"]);
    assert_refused(
        &run,
        5,
        "store_conflict",
        &["not to be trusted", "refs/current"],
    );
    assert_eq!(generation_names(&server, "cas/fake", 2), None);
}
