//! What a hostile S3 server can make baton read: the cap on every response body (chosen
//! from the request and the answer's head, enforced as the body arrives) and the caps on
//! one listing (pages, entries, name bytes). object_store reads error answers and listing
//! pages whole, and preallocates what a body declares: without these a server answering
//! for ever grows memory until the process aborts (docs/reliability.md, "Hostile
//! object-storage servers").

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use object_store::client::{HttpError, HttpErrorKind, HttpResponseBody};

/// The most of an error answer (any status but 2xx) read: S3's are an XML document of a
/// few hundred bytes.
pub const MAX_ERROR_BODY: u64 = 64 << 10;
/// The most of one ListObjectsV2 page: S3 pages hold at most 1,000 entries of keys up to
/// 1,024 bytes, about 1.5 MB of XML.
pub const MAX_LIST_PAGE_BYTES: u64 = 8 << 20;
/// The most of the answer to a PUT, POST, DELETE or HEAD (small XML documents).
pub const MAX_REPLY_BODY: u64 = 1 << 20;
/// The pages of one listing: 1,000 full pages are 1,000,000 entries.
pub const MAX_LIST_PAGES: u64 = 1000;
/// The entries (objects and common prefixes) of one listing.
pub const MAX_LIST_ENTRIES: u64 = 1_000_000;
/// The bytes of the names kept from one listing (baton's own names are at most 69 bytes).
pub const MAX_LIST_NAME_BYTES: u64 = 64 << 20;
/// What a body's declared length may make a reader reserve up front (object_store
/// preallocates the size hint); past it the buffer grows with what actually arrives.
const MAX_PREALLOCATION: u64 = 1 << 20;

/// Which limit a body was held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    ErrorBody,
    ListPage,
    Reply,
    /// The length of the byte range the request asked for.
    Range,
    /// The answer's own `Content-Length`.
    ContentLength,
}

impl Limit {
    fn describe(self) -> &'static str {
        match self {
            Limit::ErrorBody => "MAX_ERROR_BODY, the limit on an error answer",
            Limit::ListPage => "MAX_LIST_PAGE_BYTES, the limit on one listing page",
            Limit::Reply => "MAX_REPLY_BODY, the limit on the answer to a write",
            Limit::Range => "the length of the range asked for",
            Limit::ContentLength => "its own Content-Length",
        }
    }
}

/// The cap on the body of the answer (`status`, `content_length`) to a request
/// (`method`, `query`, its `Range` header), and the limit it comes from; `None`: the
/// caller bounds what it reads (a plain GET without a declared length), or there is no
/// body (HEAD: its `Content-Length` is the object's).
pub fn body_cap(
    method: &str,
    query: &str,
    range: Option<&str>,
    status: u16,
    content_length: Option<u64>,
) -> Option<(u64, Limit)> {
    if method == "HEAD" {
        return None;
    }
    let listing = query
        .split('&')
        .any(|p| p == "list-type=2" || p == "uploads" || p.starts_with("uploads="));
    // Its own length first: a body that declared exactly what was asked for and then
    // ran on is described by what it declared.
    let mut caps = Vec::with_capacity(3);
    if let Some(len) = content_length {
        caps.push((len, Limit::ContentLength));
    }
    if !(200..300).contains(&status) {
        caps.push((MAX_ERROR_BODY, Limit::ErrorBody));
    } else if method == "GET" && listing {
        caps.push((MAX_LIST_PAGE_BYTES, Limit::ListPage));
    } else if method != "GET" {
        caps.push((MAX_REPLY_BODY, Limit::Reply));
    } else if let Some(len) = range.and_then(range_len) {
        caps.push((len, Limit::Range));
    }
    caps.into_iter().min_by_key(|(cap, _)| *cap)
}

/// The length of `bytes=A-B` (the only form baton sends).
fn range_len(header: &str) -> Option<u64> {
    let (start, end) = header.strip_prefix("bytes=")?.split_once('-')?;
    let (start, end): (u64, u64) = (start.parse().ok()?, end.parse().ok()?);
    end.checked_sub(start)?.checked_add(1)
}

