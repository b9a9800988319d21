//! baton: a git-like, content-addressed store and sync tool for agent handoff bundles.
//!
//! This crate is the top layer: `cli` (argument parsing, the only place clap is used) ->
//! `commands` (one file per command, the MCP server) -> the library crates below
//! (`baton-handoff`, `baton-sync` -> `baton-transport` -> `baton-store` -> `baton-format`
//! -> `baton-error`), each depending only on those below it. `output` turns results and
//! errors into text, JSON and exit codes.

pub mod cli;
pub mod commands;
pub mod output;
mod trace;

// The layers below, under the names they had before they were crates (the integration
// tests and the fuzz targets reach into them by these paths).
pub use baton_error as error;
pub use baton_format as format;
pub use baton_handoff as handoff;
pub use baton_store as store;
pub use baton_sync as sync;
pub use baton_sync::archive;
pub use baton_transport as transport;

use clap::Parser;

/// Keep freed buffers in the process instead of returning them to the kernel at once.
/// Verify and checkout decode thousands of objects, each with fresh 256 KiB buffers and
/// zstd contexts; with glibc's defaults every one costs mmap/munmap and page faults,
/// which doubled their CPU time in measurements (docs/benchmarks.md).
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts glibc allocator parameters; it is called before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

/// Parse arguments, run the command, print, and return the exit code.
pub fn run() -> i32 {
    trace::install();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json_mode = args.iter().any(|a| a == "--json");
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind as K;
            // A hook's command line that does not parse must not block the agent either
            // (`checkpoint --hook` exits 0 whatever happens): said on stderr only.
            if is_hook_call(&args) && !matches!(e.kind(), K::DisplayHelp | K::DisplayVersion) {
                eprintln!(
                    "baton checkpoint: {}",
                    e.to_string().lines().next().unwrap_or("")
                );
                return 0;
            }
            if matches!(e.kind(), K::DisplayHelp | K::DisplayVersion) || !json_mode {
                let _ = e.print();
                return e.exit_code();
            }
            let message = e.to_string();
            // One line of message and one of hint for a JSON consumer, never clap's
            // multi-line blob: the message is clap's first paragraph on one line (the
            // missing arguments' names follow its first line), the hint clap's usage
            // line for the command, then its tips.
            let first: Vec<&str> = message
                .lines()
                .map(str::trim)
                .take_while(|l| !l.is_empty() && !l.starts_with("Usage: "))
                .collect();
            let first = first.join(" ");
            let first = first.trim_start_matches("error: ");
            let first = if first.is_empty() {
                "invalid arguments"
            } else {
                first
            };
            let tips = message
                .lines()
                .map(str::trim)
                .filter_map(|l| l.strip_prefix("tip: "))
                .map(|tip| format!("; {tip}"))
                .collect::<String>();
            let usage = message
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("Usage: "))
                .map(|usage| format!("{usage} (see --help)"))
                .unwrap_or_else(|| "see 'baton --help'".to_string());
            let err = error::Error::usage(first.to_string()).with_hint(format!("{usage}{tips}"));
            return output::finish(true, false, Err(err));
        }
    };
    let ctx = commands::Ctx {
        json: cli.json || cli.command.wants_json(),
        quiet: cli.quiet,
        store: cli.store.clone(),
        identity: cli.identity.clone(),
    };
    let verbose = cli.verbose;
    let result = catch_bugs(|| commands::dispatch(&ctx, cli.command));
    output::finish(ctx.json, verbose, result)
}

/// Whether the command line is a harness hook's (`baton ... checkpoint --hook ...`).
fn is_hook_call(args: &[std::ffi::OsString]) -> bool {
    let has = |word: &str| args.iter().skip(1).any(|a| a == word);
    has("checkpoint")
        && args
            .iter()
            .any(|a| a == "--hook" || a.to_string_lossy().starts_with("--hook="))
}

/// Run `f`, turning a panic (a bug: an invariant that failed) into an internal error, so
/// that even then the output is one error line, or one JSON document with `--json`.
fn catch_bugs(
    f: impl FnOnce() -> error::Result<output::Outcome>,
) -> error::Result<output::Outcome> {
    let message = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let seen = message.clone();
    std::panic::set_hook(Box::new(move |info| {
        let text = match info.payload().downcast_ref::<&str>() {
            Some(s) => s.to_string(),
            None => info
                .payload()
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "panic".to_string()),
        };
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if let Ok(mut m) = seen.lock() {
            *m = format!("{text}{place}");
        }
    }));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    let _ = std::panic::take_hook();
    outcome.unwrap_or_else(|_| {
        let text = message
            .lock()
            .map(|m| m.clone())
            .unwrap_or_else(|_| "a panic".to_string());
        Err(error::Error::internal(text))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_becomes_an_internal_error() {
        let result = super::catch_bugs(|| panic!("invariant broken"));
        let err = result.err().expect("an error");
        assert_eq!(err.kind, super::error::ErrorKind::Internal);
        assert!(err.message.contains("invariant broken"), "{}", err.message);
        assert!(err.message.contains("src/lib.rs"), "{}", err.message);
        let fine = super::catch_bugs(|| {
            Ok(super::output::Outcome::new(
                String::new(),
                serde_json::json!({}),
            ))
        });
        assert!(fine.is_ok());
    }
}
