//! A capture started at once on its own thread, so that git runs while the rest of a
//! handoff (the store, the secret scanner, the transcript) is prepared.

use std::path::PathBuf;
use std::thread::JoinHandle;

use super::{Capture, capture};

/// A capture under way; [`Pending::finish`] waits for it. Dropped unfinished (an error
/// elsewhere), it still waits, so no git process outlives the command.
pub struct Pending {
    dir: PathBuf,
    thread: Option<JoinHandle<Capture>>,
}

/// Start capturing the workspace at `dir` with the `git` found on `PATH`.
pub fn start(dir: PathBuf) -> Pending {
    let worker = dir.clone();
    let thread = std::thread::Builder::new()
        .name("evidence".into())
        .spawn(move || capture(&worker))
        .ok();
    Pending { dir, thread }
}

impl Pending {
    /// The directory being captured.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The capture (taken here if no thread could be started). A panic in the capture
    /// goes on in the caller.
    pub fn finish(mut self) -> Capture {
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None => capture(&self.dir),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
