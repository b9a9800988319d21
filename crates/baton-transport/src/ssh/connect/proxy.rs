//! The link under an SSH session when the server is not dialled directly: `ProxyJump`
//! (an SSH connection to a jump host forwards a TCP connection, `direct-tcpip`, relayed
//! to the session through a socket pair) and `ProxyCommand` (a command whose standard
//! input and output are the other end of the pair). libssh2 needs a socket it can poll,
//! so both become one end of a Unix socket pair.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::*;
use crate::url::SshHop;

/// How many jump hosts one connection may pass through (a ProxyJump that leads back to
/// itself in the config would otherwise never end).
const MAX_HOPS: usize = 8;

/// How long the relay waits for either side before looking again: data libssh2 has
/// already read from the jump host's socket but not handed out shows on no descriptor.
const RELAY_TICK_MS: i32 = 50;

/// The socket the session runs over (a TCP connection or one end of a pair), and what
/// keeps it going.
pub(super) struct Link {
    pub(super) stream: OwnedFd,
    /// A second descriptor of the stream, to tell a closed link from a refused key.
    pub(super) peek: Option<OwnedFd>,
    pub(super) via: Via,
}

impl Link {
    fn new(stream: impl Into<OwnedFd>, via: Via) -> Link {
        let stream = stream.into();
        Link {
            peek: stream.try_clone().ok(),
            stream,
            via,
        }
    }
}

/// What a connection keeps alive besides its own socket.
pub enum Via {
    Direct,
    /// The relay thread owns the jump host's connection; it ends when the session's end
    /// of the pair closes (or the jump host's side does).
    Jump {
        hops: String,
    },
    Command(ProxyCommand),
}

impl Via {
    /// ` through jump host H` / ` through ProxyCommand`, for messages.
    pub(super) fn describe(&self) -> String {
        match self {
            Via::Direct => String::new(),
            Via::Jump { hops } => format!(" through jump host {hops}"),
            Via::Command(_) => " through ProxyCommand".to_string(),
        }
    }

    /// Why a link through a proxy command broke, when it did because the command ended.
    pub(super) fn command_exit(&mut self) -> Option<String> {
        match self {
            Via::Command(cmd) => cmd.exited(),
            _ => None,
        }
    }
}

/// A running ProxyCommand, ended when the connection is dropped.
pub struct ProxyCommand {
    child: Child,
    command: String,
}

impl ProxyCommand {
    fn exited(&mut self) -> Option<String> {
        // It may still be writing its last words to stderr; a moment lets it finish.
        for _ in 0..20 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(format!("ProxyCommand `{}` ended ({status})", self.command));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for ProxyCommand {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // OpenSSH hangs up on its proxy command; one that ignores that is killed.
        // SAFETY: kill(2) on our own child, which has not been reaped (try_wait said so).
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGHUP);
        }
        for _ in 0..20 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Open the link `res` describes; `hops` is how many jump hosts were passed to get here.
pub(super) fn open_link(res: &Resolved, opts: &ConnectOptions, hops: usize) -> Result<Link> {
    match &res.route {
        Route::Direct => Ok(Link::new(
            tcp_connect(&res.host, res.port, res.timeout)?,
            Via::Direct,
        )),
        Route::Jump(list) => jump(res, list, opts, hops),
        Route::Command(command) => proxy_command(res, command),
    }
}

fn jump(res: &Resolved, list: &[SshHop], opts: &ConnectOptions, hops: usize) -> Result<Link> {
    if hops + list.len() > MAX_HOPS {
        return Err(Error::usage(format!(
            "more than {MAX_HOPS} jump hosts on the way to {}",
            host_port(&res.host, res.port)
        ))
        .with_hint(format!(
            "check ProxyJump in {}: a jump host whose own ProxyJump leads back to it never ends (exclude it, e.g. `Host * !bastion`)",
            res.config_path.display()
        )));
    }
    // `-J a,b c`: c is reached through b, and b through a; a's own config applies to a.
    let Some((last, before)) = list.split_last() else {
        return open_link(res, opts, hops);
    };
    let hop_target = SshTarget {
        host: last.host.clone(),
        user: last.user.clone(),
        port: last.port,
        jump: (!before.is_empty()).then(|| before.to_vec()),
    };
    let jump_conn = connect_hop(&hop_target, opts, hops + before.len() + 1)?;
    let name = host_port(&jump_conn.host, jump_conn.port);
    let where_ = host_port(&res.host, res.port);
    let channel = jump_conn
        .session
        .channel_direct_tcpip(&res.host, res.port, None)
        .map_err(|e| {
            Error::new(
                ErrorKind::Transport,
                format!("the jump host {name} could not connect to {where_}: {}", e.message()),
            )
            .with_hint(format!(
                "check that {where_} is reachable from {name}, and that its sshd allows TCP forwarding (AllowTcpForwarding)"
            ))
            .with_source(TransportError::from(e))
        })?;
    let (ours, theirs) = socket_pair()?;
    let relay = Relay::new(jump_conn, channel, theirs)?;
    std::thread::Builder::new()
        .name("baton-ssh-jump".to_string())
        .spawn(move || relay.run())
        .map_err(|e| Error::other(format!("cannot start the jump host relay: {e}")))?;
    Ok(Link::new(ours, Via::Jump { hops: name }))
}

fn proxy_command(res: &Resolved, command: &str) -> Result<Link> {
    let (ours, theirs) = socket_pair()?;
    let stdin = theirs
        .try_clone()
        .map_err(|e| Error::other(format!("cannot set up the ProxyCommand's input: {e}")))?;
    let shell = std::env::var_os("SHELL")
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".into());
    // As OpenSSH runs it: `exec` so that the command itself is the child hung up on.
    let child = Command::new(&shell)
        .arg("-c")
        .arg(format!("exec {command}"))
        .stdin(Stdio::from(OwnedFd::from(stdin)))
        .stdout(Stdio::from(OwnedFd::from(theirs)))
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            Error::new(
                ErrorKind::Transport,
                format!(
                    "cannot run the ProxyCommand for {} ({}): {e}",
                    host_port(&res.host, res.port),
                    Path::new(&shell).display()
                ),
            )
            .with_hint(format!(
                "check ProxyCommand in {}",
                res.config_path.display()
            ))
            .with_source(e)
        })?;
    Ok(Link::new(
        ours,
        Via::Command(ProxyCommand {
            child,
            command: command.to_string(),
        }),
    ))
}

