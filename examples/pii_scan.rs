//! Measures the personal-data scan (bench/pii.sh): what it finds, by kind, on a corpus
//! (false positives, on text that holds no personal data), and its recall on a generated
//! set.
//!
//! Usage: pii_scan [--list KIND] PATH...
//!        pii_scan --recall FILE
//!
//! Every regular text file (binary ones, with a NUL in the first 8000 bytes, skipped)
//! below each PATH (symlinks not followed) of at most 16 MiB is read and scanned with `pii::find`, the function a handoff uses (no commit emails kept).
//! Prints one line per kind (files flagged, findings), then the totals and the scan
//! throughput. `--list KIND` also prints each finding for KIND (`all`: any kind) with its
//! file and the text matched, to check by hand.
//!
//! `--recall FILE` (bench/pii_corpus.py): each line is `SET<TAB>KIND<TAB>TEXT` where TEXT
//! holds one planted item; it counts as caught when the scan finds exactly one item, of
//! KIND. KIND `none` is a look-alike that must give no finding. Prints caught / total per
//! set and each miss.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use baton::handoff::pii::{self, Keep};

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--recall") && args.len() == 2 {
        return recall(Path::new(&args[1]));
    }
    let mut list = None;
    if args.first().map(String::as_str) == Some("--list") && args.len() > 1 {
        list = Some(args.remove(1));
        args.remove(0);
    }
    if args.is_empty() {
        eprintln!("usage: pii_scan [--list KIND] PATH... | pii_scan --recall FILE");
        return ExitCode::from(2);
    }
    let mut files = Vec::new();
    for root in &args {
        walk(Path::new(root), &mut files);
    }
    let keep = Keep::default();
    let (mut count, mut binary, mut bytes, mut scan) = (0u64, 0u64, 0u64, Duration::ZERO);
    // Kind -> (files flagged, findings).
    let mut kinds: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for path in files {
        let Ok(text) = std::fs::read(&path) else {
            continue;
        };
        // Binary files (a NUL in the first 8000 bytes, as git decides) are no briefing
        // or transcript.
        if memchr::memchr(0, &text[..text.len().min(8000)]).is_some() {
            binary += 1;
            continue;
        }
        count += 1;
        bytes += text.len() as u64;
        let start = Instant::now();
        let found = pii::find(&text, &keep);
        scan += start.elapsed();
        let mut here: BTreeMap<&str, u64> = BTreeMap::new();
        for (range, kind) in &found {
            *here.entry(kind).or_default() += 1;
            if list.as_deref().is_some_and(|l| l == "all" || l == *kind) {
                let shown = String::from_utf8_lossy(&text[range.clone()]);
                println!("{kind}\t{}\t{shown}", path.display());
            }
        }
        for (kind, n) in here {
            let tally = kinds.entry(kind).or_default();
            tally.0 += 1;
            tally.1 += n;
        }
    }
    for kind in pii::KINDS {
        let (f, n) = kinds.get(kind).copied().unwrap_or_default();
        println!("{kind}: {f} files, {n} findings");
    }
    let mib = bytes as f64 / 1048576.0;
    println!(
        "total: {count} text files ({binary} binary skipped), {mib:.1} MiB, scanned at {:.0} MiB/s",
        mib / scan.as_secs_f64().max(1e-9)
    );
    ExitCode::SUCCESS
}

fn walk(path: &Path, out: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        children.sort();
        for child in children {
            walk(&child, out);
        }
    } else if meta.is_file() && meta.len() <= 16 << 20 {
        out.push(path.to_path_buf());
    }
}

fn recall(path: &Path) -> ExitCode {
    let Ok(text) = std::fs::read_to_string(path) else {
        eprintln!("cannot read {}", path.display());
        return ExitCode::from(2);
    };
    let keep = Keep::default();
    // Set -> (caught, total), in the file's order.
    let mut tally: Vec<(String, u64, u64)> = Vec::new();
    let mut misses = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, '\t');
        let (Some(set), Some(kind), Some(sample)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let found: Vec<&str> = pii::find(sample.as_bytes(), &keep)
            .into_iter()
            .map(|(_, k)| k)
            .collect();
        let caught = if kind == "none" {
            found.is_empty()
        } else {
            found == [kind]
        };
        if tally.last().is_none_or(|(s, _, _)| s != set) {
            tally.push((set.to_string(), 0, 0));
        }
        if let Some(t) = tally.last_mut() {
            t.2 += 1;
            t.1 += u64::from(caught);
        }
        if !caught {
            misses.push(format!("miss [{set}] {sample} (found {found:?})"));
        }
    }
    for (set, caught, total) in &tally {
        println!("{set}\t{caught} / {total}");
    }
    for miss in misses {
        println!("{miss}");
    }
    ExitCode::SUCCESS
}
