//! A real S3-compatible server on 127.0.0.1 for integration tests: moto's S3 server
//! (PyPI `moto[s3]` + flask, pinned in `.ci/run`) run by `tests/common/s3_server.py`, with
//! generated credentials (an IAM user and access key made at start), one bucket, and the
//! harness's own `If-None-Match: *` probe before any test runs (the start panics if the
//! server does not refuse the second conditional create). With authentication on (the
//! default), moto checks every request's SigV4 signature and key: a wrong secret gets 403
//! `SignatureDoesNotMatch`, an unknown key 403 `InvalidAccessKeyId`.
//!
//! Why moto (looked for issue 15): no production object store installs prebuilt and
//! standalone from the registries this project may use. PyPI and npm have no MinIO,
//! Garage, RustFS or radosgw server package; Garage and RustFS are crates to build (and
//! `s3s-fs` 0.14.1, the lightest S3 server on crates.io, builds in ~3.5 minutes, more than
//! cold CI can afford); Debian 12 has `radosgw` 16.2.15, but Ceph Pacific's gateway needs a
//! running RADOS cluster (monitor, manager, OSDs: dozens of packages and a cluster
//! bootstrap per run; the standalone SQLite store came in later releases). moto installs
//! from PyPI in ~20 s and enforces `If-None-Match` on PutObject; the probe here proves it
//! on every start, so a moto release that stopped enforcing it would fail every S3 test
//! loudly instead of letting the compare-and-swap tests pass untested.
//!
//! moto keeps its state in memory: [`S3Server::kill`] loses every object, so "a server
//! that dies mid-push and comes back" is played by a `FaultProxy` (tests/common/faultproxy.rs) in
//! front of it that cuts the connection (the server's state survives, as a real store's
//! would). [`StripProxy`] forwards requests with one header removed (`If-None-Match`), a
//! server that silently ignores conditions as seen from the client; use it with an
//! unauthenticated server ([`S3Builder::no_auth`]), since removing a signed header breaks
//! the SigV4 signature.
//!
//! ```ignore
//! let Some(server) = S3Server::start_or_skip() else { return };
//! env.cmd().envs(server.env()).args(["push", &server.url("team")]);
//! let keys = server.list("team/"); // [(key, size)]
//! ```
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The moto version `.ci/run` installs (and the one these tests were written against).
pub const MOTO_VERSION: &str = "5.2.1";

const LAUNCHER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/s3_server.py");

/// Whether moto's server and boto3 can be imported by `python3` here (checked once).
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        Command::new("python3")
            .args(["-c", "import moto.server, boto3, flask"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    })
}

/// Options for [`S3Server`]; start with [`S3Server::builder`].
#[derive(Clone, Debug)]
pub struct S3Builder {
    auth: bool,
    bucket: String,
}

impl S3Builder {
    /// Leave moto's request authentication off: any key and signature are accepted (for
    /// [`StripProxy`], which breaks signatures by removing a signed header).
    pub fn no_auth(mut self) -> Self {
        self.auth = false;
        self
    }

    /// The bucket to create (default `baton-test`).
    pub fn bucket(mut self, name: &str) -> Self {
        self.bucket = name.to_string();
        self
    }

    pub fn start(self) -> S3Server {
        S3Server::start_with(self)
    }
}

/// A running moto S3 server with one bucket and a user's credentials for it.
pub struct S3Server {
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// The command channel to the launcher (see s3_server.py); dropping stdin stops it.
    io: Mutex<Option<(ChildStdin, BufReader<ChildStdout>)>>,
    port: u16,
    bucket: String,
    access_key: String,
    secret_key: String,
    auth: bool,
}

impl S3Server {
    pub fn builder() -> S3Builder {
        S3Builder {
            auth: true,
            bucket: "baton-test".to_string(),
        }
    }

    /// An authenticated server with the bucket `baton-test`.
    pub fn start() -> S3Server {
        Self::builder().start()
    }

