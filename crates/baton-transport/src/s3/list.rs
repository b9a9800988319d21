//! The S3 backend's listings: ListObjectsV2 with `/` as delimiter, page by page, held to
//! the listing limits of `limits.rs` (pages, entries, name bytes; each page's body to
//! `MAX_LIST_PAGE_BYTES` by the HTTP layer), so a server that answers with pages for
//! ever is refused instead of filling memory.

use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;

use super::S3Backend;
use super::http::map_error;
use super::limits::{ListingBudget, ListingOver};
use crate::RemoteEntry;
use baton_error::{Error, Result};

impl S3Backend {
    /// One listing: the names right under a prefix (objects, and `is_dir` for deeper
    /// keys), sorted.
    pub(super) async fn list(&self, rel: String) -> Result<Vec<RemoteEntry>> {
        let key = self.key(&rel);
        let key = key.trim_end_matches('/');
        let prefix = if key.is_empty() {
            None
        } else {
            let path = Path::parse(key)
                .map_err(|e| Error::internal(format!("invalid S3 key {key}: {e}")))?;
            Some(format!("{path}/"))
        };
        let mut budget = ListingBudget::default();
        let mut entries = Vec::new();
        let mut token = None;
        loop {
            let opts = PaginatedListOptions {
                delimiter: Some("/".into()),
                page_token: token.take(),
                ..PaginatedListOptions::default()
            };
            let page = self
                .s3
                .list_paginated(prefix.as_deref(), opts)
                .await
                .map_err(|e| map_error(e, &self.place(), key, &self.counts.tries))?;
            let before = entries.len();
            let dirs = page.result.common_prefixes.iter().filter_map(|p| {
                Some(RemoteEntry {
                    name: p.filename()?.to_string(),
                    size: 0,
                    mtime: 0,
                    is_dir: true,
                })
            });
            let objects = page.result.objects.iter().filter_map(|o| {
                Some(RemoteEntry {
                    name: o.location.filename()?.to_string(),
                    size: o.size,
                    mtime: u64::try_from(o.last_modified.timestamp()).unwrap_or(0),
                    is_dir: false,
                })
            });
            entries.extend(dirs.chain(objects));
            let taken = &entries[before..];
            let name_bytes = taken.iter().map(|e| e.name.len() as u64).sum();
            match budget.take(taken.len() as u64, name_bytes, page.page_token.as_deref()) {
                Ok(true) => token = page.page_token,
                Ok(false) => break,
                Err(over) => return Err(self.listing_refused(key, over)),
            }
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        // A common prefix may come back on more than one page.
        entries.dedup_by(|a, b| a.name == b.name && a.is_dir && b.is_dir);
        Ok(entries)
    }

    fn listing_refused(&self, key: &str, over: ListingOver) -> Error {
        Error::integrity(format!(
            "the listing of {key}/ at {} passed {}: the server keeps answering with more",
            self.place(),
            over.describe()
        ))
        .with_hint("no baton store holds that much under one prefix: check the endpoint is the S3 server you meant (--endpoint, AWS_ENDPOINT_URL)")
    }
}
