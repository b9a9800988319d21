//! What the S3 client's retries did, for the error that ends them: how often the
//! failing request was tried and for how long; and the host name lookup, done here so
//! that a name that does not resolve fails its request at once instead of being retried,
//! and the client's runtime, which does not wait for a lookup nobody awaits any more.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tries that failed (no answer, or a 5xx or 429 one) of each request still being
/// retried (by method and URI: a retry sends the same), and when its first try was sent.
#[derive(Debug, Default)]
pub struct Tries {
    failing: Mutex<HashMap<String, (u64, Instant)>>,
}

impl Tries {
    /// A try of `request` sent at `sent` failed.
    pub fn failed(&self, request: &str, sent: Instant) {
        if let Ok(mut failing) = self.failing.lock() {
            failing.entry(request.to_string()).or_insert((0, sent)).0 += 1;
        }
    }

    /// The server answered `request`: it is no longer being retried.
    pub fn answered(&self, request: &str) {
        if let Ok(mut failing) = self.failing.lock() {
            failing.remove(request);
        }
    }

    /// The tries of the request tried most often, and the time since its first. The
    /// error that ends the retries is that request's, or one of those tried as often
    /// (they share one policy), so this is what was done about it.
    pub fn summary(&self) -> Option<(u64, Duration)> {
        let failing = self.failing.lock().ok()?;
        failing
            .values()
            .max_by_key(|(n, sent)| (*n, std::cmp::Reverse(*sent)))
            .map(|(n, sent)| (*n, sent.elapsed()))
    }
}

/// A host name the system resolver found no address for.
#[derive(Debug)]
pub struct Unresolved {
    pub host: String,
    pub cause: String,
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot resolve the host name {}: {}",
            self.host, self.cause
        )
    }
}

impl std::error::Error for Unresolved {}

/// reqwest's lookup (the system resolver, off the runtime's thread) with its failure
/// typed as [`Unresolved`], which the client does not retry: the resolver has already
/// tried its servers as often as the system says, and ten more lookups of a mistyped
/// endpoint would only make the user wait for the whole retry deadline.
#[derive(Debug)]
pub struct Resolver;

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let unresolved = |cause: String| -> Box<dyn std::error::Error + Send + Sync> {
                Box::new(Unresolved {
                    host: host.clone(),
                    cause,
                })
            };
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| unresolved(e.to_string()))?
                .collect();
            if addrs.is_empty() {
                return Err(unresolved("no address".into()));
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The client's current-thread runtime, shut down without waiting for its blocking
/// threads. A lookup runs on one of them and cannot be cancelled: when one request fails
/// (a name that does not resolve) while the others' lookups still wait on a DNS server
/// that dropped an answer, plain `Drop` would hold the error back for the resolver's
/// whole timeout (5 s per try with glibc). Nothing else runs on those threads, so
/// leaving a lookup behind loses nothing.
pub struct ClientRuntime(Option<tokio::runtime::Runtime>);

impl ClientRuntime {
    pub fn new(rt: tokio::runtime::Runtime) -> Self {
        ClientRuntime(Some(rt))
    }
}

impl std::ops::Deref for ClientRuntime {
    type Target = tokio::runtime::Runtime;

    fn deref(&self) -> &tokio::runtime::Runtime {
        // Taken only by `drop`.
        self.0
            .as_ref()
            .expect("the S3 client runtime is alive until drop")
    }
}

impl Drop for ClientRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_the_runtime_does_not_wait_for_a_lookup_left_running() {
        let rt = ClientRuntime::new(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        );
        // What a lookup stuck on an unanswered DNS query looks like to the runtime.
        let (started, running) = std::sync::mpsc::channel();
        drop(rt.spawn_blocking(move || {
            let _ = started.send(());
            std::thread::sleep(Duration::from_secs(10));
        }));
        running.recv().unwrap();
        let dropped = Instant::now();
        drop(rt);
        assert!(
            dropped.elapsed() < Duration::from_secs(5),
            "drop waited {:?} for the blocking thread",
            dropped.elapsed()
        );
    }

    #[test]
    fn the_request_tried_most_is_told_and_an_answer_clears_it() {
        let tries = Tries::default();
        assert_eq!(tries.summary(), None);
        let sent = Instant::now();
        for _ in 0..3 {
            tries.failed("GET /b/config", sent);
        }
        tries.failed("GET /b/refs", Instant::now());
        assert_eq!(tries.summary().map(|(n, _)| n), Some(3));
        tries.answered("GET /b/config");
        assert_eq!(tries.summary().map(|(n, _)| n), Some(1));
        tries.answered("GET /b/refs");
        assert_eq!(tries.summary(), None);
    }
}
