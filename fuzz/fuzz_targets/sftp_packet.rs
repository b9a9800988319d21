//! Fuzzes SFTP reply decoding. baton reads the 4-byte length itself (refusing 0 and more
//! than 4 MiB) and hands the body to `russh_sftp::protocol::Packet::try_from`, so this
//! feeds bodies to that same call and checks that what decodes re-encodes and decodes.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use russh_sftp::protocol::Packet;

fuzz_target!(|data: &[u8]| {
    if data.is_empty() || data.len() > 4 << 20 {
        return;
    }
    let mut body = Bytes::copy_from_slice(data);
    let Ok(packet) = Packet::try_from(&mut body) else {
        return;
    };
    let shown = format!("{packet:?}");
    // Init and Version carry a HashMap, whose Debug order differs between two maps.
    let maps = |p: &Packet| match p {
        Packet::Init(i) => Some((i.version, i.extensions.clone())),
        Packet::Version(v) => Some((v.version, v.extensions.clone())),
        _ => None,
    };
    let map = maps(&packet);
    // The encoding carries the 4-byte length prefix that baton strips before decoding.
    let encoded = Bytes::try_from(packet).expect("a decoded packet encodes");
    assert!(encoded.len() >= 4);
    let mut again = encoded.slice(4..);
    let decoded = Packet::try_from(&mut again).expect("a re-encoded packet decodes");
    match map {
        Some(map) => assert_eq!(maps(&decoded), Some(map), "re-encoding changed {shown}"),
        None => assert_eq!(
            format!("{decoded:?}"),
            shown,
            "re-encoding changed the packet"
        ),
    }
});
