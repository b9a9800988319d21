//! The sync tests: push, pull and clone over local paths and a real OpenSSH `sshd`
//! started per test, and the SSH connection itself.
//!
//! One test binary of modules (one link step instead of one per file); each module is
//! the file of the same name here. `scenarios` holds the scenarios the transports share,
//! run over each `transport::Transport`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/faultproxy.rs"]
mod faultproxy;
#[path = "../common/s3_hostile.rs"]
mod hostile;
#[path = "../common/s3.rs"]
mod s3;
#[path = "../common/sshd.rs"]
mod sshd;

mod error_causes;
mod round_trips;
mod round_trips_hint;
mod round_trips_pack;
mod s3_failures;
mod s3_harness;
mod s3_hostile;
mod s3_roundtrip;
mod scenarios;
mod ssh_cipher;
mod ssh_connect;
mod ssh_jump;
mod ssh_known_hosts;
mod ssh_lanes;
#[cfg(target_os = "linux")]
mod ssh_linking;
mod ssh_paths;
mod sync_local;
mod sync_ssh;
mod transport;
mod write_behind;
