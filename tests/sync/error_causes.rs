//! A failure's cause chain as `--verbose` and `--json` show it, on real failures: an S3
//! endpoint that refuses connections (the HTTP layers under the request), a port that
//! answers but is no SSH server (libssh2's error code), and a refused SSH connection,
//! whose message already says it all (no cause repeated). Without `--verbose` the error
//! stays one line.

use std::io::Write;
use std::net::TcpListener;
use std::process::Output;

use serde_json::Value;

use crate::common::{Env, text};

/// A loopback port that was just free: nothing listens, every connect is refused.
fn refused_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A store with one saved bundle and the target `origin` at `url`.
fn seeded(url: &str) -> Env {
    let env = Env::new();
    env.init();
    env.write_tree("work", &[("handoff.md", b"# handoff\n")]);
    env.save("work", &["--summary", "seed"]);
    env.ok(&["target", "add", "origin", url]);
    env
}

fn stderr_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

/// `baton push` three ways: plain, `--verbose`, and `--json --verbose` (parsed).
fn push_three_ways(env: &Env, extra_env: &[(&str, String)]) -> (Output, Output, Value) {
    let run = |flags: &[&str]| {
        let mut cmd = env.cmd();
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd.args(flags).arg("push").output().expect("run baton")
    };
    let plain = run(&[]);
    let verbose = run(&["--verbose"]);
    let json = run(&["--json", "--verbose"]);
    let doc: Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", text(&json)));
    (plain, verbose, doc)
}

/// The shared checks: the plain error is one line, `--verbose` adds exactly the JSON
/// document's `causes` as `caused by:` lines, and no cause repeats the error line or
/// another cause. Returns the causes.
fn check_chain(plain: &Output, verbose: &Output, doc: &Value, exit: i32) -> Vec<String> {
    assert_eq!(plain.status.code(), Some(exit), "{}", text(plain));
    assert_eq!(verbose.status.code(), Some(exit), "{}", text(verbose));
    assert_eq!(doc["error"]["exit_code"], exit, "{doc}");
    let plain_lines = stderr_lines(plain);
    assert_eq!(plain_lines.len(), 1, "one error line: {plain_lines:?}");
    assert!(plain_lines[0].starts_with("error: "), "{plain_lines:?}");
    let lines = stderr_lines(verbose);
    assert!(lines[0].starts_with("error: "), "{lines:?}");
    let causes: Vec<String> = doc["error"]["causes"]
        .as_array()
        .unwrap_or_else(|| panic!("no causes array: {doc}"))
        .iter()
        .map(|c| c.as_str().expect("a cause is a string").to_string())
        .collect();
    let shown: Vec<&str> = lines[1..]
        .iter()
        .map(|l| {
            l.strip_prefix("caused by: ")
                .unwrap_or_else(|| panic!("not a cause line: {l:?} in {lines:?}"))
        })
        .collect();
    // The same chain both ways (the runs differ only in timings, so compare the shape).
    assert_eq!(shown.len(), causes.len(), "{lines:?} vs {causes:?}");
    let message = doc["error"]["message"].as_str().unwrap_or("");
    for (i, cause) in causes.iter().enumerate() {
        assert!(!cause.is_empty() && !cause.contains('\n'), "{causes:?}");
        assert!(
            !message.contains(cause.as_str()),
            "{cause:?} repeats {message:?}"
        );
        assert!(
            !causes[..i].iter().any(|c| c.contains(cause.as_str())),
            "{cause:?} shown twice: {causes:?}"
        );
    }
    causes
}

#[test]
fn verbose_and_json_show_the_http_layers_under_a_refused_s3_connection() {
    let port = refused_port();
    let env = seeded("s3://bucket/team");
    let mut vars: Vec<(&str, String)> = vec![
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE".into()),
        ("AWS_SECRET_ACCESS_KEY", "not-a-secret".into()),
        ("BATON_S3_RETRY_TIMEOUT", "1".into()),
    ];
    for (k, v) in [
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1"),
    ] {
        vars.push((k, v.to_string()));
    }
    let (plain, verbose, doc) = push_three_ways(&env, &vars);
    assert_eq!(doc["error"]["code"], "transport", "{doc}");
    let message = doc["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.to_lowercase().contains("connection refused"),
        "{message}"
    );
    let causes = check_chain(&plain, &verbose, &doc, 7);
    // What the message leaves out: the HTTP client's layers down to the connect.
    assert!(
        causes.iter().any(|c| c.contains("error sending request")),
        "{causes:?}"
    );
    assert!(
        causes.iter().any(|c| c.to_lowercase().contains("connect")),
        "{causes:?}"
    );
}

#[test]
fn verbose_and_json_show_libssh2s_code_when_a_port_is_no_ssh_server() {
    // A real listener that answers like a web server and hangs up.
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().take(3).flatten() {
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        }
    });
    let env = seeded(&format!("ssh://tester@127.0.0.1:{port}/srv/store"));
    let (plain, verbose, doc) = push_three_ways(&env, &[]);
    assert_eq!(doc["error"]["code"], "transport", "{doc}");
    let message = doc["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("SSH handshake with"), "{message}");
    let causes = check_chain(&plain, &verbose, &doc, 7);
    assert!(
        causes
            .iter()
            .any(|c| c.starts_with("libssh2 error Session(-")),
        "{causes:?}"
    );
}

#[test]
fn a_refused_ssh_connection_repeats_no_cause_the_message_already_says() {
    let port = refused_port();
    let env = seeded(&format!("ssh://tester@127.0.0.1:{port}/srv/store"));
    let (plain, verbose, doc) = push_three_ways(&env, &[]);
    let message = doc["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("Connection refused (os error 111)"),
        "{message}"
    );
    // The io error is the cause, and the message already ends with it: nothing to add.
    let causes = check_chain(&plain, &verbose, &doc, 7);
    assert_eq!(causes, Vec::<String>::new());
    assert_eq!(stderr_lines(&verbose), stderr_lines(&plain));
}
