//! A controllable loopback TCP proxy for network-fault tests: it forwards each accepted
//! connection to an upstream port (a test sshd) and, per connection, passes everything,
//! drops the connection or stalls it after N bytes in one direction, counting the bytes
//! that went each way. Threads and std only.
//!
//! ```ignore
//! let proxy = FaultProxy::start(sshd.port());
//! proxy.set_fault(Fault::Drop { dir: Dir::Up, after: 4096 }); // for the next connections
//! // ... connect to proxy.port() ...
//! let conn = proxy.last().unwrap(); // conn.up(), conn.down(), conn.fired()
//! ```
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A direction of the byte stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Client to server (baton to sshd): requests, uploads.
    Up,
    /// Server to client: replies, downloads.
    Down,
}

/// What the proxy does to the connections it accepts from now on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything.
    Pass,
    /// Forward exactly `after` bytes in `dir`, then close both sockets (both ways), as a
    /// link or a middlebox that dies would.
    Drop { dir: Dir, after: u64 },
    /// Forward exactly `after` bytes in `dir`, then forward nothing more either way while
    /// keeping both sockets open (a black-holed link), until [`FaultProxy::release`] or
    /// until one side closes.
    Stall { dir: Dir, after: u64 },
}

/// One proxied connection: its byte counts and whether its fault fired.
pub struct Conn {
    fault: Fault,
    up: AtomicU64,
    down: AtomicU64,
    fired: AtomicBool,
    stalled: AtomicBool,
    /// The `release` generation when the stall began: a later one ends it.
    stall_gen: AtomicU64,
    closed: AtomicBool,
    /// Pump threads that have finished (0, 1 or 2).
    finished: AtomicUsize,
    client: TcpStream,
    server: TcpStream,
}

impl Conn {
    /// Bytes forwarded from the client to the server.
    pub fn up(&self) -> u64 {
        self.up.load(Ordering::SeqCst)
    }

    /// Bytes forwarded from the server to the client.
    pub fn down(&self) -> u64 {
        self.down.load(Ordering::SeqCst)
    }

    pub fn bytes(&self, dir: Dir) -> u64 {
        match dir {
            Dir::Up => self.up(),
            Dir::Down => self.down(),
        }
    }

    /// Whether the fault took effect (the byte threshold was reached).
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    pub fn fault(&self) -> Fault {
        self.fault
    }

    /// Both directions have stopped (each side closed, or the fault closed them).
    pub fn done(&self) -> bool {
        self.finished.load(Ordering::SeqCst) == 2
    }

    /// Wait (at most `limit`) until both directions have stopped, so the counts are final.
    pub fn wait_done(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.done() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }
}

struct Shared {
    upstream: AtomicU16,
    fault: Mutex<Fault>,
    conns: Mutex<Vec<Arc<Conn>>>,
    closing: AtomicBool,
    /// Bumped by `release`: stalled connections resume forwarding.
    release: AtomicU64,
}

