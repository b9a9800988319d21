//! A large upload's second lane (`upload::lane`) against the fake server: a second
//! channel with its own stream onto the same files, which can hold its requests until
//! its replies are read (a server process that is slower than the first).

use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex};

use russh_sftp::protocol::{OpenFlags, Packet, StatusCode};

use super::super::{CHUNK, Channel, LaneStarted, NoLane, SftpRemote};
use super::fake::{Fake, Server, fake, frame, status};
use crate::Remote;
use baton_error::ErrorKind;

const LARGE: usize = (16 << 20) + 4321;

/// One lane's stream and what it saw.
#[derive(Default)]
struct LaneIo {
    input: Vec<u8>,
    /// Requests not carried out yet (`lazy`).
    pending: Vec<Packet>,
    output: Vec<u8>,
    read_at: usize,
    /// Carry requests out only when the client reads a reply.
    lazy: bool,
    /// Answer every WRITE with a plain failure.
    fail_writes: bool,
    /// Every write to the channel times out (a server gone silent).
    silent: bool,
    writes: usize,
    /// The end of the furthest write (offset + length).
    furthest: u64,
    fsyncs: usize,
    eof: bool,
}

#[derive(Clone)]
struct LaneFake {
    server: Fake,
    io: Arc<Mutex<LaneIo>>,
}

impl LaneFake {
    fn carry_out(&self, requests: Vec<Packet>) {
        let mut io = self.io.lock().expect("lane lock");
        for request in requests {
            let frames = match &request {
                Packet::Write(w) if io.fail_writes => {
                    vec![frame(status(w.id, StatusCode::Failure))]
                }
                _ => {
                    if let Packet::Write(w) = &request {
                        io.writes += 1;
                        io.furthest = io.furthest.max(w.offset + w.data.len() as u64);
                    }
                    if matches!(&request, Packet::Extended(e) if e.request == super::super::FSYNC_EXTENSION)
                    {
                        io.fsyncs += 1;
                    }
                    self.server.with(|s| s.reply_to(request))
                }
            };
            frames.into_iter().for_each(|f| io.output.extend(f));
        }
    }
}

impl Write for LaneFake {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let requests = {
            let mut io = self.io.lock().expect("lane lock");
            if io.silent {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "lane timed out"));
            }
            io.input.extend_from_slice(data);
            let requests = Server::split_requests(&mut io.input);
            if io.lazy {
                io.pending.extend(requests);
                return Ok(data.len());
            }
            requests
        };
        self.carry_out(requests);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for LaneFake {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let pending = {
            let mut io = self.io.lock().expect("lane lock");
            if io.read_at == io.output.len() {
                std::mem::take(&mut io.pending)
            } else {
                Vec::new()
            }
        };
        self.carry_out(pending);
        let mut io = self.io.lock().expect("lane lock");
        let n = buf.len().min(io.output.len() - io.read_at);
        let at = io.read_at;
        buf[..n].copy_from_slice(&io.output[at..at + n]);
        io.read_at += n;
        Ok(n)
    }
}

impl Channel for LaneFake {
    fn send_eof(&mut self) -> io::Result<()> {
        self.io.lock().expect("lane lock").eof = true;
        Ok(())
    }

    /// A lane rides the first channel's connection.
    fn cut(&self) {
        self.server.cut();
    }
}

/// Let `remote` open lanes onto `fake`'s files, each set up by `configure`; the lanes
/// opened so far are returned.
fn with_lanes(
    remote: &mut SftpRemote,
    fake: &Fake,
    configure: fn(&mut LaneIo),
) -> Arc<Mutex<Vec<Arc<Mutex<LaneIo>>>>> {
    let opened = Arc::new(Mutex::new(Vec::new()));
    let (server, list) = (fake.clone(), opened.clone());
    remote.lane_opener = Some(Box::new(move || {
        let mut io = LaneIo::default();
        configure(&mut io);
        let io = Arc::new(Mutex::new(io));
        list.lock().expect("list lock").push(io.clone());
        let server = server.clone();
        Ok(
            Box::new(move || Ok(Box::new(LaneFake { server, io }) as Box<dyn Channel>))
                as LaneStarted,
        )
    }));
    opened
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect()
}

