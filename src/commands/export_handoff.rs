//! `baton export-handoff REV --format frontmatter|prowl DIR [--history]`: a handoff as
//! the files another handoff tool reads.

use std::fs;

use serde_json::json;

use crate::cli::ExportHandoffArgs;
use crate::commands::Ctx;
use crate::error::{Error, IoContext, Result};
use crate::format::EntryKind;
use crate::handoff::export::{self, ExportBundle};
use crate::output::Outcome;

/// A briefing larger than this is not exported (a handoff.md is a few kilobytes).
const MAX_BRIEFING: u64 = 16 << 20;

pub fn run(ctx: &Ctx, args: &ExportHandoffArgs) -> Result<Outcome> {
    let dir = &args.dir;
    // Never mix the export into other files: DIR is absent or empty.
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::usage(format!(
                    "{}: directory is not empty; export-handoff writes only into an absent or empty directory",
                    dir.display()
                ))
                .with_hint("name a new directory"));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Error::usage(format!(
                "{}: exists and is not a directory",
                dir.display()
            )));
        }
        Err(e) => return Err(e).ctx("cannot read", dir),
    }
    let store = ctx.open_store()?;
    let id = store.resolve(&args.rev)?;
    let mut chain = Vec::new();
    let mut next = Some(id);
    while let Some(at) = next {
        let bundle = store.read_bundle(&at)?;
        let briefing = match store.lookup_path(&bundle.tree, "handoff.md") {
            Ok(entry) if entry.kind != EntryKind::Dir && entry.size <= MAX_BRIEFING => {
                let mut bytes = Vec::new();
                store
                    .objects
                    .copy_to(&entry.id, Some(entry.size), &mut bytes)?;
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            Ok(_) => None,
            Err(e) if e.kind == crate::error::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        next = if args.history {
            bundle.parents.first().copied()
        } else {
            None
        };
        chain.push(ExportBundle {
            id: at.to_hex(),
            created: bundle.created,
            from: bundle.from,
            to: bundle.to,
            summary: bundle.summary,
            note: bundle.note,
            metadata: bundle.metadata,
            briefing,
        });
    }
    chain.reverse();
    let files = export::render(&chain, args.format);
    for (rel, text) in &files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).ctx("cannot create", parent)?;
        }
        fs::write(&path, text).ctx("cannot write", &path)?;
    }
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    let human = if ctx.quiet {
        String::new()
    } else {
        format!(
            "Exported {} handoff{} as {} into {} ({} files)",
            chain.len(),
            if chain.len() == 1 { "" } else { "s" },
            args.format.name(),
            dir.display(),
            files.len()
        )
    };
    Ok(Outcome::new(
        human,
        json!({
            "format": args.format.name(),
            "dir": dir,
            "bundles": chain.iter().map(|b| b.id.as_str()).collect::<Vec<_>>(),
            "files": paths,
        }),
    ))
}
