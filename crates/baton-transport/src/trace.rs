//! `BATON_TRACE=1`: log every transport call and its duration to stderr, to see where a
//! sync spends its round trips, and end with a `trace summary: round trips: N after
//! connect` line: the transport's own count (SFTP), else the calls that waited for an
//! answer (each one batch).

use std::io::Write;
use std::time::Instant;

use super::{Pipelined, Published, Remote, RemoteEntry, Step, Upload};
use baton_error::Result;

pub struct Traced<R: Pipelined> {
    inner: R,
    started: Instant,
    /// Calls that waited for an answer (the count for transports that keep none).
    batches: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Pipelined> Traced<R> {
    pub fn new(inner: R) -> Self {
        Traced {
            inner,
            started: Instant::now(),
            batches: Default::default(),
        }
    }

    /// The round trips so far: the transport's count, else the batches that waited.
    pub fn round_trips(&self) -> u64 {
        self.inner.round_trips().unwrap_or(self.batches.get())
    }

    /// Log a call that waited for its answer (one batch).
    fn log<T>(&self, what: &str, t0: Instant, result: Result<T>) -> Result<T> {
        self.batches.set(self.batches.get() + 1);
        self.note(what, t0, result)
    }

    /// Log a call whose requests a transport may send without waiting.
    fn note<T>(&self, what: &str, t0: Instant, result: Result<T>) -> Result<T> {
        eprintln!(
            "trace: {:>8.1} ms  {:>7.1} ms  {:>3} rt  {what}{}",
            self.started.elapsed().as_secs_f64() * 1e3,
            t0.elapsed().as_secs_f64() * 1e3,
            self.round_trips(),
            if result.is_err() { " (error)" } else { "" }
        );
        result
    }
}

impl<R: Pipelined> Remote for Traced<R> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn read_many(
        &mut self,
        files: &[String],
        dirs: &[String],
        limit: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        let t0 = Instant::now();
        let r = self.inner.read_many(files, dirs, limit);
        self.log(&format!("read_many {files:?} {dirs:?}"), t0, r)
    }

    fn make_dirs(&mut self, dirs: &[String]) -> Result<()> {
        let t0 = Instant::now();
        let r = self.inner.make_dirs(dirs);
        self.note(&format!("make_dirs {dirs:?} (not waited for)"), t0, r)
    }

    fn create(&mut self, path: &str) -> Result<Box<dyn Upload + '_>> {
        self.create_with(path, &[])
    }

    fn publish_many(&mut self, moves: &[(String, String)]) -> Result<Vec<Published>> {
        let t0 = Instant::now();
        let r = self.inner.publish_many(moves);
        self.log(&format!("publish {moves:?}"), t0, r)
    }

    fn read_file_sized(&mut self, path: &str, len: u64, sink: &mut dyn Write) -> Result<()> {
        let t0 = Instant::now();
        let r = self.inner.read_file_sized(path, len, sink);
        self.log(&format!("read_file_sized {path} {len}"), t0, r)
    }

    fn read_range(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let t0 = Instant::now();
        let r = self.inner.read_range(path, offset, len);
        self.log(&format!("read_range {path} {offset}+{len}"), t0, r)
    }

    fn remove_dir_all(&mut self, dir: &str) -> Result<()> {
        let t0 = Instant::now();
        let r = self.inner.remove_dir_all(dir);
        self.log(&format!("remove_dir_all {dir}"), t0, r)
    }

    fn remove_file(&mut self, path: &str) -> Result<bool> {
        let t0 = Instant::now();
        let r = self.inner.remove_file(path);
        self.log(&format!("remove_file {path}"), t0, r)
    }
}

impl<R: Pipelined> Pipelined for Traced<R> {
    fn start_reads(
        &mut self,
        files: &[String],
        dirs: &[String],
        limit: u64,
    ) -> Result<Option<u64>> {
        let t0 = Instant::now();
        let r = self.inner.start_reads(files, dirs, limit);
        self.note(
            &format!("start_reads {files:?} {dirs:?} (not waited for)"),
            t0,
            r,
        )
    }

    fn collect_reads(
        &mut self,
        token: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        let t0 = Instant::now();
        let r = self.inner.collect_reads(token);
        self.log("collect_reads", t0, r)
    }

    fn run_in_order(&mut self, steps: &[Step]) -> Result<Vec<bool>> {
        let t0 = Instant::now();
        let r = self.inner.run_in_order(steps);
        self.log(&format!("run_in_order {steps:?}"), t0, r)
    }

