//! The S3 backend's HTTP side: the reqwest client (built here, so that it follows no
//! redirect), every request counted by method (and, with `BATON_TRACE`, logged without
//! its headers, so never a signature), every response body held to the cap its request
//! allows (`limits.rs`), and object_store's errors turned into baton's exit codes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpResponseBody, HttpService,
};
use object_store::{ClientConfigKey, ClientOptions};

use super::limits::{BodyOverLimit, Capped, body_cap};
use super::tries::{Resolver, Tries, Unresolved};
use crate::error::TransportError;
use baton_error::{Error, ErrorKind};

/// Requests sent, by what they do, and the tries that failed.
#[derive(Debug, Default)]
pub struct Counts {
    pub tries: Tries,
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
    /// The counts as one trace event (`BATON_TRACE`: `trace summary: requests: ...`).
    pub fn trace(&self) {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        tracing::debug!(
            target: crate::trace::TARGET,
            kind = "requests",
            total = self.total(),
            get = n(&self.get),
            head = n(&self.head),
            put = n(&self.put),
            list = n(&self.list),
            delete = n(&self.delete),
            post = n(&self.post)
        );
    }

    #[cfg(test)]
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

/// Makes the S3 client's HTTP: reqwest built here (object_store's own connector would
/// follow redirects), counting and capping what it sends and receives.
#[derive(Debug)]
pub struct CountingConnector {
    pub counts: Arc<Counts>,
}

impl HttpConnector for CountingConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        // reqwest is built without a crypto provider of its own (no aws-lc-sys): rustls
        // takes the process default, ring's. Already installed is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(HttpClient::new(Counting {
            inner: HttpClient::new(client(options)?),
            counts: self.counts.clone(),
        }))
    }
}

/// A duration option as object_store writes it (humantime), if set.
fn duration(
    options: &ClientOptions,
    key: ClientConfigKey,
) -> object_store::Result<Option<Duration>> {
    options
        .get_config_value(&key)
        .map(|v| humantime::parse_duration(&v))
        .transpose()
        .map_err(|e| object_store::Error::Generic {
            store: "S3",
            source: Box::new(e),
        })
}

/// The reqwest client object_store's `ClientOptions::client` would build from the
/// options baton sets (timeouts, plain http only when allowed, HTTP/1 as object_store
/// prefers, no compression: reqwest is built without any), except that it follows no
/// redirect. Not carried over, since baton never sets them: proxies other than reqwest's
/// environment ones, extra root certificates, HTTP/2 tuning, address shuffling.
fn client(options: &ClientOptions) -> object_store::Result<reqwest::Client> {
    let allow_http = options
        .get_config_value(&ClientConfigKey::AllowHttp)
        .is_some_and(|v| v == "true");
    let user_agent = options
        .get_config_value(&ClientConfigKey::UserAgent)
        .unwrap_or_else(|| concat!("baton/", env!("CARGO_PKG_VERSION")).to_string());
    let mut builder = reqwest::Client::builder()
        .user_agent(user_agent)
        .http1_only()
        .https_only(!allow_http)
        .redirect(reqwest::redirect::Policy::custom(refuse_redirect))
        .dns_resolver(Arc::new(Resolver));
    if let Some(t) = duration(options, ClientConfigKey::Timeout)? {
        builder = builder.timeout(t);
    }
    if let Some(t) = duration(options, ClientConfigKey::ConnectTimeout)? {
        builder = builder.connect_timeout(t);
    }
    builder.build().map_err(|e| object_store::Error::Generic {
        store: "S3",
        source: Box::new(e),
    })
}

/// Every redirect is refused, to another host or to the same one. Another host must
/// never see a request: the session token (`x-amz-security-token`) and the signed headers
/// would go with it, and only the configured endpoint is trusted with them. The same
/// host gains nothing either: a SigV4 signature covers the path and query, so a request
/// redirected elsewhere on the host cannot verify there, and a 307/308 would send a
/// PUT's body to a key the server chose. S3 redirects only requests sent to the wrong
/// region or endpoint, which the configuration fixes.
fn refuse_redirect(attempt: reqwest::redirect::Attempt) -> reqwest::redirect::Action {
    let refused = RedirectRefused {
        status: attempt.status().as_u16(),
        to: attempt.url().origin().ascii_serialization(),
    };
    attempt.error(refused)
}

/// A redirect baton did not follow: its status and the origin it pointed to.
#[derive(Debug)]
pub struct RedirectRefused {
    pub status: u16,
    pub to: String,
}

impl std::fmt::Display for RedirectRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a {} redirect to {}, not followed", self.status, self.to)
    }
}

