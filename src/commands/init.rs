//! `baton init`: create a store.

use std::path::PathBuf;

use serde_json::json;

use crate::cli::InitArgs;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, Result};
use baton_format::StoreConfig;
use baton_store::envelope;
use baton_store::{DEFAULT_STORE_DIR, Store};

pub fn run(ctx: &Ctx, args: &InitArgs) -> Result<Outcome> {
    let path = ctx
        .store
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STORE_DIR));
    // An existing store is said to be one, not asked for keys it would not use.
    Store::check_new_root(&path)?;
    let mut config = StoreConfig::default();
    if args.encrypt {
        let mut recipients = args.recipient.clone();
        if let Some(file) = &args.recipients_file {
            let text = std::fs::read_to_string(file)
                .map_err(|e| Error::io("cannot read recipients file", file, e))?;
            recipients.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(String::from),
            );
        }
        let passphrase = if args.passphrase {
            Some(super::prompts::read_passphrase(true)?)
        } else {
            if recipients.is_empty() {
                return Err(Error::usage(
                    "--encrypt needs --recipient, --recipients-file or --passphrase",
                )
                .with_hint("generate a key pair with age-keygen and pass its public key"));
            }
            None
        };
        config.encryption = Some(envelope::new_config(&recipients, passphrase)?);
        config.features.push(envelope::FEATURE.to_string());
    }
    let store = Store::init_with(&path, &config)?;
    let root = std::fs::canonicalize(store.root()).unwrap_or_else(|_| store.root().to_path_buf());
    let human = if ctx.quiet {
        String::new()
    } else {
        format!(
            "Initialized empty {}baton store in {}",
            if args.encrypt { "encrypted " } else { "" },
            root.display()
        )
    };
    Ok(Outcome::new(
        human,
        json!({ "store": root, "version": store.config.version, "encrypted": store.is_encrypted() }),
    ))
}
