//! A capture started at once on its own thread, so that git runs while the rest of a
//! handoff (the store, the secret scanner, the transcript) is prepared; the histories
//! earlier captures recorded reach it once the store is open.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use super::{Capture, KnownHistory, Started, capture};

/// A capture under way; [`BackgroundCapture::finish`] waits for it. Dropped unfinished (an error
/// elsewhere), it still waits, so no git process outlives the command.
pub struct BackgroundCapture {
    dir: PathBuf,
    /// Hands the capture what earlier captures recorded ([`BackgroundCapture::give_histories`]); dropped
    /// unused, the capture goes on knowing nothing.
    known: Option<Sender<Vec<KnownHistory>>>,
    thread: Option<JoinHandle<Capture>>,
}

/// Start capturing the workspace at `dir` with the `git` found on `PATH`: the git
/// processes every capture runs are started here, on the calling thread, the rest on a
/// thread of its own.
pub fn start(dir: PathBuf) -> BackgroundCapture {
    let started = Started::new(&dir);
    let (sender, receiver) = channel();
    let thread = std::thread::Builder::new()
        .name("evidence".into())
        .spawn(move || {
            let received = Received {
                receiver: std::sync::Mutex::new(receiver),
                value: OnceLock::new(),
            };
            started.capture(&|| received.get())
        })
        .ok();
    BackgroundCapture {
        dir,
        known: Some(sender),
        thread,
    }
}

/// The histories sent to a capture, waited for the first time they are asked for.
struct Received {
    receiver: std::sync::Mutex<Receiver<Vec<KnownHistory>>>,
    value: OnceLock<Vec<KnownHistory>>,
}

impl Received {
    fn get(&self) -> Vec<KnownHistory> {
        self.value
            .get_or_init(|| match self.receiver.lock() {
                Ok(receiver) => receiver.recv().unwrap_or_default(),
                Err(_) => Vec::new(),
            })
            .clone()
    }
}

impl BackgroundCapture {
    /// The directory being captured.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Give the capture the histories earlier captures recorded (once; a capture that
    /// needs them waits for this or for [`BackgroundCapture::finish`]).
    pub fn give_histories(&mut self, known: Vec<KnownHistory>) {
        if let Some(sender) = self.known.take() {
            let _ = sender.send(known);
        }
    }

    /// The capture (taken here if no thread could be started). A panic in the capture
    /// goes on in the caller.
    pub fn finish(mut self) -> Capture {
        self.known = None; // a capture still waiting for histories goes on without
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None => capture(&self.dir),
        }
    }
}

impl Drop for BackgroundCapture {
    fn drop(&mut self) {
        self.known = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