impl std::error::Error for RedirectRefused {}

#[derive(Debug)]
struct Counting {
    inner: HttpClient,
    counts: Arc<Counts>,
}

#[async_trait]
impl HttpService for Counting {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let query = req.uri().query().unwrap_or("").to_string();
        let method = req.method().as_str().to_string();
        let range = req
            .headers()
            .get("range")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let what = self.counts.count(&method, &query);
        let request = format!("{method} {}", req.uri());
        let path = req.uri().path().to_string();
        let t0 = Instant::now();
        let result = self.inner.execute(req).await;
        if crate::trace::enabled() {
            let status = match &result {
                Ok(r) => r.status().as_u16().to_string(),
                Err(e) => format!("error: {e}"),
            };
            tracing::debug!(
                target: crate::trace::TARGET,
                kind = "s3",
                request = %what,
                path,
                status,
                ms = crate::trace::ms(t0)
            );
        }
        let response = match result {
            Ok(response) => response,
            Err(e) => {
                self.counts.tries.failed(&request, t0);
                if find_in::<Unresolved>(&e).is_some() {
                    return Err(HttpError::new(HttpErrorKind::Unknown, e));
                }
                return Err(e);
            }
        };
        let status = response.status().as_u16();
        if status >= 500 || status == 429 {
            self.counts.tries.failed(&request, t0);
        } else {
            self.counts.tries.answered(&request);
        }
        let declared = response
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let Some(cap) = body_cap(&method, &query, range.as_deref(), status, declared) else {
            return Ok(response);
        };
        let (parts, body) = response.into_parts();
        let body = HttpResponseBody::new(Capped::new(body, cap, status, declared));
        Ok(HttpResponse::from_parts(parts, body))
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

/// The first error of type `T` in the chain of `e`'s sources.
fn find<T: std::error::Error + 'static>(e: &object_store::Error) -> Option<&T> {
    find_in(e)
}

fn find_in<T: std::error::Error + 'static>(e: &dyn std::error::Error) -> Option<&T> {
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(found) = s.downcast_ref::<T>() {
            return Some(found);
        }
        source = s.source();
    }
    None
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
/// (exit 6), no such bucket (exit 3), a host name that does not resolve (exit 7, not
/// retried), anything retried until the deadline (exit 7, saying how often and how long,
/// from `tries`). Not for the outcomes the caller handles (a missing key, an existing one).
pub fn map_error(e: object_store::Error, place: &str, key: &str, tries: &Tries) -> Error {
    // The object_store error stays the cause (its chain holds the HTTP layers between the
    // request and, say, a refused connection; `--verbose` shows them), under the typed
    // reason where a caller decides on one.
    let (place, key) = (place.to_string(), key.to_string());
    match mapped(&e, &place, &key, tries) {
        Mapped::NoSuchBucket => TransportError::NoSuchBucket { place, source: e }.into_error(),
        Mapped::NotFound => TransportError::NotFound {
            key,
            place,
            source: e,
        }
        .into_error(),
        Mapped::Other(error) => error.with_source(e),
    }
}

/// What an object_store error is to baton: one of the typed reasons, or an error to
/// report as it is.
enum Mapped {
    NoSuchBucket,
    NotFound,
    Other(Error),
}

