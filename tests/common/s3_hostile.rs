//! A hostile S3 server for tests: a loopback HTTP/1.1 front that a test's rule decides
//! for each request whether to forward to the real test server (moto,
//! tests/common/s3.rs; one request per connection, `Connection: close` both ways) or to
//! answer itself: an endless body, a redirect, a fake `200`, a held request. It is the
//! attacker, not a mock of baton: everything it forwards is answered by the real server.
//! Also [`run_bounded`]: baton under a data rlimit and a wall clock, so that unbounded
//! growth fails the test (an allocation failure, a kill) instead of the machine, with
//! the peak RSS and the time it took to exit.
//!
//! ```ignore
//! let front = Hostile::start(Some(server.port()), |req| {
//!     if req.is_list() { Reply::endless_chunked(200, &[], b"<x/>".to_vec()) } else { Reply::Forward }
//! });
//! let run = run_bounded(cmd, DATA_LIMIT, Duration::from_secs(60));
//! ```
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most an endless answer sends before giving up on its own (the client should have
/// hung up long before; this only keeps a broken test from running for ever).
const ENDLESS_MAX_BYTES: u64 = 8 << 30;
const ENDLESS_MAX_TIME: Duration = Duration::from_secs(120);

/// One request as the front received it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// The request target: path and query, as sent.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header of this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    pub fn query(&self) -> &str {
        self.target.split_once('?').map(|(_, q)| q).unwrap_or("")
    }

    /// A ListObjectsV2 request.
    pub fn is_list(&self) -> bool {
        self.method == "GET" && self.query().split('&').any(|p| p == "list-type=2")
    }

    /// The `prefix` of a listing, percent-decoded.
    pub fn list_prefix(&self) -> Option<String> {
        self.query()
            .split('&')
            .find_map(|p| p.strip_prefix("prefix="))
            .map(percent_decode)
    }

    /// The object key of a path-style request to `bucket`, percent-decoded.
    pub fn key(&self, bucket: &str) -> Option<String> {
        self.path()
            .strip_prefix(&format!("/{bucket}/"))
            .map(percent_decode)
    }

    /// The same request without the headers of this name.
    pub fn without(&self, name: &str) -> Request {
        let mut req = self.clone();
        req.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        req
    }

    /// The head as sent upstream: `Connection: close`, the body's own length.
    fn encode_head(&self) -> String {
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.target);
        for (name, value) in &self.headers {
            let lower = name.to_ascii_lowercase();
            if matches!(
                lower.as_str(),
                "connection" | "keep-alive" | "content-length"
            ) {
                continue;
            }
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !self.body.is_empty() || matches!(self.method.as_str(), "PUT" | "POST") {
            head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        head.push_str("Connection: close\r\n\r\n");
        head
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What the front does with a request.
pub enum Reply {
    /// Send the request upstream (as received) and relay its answer.
    Forward,
    /// Send this (modified) request upstream and relay its answer.
    ForwardAs(Request),
    /// Answer with exactly these bytes (a whole response), then close.
    Raw(Vec<u8>),
    /// Answer with `head` (status line and headers, through the blank line), then `chunk`
    /// again and again (as HTTP chunks when `chunked`) until the client hangs up.
    Endless {
        head: String,
        chunk: Vec<u8>,
        chunked: bool,
    },
}

impl Reply {
    /// A complete response with `body` and its length.
    pub fn with_body(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut raw = status_line(status);
        for (n, v) in headers {
            raw.push_str(&format!("{n}: {v}\r\n"));
        }
        raw.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        ));
        let mut raw = raw.into_bytes();
        raw.extend_from_slice(body);
        Reply::Raw(raw)
    }

    /// `status` with `headers`, then `chunk` repeated for ever in HTTP chunks.
    pub fn endless_chunked(status: u16, headers: &[(&str, &str)], chunk: Vec<u8>) -> Reply {
        let mut head = status_line(status);
        for (n, v) in headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
        Reply::Endless {
            head,
            chunk,
            chunked: true,
        }
    }
}

fn status_line(status: u16) -> String {
    let reason = match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Whatever",
    };
    format!("HTTP/1.1 {status} {reason}\r\n")
}

type Rule = dyn Fn(&Request) -> Reply + Send + Sync;

/// The front: a listener on a free loopback port and the log of what it received.
pub struct Hostile {
    port: u16,
    seen: Arc<Mutex<Vec<Request>>>,
    sent: Arc<AtomicU64>,
}

impl Hostile {
    /// Listen on a free loopback port; each request goes to `rule`, forwarded to
    /// `upstream` (a loopback port) when the rule says so.
    pub fn start(
        upstream: Option<u16>,
        rule: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> Hostile {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind hostile front");
        let port = listener.local_addr().expect("local_addr").port();
        let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
        let sent: Arc<AtomicU64> = Arc::default();
        let rule: Arc<Rule> = Arc::new(rule);
        let (seen2, sent2) = (seen.clone(), sent.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (rule, seen, sent) = (rule.clone(), seen2.clone(), sent2.clone());
                std::thread::spawn(move || {
                    let _ = serve(client, upstream, &*rule, &seen, &sent);
                });
            }
        });
        Hostile { port, seen, sent }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every request received so far, in order of arrival.
    pub fn seen(&self) -> Vec<Request> {
        self.seen.lock().expect("seen").clone()
    }

