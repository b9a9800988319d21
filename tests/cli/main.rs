//! The command-line tests: the real `baton` binary in isolated environments (stores,
//! handoffs, git evidence, archives, encryption), the format vectors and fuzz regressions.
//!
//! One test binary of modules (one link step instead of one per file); each module is
//! the file of the same name here.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/sshd.rs"]
mod sshd;

mod archive;
mod checkpoint;
mod cli_bad_input;
mod cli_store;
mod continuity;
mod encryption;
mod format_vectors;
mod fuzz_regressions;
mod handoff_cli;
mod handoff_evidence;
mod handoff_latency;
mod hooks;
mod perf_history;
mod save_pack;
mod save_speed;
mod statcache;
mod statcache_unchanged;
mod transcript_append;
