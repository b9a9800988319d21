//! Fuzzes the fd-relative walk (`baton::store::beneath`): the input builds a tree with
//! symlinks to outside, up, dangling and to themselves, then names paths in it
//! (`baton::store::beneath::fuzzing::walk`); openat2 and the fallback walk must agree,
//! and nothing read may come from outside the root.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    baton::store::beneath::fuzzing::walk(data);
});