/// The proxy: a listening port on 127.0.0.1 and its threads. Dropping it closes every
/// connection and stops the threads.
pub struct FaultProxy {
    port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// A proxy to 127.0.0.1:`upstream`, passing everything until told otherwise.
    pub fn start(upstream: u16) -> FaultProxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind proxy");
        let port = listener.local_addr().expect("proxy addr").port();
        let shared = Arc::new(Shared {
            upstream: AtomicU16::new(upstream),
            fault: Mutex::new(Fault::Pass),
            conns: Mutex::new(Vec::new()),
            closing: AtomicBool::new(false),
            release: AtomicU64::new(0),
        });
        let accept_shared = shared.clone();
        let accept = std::thread::spawn(move || accept_loop(listener, accept_shared));
        FaultProxy {
            port,
            shared,
            accept: Some(accept),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Forward new connections to another upstream port (a restarted server).
    pub fn set_upstream(&self, port: u16) {
        self.shared.upstream.store(port, Ordering::SeqCst);
    }

    /// The fault applied to connections accepted from now on.
    pub fn set_fault(&self, fault: Fault) {
        *self.shared.fault.lock().unwrap() = fault;
    }

    /// Let stalled connections forward again.
    pub fn release(&self) {
        self.shared.release.fetch_add(1, Ordering::SeqCst);
    }

    /// Every connection accepted so far, oldest first.
    pub fn connections(&self) -> Vec<Arc<Conn>> {
        self.shared.conns.lock().unwrap().clone()
    }

    pub fn last(&self) -> Option<Arc<Conn>> {
        self.shared.conns.lock().unwrap().last().cloned()
    }

    /// Forget the connections seen so far (closing any still open).
    pub fn reset(&self) {
        for conn in self.shared.conns.lock().unwrap().drain(..) {
            conn.close();
        }
    }

    /// Wait (at most `limit`) until the newest connection's fault fired.
    pub fn wait_fired(&self, limit: Duration) -> Option<Arc<Conn>> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(conn) = self.last()
                && conn.fired()
            {
                return Some(conn);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        self.release();
        for conn in self.shared.conns.lock().unwrap().iter() {
            conn.close();
        }
        // Wake the accept loop so that it sees `closing`.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for client in listener.incoming() {
        if shared.closing.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let upstream = shared.upstream.load(Ordering::SeqCst);
        let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream)) else {
            // Nothing listens upstream (a killed server): the client sees a closed link.
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let fault = *shared.fault.lock().unwrap();
        let conn = Arc::new(Conn {
            fault,
            up: AtomicU64::new(0),
            down: AtomicU64::new(0),
            fired: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            stall_gen: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            finished: AtomicUsize::new(0),
            client: client.try_clone().expect("clone client socket"),
            server: server.try_clone().expect("clone server socket"),
        });
        shared.conns.lock().unwrap().push(conn.clone());
        for dir in [Dir::Up, Dir::Down] {
            let (from, to) = match dir {
                Dir::Up => (client.try_clone(), server.try_clone()),
                Dir::Down => (server.try_clone(), client.try_clone()),
            };
            let (Ok(from), Ok(to)) = (from, to) else {
                conn.close();
                continue;
            };
            let (conn, shared) = (conn.clone(), shared.clone());
            std::thread::spawn(move || {
                pump(&conn, &shared, dir, from, to);
                conn.finished.fetch_add(1, Ordering::SeqCst);
            });
        }
    }
}

/// Copy `from` to `to`, counting into `dir`'s counter and applying the connection's fault.
fn pump(conn: &Conn, shared: &Shared, dir: Dir, mut from: TcpStream, mut to: TcpStream) {
    let counter = match dir {
        Dir::Up => &conn.up,
        Dir::Down => &conn.down,
    };
    let (threshold, drops) = match conn.fault {
        Fault::Pass => (None, false),
        Fault::Drop { dir: d, after } => (Some(after).filter(|_| d == dir), true),
        Fault::Stall { dir: d, after } => (Some(after).filter(|_| d == dir), false),
    };
    // A fault at byte 0 fires before anything flows.
    if threshold == Some(0) {
        fire(conn, shared, drops);
        if drops {
            return;
        }
    }
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut chunk = &buf[..n];
        let mut fire_now = false;
        if let Some(after) = threshold
            && !conn.fired()
        {
            let sent = counter.load(Ordering::SeqCst);
            if sent + n as u64 >= after {
                chunk = &chunk[..(after - sent) as usize];
                fire_now = true;
            }
        }
        if !wait_unstalled(conn, shared) {
            break;
        }
        if !chunk.is_empty() {
            if to.write_all(chunk).is_err() {
                break;
            }
            counter.fetch_add(chunk.len() as u64, Ordering::SeqCst);
        }
        if fire_now {
            fire(conn, shared, drops);
            if drops {
                return;
            }
            // The rest of this read waits until the stall is released.
            let rest = &buf[chunk.len()..n];
            if !wait_unstalled(conn, shared) {
                break;
            }
            if to.write_all(rest).is_err() {
                break;
            }
            counter.fetch_add(rest.len() as u64, Ordering::SeqCst);
        }
    }
    // One side closed (or the proxy is closing): pass the close on, both ways.
    conn.close();
}

fn fire(conn: &Conn, shared: &Shared, drops: bool) {
    if drops {
        conn.close();
    } else {
        conn.stall_gen
            .store(shared.release.load(Ordering::SeqCst), Ordering::SeqCst);
        conn.stalled.store(true, Ordering::SeqCst);
    }
    conn.fired.store(true, Ordering::SeqCst);
}

/// Block while the connection is stalled; false when it should end instead (closed, or
/// the proxy is closing). A stall ends when `release` is called after it began.
fn wait_unstalled(conn: &Conn, shared: &Shared) -> bool {
    loop {
        if shared.closing.load(Ordering::SeqCst) || conn.closed.load(Ordering::SeqCst) {
            return false;
        }
        if !conn.stalled.load(Ordering::SeqCst) {
            return true;
        }
        if shared.release.load(Ordering::SeqCst) != conn.stall_gen.load(Ordering::SeqCst) {
            conn.stalled.store(false, Ordering::SeqCst);
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