    /// [`S3Server::start`], or `None` with a loud note when moto is not installed here
    /// (under `CI=true` that fails the test instead: see `common::precondition`).
    pub fn start_or_skip() -> Option<S3Server> {
        Self::skip_unless_available().then(Self::start)
    }

    /// Whether the S3 tests can run here; false (after the note) means: return now.
    pub fn skip_unless_available() -> bool {
        crate::common::precondition(
            available(),
            &format!(
                "python3 with moto[s3]=={MOTO_VERSION} and flask (pip install \
                 'moto[s3]=={MOTO_VERSION}' flask flask-cors; .ci/run does)"
            ),
        )
    }

    fn start_with(opts: S3Builder) -> S3Server {
        assert!(
            available(),
            "python3 cannot import moto.server: pip install 'moto[s3]=={MOTO_VERSION}' flask flask-cors \
             (.ci/run does)"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("server.log");
        let mut cmd = Command::new("python3");
        cmd.arg(LAUNCHER).arg(&opts.bucket);
        if opts.auth {
            cmd.arg("--auth");
        }
        // Nothing of the test environment's AWS settings may reach the server's own
        // boto3 client (it must talk to itself, with the credentials it made).
        for (name, _) in std::env::vars() {
            if name.starts_with("AWS_") {
                cmd.env_remove(name);
            }
        }
        let mut child = cmd
            .env("HOME", dir.path())
            .env("PYTHONUNBUFFERED", "1")
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("server log"))
            .spawn()
            .expect("start python3 tests/common/s3_server.py");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut first = String::new();
        let read = stdout.read_line(&mut first);
        if read.map(|n| n == 0).unwrap_or(true) {
            let status = child.wait().expect("wait for the server");
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            // Exit 3 is the launcher's probe: the server accepted a second conditional
            // create. Every S3 test must stop here, loudly.
            panic!(
                "the test S3 server did not start ({status}): {}\n{log}",
                if status.code() == Some(3) {
                    "it does NOT enforce If-None-Match, so the compare-and-swap tests \
                     would prove nothing; pin a moto release that does"
                } else {
                    "see its log below"
                }
            );
        }
        let info: serde_json::Value = serde_json::from_str(first.trim()).expect("server info line");
        let field = |name: &str| info[name].as_str().expect("server info").to_string();
        let port = u16::try_from(info["port"].as_u64().expect("port")).expect("port");
        S3Server {
            child: Some(child),
            io: Mutex::new(Some((stdin, stdout))),
            port,
            bucket: opts.bucket,
            access_key: field("access_key"),
            secret_key: field("secret_key"),
            auth: opts.auth,
            dir,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// Whether the server checks signatures and keys.
    pub fn authenticates(&self) -> bool {
        self.auth
    }

    /// `s3://BUCKET/PREFIX` (or `s3://BUCKET` for an empty prefix).
    pub fn url(&self, prefix: &str) -> String {
        if prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{prefix}", self.bucket)
        }
    }

    /// The environment a `baton` command needs to reach this server directly.
    pub fn env(&self) -> Vec<(String, String)> {
        self.env_via(self.port)
    }

    /// The same, with the endpoint on another loopback port (a proxy in front).
    pub fn env_via(&self, port: u16) -> Vec<(String, String)> {
        let mut env = vec![
            (
                "AWS_ENDPOINT_URL".into(),
                format!("http://127.0.0.1:{port}"),
            ),
            ("AWS_ACCESS_KEY_ID".into(), self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY".into(), self.secret_key.clone()),
        ];
        env.extend(no_metadata_env());
        env
    }

    /// Run one launcher command; its JSON answer.
    fn command(&self, line: &str) -> serde_json::Value {
        let mut io = self.io.lock().expect("server channel");
        let (stdin, stdout) = io.as_mut().expect("the server was killed");
        writeln!(stdin, "{line}").expect("write to the server's launcher");
        stdin.flush().expect("flush");
        let mut answer = String::new();
        let n = stdout.read_line(&mut answer).expect("read the launcher");
        assert!(n > 0, "the S3 server's launcher exited: {}", self.log());
        serde_json::from_str(answer.trim()).expect("launcher answer")
    }

    /// Every object under `prefix` (sorted by key) with its size, straight from the
    /// server (not through baton).
    pub fn list(&self, prefix: &str) -> Vec<(String, u64)> {
        let answer = self.command(&format!("list {prefix}"));
        answer
            .as_array()
            .expect("list answer")
            .iter()
            .map(|entry| {
                (
                    entry[0].as_str().expect("key").to_string(),
                    entry[1].as_u64().expect("size"),
                )
            })
            .collect()
    }

    /// The keys under `prefix`.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        self.list(prefix).into_iter().map(|(k, _)| k).collect()
    }

    /// An object's bytes, or `None` when there is no such key.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        let answer = self.command(&format!("get {key}"));
        answer.as_str().map(hex_decode)
    }

