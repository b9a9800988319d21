//! Robustness: write ordering, observed with strace.

use super::*;

// ---------------------------------------------------------------------------------------
// 5. Write ordering, observed with strace
// ---------------------------------------------------------------------------------------

/// One traced system call: where its line started and where it completed (the same line
/// unless strace split it into `<unfinished ...>` and `<... resumed>`).
#[derive(Debug)]
struct Call {
    name: String,
    args: String,
    start: usize,
    end: usize,
    ok: bool,
}

/// `ARGS) = RET` (strace pads short lines before `=`): the arguments and whether RET is 0.
fn split_result(tail: &str) -> (&str, bool) {
    match tail.rsplit_once(" = ") {
        Some((head, ret)) => (
            head.trim_end().strip_suffix(')').unwrap_or(head),
            ret.trim_start().starts_with('0'),
        ),
        None => (tail, false),
    }
}

fn parse_strace(text: &str) -> Vec<Call> {
    let mut pending: std::collections::HashMap<String, (String, String, usize)> =
        Default::default();
    let mut calls = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(resumed) = rest.strip_prefix("<... ") {
            let Some((name, tail)) = resumed.split_once(" resumed>") else {
                continue;
            };
            if let Some((pname, args, start)) = pending.remove(pid) {
                assert_eq!(pname, name, "strace resumed a different call: {line}");
                let (rest_args, ok) = split_result(tail);
                calls.push(Call {
                    name: pname,
                    args: format!("{args}{rest_args}"),
                    start,
                    end: i,
                    ok,
                });
            }
        } else if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            if let Some((name, args)) = head.split_once('(') {
                pending.insert(pid.to_string(), (name.to_string(), args.to_string(), i));
            }
        } else if let Some((name, args)) = rest.split_once('(')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            let (args, ok) = split_result(args);
            calls.push(Call {
                name: name.to_string(),
                args: args.to_string(),
                start: i,
                end: i,
                ok,
            });
        }
    }
    calls.sort_by_key(|c| c.start);
    calls
}

/// Split strace arguments at top-level commas (not inside quotes or `<fd path>`).
fn split_args(args: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted, mut angle, mut escaped) =
        (Vec::new(), String::new(), false, 0, false);
    for c in args.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '<' if !quoted => angle += 1,
            '>' if !quoted && angle > 0 => angle -= 1,
            ',' if !quoted && angle == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// The path in an `-y` fd annotation: `5</a/b>` -> `/a/b`.
fn fd_path(arg: &str) -> Option<PathBuf> {
    let (_, rest) = arg.split_once('<')?;
    Some(PathBuf::from(rest.strip_suffix('>')?))
}

fn unquote(arg: &str) -> Option<String> {
    let inner = arg.strip_prefix('"')?.strip_suffix('"')?;
    Some(inner.replace("\\\"", "\"").replace("\\\\", "\\"))
}

/// (from, to) of a rename/link-family call, made absolute against its directory fds.
fn moved_paths(call: &Call) -> Option<(PathBuf, PathBuf)> {
    let args = split_args(&call.args);
    let at = |dirfd: &str, path: &str| -> Option<PathBuf> {
        let path = PathBuf::from(unquote(path)?);
        if path.is_absolute() {
            Some(path)
        } else {
            Some(fd_path(dirfd)?.join(path))
        }
    };
    match call.name.as_str() {
        "rename" | "link" => Some((
            PathBuf::from(unquote(&args[0])?),
            PathBuf::from(unquote(&args[1])?),
        )),
        "renameat" | "renameat2" | "linkat" => {
            Some((at(&args[0], &args[1])?, at(&args[2], &args[3])?))
        }
        _ => None,
    }
}