    /// Bytes sent by endless answers so far.
    pub fn endless_bytes(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

/// Read one request (head, then a `Content-Length` body); `None` on a closed connection.
fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut body = buf.split_off(end + 4);
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_string();
    let target = first.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while body.len() < len {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(Request {
        method,
        target,
        headers,
        body,
    }))
}

fn serve(
    mut client: TcpStream,
    upstream: Option<u16>,
    rule: &Rule,
    seen: &Mutex<Vec<Request>>,
    sent: &AtomicU64,
) -> std::io::Result<()> {
    let Some(req) = read_request(&mut client)? else {
        return Ok(());
    };
    seen.lock().expect("seen").push(req.clone());
    match rule(&req) {
        Reply::Forward => forward(&mut client, upstream, &req)?,
        Reply::ForwardAs(changed) => forward(&mut client, upstream, &changed)?,
        Reply::Raw(bytes) => client.write_all(&bytes)?,
        Reply::Endless {
            head,
            chunk,
            chunked,
        } => {
            client.write_all(head.as_bytes())?;
            let framed = if chunked {
                let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
                framed.extend_from_slice(&chunk);
                framed.extend_from_slice(b"\r\n");
                framed
            } else {
                chunk
            };
            let started = Instant::now();
            let mut total = 0u64;
            while total < ENDLESS_MAX_BYTES && started.elapsed() < ENDLESS_MAX_TIME {
                client.write_all(&framed)?;
                total += framed.len() as u64;
                sent.fetch_add(framed.len() as u64, Ordering::SeqCst);
            }
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    Ok(())
}

/// Send `req` to the upstream port and relay its whole answer.
fn forward(client: &mut TcpStream, upstream: Option<u16>, req: &Request) -> std::io::Result<()> {
    let port = upstream.expect("this front has no upstream to forward to");
    let mut server = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    server.write_all(req.encode_head().as_bytes())?;
    server.write_all(&req.body)?;
    server.set_read_timeout(Some(Duration::from_secs(120)))?;
    std::io::copy(&mut server, client)?;
    Ok(())
}

/// The answer to one request sent straight to a loopback port (for a rule that needs
/// to look at the real server first): its status and the whole response as received.
pub fn ask(port: u16, req: &Request) -> (u16, Vec<u8>) {
    let mut server = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect upstream");
    server
        .write_all(req.encode_head().as_bytes())
        .expect("write");
    server.write_all(&req.body).expect("write body");
    let mut reply = Vec::new();
    server.read_to_end(&mut reply).expect("read upstream");
    let status = String::from_utf8_lossy(&reply[..reply.len().min(64)])
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, reply)
}

/// A listener that answers nothing and records every connection and what arrived on it
/// (the place a redirect points to: it must never hear from baton).
pub struct Recorder {
    port: u16,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Recorder {
    pub fn start() -> Recorder {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind recorder");
        let port = listener.local_addr().expect("local_addr").port();
        let received: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let log = received.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut conn = conn;
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                        if got.windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                    log.lock().expect("recorder").push(got);
                    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                });
            }
        });
        Recorder { port, received }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// What each connection received (connections so far).
    pub fn received(&self) -> Vec<Vec<u8>> {
        self.received.lock().expect("recorder").clone()
    }
}

/// How a bounded run of baton ended.
pub struct Bounded {
    /// The exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Killed by the wall clock.
    pub timed_out: bool,
    pub elapsed: Duration,
    /// Peak resident set size (`ru_maxrss`), KiB.
    pub max_rss_kib: u64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Bounded {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.stdout).unwrap_or(serde_json::Value::Null)
    }

    pub fn describe(&self) -> String {
        format!(
            "exit {:?}, signal {:?}, timed out {}, {:.1} s, peak RSS {} MiB\nstdout: {}\nstderr: {}",
            self.code,
            self.signal,
            self.timed_out,
            self.elapsed.as_secs_f64(),
            self.max_rss_kib / 1024,
            String::from_utf8_lossy(&self.stdout),
            tail(&self.stderr, 2000)
        )
    }

    /// `error.message` of the JSON document.
    pub fn message(&self) -> String {
        self.json()["error"]["message"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
}

fn tail(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let start = text.char_indices().rev().nth(n).map_or(0, |(at, _)| at);
    text[start..].to_string()
}

/// Run `cmd` with its data segment (`RLIMIT_DATA`: heap and private writable mappings)
/// capped at `data_limit` bytes, every file it writes at 64 MiB, and at most `wall` of
/// wall time (then SIGKILLed). Unbounded growth ends in an allocation failure (SIGABRT)
/// or the kill, never in a machine out of memory.
pub fn run_bounded(mut cmd: Command, data_limit: u64, wall: Duration) -> Bounded {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe and touches only the structs on the stack.
    unsafe {
        cmd.pre_exec(move || {
            for (resource, value) in [
                (libc::RLIMIT_DATA, data_limit),
                (libc::RLIMIT_FSIZE, crate::common::CAPPED_FILE_SIZE),
            ] {
                let cap = libc::rlimit {
                    rlim_cur: value as libc::rlim_t,
                    rlim_max: value as libc::rlim_t,
                };
                if libc::setrlimit(resource, &cap) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let started = Instant::now();
    // Reaped by the wait4 below, which also gives its peak RSS.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn baton");
    let pid = child.id() as libc::pid_t;
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = pipe.read_to_end(&mut all);
            all
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let mut timed_out = false;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our child; status and usage are valid for writes.
        let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if got == pid {
            break (status, usage);
        }
        assert!(got == 0, "wait4: {}", std::io::Error::last_os_error());
        if !timed_out && started.elapsed() > wall {
            timed_out = true;
            // SAFETY: kill of our own, not yet reaped, child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = started.elapsed();
    let exited = libc::WIFEXITED(status);
    Bounded {
        code: exited.then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        timed_out,
        elapsed,
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}
