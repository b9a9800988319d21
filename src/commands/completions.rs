//! `baton completions SHELL` and `baton man`: generated from the clap definition.

use clap::CommandFactory;
use serde_json::json;

use crate::cli::Cli;
use crate::error::{Error, Result};
use crate::output::Outcome;

pub fn completions(shell: clap_complete::Shell) -> Result<Outcome> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "baton", &mut script);
    let text = String::from_utf8_lossy(&script).into_owned();
    Ok(Outcome::new(
        text.clone(),
        json!({ "shell": shell.to_string(), "script": text }),
    ))
}

pub fn man() -> Result<Outcome> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .map_err(|e| Error::other(format!("cannot render the man page: {e}")))?;
    let text = String::from_utf8_lossy(&page).into_owned();
    Ok(Outcome::new(text.clone(), json!({ "man": text })))
}