    fn create_with(
        &mut self,
        path: &str,
        beside: &[(String, Vec<u8>)],
    ) -> Result<Box<dyn Upload + '_>> {
        let t0 = Instant::now();
        let started = self.started;
        let batches = self.batches.clone();
        batches.set(batches.get() + 1);
        let r = self.inner.create_with(path, beside);
        let names: Vec<&String> = beside.iter().map(|(n, _)| n).collect();
        eprintln!(
            "trace: {:>8.1} ms  {:>7.1} ms  create {path} beside {names:?}",
            started.elapsed().as_secs_f64() * 1e3,
            t0.elapsed().as_secs_f64() * 1e3
        );
        let inner = r?;
        Ok(Box::new(TracedUpload {
            inner,
            batches,
            path: path.to_string(),
            started,
        }))
    }

    fn put_files(&mut self, files: &[(String, Vec<u8>)]) -> Result<()> {
        let t0 = Instant::now();
        let r = self.inner.put_files(files);
        let names: Vec<&String> = files.iter().map(|(n, _)| n).collect();
        self.log(&format!("put_files {names:?}"), t0, r)
    }

    fn prepare_publish(&mut self, dirs: &[String]) -> Result<()> {
        let t0 = Instant::now();
        let r = self.inner.prepare_publish(dirs);
        self.note(&format!("prepare_publish {dirs:?} (not waited for)"), t0, r)
    }

    fn open_tail(
        &mut self,
        path: &str,
        size: u64,
        tail_len: u64,
        body: bool,
    ) -> Result<(Vec<u8>, Option<u64>)> {
        let t0 = Instant::now();
        let r = self.inner.open_tail(path, size, tail_len, body);
        let body = if body { " and the body" } else { "" };
        self.log(
            &format!("open_tail {path} {size} (last {tail_len}{body})"),
            t0,
            r,
        )
    }

    fn read_open(
        &mut self,
        token: Option<u64>,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        let t0 = Instant::now();
        let r = self.inner.read_open(token, path, offset, len);
        self.log(&format!("read_open {path} {offset}+{len}"), t0, r)
    }

    fn read_rest(
        &mut self,
        token: Option<u64>,
        path: &str,
        size: u64,
        tail: &[u8],
        sink: &mut dyn Write,
    ) -> Result<()> {
        let t0 = Instant::now();
        let r = self.inner.read_rest(token, path, size, tail, sink);
        // A kept open streams on (the transport counts its own round trips); without
        // one the file is read again, a call that waits.
        if token.is_some() {
            self.note(&format!("read_rest {path} {size}"), t0, r)
        } else {
            self.log(&format!("read_rest {path} {size}"), t0, r)
        }
    }

    fn expect_tails(&mut self, files: &[(String, u64, u64, bool)]) {
        let t0 = Instant::now();
        self.inner.expect_tails(files);
        let what = format!("expect_tails of {} files (not waited for)", files.len());
        let _ = self.note(&what, t0, Ok(()));
    }

    fn close_tail(&mut self, token: Option<u64>, path: &str) {
        let t0 = Instant::now();
        self.inner.close_tail(token, path);
        let _ = self.note(&format!("close_tail {path} (not waited for)"), t0, Ok(()));
    }

    fn forget_prepared(&mut self) {
        self.inner.forget_prepared();
    }

    fn remove_empty_dir(&mut self, dir: &str) {
        self.inner.remove_empty_dir(dir);
        eprintln!(
            "trace: {:>8.1} ms  {:>7.1} ms  remove_empty_dir {dir} (not waited for)",
            self.started.elapsed().as_secs_f64() * 1e3,
            0.0
        );
    }

    fn round_trips(&self) -> Option<u64> {
        Some(Traced::round_trips(self))
    }

    fn cipher(&self) -> Option<String> {
        self.inner.cipher()
    }
}

impl<R: Pipelined> Drop for Traced<R> {
    fn drop(&mut self) {
        eprintln!(
            "trace summary: round trips: {} after connect",
            Traced::round_trips(self)
        );
    }
}

/// An upload whose `finish` (one waited batch) is traced and counted.
struct TracedUpload<'a> {
    inner: Box<dyn Upload + 'a>,
    batches: std::rc::Rc<std::cell::Cell<u64>>,
    path: String,
    started: Instant,
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

    fn finish(self: Box<Self>, readback: &[(u64, u64)]) -> Result<super::Receipt> {
        let t0 = Instant::now();
        self.batches.set(self.batches.get() + 1);
        let r = self.inner.finish(readback);
        eprintln!(
            "trace: {:>8.1} ms  {:>7.1} ms  finish {}{}",
            self.started.elapsed().as_secs_f64() * 1e3,
            t0.elapsed().as_secs_f64() * 1e3,
            self.path,
            if r.is_err() { " (error)" } else { "" }
        );
        r
    }
}