fn mapped(e: &object_store::Error, place: &str, key: &str, tries: &Tries) -> Mapped {
    if let Some(unresolved) = find::<Unresolved>(e) {
        return Mapped::Other(Error::new(
            ErrorKind::Transport,
            format!("S3 request for {key} at {place} failed: {unresolved} (not retried)"),
        )
        .with_hint("check the endpoint's host name (--endpoint, AWS_ENDPOINT_URL) and the region, and that this machine's DNS works"));
    }
    if let Some(refused) = find::<RedirectRefused>(e) {
        return Mapped::Other(Error::new(
            ErrorKind::Security,
            format!(
                "S3 answered the request for {key} at {place} with {refused}: baton never follows a redirect, so credentials go only to the configured endpoint"
            ),
        )
        .with_hint("check the endpoint and the region (--endpoint, --region, AWS_ENDPOINT_URL, AWS_REGION): S3 redirects a request sent to the wrong region or endpoint"));
    }
    if let Some(over) = find::<BodyOverLimit>(e) {
        return Mapped::Other(Error::new(
            ErrorKind::Transport,
            format!("S3 answer for {key} at {place} refused: {over}"),
        )
        .with_hint("the server sent more than it declared or than baton reads (a broken or hostile server): check the endpoint (--endpoint, AWS_ENDPOINT_URL)"));
    }
    let text = chain(e);
    let denied = matches!(
        e,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
    ) || DENIED.iter().any(|code| text.contains(code));
    if text.contains("NoSuchBucket") {
        return Mapped::NoSuchBucket;
    }
    if denied {
        return Mapped::Other(Error::new(
            ErrorKind::Security,
            format!("S3 refused access to {key} at {place}: {}", cause(e)),
        )
        .with_hint("check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the AWS_PROFILE profile), the region and the bucket policy"));
    }
    match e {
        object_store::Error::NotFound { .. } => Mapped::NotFound,
        object_store::Error::InvalidPath { .. } => {
            Mapped::Other(Error::internal(format!("invalid S3 key {key}: {text}")))
        }
        _ => {
            let done = match tries.summary() {
                Some((n, took)) => format!(
                    " after {n} {} in {:.1} s",
                    if n == 1 { "try" } else { "tries" },
                    took.as_secs_f64()
                ),
                None => String::new(),
            };
            Mapped::Other(Error::new(
                ErrorKind::Transport,
                format!("S3 request for {key} at {place} failed{done}: {}", cause(e)),
            )
            .with_hint(format!(
                "check the endpoint and the network, then run the command again (a request is retried {} times at most, for up to {} s; {} sets the time)",
                super::MAX_RETRIES,
                super::settings::retry_timeout()
                    .map(|d| d.as_secs())
                    .unwrap_or(super::settings::DEFAULT_RETRY_SECS),
                super::settings::RETRY_VAR
            )))
        }
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
        let kind = |e| map_error(e, "s3://b/p", "config", &Tries::default()).kind;
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
        // Found anywhere in the chain, whatever the rest of the text says.
        let wrapped = |e: Box<dyn std::error::Error + Send + Sync>| object_store::Error::Generic {
            store: "S3",
            source: Box::new(HttpError::new_boxed(
                object_store::client::HttpErrorKind::Decode,
                e,
            )),
        };
        let redirect = map_error(
            wrapped(Box::new(RedirectRefused {
                status: 307,
                to: "http://elsewhere:9000".into(),
            })),
            "s3://b/p",
            "p/config",
            &Tries::default(),
        );
        assert_eq!(redirect.kind, ErrorKind::Security);
        assert!(
            redirect
                .message
                .contains("307 redirect to http://elsewhere:9000")
        );
        let over = map_error(
            wrapped(Box::new(BodyOverLimit {
                status: 500,
                cap: super::super::limits::MAX_ERROR_BODY,
                limit: super::super::limits::Limit::ErrorBody,
                declared: None,
            })),
            "s3://b/p",
            "p/config",
            &Tries::default(),
        );
        assert_eq!(over.kind, ErrorKind::Transport);
        assert!(over.message.contains("MAX_ERROR_BODY"), "{}", over.message);
    }

    #[test]
    fn the_client_takes_the_timeouts_object_store_was_given() {
        let options = ClientOptions::new()
            .with_timeout(Duration::from_secs(300))
            .with_connect_timeout(Duration::from_millis(1500));
        assert_eq!(
            duration(&options, ClientConfigKey::Timeout).unwrap(),
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            duration(&options, ClientConfigKey::ConnectTimeout).unwrap(),
            Some(Duration::from_millis(1500))
        );
        let _ = rustls::crypto::ring::default_provider().install_default();
        assert!(client(&options).is_ok());
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

    fn not_found(text: &str) -> object_store::Error {
        object_store::Error::NotFound {
            path: "p/config".into(),
            source: text.to_string().into(),
        }
    }

    #[test]
    fn a_missing_bucket_is_told_from_a_missing_key_by_variant() {
        let map = |e| map_error(e, "s3://b/p", "p/config", &Tries::default());
        let bucket = map(not_found("<Code>NoSuchBucket</Code>"));
        let key = map(not_found("<Code>NoSuchKey</Code>"));
        assert_eq!(
            (bucket.kind, key.kind),
            (ErrorKind::NotFound, ErrorKind::NotFound)
        );
        assert!(TransportError::is_no_such_bucket(&bucket));
        assert!(!TransportError::is_no_such_bucket(&key));
        assert!(matches!(
            key.reason::<TransportError>(),
            Some(TransportError::NotFound { .. })
        ));
        // The decision survives a reworded message; the old text alone decides nothing.
        // The object_store error is the cause under the reason.
        assert!(bucket.reason::<object_store::Error>().is_some());
        let mut reworded = bucket.context("push to origin");
        reworded.message = "the bucket is gone".into();
        assert!(TransportError::is_no_such_bucket(&reworded));
        assert!(!TransportError::is_no_such_bucket(&Error::not_found(
            "no such bucket for s3://b/p"
        )));
    }
}
