//! The `baton` binary: everything lives in the library; this only sets the exit code.

fn main() {
    baton::tune_allocator();
    std::process::exit(baton::run());
}
