//! `baton search REV QUERY [--cursor C]`: page through a handoff's transcript, read line
//! by line from the store.

use std::fmt::Write;

use serde_json::json;

use crate::cli::SearchArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, Result};
use baton_handoff::transcript;

pub fn run(ctx: &Ctx, args: &SearchArgs) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let id = store.resolve(&args.rev)?;
    let bundle = store.read_bundle(&id)?;
    let entry = store
        .lookup_path(&bundle.tree, "transcript.jsonl")
        .map_err(|e| {
            if e.kind == baton_error::ErrorKind::NotFound {
                Error::not_found(format!("handoff {} has no transcript", id.short()))
                    .with_hint("save one with 'baton save --transcript FILE'")
            } else {
                e
            }
        })?;
    let filter = transcript::Filter {
        roles: args.role.clone(),
        kinds: args.kind.clone(),
        tools: args.tool.clone(),
    };
    // Searched as it is decompressed, one line held at a time (a small pulled store can
    // hold a transcript of gigabytes).
    let mut search = transcript::Search::new(&args.query, &filter, args.cursor.as_deref())?;
    transcript::read_stored(&store, &entry, &mut |line, bytes| search.line(line, bytes))?;
    let page = search.finish();
    let mut human = String::new();
    for hit in &page.hits {
        match baton_handoff::events::parse(&hit.event) {
            Some(e) => {
                // An `other` event names the harness's own type where a call names its
                // tool, and a sub-agent's event says whose it is, as the kickoff does.
                let tool = e
                    .tool
                    .as_deref()
                    .or(e.harness_type.as_deref())
                    .map(|t| format!(" {t}"))
                    .unwrap_or_default();
                let agent = e
                    .source
                    .agent
                    .as_deref()
                    .map(|a| format!(", sub-agent {a}"))
                    .unwrap_or_default();
                let _ = writeln!(
                    human,
                    "{} [{} {}{tool}{agent}] {}",
                    hit.line,
                    e.role.name(),
                    e.kind.name(),
                    e.text.trim_end()
                );
            }
            None => {
                let _ = writeln!(human, "{}: {}", hit.line, hit.event);
            }
        }
    }
    let _ = write!(
        human,
        "{} of {} matching events",
        page.hits.len(),
        page.total_matches
    );
    if let Some(cursor) = &page.next_cursor {
        let _ = write!(human, "; more with --cursor {cursor}");
    }
    let hits: Vec<_> = page
        .hits
        .iter()
        .map(|h| json!({ "line": h.line, "event": h.event, "tokens": h.tokens }))
        .collect();
    Ok(Outcome::new(
        human,
        json!({
            "bundle": id,
            "query": args.query,
            "hits": hits,
            "total_matches": page.total_matches,
            "truncated_events": page.truncated_events,
            "next_cursor": page.next_cursor,
        }),
    ))
}
