//! Killing a child at a chosen instant, for the crash harnesses: a SIGKILL can land
//! anywhere in a run only if the run is watched closely (every 500 µs here).

use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// Wait for `child` until `delay` has passed, then SIGKILL it; its output, and how long
/// it ran when it exited on its own before that (`None`: it was killed).
pub fn kill_at(mut child: Child, delay: Duration) -> (Output, Option<Duration>) {
    let started = Instant::now();
    let finished = loop {
        if child.try_wait().expect("wait for the child").is_some() {
            break Some(started.elapsed());
        }
        if started.elapsed() >= delay {
            // SIGKILL (std's kill on Unix); the child is not reaped yet, so the pid is ours.
            child.kill().expect("SIGKILL the child");
            break None;
        }
        std::thread::sleep(Duration::from_micros(500));
    };
    (
        child.wait_with_output().expect("the child's output"),
        finished,
    )
}
