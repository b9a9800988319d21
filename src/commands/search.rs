//! `baton search REV QUERY [--cursor C]`: page through a handoff's transcript, read line
//! by line from the store.

use std::fmt::Write;

use serde_json::json;

use crate::cli::SearchArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::Result;
use baton_handoff::transcript;

pub use baton_handoff::search::SearchOptions;

impl From<&SearchArgs> for SearchOptions {
    fn from(args: &SearchArgs) -> SearchOptions {
        SearchOptions {
            rev: args.rev.clone(),
            query: args.query.clone(),
            cursor: args.cursor.clone(),
            filter: transcript::Filter {
                roles: args.role.clone(),
                kinds: args.kind.clone(),
                tools: args.tool.clone(),
            },
            total: !args.no_total,
        }
    }
}

pub fn run(ctx: &Ctx, args: &SearchArgs) -> Result<Outcome> {
    run_with(ctx, &SearchOptions::from(args))
}

pub fn run_with(ctx: &Ctx, args: &SearchOptions) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let (id, page) = baton_handoff::search::search(&store, args)?;
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
    let _ = match page.total_matches {
        Some(total) => write!(human, "{} of {total} matching events", page.hits.len()),
        None => write!(human, "{} matching events shown", page.hits.len()),
    };
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
