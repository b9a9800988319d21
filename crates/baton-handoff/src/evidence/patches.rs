//! Per-file hashes of the uncommitted changes: each file's part of the staged and the
//! unstaged patch, `index` lines left out (their abbreviated blob ids vary with the
//! repository), hashed with BLAKE3. Comparing these hashes tells a receiver whether the
//! captured changes are present in its own work tree without shipping them anywhere.

use serde::{Deserialize, Serialize};

use super::git::lossy;

/// What the kickoff says of a patch whose secrets were replaced by placeholders.
pub const PATCH_REDACTED: &str = "patch redacted: does not apply as-is";

/// Which of the two patches had secrets replaced by placeholders (`"staged_patch_redacted":
/// true` in `evidence.json`): a redacted patch no longer applies as it is (`git apply`
/// fails where a placeholder stands), though the per-file hashes, taken before
/// redaction, still tell whether its changes are present in a work tree.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Redacted {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub staged_patch_redacted: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unstaged_patch_redacted: bool,
}

impl Redacted {
    /// Mark the patch file `name` (`staged.patch`, `unstaged.patch`) as redacted.
    pub fn mark(&mut self, name: &str) {
        match name {
            "staged.patch" => self.staged_patch_redacted = true,
            "unstaged.patch" => self.unstaged_patch_redacted = true,
            _ => {}
        }
    }

    /// The file names of the redacted patches.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.staged_patch_redacted {
            names.push("staged.patch");
        }
        if self.unstaged_patch_redacted {
            names.push("unstaged.patch");
        }
        names
    }
}

/// The hash of one file's change in one patch.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PatchHash {
    /// The path the change is to (the new path of a rename).
    pub path: String,
    /// `staged` or `unstaged`.
    pub patch: String,
    /// BLAKE3 hex of the file's diff text without its `index` line.
    pub blake3: String,
}

/// Split a `git diff-index`/`diff-files -p` patch into files and hash each one.
pub fn hash_patch(patch: &[u8], which: &str) -> Vec<PatchHash> {
    let mut out: Vec<PatchHash> = Vec::new();
    let mut current: Option<(String, blake3::Hasher)> = None;
    let finish = |current: Option<(String, blake3::Hasher)>, out: &mut Vec<PatchHash>| {
        if let Some((path, hasher)) = current {
            out.push(PatchHash {
                path,
                patch: which.to_string(),
                blake3: hasher.finalize().to_hex().to_string(),
            });
        }
    };
    for line in patch.split_inclusive(|b| *b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"diff --git ") {
            finish(current.take(), &mut out);
            current = Some((header_path(rest), blake3::Hasher::new()));
        }
        if line.starts_with(b"index ") {
            continue;
        }
        if let Some((_, hasher)) = current.as_mut() {
            hasher.update(line);
        }
    }
    finish(current, &mut out);
    out
}

/// The path named by `a/P b/P` (the text after `diff --git `): `P` when both halves
/// agree, else what follows the last ` b/` (a rename), else the whole text.
fn header_path(rest: &[u8]) -> String {
    let text = lossy(rest);
    let text = text.trim_end_matches(['\n', '\r']);
    let n = text.len();
    if n % 2 == 1 && text.is_char_boundary(n / 2) {
        let (a, b) = (&text[..n / 2], &text[n / 2 + 1..]);
        if let (Some(a), Some(b)) = (a.strip_prefix("a/"), b.strip_prefix("b/"))
            && a == b
        {
            return a.to_string();
        }
    }
    match text.rfind(" b/") {
        Some(i) => text[i + 3..].to_string(),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_split_and_index_lines_ignored() {
        let one = b"diff --git a/x y b/x y\nindex 1234567..89abcde 100644\n--- a/x y\n+++ b/x y\n@@ -1 +1 @@\n-a\n+b\n";
        let two = b"diff --git a/old b/new\nsimilarity index 90%\nrename from old\nrename to new\n";
        let patch = [&one[..], &two[..]].concat();
        let hashes = hash_patch(&patch, "staged");
        let paths: Vec<&str> = hashes.iter().map(|h| h.path.as_str()).collect();
        assert_eq!(paths, ["x y", "new"]);
        let other_index =
            String::from_utf8_lossy(one).replace("1234567..89abcde", "1234567890ab..89abcdef0123");
        assert_eq!(
            hash_patch(other_index.as_bytes(), "staged")[0],
            hashes[0],
            "index lines do not count"
        );
        assert!(hash_patch(b"", "unstaged").is_empty());
    }
}
