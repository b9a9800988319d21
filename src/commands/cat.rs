//! `baton cat REV:PATH`: print one file of a bundle, only after its hash checks out.

use std::io::{Seek, Write};

use base64::Engine;
use serde_json::json;

use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, IoContext, Result};
use baton_format::EntryKind;

/// Files up to this size are verified in memory; larger ones in an unnamed temp file.
const IN_MEMORY: u64 = 8 << 20;

pub fn run(ctx: &Ctx, spec: &str) -> Result<Outcome> {
    let Some((rev, path)) = spec.split_once(':') else {
        return Err(Error::usage(format!("'{spec}' is not REV:PATH"))
            .with_hint("e.g. baton cat current:handoff.md"));
    };
    let store = ctx.open_store()?;
    let bundle = store.read_bundle(&store.resolve(rev)?)?;
    let entry = store.lookup_path(&bundle.tree, path).map_err(|e| {
        if baton_store::StoreError::is_no_such_path(&e) {
            e.with_hint(format!("list the bundle's files with 'baton show {rev}'"))
        } else {
            e
        }
    })?;
    if entry.kind == EntryKind::Dir {
        return Err(Error::usage(format!("'{path}' is a directory"))
            .with_hint(format!("list it with 'baton show {rev}'")));
    }
    if ctx.json {
        let mut bytes = Vec::new();
        store
            .objects
            .copy_to(&entry.id, Some(entry.size), &mut bytes)?;
        let content = match String::from_utf8(bytes) {
            Ok(text) => json!({ "content": text }),
            Err(e) => {
                json!({ "content_base64": base64::engine::general_purpose::STANDARD.encode(e.as_bytes()) })
            }
        };
        let mut doc =
            json!({ "path": path, "id": entry.id, "size": entry.size, "kind": entry.kind });
        if let (Some(d), Some(c)) = (doc.as_object_mut(), content.as_object()) {
            d.extend(c.clone());
        }
        return Ok(Outcome::new("", doc));
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // A reader that stops early (`baton cat ... | head`) is not an error.
    let emit = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(|e| Error::other(format!("cannot write to stdout: {e}"))),
    };
    if entry.size <= IN_MEMORY {
        let mut bytes = Vec::with_capacity(entry.size as usize);
        store
            .objects
            .copy_to(&entry.id, Some(entry.size), &mut bytes)?;
        emit(out.write_all(&bytes))?;
    } else {
        let tmp_dir = std::env::temp_dir();
        let mut spool = tempfile::tempfile().ctx("cannot create a temp file in", &tmp_dir)?;
        store
            .objects
            .copy_to(&entry.id, Some(entry.size), &mut spool)?;
        spool.rewind().ctx("cannot read back", &tmp_dir)?;
        emit(std::io::copy(&mut spool, &mut out).map(|_| ()))?;
    }
    emit(out.flush())?;
    Ok(Outcome::new("", json!({})))
}
