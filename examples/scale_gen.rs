//! Generates a large store for the scale benchmark (bench/scale.sh): B bundles in one
//! linear history, about O objects, one pack per K bundles, `current` moved once per bundle.
//!
//! Usage: scale_gen STORE BUNDLES OBJECTS [PER_PACK [REPACK]]
//!
//! REPACK is `auto` (the default: after each pack, packs are merged as a pull that
//! wrote it would merge them, `Store::auto_repack`) or `none` (every pack kept, the
//! layout of stores made before packs were merged).
//!
//! Everything goes through baton's own writers: objects are encoded by
//! `Objects::encode_stored` and written by `Objects::write_pack` (the pack writer, as a
//! pull publishes packs), and every bundle is made current by `Store::update_ref`, which
//! appends the log line and publishes the ref generation exactly as `save` does. Only the
//! directory scan of `save` is skipped: the content is synthesised in memory.
//!
//! Shape of bundle i: a root tree with `handoff.md` (new), `evidence/`, `transcript/` and
//! `artifacts/` (new small files, about OBJECTS/BUNDLES in all) and `shared/` (five files,
//! the same in every bundle: one shared tree).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton::error::Result;
use baton::format::names::RefName;
use baton::format::{Bundle, EntryKind, ObjectId, Tree, TreeEntry};
use baton::store::Store;
use baton::store::refs::{Expect, MoveReason};
use rayon::prelude::*;

/// Objects per bundle that are not new blobs: root tree, three subtrees, the manifest.
const FIXED_PER_BUNDLE: u64 = 5;
const SHARED_FILES: usize = 5;
const DIRS: [&str; 3] = ["artifacts", "evidence", "transcript"];

struct Args {
    store: PathBuf,
    bundles: u64,
    objects: u64,
    per_pack: u64,
    repack: bool,
}

fn parse_args() -> std::result::Result<Args, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 || args.len() > 5 {
        return Err("usage: scale_gen STORE BUNDLES OBJECTS [PER_PACK [auto|none]]".into());
    }
    let repack = match args.get(4).map(String::as_str) {
        None | Some("auto") => true,
        Some("none") => false,
        Some(other) => return Err(format!("REPACK is 'auto' or 'none', not '{other}'")),
    };
    let number = |s: &str| {
        s.parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("'{s}' is not a positive number"))
    };
    Ok(Args {
        store: PathBuf::from(&args[0]),
        bundles: number(&args[1])?,
        objects: number(&args[2])?,
        per_pack: args.get(3).map(|s| number(s)).transpose()?.unwrap_or(10),
        repack,
    })
}

