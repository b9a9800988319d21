//! baton: a git-like, content-addressed store and sync tool for agent handoff bundles.
//!
//! Layers, each importing only those below it: `cli` (argument parsing) -> `commands`
//! (one file per command) -> `store` (objects, refs, log, locks) -> `format` (pure
//! encodings and hashing). `output` turns results and errors into text, JSON and exit codes.

pub mod archive;
pub mod cli;
pub mod commands;
pub mod error;
pub mod format;
pub mod handoff;
pub mod output;
pub mod store;
pub mod sync;
pub mod transport;

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
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json_mode = args.iter().any(|a| a == "--json");
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind as K;
            if matches!(e.kind(), K::DisplayHelp | K::DisplayVersion) || !json_mode {
                let _ = e.print();
                return e.exit_code();
            }
            let message = e.to_string();
            let first = message
                .lines()
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            // One line of message and one of hint for a JSON consumer, never clap's
            // multi-line blob: the hint is clap's usage line for the command.
            let hint = message
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("Usage: "))
                .map(|usage| format!("{usage} (see --help)"))
                .unwrap_or_else(|| "see 'baton --help'".to_string());
            let err = error::Error::usage(first.to_string()).with_hint(hint);
            return output::finish(true, Err(err));
        }
    };
    let ctx = output::Ctx {
        json: cli.json || cli.command.wants_json(),
        quiet: cli.quiet,
        store: cli.store.clone(),
        identity: cli.identity.clone(),
    };
    let result = commands::dispatch(&ctx, cli.command);
    output::finish(ctx.json, result)
}
