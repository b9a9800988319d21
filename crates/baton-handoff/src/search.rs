//! `search` as a library function: one page of a handoff's transcript events matching a
//! query, read line by line as it is decompressed from the store.

use crate::transcript::{self, Filter, Page};
use baton_error::{Error, Result};
use baton_format::ObjectId;
use baton_store::Store;

/// One page of a search, as plain values (the CLI's arguments, or an MCP call's).
pub struct SearchOptions {
    /// The handoff whose transcript to search.
    pub rev: String,
    /// Words that must all appear in an event's text (ignoring case).
    pub query: String,
    /// A previous answer's `next_cursor`.
    pub cursor: Option<String>,
    pub filter: Filter,
    /// Count every match of the transcript (`total_matches`); `false` stops looking once
    /// the page and its cursor are known, which is what a common word costs.
    pub total: bool,
}

/// The page `opts` asks for, and the bundle it was found in.
pub fn search(store: &Store, opts: &SearchOptions) -> Result<(ObjectId, Page)> {
    let id = store.resolve(&opts.rev)?;
    let bundle = store.read_bundle(&id)?;
    let entry = store
        .find_path(&bundle.tree, "transcript.jsonl")?
        .ok_or_else(|| {
            Error::not_found(format!("handoff {} has no transcript", id.short()))
                .with_hint("save one with 'baton save --transcript FILE'")
        })?;
    // Searched as it is decompressed, one line held at a time (a small pulled store can
    // hold a transcript of gigabytes).
    let mut search = transcript::Search::new(&opts.query, &opts.filter, opts.cursor.as_deref())?;
    if !opts.total {
        search = search.without_total();
    }
    transcript::read_stored(store, &entry, &mut |line, bytes| search.line(line, bytes))?;
    Ok((id, search.finish()))
}
