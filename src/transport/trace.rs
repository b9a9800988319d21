//! `BATON_TRACE=1`: log every transport call and its duration to stderr, to see where a
//! sync spends its round trips.

use std::io::Write;
use std::time::Instant;

use super::{Published, Remote, RemoteEntry, Upload};
use crate::error::Result;

pub struct Traced<R> {
    inner: R,
    started: Instant,
}

impl<R: Remote> Traced<R> {
    pub fn new(inner: R) -> Self {
        Traced {
            inner,
            started: Instant::now(),
        }
    }

    fn log<T>(&self, what: &str, t0: Instant, result: Result<T>) -> Result<T> {
        eprintln!(
            "trace: {:>8.1} ms  {:>7.1} ms  {what}{}",
            self.started.elapsed().as_secs_f64() * 1e3,
            t0.elapsed().as_secs_f64() * 1e3,
            if result.is_err() { " (error)" } else { "" }
        );
        result
    }
}

impl<R: Remote> Remote for Traced<R> {
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
        self.log(&format!("make_dirs {dirs:?}"), t0, r)
    }

    fn create(&mut self, path: &str) -> Result<Box<dyn Upload + '_>> {
        let t0 = Instant::now();
        let started = self.started;
        let r = self.inner.create(path);
        eprintln!(
            "trace: {:>8.1} ms  {:>7.1} ms  create {path}",
            started.elapsed().as_secs_f64() * 1e3,
            t0.elapsed().as_secs_f64() * 1e3
        );
        r
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
        self.log(&format!("prepare_publish {dirs:?} (not waited for)"), t0, r)
    }

    fn publish_many(&mut self, moves: &[(String, String)]) -> Result<Vec<Published>> {
        let t0 = Instant::now();
        let r = self.inner.publish_many(moves);
        self.log(&format!("publish {moves:?}"), t0, r)
    }

    fn read_file(&mut self, path: &str, sink: &mut dyn Write) -> Result<u64> {
        let t0 = Instant::now();
        let r = self.inner.read_file(path, sink);
        self.log(&format!("read_file {path}"), t0, r)
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

    fn remove_empty_dir(&mut self, dir: &str) {
        self.inner.remove_empty_dir(dir);
        let _ = self.log(
            &format!("remove_empty_dir {dir} (not waited for)"),
            Instant::now(),
            Ok(()),
        );
    }
}
