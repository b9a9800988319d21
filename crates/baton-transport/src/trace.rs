//! Trace events (`tracing`, target `baton::trace`): each call the backend adapter
//! (`backend.rs`) makes on a path transport, with its duration and whether it waited for
//! an answer (one batch); a connection's end with the transport's round-trip count (SFTP);
//! S3's requests. Nothing here prints: the CLI's subscriber does, when `BATON_TRACE` is set.
//! SFTP's packets go to `baton::sftp` (`BATON_TRACE_SFTP`).

use std::io::Write;
use std::time::Instant;

use super::{Receipt, Upload};
use baton_error::Result;

/// The target of trace events.
pub const TARGET: &str = "baton::trace";
/// The target of SFTP packet events.
pub const SFTP: &str = "baton::sftp";

/// Whether a subscriber takes trace events (so that tracing wrappers are made at all).
pub fn enabled() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
}

/// Milliseconds since `t0`.
pub fn ms(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e3
}

/// A path transport's call `call` (its method), described by `what`: `waited` when it
/// waits for its answer (one batch); `round_trips`, the transport's own count after it.
pub fn call<T>(
    call: &'static str,
    what: impl FnOnce() -> String,
    waited: bool,
    t0: Instant,
    round_trips: Option<u64>,
    result: &Result<T>,
) {
    tracing::debug!(
        target: TARGET,
        kind = "call",
        call,
        what = %what(),
        ms = ms(t0),
        waited,
        round_trips,
        error = result.is_err()
    );
}

/// A connection ends: `round_trips`, the transport's own count (else the subscriber's
/// count of the calls that waited).
pub fn closed(round_trips: Option<u64>) {
    tracing::debug!(target: TARGET, kind = "summary", round_trips);
}

/// An upload whose `finish` (one waited batch) is traced.
pub(crate) struct TracedUpload<'a> {
    pub(crate) inner: Box<dyn Upload + 'a>,
    pub(crate) path: String,
}

impl Write for TracedUpload<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl Upload for TracedUpload<'_> {
    fn expect_len(&mut self, len: u64) {
        self.inner.expect_len(len)
    }

    fn finish(self: Box<Self>, readback: &[(u64, u64)]) -> Result<Receipt> {
        let t0 = Instant::now();
        let r = self.inner.finish(readback);
        tracing::debug!(
            target: TARGET,
            kind = "upload",
            call = "finish",
            what = %format_args!("finish {}", self.path),
            ms = ms(t0),
            waited = true,
            error = r.is_err()
        );
        r
    }
}
