//! Measures the secret scan on a corpus (bench/secrets.sh): how many files it flags, by
//! kind (false positives, on a corpus that holds no secrets), and how fast it scans.
//!
//! Usage: secret_scan [--list KIND] PATH...
//!        secret_scan --recall DIR
//!        secret_scan --detect DIR
//!
//! Every regular file below each PATH (symlinks not followed) is read, then scanned with
//! `secrets::scan`, the one function every writer uses; only the scans are timed.
//! Prints one line per kind (files flagged, findings), then the totals and the scan
//! throughput. `--list KIND` also prints each file flagged for KIND (`all`: for any kind),
//! and with `SECRET_SCAN_SHOW` set each line of it as redaction leaves it.
//!
//! `--recall DIR`: every file F below DIR that has a sibling `F.pieces` (one piece of a
//! planted secret per line, as it is spelled in F) is redacted; F counts as caught when
//! no piece of 6 or more characters is left in the result. Prints caught / total for
//! each directory directly below DIR (one shape of secret each), and lists the misses.
//!
//! `--detect DIR`: every file below DIR holds one true positive (bench/gitleaks_tps.py:
//! gitleaks' own test strings, one directory per gitleaks rule); a file counts as
//! detected when the scan finds anything in it. Prints detected / total per directory,
//! the misses, and the total.
//!
//! A file over 16 MiB is scanned in chunks (`secrets::scan_reader`, as `save DIR` does);
//! it counts as flagged, with one finding per kind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use baton::handoff::secrets;

#[derive(Default)]
struct Tally {
    files: u64,
    bytes: u64,
    flagged: u64,
    scan: Duration,
    /// Kind -> (files flagged, findings).
    kinds: BTreeMap<&'static str, (u64, u64)>,
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--recall") && args.len() == 2 {
        return recall(Path::new(&args[1]));
    }
    if args.first().map(String::as_str) == Some("--detect") && args.len() == 2 {
        return detect(Path::new(&args[1]));
    }
    let mut list = None;
    if args.first().map(String::as_str) == Some("--list") && args.len() > 1 {
        list = Some(args.remove(1));
        args.remove(0);
    }
    if args.is_empty() {
        eprintln!("usage: secret_scan [--list KIND] PATH...");
        return ExitCode::from(2);
    }
    let mut files = Vec::new();
    for root in &args {
        walk(Path::new(root), &mut files);
    }
    let mut tally = Tally::default();
    for path in files {
        let big = std::fs::metadata(&path).is_ok_and(|m| m.len() > secrets::files::REDACT_LIMIT);
        let (found, len, took) = if big {
            let Ok(mut file) = std::fs::File::open(&path) else {
                continue;
            };
            let len = file.metadata().map(|m| m.len()).unwrap_or_default();
            let start = Instant::now();
            let Ok(kinds) = secrets::scan_reader(&mut file) else {
                continue;
            };
            let found: BTreeMap<&'static str, u64> = kinds.into_iter().map(|k| (k, 1)).collect();
            (found, len, start.elapsed())
        } else {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let start = Instant::now();
            let found = secrets::scan(&bytes);
            (found, bytes.len() as u64, start.elapsed())
        };
        tally.files += 1;
        tally.bytes += len;
        tally.scan += took;
        if found.is_empty() {
            continue;
        }
        tally.flagged += 1;
        for (kind, n) in &found {
            let entry = tally.kinds.entry(kind).or_default();
            entry.0 += 1;
            entry.1 += n;
        }
        if let Some(wanted) = &list
            && (wanted == "all" || found.contains_key(wanted.as_str()))
        {
            let kinds: Vec<_> = found.iter().map(|(k, n)| format!("{k}:{n}")).collect();
            println!("flagged {} {}", path.display(), kinds.join(","));
            if std::env::var_os("SECRET_SCAN_SHOW").is_some() && !big {
                show_redacted_lines(&path);
            }
        }
    }
    for (kind, (files, findings)) in &tally.kinds {
        println!("kind {kind} files {files} findings {findings}");
    }
    let secs = tally.scan.as_secs_f64();
    println!(
        "total files {} bytes {} flagged {} scan_seconds {:.3} mib_per_s {:.1}",
        tally.files,
        tally.bytes,
        tally.flagged,
        secs,
        tally.bytes as f64 / (1 << 20) as f64 / secs.max(1e-9)
    );
    ExitCode::SUCCESS
}

