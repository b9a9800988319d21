//! The S3 backend's HTTP side: every request counted by method (and, with `BATON_TRACE`,
//! logged without its headers, so never a signature), and object_store's errors turned
//! into baton's exit codes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};

use crate::error::{Error, ErrorKind};

/// Requests sent, by what they do.
#[derive(Debug, Default)]
pub struct Counts {
    get: AtomicU64,
    head: AtomicU64,
    put: AtomicU64,
    list: AtomicU64,
    delete: AtomicU64,
    post: AtomicU64,
}

impl Counts {
    fn count(&self, method: &str, query: &str) -> &'static str {
        let (counter, name) = match method {
            "GET" if query.contains("list-type") || query.contains("uploads") => {
                (&self.list, "LIST")
            }
            "GET" => (&self.get, "GET"),
            "HEAD" => (&self.head, "HEAD"),
            "PUT" => (&self.put, "PUT"),
            "DELETE" => (&self.delete, "DELETE"),
            _ => (&self.post, "POST"),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        name
    }

    pub fn total(&self) -> u64 {
        [
            &self.get,
            &self.head,
            &self.put,
            &self.list,
            &self.delete,
            &self.post,
        ]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum()
    }

    /// `requests: N (GET g, HEAD h, PUT p, LIST l, DELETE d, POST o)`.
    pub fn summary(&self) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "requests: {} (GET {}, HEAD {}, PUT {}, LIST {}, DELETE {}, POST {})",
            self.total(),
            n(&self.get),
            n(&self.head),
            n(&self.put),
            n(&self.list),
            n(&self.delete),
            n(&self.post)
        )
    }
}

/// Makes object_store's reqwest client count (and trace) what it sends.
#[derive(Debug)]
pub struct CountingConnector {
    pub counts: Arc<Counts>,
    pub trace: Option<Instant>,
}

impl HttpConnector for CountingConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        // reqwest is built without a crypto provider of its own (no aws-lc-sys): rustls
        // takes the process default, ring's. Already installed is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(Counting {
            inner,
            counts: self.counts.clone(),
            trace: self.trace,
        }))
    }
}

#[derive(Debug)]
struct Counting {
    inner: HttpClient,
    counts: Arc<Counts>,
    trace: Option<Instant>,
}

#[async_trait]
impl HttpService for Counting {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let query = req.uri().query().unwrap_or("").to_string();
        let what = self.counts.count(req.method().as_str(), &query);
        let path = req.uri().path().to_string();
        let t0 = Instant::now();
        let result = self.inner.execute(req).await;
        if let Some(started) = self.trace {
            let status = match &result {
                Ok(r) => r.status().as_u16().to_string(),
                Err(e) => format!("error: {e}"),
            };
            eprintln!(
                "trace: {:>8.1} ms  {:>7.1} ms  s3 {what} {path} -> {status}",
                started.elapsed().as_secs_f64() * 1e3,
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
        result
    }
}

/// The whole chain of an object_store error on one line (its sources carry the S3 error
/// code from the response body).
fn chain(e: &object_store::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text.replace(['\n', '\r'], " ")
}

/// The innermost cause of an error (a refused connection, a status and its body), short.
fn cause(e: &object_store::Error) -> String {
    let mut last: &dyn std::error::Error = e;
    while let Some(s) = last.source() {
        last = s;
    }
    let text = last.to_string().replace(['\n', '\r'], " ");
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

/// Which S3 error codes mean what (from the response body, which servers fill in).
const DENIED: [&str; 7] = [
    "AccessDenied",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "InvalidToken",
    "ExpiredToken",
    "AuthorizationHeaderMalformed",
    "InvalidSecurity",
];

/// An object_store error of a request about `key` at `place` as baton's error: denied
/// (exit 6), no such bucket (exit 3), anything retried until the deadline (exit 7).
/// Not for the outcomes the caller handles (a missing key, an existing one).
pub fn map_error(e: object_store::Error, place: &str, key: &str) -> Error {
    let text = chain(&e);
    let denied = matches!(
        e,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
    ) || DENIED.iter().any(|code| text.contains(code));
    if text.contains("NoSuchBucket") {
        return Error::not_found(format!("no such bucket for {place}"))
            .with_hint("create the bucket, or check the target URL and its endpoint (--endpoint, AWS_ENDPOINT_URL)");
    }
    if denied {
        return Error::new(
            ErrorKind::Security,
            format!("S3 refused access to {key} at {place}: {}", cause(&e)),
        )
        .with_hint("check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the AWS_PROFILE profile), the region and the bucket policy");
    }
    match e {
        object_store::Error::NotFound { .. } => {
            Error::not_found(format!("{key} not found at {place}"))
        }
        object_store::Error::InvalidPath { .. } => {
            Error::internal(format!("invalid S3 key {key}: {text}"))
        }
        _ => Error::new(
            ErrorKind::Transport,
            format!("S3 request for {key} at {place} failed: {}", cause(&e)),
        )
        .with_hint(format!(
            "check the endpoint and the network, then run the command again (retried for {} s; {} sets it)",
            super::settings::retry_timeout()
                .map(|d| d.as_secs())
                .unwrap_or(super::settings::DEFAULT_RETRY_SECS),
            super::settings::RETRY_VAR
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic(text: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: text.to_string().into(),
        }
    }

    #[test]
    fn errors_map_to_exit_codes() {
        let kind = |e| map_error(e, "s3://b/p", "config").kind;
        assert_eq!(
            kind(generic("<Code>NoSuchBucket</Code>")),
            ErrorKind::NotFound
        );
        assert_eq!(
            kind(generic("<Code>SignatureDoesNotMatch</Code>")),
            ErrorKind::Security
        );
        assert_eq!(
            kind(object_store::Error::PermissionDenied {
                path: "k".into(),
                source: "403".to_string().into()
            }),
            ErrorKind::Security
        );
        assert_eq!(
            kind(generic("error sending request: connection refused")),
            ErrorKind::Transport
        );
    }

    #[test]
    fn requests_are_counted_by_what_they_do() {
        let counts = Counts::default();
        counts.count("GET", "list-type=2&prefix=p");
        counts.count("GET", "");
        counts.count("PUT", "");
        counts.count("POST", "uploads");
        assert_eq!(
            counts.summary(),
            "requests: 4 (GET 1, HEAD 0, PUT 1, LIST 1, DELETE 0, POST 1)"
        );
    }
}
