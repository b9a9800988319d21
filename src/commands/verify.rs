//! `baton verify [REV] [--history]`: rehash and check the whole store, or one bundle (and
//! with `--history` all its ancestors).

use std::fmt::Write;

use serde_json::json;

use crate::commands::Ctx;
use crate::output::{Outcome, count};
use baton_error::{Error, Result};

pub fn run(ctx: &Ctx, rev: Option<&str>, history: bool) -> Result<Outcome> {
    // A full verify works without keys on an encrypted store (what it can check);
    // verifying a revision needs them.
    let store = if rev.is_some() {
        ctx.open_store()?
    } else {
        ctx.open_store_locked()?
    };
    let target = rev.map(|r| store.resolve(r)).transpose()?;
    let bar = ctx.progress(0, false).with_message("verifying");
    let report = match &target {
        Some(id) => store.verify_rev(id, history, &|n| bar.inc(n))?,
        None => store.verify_all(&|n| bar.inc(n))?,
    };
    bar.finish_and_clear();
    let scope = match &target {
        Some(id) if history => format!("bundle {} and its history", id.short()),
        Some(id) => format!("bundle {}", id.short()),
        None => "store".to_string(),
    };
    let mut human = String::new();
    for problem in &report.problems {
        let _ = writeln!(human, "problem: {problem}");
    }
    if !ctx.quiet || !report.is_clean() {
        let _ = write!(
            human,
            "{scope}: {} ({} bytes), {} checked",
            count(report.objects_checked, "object"),
            report.bytes_checked,
            count(report.bundles_checked, "bundle")
        );
        if target.is_none() {
            let _ = write!(
                human,
                ", {}",
                match report.log_entries {
                    1 => "1 log entry".to_string(),
                    n => format!("{n} log entries"),
                }
            );
        }
        let _ = write!(
            human,
            ": {}",
            if report.is_clean() { "ok" } else { "DAMAGED" }
        );
        if !report.contents_checked {
            let _ = write!(
                human,
                "\nnote: the store is encrypted and no identity was given: files, names, pack hashes, refs and the log were checked, object contents were not"
            );
        }
    }
    let mut outcome = Outcome::new(human, json!({ "scope": scope, "report": report }));
    if !report.is_clean() {
        outcome.failure = Some(
            Error::integrity(format!(
                "{scope} has {}: {}",
                count(report.problems.len() as u64, "problem"),
                report.problems[0]
            ))
            .with_hint(
                "refetch what is missing or damaged from a target that has it: 'baton pull --repair [TARGET]', then 'baton verify' again",
            ),
        );
    }
    Ok(outcome)
}