/// Deterministic small text (a few lines, 100-400 bytes): a file's contents.
fn file_text(bundle: u64, dir: &str, file: u64) -> Vec<u8> {
    let mut x = bundle
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(file.wrapping_mul(0xbf58_476d_1ce4_e5b9))
        ^ dir.len() as u64;
    let mut out = format!("# {dir} {file} of bundle {bundle}\n");
    let words = [
        "parser", "test", "fails", "on", "nested", "input", "fixed", "todo", "check", "the",
        "lexer", "state", "after", "retry", "agent", "handoff", "note", "build", "ok",
    ];
    let lines = 2 + (x % 6);
    for _ in 0..lines {
        for _ in 0..8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push_str(words[(x % words.len() as u64) as usize]);
            out.push(' ');
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// Objects of one bundle, in stored form, plus its root tree id.
struct Built {
    stored: Vec<(ObjectId, Vec<u8>)>,
    tree: ObjectId,
}

fn entry(name: String, kind: EntryKind, bytes: &[u8]) -> TreeEntry {
    TreeEntry {
        name,
        kind,
        size: bytes.len() as u64,
        id: ObjectId::of(bytes),
    }
}

fn build_bundle(store: &Store, i: u64, new_files: u64, shared: &TreeEntry) -> Result<Built> {
    let mut contents: Vec<Vec<u8>> = Vec::new();
    let mut root = vec![shared.clone()];
    let handoff = format!("# Handoff {i}\n\nNext: continue with step {}.\n", i + 1).into_bytes();
    root.push(entry("handoff.md".into(), EntryKind::File, &handoff));
    contents.push(handoff);
    let per_dir = new_files.saturating_sub(1).div_ceil(DIRS.len() as u64);
    let mut left = new_files.saturating_sub(1);
    for dir in DIRS {
        let n = per_dir.min(left);
        left -= n;
        let mut entries = Vec::new();
        for f in 0..n {
            let text = file_text(i, dir, f);
            entries.push(entry(format!("f{f:05}.txt"), EntryKind::File, &text));
            contents.push(text);
        }
        let tree = Tree::new(entries)?.encode();
        root.push(entry(dir.to_string(), EntryKind::Dir, &tree));
        contents.push(tree);
    }
    let root = Tree::new(root)?.encode();
    let tree = ObjectId::of(&root);
    contents.push(root);
    let stored = contents
        .par_iter()
        .map(|bytes| {
            store
                .objects
                .encode_stored(bytes)
                .map(|(_, name, stored)| (name, stored))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Built { stored, tree })
}

fn run(args: &Args) -> Result<()> {
    let started = Instant::now();
    let store = Store::init(&args.store)?;
    let new_files = (args.objects / args.bundles)
        .saturating_sub(FIXED_PER_BUNDLE)
        .max(1);
    // The shared subtree and its files: written once, in the first pack.
    let mut shared_entries = Vec::new();
    let mut first_objects = Vec::new();
    for f in 0..SHARED_FILES as u64 {
        let text = file_text(0, "shared", f);
        shared_entries.push(entry(format!("lib{f}.rs"), EntryKind::File, &text));
        first_objects.push(text);
    }
    let shared_tree = Tree::new(shared_entries)?.encode();
    let shared = entry("shared".into(), EntryKind::Dir, &shared_tree);
    first_objects.push(shared_tree);

    let base = UNIX_EPOCH + Duration::from_secs(1_780_000_000);
    let mut parent: Option<ObjectId> = None;
    let mut total_objects = 0u64;
    let mut packs = 0u64;
    let mut i = 0u64;
    while i < args.bundles {
        let batch_end = (i + args.per_pack).min(args.bundles);
        let mut pack: Vec<(ObjectId, Vec<u8>)> = Vec::new();
        if i == 0 {
            for bytes in &first_objects {
                let (_, name, stored) = store.objects.encode_stored(bytes)?;
                pack.push((name, stored));
            }
        }
        let mut moves = Vec::new();
        let mut prev = parent;
        for b in i..batch_end {
            let built = build_bundle(&store, b, new_files, &shared)?;
            pack.extend(built.stored);
            let created: SystemTime = base + Duration::from_secs(60 * b);
            let mut bundle = Bundle::new(built.tree, prev.into_iter().collect(), created);
            let (from, to) = if b % 2 == 0 {
                ("claude", "codex")
            } else {
                ("codex", "claude")
            };
            bundle.from = from.into();
            bundle.to = to.into();
            bundle.summary = format!("step {b}: parser work continues");
            bundle.metadata = BTreeMap::from([("task".to_string(), "scale".to_string())]);
            let (id, name, stored) = store.objects.encode_stored(&bundle.encode())?;
            pack.push((name, stored));
            moves.push((prev, id, from, to));
            prev = Some(id);
        }
        // A pack never holds an object twice (the index is strictly sorted).
        pack.sort_by_key(|a| a.0);
        pack.dedup_by(|a, b| a.0 == b.0);
        total_objects += pack.len() as u64;
        store.objects.write_pack(&pack)?;
        packs += 1;
        // The objects are durable before any ref names them (invariant I).
        for (old, new, from, to) in moves {
            let reason = MoveReason {
                action: "save".into(),
                from: from.into(),
                to: to.into(),
            };
            store.update_ref(&RefName::Current, Expect::Value(old), Some(new), &reason)?;
        }
        if args.repack {
            store.auto_repack()?;
        }
        parent = prev;
        i = batch_end;
        if packs.is_multiple_of(100) || i == args.bundles {
            eprintln!(
                "scale_gen: {i}/{} bundles, {total_objects} objects, {packs} packs written, {:.1}s",
                args.bundles,
                started.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "{{\"bundles\":{},\"objects\":{total_objects},\"packs\":{packs},\"per_pack\":{},\"seconds\":{:.1}}}",
        args.bundles,
        args.per_pack,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale_gen: {}", e.message);
            ExitCode::FAILURE
        }
    }
}
