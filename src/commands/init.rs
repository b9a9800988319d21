//! `baton init`: create a store.

use std::path::PathBuf;

use serde_json::json;

use crate::error::Result;
use crate::output::{Ctx, Outcome};
use crate::store::{DEFAULT_STORE_DIR, Store};

pub fn run(ctx: &Ctx) -> Result<Outcome> {
    let path = ctx
        .store
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STORE_DIR));
    let store = Store::init(&path)?;
    let root = std::fs::canonicalize(store.root()).unwrap_or_else(|_| store.root().to_path_buf());
    let human = if ctx.quiet {
        String::new()
    } else {
        format!("Initialized empty baton store in {}", root.display())
    };
    Ok(Outcome::new(
        human,
        json!({ "store": root, "version": store.config.version }),
    ))
}