/// The `--recall` measurement (see the module documentation).
fn recall(dir: &Path) -> ExitCode {
    let mut files = Vec::new();
    walk(dir, &mut files);
    // Shape (the directory below DIR) -> (caught, total).
    let mut shapes: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for path in &files {
        if path.extension().is_some_and(|e| e == "pieces") {
            continue;
        }
        let mut sidecar = path.clone().into_os_string();
        sidecar.push(".pieces");
        let (Ok(bytes), Ok(pieces)) = (std::fs::read(path), std::fs::read_to_string(&sidecar))
        else {
            continue;
        };
        let out = without_placeholders(&secrets::redact(&bytes).bytes);
        let left: Vec<&str> = pieces
            .lines()
            .filter(|p| p.len() >= 6)
            .filter(|p| out.windows(p.len()).any(|w| w == p.as_bytes()))
            .collect();
        let shape = path
            .strip_prefix(dir)
            .ok()
            .and_then(|rel| rel.iter().next())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let entry = shapes.entry(shape).or_default();
        entry.1 += 1;
        if left.is_empty() {
            entry.0 += 1;
        } else {
            println!("missed {} left {}", path.display(), left.join(" "));
        }
    }
    for (shape, (caught, total)) in &shapes {
        println!("recall {shape} caught {caught} of {total}");
    }
    ExitCode::SUCCESS
}

/// Each line of `path` that redaction changes, as it reads redacted (`SECRET_SCAN_SHOW`:
/// what a finding took, for a corpus with no live secrets).
fn show_redacted_lines(path: &Path) {
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    let redacted = secrets::redact(&bytes).bytes;
    let before: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    for (i, line) in redacted.split(|&b| b == b'\n').enumerate() {
        if before.get(i) != Some(&line) {
            let text = String::from_utf8_lossy(line);
            println!(
                "    {}: {}",
                i + 1,
                text.chars().take(200).collect::<String>()
            );
        }
    }
}

/// The `--detect` measurement (see the module documentation).
fn detect(dir: &Path) -> ExitCode {
    let mut files = Vec::new();
    walk(dir, &mut files);
    // Rule (the directory below DIR) -> (detected, total).
    let mut rules: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for path in &files {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        let rule = path
            .strip_prefix(dir)
            .ok()
            .and_then(|rel| rel.iter().next())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let entry = rules.entry(rule).or_default();
        entry.1 += 1;
        if secrets::scan(&bytes).is_empty() {
            println!("missed {}", path.display());
        } else {
            entry.0 += 1;
        }
    }
    let (mut detected, mut total) = (0, 0);
    for (rule, (d, t)) in &rules {
        println!("detect {rule} {d} of {t}");
        detected += d;
        total += t;
    }
    println!("detect total {detected} of {total}");
    ExitCode::SUCCESS
}

/// `text` without its `[REDACTED:<kind>]` placeholders (a kind's name holds text a piece
/// may have, `github_`).
fn without_placeholders(text: &[u8]) -> Vec<u8> {
    const OPEN: &[u8] = b"[REDACTED:";
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.windows(OPEN.len()).position(|w| w == OPEN) {
        out.extend_from_slice(&rest[..at]);
        match rest[at..].iter().position(|&b| b == b']') {
            Some(close) => rest = &rest[at + close + 1..],
            None => {
                rest = &rest[at..];
                break;
            }
        }
    }
    out.extend_from_slice(rest);
    out
}

/// Every regular file below `path`, in name order.
fn walk(path: &Path, out: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_file() {
        out.push(path.to_path_buf());
        return;
    }
    if !meta.is_dir() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let mut children: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    children.sort();
    for child in children {
        walk(&child, out);
    }
}