/// Upload `data` to `objects/big`, announced as `expect` bytes, reading back `ranges`.
fn upload(
    remote: &mut SftpRemote,
    data: &[u8],
    expect: u64,
    ranges: &[(u64, u64)],
) -> baton_error::Result<crate::Receipt> {
    let mut up = remote.create("objects/big")?;
    up.expect_len(expect);
    // Odd-sized writes, as a pack writer makes them.
    for part in data.chunks(100_003) {
        if let Err(e) = up.write_all(part) {
            let inner = e
                .get_ref()
                .and_then(|i| i.downcast_ref::<baton_error::Error>());
            let inner = inner.expect("an upload's own error");
            return Err(baton_error::Error::new(inner.kind, inner.message.clone()));
        }
    }
    up.finish(ranges)
}

fn lane_stats(opened: &Arc<Mutex<Vec<Arc<Mutex<LaneIo>>>>>) -> Vec<(usize, usize, u64, bool)> {
    opened
        .lock()
        .expect("list lock")
        .iter()
        .map(|io| {
            let io = io.lock().expect("lane lock");
            (io.writes, io.fsyncs, io.furthest, io.eof)
        })
        .collect()
}

#[test]
fn a_large_upload_shares_its_writes_with_a_second_lane() {
    let (mut remote, fake) = fake(&[]);
    let opened = with_lanes(&mut remote, &fake, |_| {});
    let data = pattern(LARGE);
    let tail = (LARGE as u64 - 1000, 1000);
    let receipt = upload(&mut remote, &data, LARGE as u64, &[tail]).expect("upload");
    assert_eq!(receipt.size, LARGE as u64);
    assert_eq!(receipt.readback, vec![data[LARGE - 1000..].to_vec()]);
    assert!(
        fake.with(|s| s.files["s/objects/big"] == data),
        "the file is whole"
    );
    let lanes = lane_stats(&opened);
    assert_eq!(lanes.len(), 1, "one second lane");
    let (writes, fsyncs, _, eof) = lanes[0];
    let total = LARGE.div_ceil(CHUNK);
    assert!(
        writes >= total / 3 && writes <= total / 2 + 1,
        "{writes} of {total} chunks on the lane"
    );
    assert_eq!(fsyncs, 1, "the lane fsyncs its own writes");
    assert!(eof, "the lane's input is ended once the upload is done");
    // Every handle is closed on both lanes (the closes are sent, deferred).
    assert_eq!(fake.with(|s| s.handles.len()), 0);
    // The next large upload opens a lane of its own.
    fake.with(|s| s.files.clear());
    upload(&mut remote, &data, LARGE as u64, &[]).expect("second upload");
    assert_eq!(lane_stats(&opened).len(), 2);
}

#[test]
fn what_the_lane_wrote_is_read_back_only_once_it_is_answered() {
    // A whole number of chunks, so that the last one may be sent on the lane (which of
    // two lengths does depends on where the lane starts): the first session's fstat must
    // wait for it, as must a read-back of the middle.
    let mut last_on_lane = 0;
    for chunks in [66, 67] {
        let len = chunks * CHUNK;
        let data = pattern(len);
        let (mut remote, fake) = fake(&[]);
        let opened = with_lanes(&mut remote, &fake, |io| io.lazy = true);
        let middle = (6 << 20, 1 << 20);
        let receipt = upload(&mut remote, &data, len as u64, &[middle]).expect("upload");
        let (_, _, furthest, _) = lane_stats(&opened)[0];
        if furthest == len as u64 {
            last_on_lane += 1;
        }
        assert_eq!(receipt.size, len as u64);
        assert_eq!(receipt.readback, vec![data[6 << 20..7 << 20].to_vec()]);
        assert!(fake.with(|s| s.files["s/objects/big"] == data));
    }
    assert_eq!(last_on_lane, 1, "one of the two lengths ends on the lane");
}

#[test]
fn a_small_upload_opens_no_lane() {
    let (mut remote, fake) = fake(&[]);
    let opened = with_lanes(&mut remote, &fake, |_| {});
    let data = pattern(LARGE);
    // Announced small (or not at all): one channel, whatever is written.
    upload(&mut remote, &data, 1 << 20, &[]).expect("upload");
    fake.with(|s| s.files.clear());
    upload(&mut remote, &data, 0, &[]).expect("upload");
    assert!(lane_stats(&opened).is_empty());
    assert!(fake.with(|s| s.files["s/objects/big"] == data));
}

