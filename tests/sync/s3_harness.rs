//! The test S3 server itself (tests/common/s3.rs): it starts with generated credentials,
//! enforces `If-None-Match: *`, checks signatures, and the header-stripping proxy really
//! makes it accept a second conditional create.

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::s3::{S3Server, StripProxy};

/// An `Authorization` header naming `key` with a signature that is wrong for any request:
/// moto without authentication takes any (it needs one to treat the request as a user's,
/// not an anonymous one); moto with authentication must refuse it.
fn bogus_auth(key: &str) -> String {
    format!(
        "Authorization: AWS4-HMAC-SHA256 Credential={key}/20260101/us-east-1/s3/aws4_request, \
         SignedHeaders=host;x-amz-date, Signature={}",
        "0".repeat(64)
    )
}

/// One raw HTTP/1.1 request (no real signature); the status code.
fn raw(port: u16, method: &str, path: &str, headers: &[&str], body: &[u8]) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write");
    stream.write_all(body).expect("write body");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("read");
    reply
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {reply:?}"))
}

#[test]
fn server_starts_with_credentials_and_serves_its_bucket() {
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    assert!(
        server.access_key().starts_with("AKIA"),
        "{}",
        server.access_key()
    );
    assert!(server.secret_key().len() >= 20);
    assert!(
        server.list("").is_empty(),
        "the harness probe left {:?}",
        server.list("")
    );
    server.put("team/a", b"hello");
    server.put("other/b", b"!");
    assert_eq!(server.list("team/"), vec![("team/a".to_string(), 5)]);
    assert_eq!(server.get("team/a").as_deref(), Some(&b"hello"[..]));
    assert_eq!(server.get("team/missing"), None);
    server.delete("team/a");
    assert!(server.keys("team/").is_empty());
    let env = server.env();
    let endpoint = env
        .iter()
        .find(|(k, _)| k == "AWS_ENDPOINT_URL")
        .expect("endpoint");
    assert_eq!(endpoint.1, server.endpoint());
    assert!(
        env.iter()
            .any(|(k, v)| k == "AWS_EC2_METADATA_DISABLED" && v == "true")
    );
}

#[test]
fn authenticated_server_refuses_a_wrong_signature() {
    let Some(server) = S3Server::start_or_skip() else {
        return;
    };
    let path = format!("/{}/x", server.bucket());
    let auth = bogus_auth(server.access_key());
    let headers = [
        auth.as_str(),
        "x-amz-content-sha256: UNSIGNED-PAYLOAD",
        "x-amz-date: 20260101T000000Z",
    ];
    let status = raw(server.port(), "PUT", &path, &headers, b"x");
    assert_eq!(status, 403, "server log:\n{}", server.log());
    assert!(server.keys("").is_empty());
}

#[test]
fn strip_proxy_makes_the_server_accept_a_second_conditional_create() {
    if !S3Server::skip_unless_available() {
        return;
    }
    let server = S3Server::builder().no_auth().start();
    let path = format!("/{}/k", server.bucket());
    let auth = bogus_auth(server.access_key());
    let cond = [
        auth.as_str(),
        "x-amz-content-sha256: UNSIGNED-PAYLOAD",
        "If-None-Match: *",
    ];
    // Direct: the second conditional create is refused.
    assert_eq!(raw(server.port(), "PUT", &path, &cond, b"1"), 200);
    assert_eq!(raw(server.port(), "PUT", &path, &cond, b"2"), 412);
    assert_eq!(server.get("k").as_deref(), Some(&b"1"[..]));
    // Through the proxy the condition never arrives: the object is overwritten.
    let proxy = StripProxy::start(server.port(), "if-none-match");
    assert_eq!(raw(proxy.port(), "PUT", &path, &cond, b"3"), 200);
    assert_eq!(server.get("k").as_deref(), Some(&b"3"[..]));
    assert_eq!((proxy.requests(), proxy.stripped()), (1, 1));
}