fn socket_pair() -> Result<(UnixStream, UnixStream)> {
    UnixStream::pair().map_err(|e| Error::other(format!("cannot create a socket pair: {e}")))
}

/// Moves bytes between the session's end of the socket pair and the forwarded channel of
/// the jump host's connection, both ways, until either side ends.
struct Relay {
    // Field order is drop order: the channel before the session it belongs to.
    channel: ssh2::Channel,
    jump: Connection,
    local: UnixStream,
}

const RELAY_BUF: usize = 64 * 1024;

/// One direction's bytes read but not yet written, in a buffer of its own.
struct Pending {
    buf: Box<[u8]>,
    at: usize,
    end: usize,
}

/// What one read or write of the relay did.
enum Step {
    Moved(usize),
    Blocked,
    /// A read of nothing: the end of that side's stream (the channel: see its `eof`).
    End,
    Broken,
}

impl Step {
    fn of(result: io::Result<usize>) -> Step {
        match result {
            Ok(0) => Step::End,
            Ok(n) => Step::Moved(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Step::Blocked,
            Err(_) => Step::Broken,
        }
    }
}

impl Pending {
    fn new() -> Pending {
        Pending {
            buf: vec![0u8; RELAY_BUF].into_boxed_slice(),
            at: 0,
            end: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.at == self.end
    }

    /// Read into the (empty) buffer.
    fn fill(&mut self, from: &mut impl Read) -> Step {
        let step = Step::of(from.read(&mut self.buf));
        if let Step::Moved(n) = step {
            (self.at, self.end) = (0, n);
        }
        step
    }

    /// Write what the buffer holds, or some of it.
    fn drain(&mut self, to: &mut impl Write) -> Step {
        let step = Step::of(to.write(&self.buf[self.at..self.end]));
        if let Step::Moved(n) = step {
            self.at += n;
        }
        step
    }
}

/// The forwarded channel's receive window. libssh2 opens a `direct-tcpip` channel with
/// 2 MiB and keeps it there, which caps a download at 2 MiB per round trip through the
/// jump host; the session inside asks for 16 MiB on its SFTP channel (sftp.rs).
const RELAY_WINDOW: u64 = 16 << 20;
/// Window given back in steps of this much, not per read.
const WINDOW_STEP: u64 = 256 << 10;

impl Drop for Relay {
    fn drop(&mut self) {
        // Closing the channel and the connection is a conversation with the jump host:
        // blocking again, briefly, so that it is had rather than cut off.
        self.jump.session.set_timeout(1000);
        self.jump.session.set_blocking(true);
    }
}

impl Relay {
    fn new(jump: Connection, mut channel: ssh2::Channel, local: UnixStream) -> Result<Relay> {
        // Still blocking: the adjustment is sent before anything else.
        channel
            .adjust_receive_window(RELAY_WINDOW - LIBSSH2_CHANNEL_WINDOW_DEFAULT, true)
            .map_err(|e| {
                Error::new(
                    ErrorKind::Transport,
                    format!("cannot widen the jump host's channel: {}", e.message()),
                )
                .with_source(TransportError::from(e))
            })?;
        local
            .set_nonblocking(true)
            .map_err(|e| Error::other(format!("cannot set up the jump host relay: {e}")))?;
        jump.session.set_blocking(false);
        Ok(Relay {
            channel,
            jump,
            local,
        })
    }