    /// Write an object unconditionally (planting test data behind baton's back).
    pub fn put(&self, key: &str, data: &[u8]) {
        self.command(&format!("put {key} {}", hex_encode(data)));
    }

    pub fn delete(&self, key: &str) {
        self.command(&format!("delete {key}"));
    }

    /// Every object under `prefix/` copied into `dest` (made anew): the store the bucket
    /// holds, with the directories a store has and its private modes, so `baton --store
    /// DEST` reads it as it reads the remote.
    pub fn copy_store(&self, prefix: &str, dest: &Path) {
        if dest.exists() {
            std::fs::remove_dir_all(dest).expect("remove the old copy");
        }
        for (key, _) in self.list(&format!("{prefix}/")) {
            let rel = key
                .strip_prefix(&format!("{prefix}/"))
                .expect("under the prefix");
            let path = dest.join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, self.get(&key).expect("listed key")).expect("write");
        }
        for dir in [
            "objects",
            "packs",
            "refs/current",
            "refs/targets",
            "staging",
        ] {
            std::fs::create_dir_all(dest.join(dir)).expect("mkdir");
        }
        // Private, as a store made by baton is (verify checks the modes).
        let out = Command::new("chmod")
            .arg("-R")
            .arg("u=rwX,go=")
            .arg(dest)
            .output()
            .expect("run chmod");
        assert!(out.status.success(), "chmod: {out:?}");
    }

    /// Make the objects under `prefix/` the files of `dir` (a copy from
    /// [`S3Server::copy_store`] changed behind baton's back): what changed is written,
    /// what is gone is deleted.
    pub fn upload_store(&self, dir: &Path, prefix: &str) {
        let mut files = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(path) = stack.pop() {
            for entry in std::fs::read_dir(&path).expect("read_dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let rel = path.strip_prefix(dir).expect("under dir");
                    let rel = rel.to_str().expect("UTF-8 store path");
                    files.push((format!("{prefix}/{rel}"), path));
                }
            }
        }
        for key in self.keys(&format!("{prefix}/")) {
            if !files.iter().any(|(k, _)| *k == key) {
                self.delete(&key);
            }
        }
        for (key, path) in files {
            let bytes = std::fs::read(&path).expect("read");
            if self.get(&key).as_deref() != Some(bytes.as_slice()) {
                self.put(&key, &bytes);
            }
        }
    }

    /// The server's log (its stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// SIGKILL the server now (its objects are gone: moto keeps them in memory).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Ok(mut io) = self.io.lock() {
            io.take();
        }
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }
}

/// `baton` reaching this server with its credentials, retrying for 5 s at most (a
/// failing request fails the test soon); a failure shows the server's log.
impl crate::common::Via for S3Server {
    fn cmd(&self, env: &crate::common::Env) -> Command {
        let mut cmd = env.cmd();
        cmd.envs(self.env()).env("BATON_S3_RETRY_TIMEOUT", "5");
        cmd
    }