#[test]
fn a_refused_lane_leaves_uploads_on_one_channel() {
    let (mut remote, fake) = fake(&[]);
    let tries = Arc::new(Mutex::new(0));
    let counted = tries.clone();
    remote.lane_opener = Some(Box::new(move || {
        *counted.lock().expect("lock") += 1;
        Err(NoLane::Refused("administratively prohibited".to_string()))
    }));
    let data = pattern(LARGE);
    upload(&mut remote, &data, LARGE as u64, &[]).expect("upload on one channel");
    assert!(fake.with(|s| s.files["s/objects/big"] == data));
    fake.with(|s| s.files.clear());
    upload(&mut remote, &data, LARGE as u64, &[]).expect("again");
    assert_eq!(
        *tries.lock().expect("lock"),
        1,
        "a refusal is not asked again"
    );
}

#[test]
fn a_lane_that_cannot_open_the_file_is_dropped() {
    let (mut remote, fake) = fake(&[]);
    let opened = with_lanes(&mut remote, &fake, |_| {});
    fake.hook(|p| match p {
        Packet::Open(o) if !o.pflags.contains(OpenFlags::CREATE) => {
            Some(vec![frame(status(o.id, StatusCode::PermissionDenied))])
        }
        _ => None,
    });
    let data = pattern(LARGE);
    upload(&mut remote, &data, LARGE as u64, &[]).expect("upload on one channel");
    assert!(fake.with(|s| s.files["s/objects/big"] == data));
    let lanes = lane_stats(&opened);
    assert_eq!((lanes[0].0, lanes[0].3), (0, true), "no write on it; ended");
}

#[test]
fn a_write_that_fails_on_the_lane_fails_the_upload() {
    let (mut remote, fake) = fake(&[]);
    let _opened = with_lanes(&mut remote, &fake, |io| io.fail_writes = true);
    let err = upload(&mut remote, &pattern(LARGE), LARGE as u64, &[]).expect_err("a failed write");
    assert_eq!(err.kind, ErrorKind::Transport, "{}", err.message);
    assert!(err.message.contains("write objects/big"), "{}", err.message);
    assert!(!fake.with(|s| s.cut), "a refusal leaves the connection up");
}

#[test]
fn a_lane_that_times_out_cuts_the_connection_both_channels_ride() {
    let (mut remote, fake) = fake(&[]);
    let _opened = with_lanes(&mut remote, &fake, |io| io.silent = true);
    let err = upload(&mut remote, &pattern(LARGE), LARGE as u64, &[]).expect_err("timed out");
    assert_eq!(err.kind, ErrorKind::Transport, "{}", err.message);
    assert!(err.message.contains("lane timed out"), "{}", err.message);
    // Cut at once: freeing the lane or ending the first channel's input does not wait
    // a timeout each on the silent server.
    assert!(fake.with(|s| s.cut), "the connection is cut");
    assert!(
        remote.broken,
        "the first channel's later requests fail at once"
    );
    drop(remote);
    assert!(
        !fake.with(|s| s.eof),
        "no end of input sent on a cut connection"
    );
}

#[test]
fn a_connection_lost_while_opening_a_lane_fails_the_upload() {
    let (mut remote, fake) = fake(&[]);
    remote.lane_opener = Some(Box::new(|| Err(NoLane::Failed("timed out".to_string()))));
    let err = upload(&mut remote, &pattern(LARGE), LARGE as u64, &[]).expect_err("lost");
    assert_eq!(err.kind, ErrorKind::Transport, "{}", err.message);
    assert!(err.message.contains("timed out"), "{}", err.message);
    assert!(remote.broken, "later requests fail at once");
    assert!(fake.with(|s| s.cut), "and the connection is cut");
}

#[test]
fn a_refused_subsystem_leaves_uploads_on_one_channel() {
    let (mut remote, fake) = fake(&[]);
    remote.lane_opener = Some(Box::new(|| {
        Ok(
            Box::new(|| Err(NoLane::Refused("subsystem request denied".to_string())))
                as LaneStarted,
        )
    }));
    let data = pattern(LARGE);
    upload(&mut remote, &data, LARGE as u64, &[]).expect("upload on one channel");
    assert!(fake.with(|s| s.files["s/objects/big"] == data));
    assert!(remote.lane_opener.is_none(), "not asked again");
    assert!(!remote.broken);
    assert!(!fake.with(|s| s.cut), "a refusal leaves the connection up");
}
