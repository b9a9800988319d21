//! Asking the person at the terminal: store passphrases and SSH key passphrases. The only
//! place below `main` that reads from a terminal; the layers below get these as callbacks.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use age::secrecy::SecretString;

use baton_error::{Error, Result};
use baton_store::envelope::security;
use baton_transport::ssh::connect::KeyPassphrasePrompt;

/// The store passphrase: `$BATON_PASSPHRASE`, else a prompt on the terminal (twice with
/// `confirm`), else an error.
pub fn read_passphrase(confirm: bool) -> Result<SecretString> {
    if let Ok(p) = std::env::var("BATON_PASSPHRASE") {
        return Ok(SecretString::from(p));
    }
    if !std::io::stdin().is_terminal() {
        return Err(
            security("this store is protected by a passphrase and none was given")
                .with_hint("set BATON_PASSPHRASE, or run on a terminal to be prompted"),
        );
    }
    let first = rpassword::prompt_password("Passphrase: ")
        .map_err(|e| security(format!("cannot read the passphrase: {e}")))?;
    if confirm {
        let again = rpassword::prompt_password("Passphrase (again): ")
            .map_err(|e| security(format!("cannot read the passphrase: {e}")))?;
        if again != first {
            return Err(Error::usage("the passphrases do not match"));
        }
    }
    Ok(SecretString::from(first))
}

/// Asks for an SSH key file's passphrase on the terminal, as OpenSSH does; none without
/// one (the key is then skipped, and the error says how to use it).
pub fn key_passphrase_prompt() -> Option<KeyPassphrasePrompt> {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return None;
    }
    Some(KeyPassphrasePrompt(Arc::new(
        |path: &Path, attempt: usize| {
            if attempt > 0 {
                eprintln!("wrong passphrase for key {}", path.display());
            }
            rpassword::prompt_password(format!("Enter passphrase for key {}: ", path.display()))
                .map(Some)
                .map_err(|e| {
                    Error::other(format!("cannot read the passphrase from the terminal: {e}"))
                })
        },
    )))
}
