//! save DIR of binary content (issue 29): random bytes are not refused as
//! `password_assignment`, a token with a fixed prefix inside a binary file still is.

use super::*;

/// Seeded random bytes (xorshift: the same on every run), with `planted` written at
/// each of `at`.
fn random_file(len: usize, seed: u64, planted: &[u8], at: &[usize]) -> Vec<u8> {
    let mut x = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    for &a in at {
        out[a..a + planted.len()].copy_from_slice(planted);
    }
    out
}

#[test]
fn random_bytes_are_not_refused_but_a_token_in_them_is() {
    let env = populated();
    // What the assignment rule's `pwd` anchor met in random bytes (a 256 MiB file was
    // refused about 2 runs in 3), planted in a small file and, past the first chunk, in
    // one scanned in chunks (over 16 MiB).
    let pwd = b" PWD=q7Zx!2kLp9Rw ";
    let dir = env.path().join("r");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("small.bin"),
        random_file(1 << 20, 29, pwd, &[4096, 700_000]),
    )
    .unwrap();
    let big = 17 << 20;
    fs::write(
        dir.join("big.bin"),
        random_file(big, 31, pwd, &[5 << 20, big - 100]),
    )
    .unwrap();
    let (code, doc) = env.json(&["save", "r"]);
    assert_eq!(code, 0, "{doc}");

    // The same bytes as text (no NUL) are refused: the plant is what the rule finds.
    let text: Vec<u8> = random_file(1 << 20, 29, pwd, &[4096, 700_000])
        .into_iter()
        .map(|b| if b == 0 { b'x' } else { b })
        .collect();
    fs::create_dir_all(env.path().join("t")).unwrap();
    fs::write(env.path().join("t/small.txt"), text).unwrap();
    refuse(&env, &["save", "t"], 6, "security", "password_assignment");

    // A GitHub token inside binary content is found, in a small file and a big one.
    let token = b" ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8 ";
    for (name, len) in [("g", 1 << 20), ("h", big)] {
        let d = env.path().join(name);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("blob.bin"), random_file(len, 37, token, &[len / 2])).unwrap();
        refuse(&env, &["save", name], 6, "security", "github_token");
    }
}
