//! `baton save DIR`: snapshot a directory as a new bundle on top of `current`.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;

use serde_json::json;

use crate::cli::SaveArgs;
use crate::error::{Error, Result};
use crate::format::names::RefName;
use crate::output::{Ctx, Outcome};
use crate::store::snapshot;

pub fn run(ctx: &Ctx, args: &SaveArgs) -> Result<Outcome> {
    let metadata = parse_metadata(&args.meta)?;
    let store = ctx.open_store()?;
    let skip = std::fs::metadata(store.root())
        .ok()
        .map(|m| (m.dev(), m.ino()));
    let node = snapshot::scan(&args.dir, skip)?;
    // A damaged ref or log stops a save before a single object is written, so a refused
    // save leaves the store exactly as it was (the ref move at the end would refuse a
    // damaged ref or a torn log only after writing every object, and would append after
    // a damaged log line).
    store.read_ref(&RefName::Current)?;
    store.read_log()?;
    let bar = ctx.progress(node.total_bytes(), true);
    let (tree, stats) = snapshot::write(&store, &node, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let (id, bundle) = store.commit_bundle(tree, "save", |b| {
        b.from = args.from.clone();
        b.to = args.to.clone();
        b.summary = args.summary.clone();
        b.note = args.note.clone();
        b.metadata = metadata;
    })?;
    Ok(Outcome::new(
        id.to_hex(),
        json!({
            "bundle": id,
            "parents": bundle.parents,
            "tree": tree,
            "files": stats.files,
            "bytes": stats.bytes,
            "objects_written": stats.objects_written,
            "bytes_written": stats.bytes_written,
        }),
    ))
}

fn parse_metadata(pairs: &[String]) -> Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(Error::usage(format!("--meta '{pair}' is not KEY=VALUE"))
                .with_hint("write --meta key=value"));
        };
        if key.is_empty() {
            return Err(Error::usage(format!("--meta '{pair}' has an empty key")));
        }
        map.insert(key.to_string(), value.to_string());
    }
    Ok(map)
}
