//! How the binary links OpenSSL (vendor/libssh2-sys/BATON-PATCH.md, "Second change"):
//! libcrypto as the system's shared library unless the build asked openssl-sys for a
//! static one, so what `baton` depends on does not come down to whether the build machine
//! happened to have `libcrypto.a` (issue 30); libssl, which libssh2 never uses, never.

use std::process::Command;

/// The shared libraries the loader maps for `baton`, as `ldd` names them.
fn shared_libraries() -> Vec<String> {
    let out = Command::new("ldd")
        .arg(env!("CARGO_BIN_EXE_baton"))
        .output()
        .expect("run ldd (libc-bin)");
    assert!(out.status.success(), "ldd failed: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn libcrypto_is_the_systems_shared_library_and_libssl_is_not_linked() {
    let libs = shared_libraries();
    let has = |prefix: &str| libs.iter().any(|l| l.starts_with(prefix));
    assert!(!has("libssl.so"), "libssl is linked: {libs:?}");
    // The same variable, read the same way, as openssl-sys's build script: `cargo test`
    // builds the binary under this environment.
    let static_asked = std::env::var("OPENSSL_STATIC").is_ok_and(|v| v != "0");
    if static_asked {
        assert!(!has("libcrypto.so"), "OPENSSL_STATIC set, yet: {libs:?}");
    } else {
        assert!(
            has("libcrypto.so"),
            "libcrypto is not the shared library: {libs:?}"
        );
    }
}
