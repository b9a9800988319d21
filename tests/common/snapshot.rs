//! Text snapshots with `insta`, kept in tests/snapshots/NAME.snap: one assertion for
//! every snapshot test, as strict as a byte comparison of the file.

use std::path::Path;

/// `text` must equal the snapshot `tests/snapshots/NAME.snap` byte for byte.
///
/// insta compares the text with its trailing whitespace trimmed and CRLF read as LF, so
/// what that forgives is asserted here first: every snapshot ends in exactly one newline
/// and holds no carriage return, and so must the text. A mismatch fails the test (under
/// `CI=true` nothing is written); `INSTA_UPDATE=always` rewrites the file instead.
pub fn assert_text_snapshot(name: &str, text: &str, what: &str) {
    assert!(
        text.ends_with('\n') && text.trim_end().len() + 1 == text.len(),
        "{what}: the text must end in exactly one newline, as the snapshot {name} does: {text:?}"
    );
    assert!(!text.contains('\r'), "{what}: a carriage return: {text:?}");
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_description(what);
    settings.bind(|| insta::assert_snapshot!(name, text));
}
