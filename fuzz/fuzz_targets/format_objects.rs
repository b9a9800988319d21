//! Fuzzes the canonical object decoders: trees, bundle manifests, object ids and times.
#![no_main]

use baton::format::bundle::{format_time, parse_time};
use baton::format::{Bundle, ObjectId, Tree};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Canonical formats: whatever decodes must re-encode to exactly the input bytes, so
    // that the object id (the hash of those bytes) is stable.
    if let Ok(tree) = Tree::decode(data) {
        assert_eq!(tree.encode(), data, "tree is not canonical");
        assert_eq!(tree.id(), ObjectId::of(data));
        assert_eq!(Tree::new(tree.entries.clone()).ok().as_ref(), Some(&tree));
        for entry in &tree.entries {
            assert_eq!(tree.get(&entry.name), Some(entry));
        }
    }
    if let Ok(bundle) = Bundle::decode(data) {
        assert_eq!(bundle.encode(), data, "bundle is not canonical");
        assert!(Bundle::looks_like(data));
        assert_eq!(bundle.id(), ObjectId::of(data));
        assert_eq!(format_time(bundle.created_time()), bundle.created);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(id) = ObjectId::parse(text) {
            assert_eq!(id.to_hex(), text);
        }
        if let Ok(time) = parse_time(text) {
            assert_eq!(format_time(time), text);
        }
    }
});