/// A body that was longer than its cap (or declared itself so).
#[derive(Debug)]
pub struct BodyOverLimit {
    pub status: u16,
    pub cap: u64,
    pub limit: Limit,
    /// The length the answer declared, when that alone was over the cap.
    pub declared: Option<u64>,
}

impl std::fmt::Display for BodyOverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.declared {
            Some(declared) => write!(
                f,
                "the answer (status {}) declared a body of {declared} bytes, more than {} ({})",
                self.status,
                self.cap,
                self.limit.describe()
            ),
            None => write!(
                f,
                "the answer's body (status {}) ran past {} bytes ({})",
                self.status,
                self.cap,
                self.limit.describe()
            ),
        }
    }
}

impl std::error::Error for BodyOverLimit {}

/// A response body that fails as soon as it passes `cap` bytes, and never asks a reader
/// to reserve more than `MAX_PREALLOCATION` up front.
pub struct Capped {
    inner: HttpResponseBody,
    cap: u64,
    limit: Limit,
    status: u16,
    declared: Option<u64>,
    seen: u64,
    failed: bool,
}

impl Capped {
    pub fn new(
        inner: HttpResponseBody,
        (cap, limit): (u64, Limit),
        status: u16,
        declared: Option<u64>,
    ) -> Capped {
        Capped {
            inner,
            cap,
            limit,
            status,
            declared,
            seen: 0,
            failed: false,
        }
    }

    fn over(&mut self, declared: Option<u64>) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        self.failed = true;
        let over = BodyOverLimit {
            status: self.status,
            cap: self.cap,
            limit: self.limit,
            declared,
        };
        // Decode: object_store does not retry it as a broken connection.
        Poll::Ready(Some(Err(HttpError::new(HttpErrorKind::Decode, over))))
    }
}

impl Body for Capped {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        if let Some(declared) = this.declared.filter(|d| *d > this.cap) {
            return this.over(Some(declared));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                this.seen = this.seen.saturating_add(len);
                if this.seen > this.cap {
                    return this.over(None);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper);
        }
        hint.set_lower(inner.lower().min(self.cap).min(MAX_PREALLOCATION));
        hint
    }
}

/// Which listing limit a server ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListingOver {
    Pages,
    Entries,
    NameBytes,
    /// The next page's token was the one just used: the listing would never end.
    RepeatedToken,
}

impl ListingOver {
    pub fn describe(self) -> String {
        match self {
            ListingOver::Pages => format!("MAX_LIST_PAGES ({MAX_LIST_PAGES} pages)"),
            ListingOver::Entries => format!("MAX_LIST_ENTRIES ({MAX_LIST_ENTRIES} entries)"),
            ListingOver::NameBytes => {
                format!(
                    "MAX_LIST_NAME_BYTES ({} MiB of names)",
                    MAX_LIST_NAME_BYTES >> 20
                )
            }
            ListingOver::RepeatedToken => {
                "its continuation token did not change from one page to the next".to_string()
            }
        }
    }
}

/// What one listing has taken so far.
#[derive(Debug, Default)]
pub struct ListingBudget {
    pages: u64,
    entries: u64,
    name_bytes: u64,
    last_token: Option<String>,
}

