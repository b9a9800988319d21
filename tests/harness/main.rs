//! The crash, fault, load and robustness harnesses (short runs here; see each module
//! for the environment variables of the long runs).
//!
//! One test binary of modules (one link step instead of one per file); each module is
//! the file of the same name here.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/faultproxy.rs"]
mod faultproxy;
#[path = "../common/sshd.rs"]
mod sshd;

mod crash;
mod crash_handoff;
mod crash_pack;
mod crash_repack;
mod faults;
mod load;
mod resave_stats;
mod robustness;
mod save_fsyncs;
