//! Fuzzes the stored-object path: one zstd frame in, verified content out.
#![no_main]

use baton::format::ObjectId;
use baton::store::envelope::Envelope;
use baton::store::codec::{decode_named, decode_verified};
use libfuzzer_sys::fuzz_target;

/// Output beyond this is refused, so that a tiny frame declaring gigabytes (a zstd bomb)
/// costs a bounded time per input instead of a timeout.
const CAP: usize = 16 << 20;

#[derive(Default)]
struct Capped(Vec<u8>);

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > CAP {
            return Err(std::io::Error::other("fuzz output cap"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    // First pass with an id that will not match: exercises the frame checks and yields
    // the content the decoder produced, if it got that far.
    let mut first = Capped::default();
    let wrong = ObjectId::of(b"fuzz: surely not this content");
    let first_ok = decode_verified(&wrong, data, None, &mut first).is_ok();
    assert!(!first_ok || ObjectId::of(&first.0) == wrong);
    let first = first.0;

    // Second pass with the id and size of that content: accepted exactly when the stored
    // bytes are one complete zstd frame and nothing else.
    let id = ObjectId::of(&first);
    let mut second = Capped::default();
    match decode_verified(&id, data, Some(first.len() as u64), &mut second) {
        Ok(size) => {
            let second = second.0;
            assert_eq!(size, second.len() as u64);
            assert_eq!(second, first);
            // The frame's declared content size, when it has one, is what it holds
            // (zstd's streaming decoder skips this check when the last block is empty;
            // baton checks it, tests/fuzz_regressions.rs).
            let declared = zstd::zstd_safe::get_frame_content_size(data).ok().flatten();
            assert!(
                declared.is_none_or(|d| d == size),
                "declared {declared:?}, holds {size}"
            );
            let reference = zstd::stream::decode_all(data).expect("zstd accepts what baton does");
            assert_eq!(reference, second, "baton and zstd decode differently");
            // A wrong expected size is refused.
            let mut sink = Capped::default();
            assert!(decode_verified(&id, data, Some(size + 1), &mut sink).is_err());
            // The plain envelope names an object by its id.
            let mut sink = Capped::default();
            let (named, named_size) =
                decode_named(&Envelope::Plain, &id, data, &mut sink).expect("plain name");
            assert_eq!((named, named_size), (id, size));
        }
        Err(_) => {
            let mut sink = Capped::default();
            assert!(decode_named(&Envelope::Plain, &id, data, &mut sink).is_err());
        }
    }
});