impl ListingBudget {
    /// Count a page of `entries` names of `name_bytes` bytes whose answer named `next` as
    /// the following page: whether to ask for it, or the limit passed.
    pub fn take(
        &mut self,
        entries: u64,
        name_bytes: u64,
        next: Option<&str>,
    ) -> Result<bool, ListingOver> {
        self.pages += 1;
        self.entries = self.entries.saturating_add(entries);
        self.name_bytes = self.name_bytes.saturating_add(name_bytes);
        if self.entries > MAX_LIST_ENTRIES {
            return Err(ListingOver::Entries);
        }
        if self.name_bytes > MAX_LIST_NAME_BYTES {
            return Err(ListingOver::NameBytes);
        }
        let Some(next) = next.filter(|t| !t.is_empty()) else {
            return Ok(false);
        };
        if self.last_token.as_deref() == Some(next) {
            return Err(ListingOver::RepeatedToken);
        }
        if self.pages >= MAX_LIST_PAGES {
            return Err(ListingOver::Pages);
        }
        self.last_token = Some(next.to_string());
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[test]
    fn every_answer_gets_the_tightest_cap_that_applies() {
        let cap = |m, q, r, s, cl| body_cap(m, q, r, s, cl);
        assert_eq!(
            cap("GET", "", None, 500, None),
            Some((MAX_ERROR_BODY, Limit::ErrorBody))
        );
        assert_eq!(
            cap("GET", "", None, 404, Some(10)),
            Some((10, Limit::ContentLength))
        );
        assert_eq!(
            cap("GET", "list-type=2&prefix=p%2F", None, 200, None),
            Some((MAX_LIST_PAGE_BYTES, Limit::ListPage))
        );
        assert_eq!(
            cap("GET", "", Some("bytes=100-199"), 206, Some(1 << 40)),
            Some((100, Limit::Range))
        );
        assert_eq!(
            cap("GET", "", None, 200, Some(10)),
            Some((10, Limit::ContentLength))
        );
        assert_eq!(cap("GET", "", None, 200, None), None);
        assert_eq!(
            cap("PUT", "", None, 200, None),
            Some((MAX_REPLY_BODY, Limit::Reply))
        );
        assert_eq!(
            cap("POST", "uploads", None, 200, None),
            Some((MAX_REPLY_BODY, Limit::Reply))
        );
        assert_eq!(cap("HEAD", "", None, 200, Some(1 << 40)), None);
        assert_eq!(range_len("bytes=5-4"), None);
        assert_eq!(range_len("bytes=0-0"), Some(1));
    }

    /// A body of these chunks, one frame each.
    struct Chunks(std::collections::VecDeque<&'static [u8]>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = HttpError;

        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
            let next = self.get_mut().0.pop_front();
            Poll::Ready(next.map(|c| Ok(Frame::data(Bytes::from_static(c)))))
        }
    }

    fn capped(chunks: Vec<&'static [u8]>, cap: u64, declared: Option<u64>) -> Capped {
        let body = HttpResponseBody::new(Chunks(chunks.into()));
        Capped::new(body, (cap, Limit::ContentLength), 200, declared)
    }

    fn collect(body: Capped) -> Result<Vec<u8>, String> {
        let body = HttpResponseBody::new(body);
        futures::executor::block_on(async {
            let mut out = Vec::new();
            let mut stream = body.bytes_stream();
            while let Some(chunk) = stream.next().await {
                out.extend_from_slice(&chunk.map_err(|e| format!("{e:?}"))?);
            }
            Ok(out)
        })
    }

    #[test]
    fn a_body_past_its_cap_fails_and_one_within_passes() {
        assert_eq!(
            collect(capped(vec![b"abc", b"de"], 5, Some(5))).unwrap(),
            b"abcde"
        );
        let err = collect(capped(vec![b"abc", b"def"], 5, Some(5))).unwrap_err();
        assert!(err.contains("ContentLength"), "{err}");
        let err = collect(capped(vec![b"a"], 5, Some(1 << 40))).unwrap_err();
        assert!(err.contains("declared: Some"), "{err}");
    }

    #[test]
    fn a_listing_stops_at_each_limit() {
        let mut budget = ListingBudget::default();
        for page in 1..MAX_LIST_PAGES {
            assert_eq!(budget.take(1, 10, Some(&format!("t{page}"))), Ok(true));
        }
        assert_eq!(budget.take(1, 10, Some("last")), Err(ListingOver::Pages));
        let mut budget = ListingBudget::default();
        assert_eq!(budget.take(1, 10, Some("same")), Ok(true));
        assert_eq!(
            budget.take(1, 10, Some("same")),
            Err(ListingOver::RepeatedToken)
        );
        let mut budget = ListingBudget::default();
        assert_eq!(
            budget.take(MAX_LIST_ENTRIES + 1, 0, None),
            Err(ListingOver::Entries)
        );
        let mut budget = ListingBudget::default();
        assert_eq!(
            budget.take(1, MAX_LIST_NAME_BYTES + 1, None),
            Err(ListingOver::NameBytes)
        );
        let mut budget = ListingBudget::default();
        assert_eq!(budget.take(1000, 69_000, Some("")), Ok(false));
    }
}
