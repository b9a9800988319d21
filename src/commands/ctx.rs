//! What every command gets: the global flags, the way to open the store (unlocked with the
//! keys the command layer resolved) and progress bars that respect `--json` and `-q`.

use std::path::PathBuf;

use indicatif::ProgressBar;

use baton_error::Error;
use baton_store::Store;

/// What every command gets: global flags and the way to reach the store.
pub struct Ctx {
    pub json: bool,
    pub quiet: bool,
    pub store: Option<PathBuf>,
    /// `--identity` / `$BATON_IDENTITY`: unlocks an encrypted store.
    pub identity: Option<PathBuf>,
}

impl Ctx {
    pub fn store_path(&self) -> baton_error::Result<PathBuf> {
        let cwd = std::env::current_dir()
            .map_err(|e| Error::other(format!("cannot read the current directory: {e}")))?;
        Store::discover(self.store.as_deref(), &cwd)
    }

    /// Open the store; an encrypted one is unlocked, or the command fails (exit 6)
    /// before it writes anything.
    pub fn open_store(&self) -> baton_error::Result<Store> {
        let mut store = Store::open(&self.store_path()?)?;
        store.unlock(&self.key_source())?;
        Ok(store)
    }

    /// Open the store for commands that can work without keys (full verify, the audit
    /// log, targets): an encrypted store is unlocked only when keys were given.
    pub fn open_store_locked(&self) -> baton_error::Result<Store> {
        let mut store = Store::open(&self.store_path()?)?;
        let passphrase = store
            .config
            .encryption
            .as_ref()
            .is_some_and(|e| e.passphrase);
        let have_keys = if passphrase {
            std::env::var_os("BATON_PASSPHRASE").is_some()
        } else {
            self.identity.is_some()
        };
        if have_keys {
            store.unlock(&self.key_source())?;
        }
        Ok(store)
    }

    pub fn key_source(&self) -> baton_store::envelope::KeySource {
        baton_store::envelope::KeySource {
            identity: self.identity.clone(),
            passphrase: Some(std::sync::Arc::new(|| {
                super::prompts::read_passphrase(false)
            })),
        }
    }

    /// A progress bar on stderr, drawn only on a terminal and never with --json or -q.
    pub fn progress(&self, total: u64, bytes: bool) -> ProgressBar {
        crate::output::progress_bar(self.json, self.quiet, total, bytes)
    }
}