    fn run(mut self) {
        let mut down = Pending::new(); // jump host -> session
        let mut up = Pending::new(); // session -> jump host
        let (mut local_eof, mut remote_eof, mut eof_sent) = (false, false, false);
        // Bytes read that the window has not been given back yet, and an adjustment
        // libssh2 is still sending (a retry must repeat it: it resends its own packet).
        let (mut owed, mut sending) = (0u64, None::<u64>);
        loop {
            let mut moved = false;
            if down.is_empty() && !remote_eof {
                match down.fill(&mut self.channel) {
                    Step::Moved(n) => {
                        owed += n as u64;
                        moved = true;
                    }
                    Step::End => remote_eof = self.channel.eof(),
                    Step::Blocked => {}
                    Step::Broken => return,
                }
            }
            if owed >= WINDOW_STEP || sending.is_some() {
                let amount = sending.unwrap_or(owed);
                match self.channel.adjust_receive_window(amount, true) {
                    Ok(_) => {
                        owed -= amount;
                        sending = None;
                    }
                    Err(e) if e.code() == ErrorCode::Session(LIBSSH2_ERROR_EAGAIN) => {
                        sending = Some(amount)
                    }
                    Err(_) => return,
                }
            }
            if !down.is_empty() {
                match down.drain(&mut &self.local) {
                    Step::Moved(_) => moved = true,
                    Step::Broken => return,
                    Step::Blocked | Step::End => {}
                }
            }
            if remote_eof && down.is_empty() {
                // The server's side is done: the session reads the end of its stream.
                let _ = self.local.shutdown(std::net::Shutdown::Write);
                return;
            }
            if up.is_empty() && !local_eof {
                match up.fill(&mut &self.local) {
                    Step::Moved(_) => moved = true,
                    Step::End => local_eof = true,
                    Step::Blocked => {}
                    Step::Broken => return,
                }
            }
            if !up.is_empty() {
                match up.drain(&mut self.channel) {
                    Step::Moved(_) => moved = true,
                    Step::Broken => return,
                    Step::Blocked | Step::End => {}
                }
            }
            if local_eof && up.is_empty() && !eof_sent {
                match self.channel.send_eof() {
                    Ok(()) => eof_sent = true,
                    Err(e) if e.code() == ErrorCode::Session(LIBSSH2_ERROR_EAGAIN) => {}
                    Err(_) => return,
                }
            }
            if eof_sent {
                // The session closed its end: nothing it could still want is coming.
                return;
            }
            if !moved {
                self.wait(&up, &down, local_eof);
            }
        }
    }

    /// Sleep until either socket can move something, or a tick passes.
    fn wait(&self, up: &Pending, down: &Pending, local_eof: bool) {
        let mut jump_events = libc::POLLIN;
        if !up.is_empty()
            || matches!(
                self.jump.session.block_directions(),
                ssh2::BlockDirections::Outbound | ssh2::BlockDirections::Both
            )
        {
            jump_events |= libc::POLLOUT;
        }
        let mut local_events = 0;
        if up.is_empty() && !local_eof {
            local_events |= libc::POLLIN;
        }
        if !down.is_empty() {
            local_events |= libc::POLLOUT;
        }
        let mut fds = [
            libc::pollfd {
                fd: self.jump.session.as_raw_fd(),
                events: jump_events,
                revents: 0,
            },
            libc::pollfd {
                fd: self.local.as_raw_fd(),
                events: local_events,
                revents: 0,
            },
        ];
        // SAFETY: poll(2) on two pollfd structs we own, for descriptors that stay open
        // while `self` lives.
        unsafe {
            libc::poll(fds.as_mut_ptr(), 2, RELAY_TICK_MS);
        }
    }
}
