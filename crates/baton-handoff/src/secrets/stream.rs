//! Scanning a file too large to hold in memory: in chunks that overlap, so that a secret
//! cut by a chunk boundary is whole in the next chunk.

use std::collections::BTreeSet;
use std::io::{self, Read};

/// Bytes scanned at a time (the overlap included).
pub const CHUNK: usize = 4 << 20;
/// Bytes each chunk repeats from the end of the one before: longer than any secret the
/// rules match in one piece (a 4096-bit RSA key block is about 3.3 KiB).
pub const OVERLAP: usize = 64 << 10;

/// The kinds of secrets in everything `reader` yields, with memory bounded by [`CHUNK`].
/// Kinds only: a secret inside an overlap is seen twice, so counts would not be exact.
pub fn scan_reader(reader: &mut impl Read) -> io::Result<BTreeSet<&'static str>> {
    let mut kinds = BTreeSet::new();
    let mut buf = vec![0u8; CHUNK];
    let mut filled = 0;
    let mut carried = 0;
    // What the stream is, text or binary, is decided once from its start (as git does for
    // a file), not chunk by chunk.
    let mut content = None;
    loop {
        let n = match reader.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        filled += n;
        if filled < CHUNK && n != 0 {
            continue;
        }
        // A chunk that is all overlap (nothing read since) was scanned already.
        if filled > carried {
            let chunk = &buf[..filled];
            let content = *content.get_or_insert_with(|| super::Content::of(chunk));
            kinds.extend(super::scan_as(chunk, content).into_keys());
        }
        if n == 0 {
            return Ok(kinds);
        }
        buf.copy_within(filled - OVERLAP..filled, 0);
        filled = OVERLAP;
        carried = OVERLAP;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_across_a_chunk_boundary_is_found() {
        let token = format!("ghp_{}", "A1b2C3d4E5".repeat(4));
        for at in [0, CHUNK - 10, CHUNK - OVERLAP + 5, 2 * CHUNK - OVERLAP - 7] {
            let mut data = vec![b' '; 3 * CHUNK];
            data[at..at + token.len()].copy_from_slice(token.as_bytes());
            let kinds = scan_reader(&mut &data[..]).unwrap();
            assert_eq!(
                kinds.into_iter().collect::<Vec<_>>(),
                ["github_token"],
                "at {at}"
            );
        }
        assert!(scan_reader(&mut &[b'x'; 100][..]).unwrap().is_empty());
        assert!(scan_reader(&mut &[][..]).unwrap().is_empty());
    }
}
