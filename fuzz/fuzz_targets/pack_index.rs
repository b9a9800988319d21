//! Fuzzes pack files: footer, index and the seekable reader that loads them.
#![no_main]

use std::io::Cursor;

use baton::format::pack::{FOOTER_LEN, PACK_MAGIC, decode_footer, decode_index, encode_index};
use baton::store::packs::{pack_name_id, read_index};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    if let Ok(entries) = read_index(&mut Cursor::new(data), len) {
        assert!(data.starts_with(PACK_MAGIC));
        let (count, index_offset) =
            decode_footer(&data[data.len() - FOOTER_LEN as usize..], len).expect("footer");
        assert_eq!(count, entries.len() as u64);
        for pair in entries.windows(2) {
            assert!(pair[0].id < pair[1].id);
        }
        for e in &entries {
            assert!(e.offset >= PACK_MAGIC.len() as u64 && e.offset + e.length <= index_offset);
        }
        // The index is canonical: re-encoding it gives the file's tail back.
        assert_eq!(
            encode_index(entries, index_offset),
            &data[index_offset as usize..],
            "pack index is not canonical"
        );
    }
    // The pure decoders on their own, with the offset taken from the input.
    if data.len() >= 8 {
        let (head, rest) = data.split_at(8);
        let offset = u64::from_be_bytes(head.try_into().expect("8 bytes"));
        if let Ok(entries) = decode_index(rest, offset) {
            assert_eq!(entries.len() * 48, rest.len());
            let encoded = encode_index(entries, offset);
            assert_eq!(&encoded[..rest.len()], rest);
        }
        if rest.len() as u64 == FOOTER_LEN {
            let _ = decode_footer(rest, offset);
        }
    }
    if let Ok(name) = std::str::from_utf8(data)
        && let Some(id) = pack_name_id(name)
    {
        assert_eq!(baton::store::packs::pack_file_name(&id), name);
    }
});