    fn context(&self) -> String {
        format!("\nserver log:\n{}", self.log())
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Variables that keep the AWS credential chain off the EC2 instance-metadata endpoint
/// (169.254.169.254), so a test without credentials fails at once instead of waiting on
/// a link-local address: the AWS SDKs' switch (baton's S3 backend asks the instance
/// metadata only when it says `false`), and object_store's metadata endpoint pointed at a
/// closed loopback port.
pub fn no_metadata_env() -> Vec<(String, String)> {
    vec![
        ("AWS_REGION".into(), "us-east-1".into()),
        ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
        // Port 1 (tcpmux): nothing listens there, so a connection is refused at once.
        ("AWS_METADATA_ENDPOINT".into(), "http://127.0.0.1:1".into()),
    ]
}

fn hex_encode(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex from the launcher"))
        .collect()
}

/// A loopback HTTP proxy that forwards every request to `upstream` with one header
/// removed (case-insensitive), one request per connection (it adds `Connection: close`
/// both ways). Counts the requests it forwarded and the headers it removed.
pub struct StripProxy {
    port: u16,
    requests: Arc<AtomicUsize>,
    stripped: Arc<AtomicUsize>,
    bytes_up: Arc<AtomicU64>,
}

impl StripProxy {
    pub fn start(upstream: u16, header: &str) -> StripProxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind proxy");
        let port = listener.local_addr().expect("local_addr").port();
        let proxy = StripProxy {
            port,
            requests: Arc::default(),
            stripped: Arc::default(),
            bytes_up: Arc::default(),
        };
        let (requests, stripped, bytes_up) = (
            proxy.requests.clone(),
            proxy.stripped.clone(),
            proxy.bytes_up.clone(),
        );
        let header = header.to_ascii_lowercase();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (requests, stripped, bytes_up) =
                    (requests.clone(), stripped.clone(), bytes_up.clone());
                let header = header.clone();
                std::thread::spawn(move || {
                    let _ = relay(client, upstream, &header, &requests, &stripped, &bytes_up);
                });
            }
        });
        proxy
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Requests forwarded so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Headers removed so far.
    pub fn stripped(&self) -> usize {
        self.stripped.load(Ordering::SeqCst)
    }
}

/// Read an HTTP head (through the blank line); the head and any body bytes read past it.
fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok(Some((String::from_utf8_lossy(&buf).into_owned(), rest)));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The head without `drop` headers and any `Connection` header, plus `Connection: close`;
/// and how many `drop` headers it had.
fn rewrite_head(head: &str, drop: &str) -> (String, usize) {
    let mut out = String::with_capacity(head.len() + 20);
    let mut removed = 0;
    for line in head.trim_end_matches("\r\n").split("\r\n") {
        let name = line
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if name == drop {
            removed += 1;
            continue;
        }
        if name == "connection" || name == "keep-alive" {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    (out, removed)
}

fn relay(
    mut client: TcpStream,
    upstream: u16,
    drop: &str,
    requests: &AtomicUsize,
    stripped: &AtomicUsize,
    bytes_up: &Arc<AtomicU64>,
) -> std::io::Result<()> {
    let Some((head, rest)) = read_head(&mut client)? else {
        return Ok(());
    };
    let mut server = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream))?;
    let (head, removed) = rewrite_head(&head, drop);
    stripped.fetch_add(removed, Ordering::SeqCst);
    requests.fetch_add(1, Ordering::SeqCst);
    server.write_all(head.as_bytes())?;
    server.write_all(&rest)?;
    // The rest of the request body, as it comes.
    let (mut from_client, mut to_server) = (client.try_clone()?, server.try_clone()?);
    let counter = bytes_up.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n) = from_client.read(&mut buf) {
            if n == 0 || to_server.write_all(&buf[..n]).is_err() {
                break;
            }
            counter.fetch_add(n as u64, Ordering::SeqCst);
        }
    });
    server.set_read_timeout(Some(Duration::from_secs(120)))?;
    if let Some((head, body)) = read_head(&mut server)? {
        let (head, _) = rewrite_head(&head, "");
        client.write_all(head.as_bytes())?;
        client.write_all(&body)?;
        std::io::copy(&mut server, &mut client)?;
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
    Ok(())
}