#[test]
fn strace_parser_reads_split_and_padded_lines() {
    let text = "\
7 fsync(3</s/objects>)  = 0
8 fsync(4</s/objects/ab/.tmp-x> <unfinished ...>
7 renameat(AT_FDCWD</w>, \"rel/.tmp-y\", AT_FDCWD</w>, \"/s/objects/cd/ef\") = 0
8 <... fsync resumed>) = 0
8 renameat2(AT_FDCWD</w>, \"/s/refs/current/.tmp-z\", AT_FDCWD</w>, \"/s/refs/current/01\", RENAME_NOREPLACE) = -1 EEXIST (File exists)
9 --- SIGCHLD {si_signo=SIGCHLD} ---
";
    let calls = parse_strace(text);
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert_eq!((calls[0].name.as_str(), calls[0].ok), ("fsync", true));
    assert_eq!(fd_path(&calls[0].args), Some(PathBuf::from("/s/objects")));
    // The split fsync started on line 1 and completed on line 3.
    assert_eq!(
        (
            calls[1].name.as_str(),
            calls[1].start,
            calls[1].end,
            calls[1].ok
        ),
        ("fsync", 1, 3, true)
    );
    assert_eq!(
        fd_path(&calls[1].args),
        Some(PathBuf::from("/s/objects/ab/.tmp-x"))
    );
    assert_eq!(
        moved_paths(&calls[2]),
        Some((
            PathBuf::from("/w/rel/.tmp-y"),
            PathBuf::from("/s/objects/cd/ef")
        ))
    );
    assert!(!calls[3].ok, "a failed rename is not a publish");
    assert_eq!(
        moved_paths(&calls[3]).unwrap().1,
        PathBuf::from("/s/refs/current/01")
    );
}

/// Best effort by nature: strace shows the order in which syscalls were issued and
/// completed, which is what the write-ordering rules constrain. What it cannot show is
/// what the file system does with them, so this checks the program's side of the contract.
#[test]
fn save_orders_fsyncs_and_renames_durably() {
    let start = Instant::now();
    if !common::precondition(
        common::strace_usable(),
        "strace that can trace here (apt-get install -y strace)",
    ) {
        return;
    }
    let env = Env::new();
    env.init();
    let mut rng = Rng::new(0x57ace);
    let files: Vec<(String, Vec<u8>)> = (0..24)
        .map(|i| {
            let len = if i == 0 {
                3 << 20
            } else {
                rng.below(20_000) as usize + 1
            };
            (format!("d{}/f{i}", i % 3), rng.content(len))
        })
        .collect();
    env.write_files("work", &files);
    env.save("work", &[]); // an existing parent, so the traced save moves a ref that exists
    env.write_tree("work", &[("d0/f0", b"changed"), ("new/file", b"new")]);

    let trace = env.path().join("trace.txt");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-y", "-s", "4096", "-o"])
        .arg(&trace)
        .args([
            "-e",
            "trace=fsync,fdatasync,rename,renameat,renameat2,link,linkat",
        ])
        .arg(env!("CARGO_BIN_EXE_baton"))
        .args(["save", "work"])
        .current_dir(env.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", env.path())
        .env("USER", "tester")
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(out.status.success(), "traced save\n{}", text_of(&out));
    let text = fs::read_to_string(&trace).unwrap();
    let calls = parse_strace(&text);
    let store = fs::canonicalize(env.store()).unwrap();
    let (objects, refs_dir, log) = (store.join("objects"), store.join("refs"), store.join("log"));
    let packs = store.join("packs");
    let syncs: Vec<(&Call, PathBuf)> = calls
        .iter()
        .filter(|c| c.ok && (c.name == "fsync" || c.name == "fdatasync"))
        .filter_map(|c| Some((c, fd_path(&c.args)?)))
        .collect();
    let publishes: Vec<(&Call, PathBuf, PathBuf)> = calls
        .iter()
        .filter(|c| c.ok)
        .filter_map(|c| moved_paths(c).map(|(from, to)| (c, from, to)))
        .filter(|(_, _, to)| {
            to.starts_with(&objects) || to.starts_with(&packs) || to.starts_with(&refs_dir)
        })
        .collect();
    let ref_publishes: Vec<_> = publishes
        .iter()
        .filter(|(_, _, to)| to.starts_with(&refs_dir))
        .collect();
    // New blobs and trees go into one pack (the 3 MiB file too), the manifest is loose.
    let object_publishes: Vec<_> = publishes
        .iter()
        .filter(|(_, _, to)| to.starts_with(&objects) || to.starts_with(&packs))
        .collect();
    let context = || format!("strace of save:\n{text}");
    assert!(
        !ref_publishes.is_empty(),
        "no ref was published? {}",
        context()
    );
    assert!(
        object_publishes
            .iter()
            .any(|(_, _, to)| to.starts_with(&packs))
            && object_publishes
                .iter()
                .any(|(_, _, to)| to.starts_with(&objects)),
        "expected a pack of new blobs and trees, and a manifest; {}",
        context()
    );

    // Every object and ref file was fsynced (under its temp name) before being renamed.
    for (call, from, to) in &publishes {
        assert!(
            syncs.iter().any(|(s, p)| p == from && s.end < call.start),
            "{} -> {} renamed without a prior fsync of the temp file; {}",
            from.display(),
            to.display(),
            context()
        );
    }
    // The log line is durable before the ref moves, and the ref's directory is fsynced after.
    let log_syncs: Vec<&&Call> = syncs
        .iter()
        .filter(|(_, p)| *p == log)
        .map(|(c, _)| c)
        .collect();
    assert!(
        !log_syncs.is_empty(),
        "the log was never synced; {}",
        context()
    );
    for (call, _, to) in &ref_publishes {
        assert!(
            log_syncs.iter().any(|s| s.end < call.start),
            "ref {} moved before the log was synced; {}",
            to.display(),
            context()
        );
        let dir = to.parent().unwrap();
        assert!(
            syncs.iter().any(|(s, p)| p == dir && s.start > call.end),
            "ref directory {} not fsynced after the ref moved; {}",
            dir.display(),
            context()
        );
    }
    // Every new object's (and pack's) directory entry is durable before the log line
    // naming the bundle.
    let first_log_sync = log_syncs.iter().map(|s| s.start).min().unwrap();
    for (call, _, to) in &object_publishes {
        let fanout = to.parent().unwrap();
        assert!(
            syncs
                .iter()
                .any(|(s, p)| p == fanout && s.start > call.end && s.end < first_log_sync),
            "object {} published but its directory not fsynced before the log append; {}",
            to.display(),
            context()
        );
    }
    println!(
        "[robustness] strace: {} calls, {} object renames, {} ref publishes, {} syncs",
        calls.len(),
        object_publishes.len(),
        ref_publishes.len(),
        syncs.len()
    );
    elapsed_note("save_orders_fsyncs_and_renames_durably", start);
}
