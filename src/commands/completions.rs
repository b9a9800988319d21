//! `baton completions SHELL` and `baton man`: generated from the clap definition.

use clap::CommandFactory;
use serde_json::json;

use crate::cli::Cli;
use crate::output::Outcome;
use baton_error::{Error, Result};

pub fn completions(shell: clap_complete::Shell) -> Result<Outcome> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "baton", &mut script);
    let text = String::from_utf8_lossy(&script).into_owned();
    Ok(Outcome::new(
        text.clone(),
        json!({ "shell": shell.to_string(), "script": text }),
    ))
}

pub fn man(command: Option<&str>) -> Result<Outcome> {
    let root = Cli::command();
    let page = match command {
        None => root,
        Some(name) => {
            let sub = root.find_subcommand(name).cloned().ok_or_else(|| {
                Error::not_found(format!("no command named '{name}'"))
                    .with_hint("see 'baton --help'")
            })?;
            // Named like the pages the top-level page refers to: baton-save(1).
            let full = format!("baton-{}", sub.get_name());
            sub.name(full)
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|e| Error::other(format!("cannot render the man page: {e}")))?;
    let text = String::from_utf8_lossy(&out).into_owned();
    Ok(Outcome::new(text.clone(), json!({ "man": text })))
}
