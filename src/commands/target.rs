//! `baton target add|list|remove`: named remote stores, kept in the store's config.

use std::fmt::Write;

use serde_json::json;

use crate::cli::TargetCommand;
use crate::commands::Ctx;
use crate::output::Outcome;
use baton_error::{Error, Result};
use baton_format::config::TargetConfig;
use baton_format::names::{RefName, validate_target_name};
use baton_store::refs::{Expect, MoveReason};
use baton_transport::url::TargetUrl;

/// A target name is also a REV (`baton resume NAME` pulls it): refuse the names that
/// would shadow a REV keyword or an id prefix.
fn refuse_rev_names(name: &str) -> Result<()> {
    let keyword = matches!(name, "current" | "targets");
    let id_like = name.len() >= 8 && name.bytes().all(|b| b.is_ascii_hexdigit());
    if keyword || id_like {
        let what = if keyword {
            "a revision keyword"
        } else {
            "an id prefix"
        };
        return Err(Error::usage(format!(
            "target name '{name}' is {what} and would shadow it"
        ))
        .with_hint("choose another name, e.g. origin or backup"));
    }
    Ok(())
}

/// A relative local path (`../store`, `store`, `./x`) made absolute against the current
/// directory, as git does for a remote; `..` and `.` are resolved lexically, since the
/// target may not exist yet. URLs, scp-like `host:path` and absolute paths are unchanged.
fn absolute_local(url: &str) -> Result<String> {
    let scp_like = url
        .split_once(':')
        .is_some_and(|(authority, _)| !authority.contains('/'));
    if url.is_empty() || url.starts_with('/') || url.contains("://") || scp_like {
        return Ok(url.to_string());
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Error::other(format!("cannot read the current directory: {e}")))?;
    let mut path = std::path::PathBuf::new();
    for part in cwd.join(url).components() {
        match part {
            std::path::Component::ParentDir => {
                path.pop();
            }
            std::path::Component::CurDir => {}
            other => path.push(other),
        }
    }
    path.into_os_string().into_string().map_err(|_| {
        Error::usage(format!("target path '{url}' is not valid UTF-8"))
            .with_hint("use a UTF-8 path")
    })
}

/// `--endpoint` and `--region`, checked: for S3 targets only, an endpoint an http(s) URL
/// without credentials, a region a plain name.
pub(super) fn s3_settings(
    url: &TargetUrl,
    endpoint: Option<String>,
    region: Option<String>,
) -> Result<(Option<String>, Option<String>)> {
    if !matches!(url, TargetUrl::S3 { .. }) && (endpoint.is_some() || region.is_some()) {
        return Err(
            Error::usage("--endpoint and --region are for s3:// targets only")
                .with_hint("drop them, or use an s3://BUCKET[/PREFIX] URL"),
        );
    }
    let endpoint = endpoint
        .map(|e| baton_transport::s3::settings::check_endpoint(&e))
        .transpose()?;
    if let Some(r) = &region
        && (r.is_empty()
            || r.len() > 64
            || !r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    {
        return Err(Error::usage(format!("bad region '{}'", r.escape_debug()))
            .with_hint("use a region name such as us-east-1"));
    }
    Ok((endpoint, region))
}

pub fn run(ctx: &Ctx, command: TargetCommand) -> Result<Outcome> {
    // Listing reads only the plain config and ref files, so it works on a locked
    // encrypted store. Every change needs the keys, the same for add, default and
    // remove: removing writes a sealed log entry, and a store's targets (where its
    // pushes go) must not be rewritten by someone who cannot open it.
    let mut store = match command {
        TargetCommand::List => ctx.open_store_locked()?,
        _ => ctx.open_store()?,
    };
    match command {
        TargetCommand::Add {
            name,
            url,
            default,
            endpoint,
            region,
        } => {
            validate_target_name(&name)?;
            refuse_rev_names(&name)?;
            let parsed = TargetUrl::parse(&absolute_local(&url)?)?;
            let (endpoint, region) = s3_settings(&parsed, endpoint, region)?;
            let lock = store.lock()?;
            let mut config = store.config.clone();
            if config.targets.contains_key(&name) {
                return Err(Error::usage(format!("target '{name}' already exists"))
                    .with_hint(format!("remove it first with 'baton target remove {name}'")));
            }
            config.targets.insert(
                name.clone(),
                TargetConfig {
                    url: parsed.to_string(),
                    endpoint,
                    region,
                },
            );
            if default || config.targets.len() == 1 {
                config.default_target = Some(name.clone());
            }
            store.write_config(&lock, config)?;
            let human = if ctx.quiet {
                String::new()
            } else {
                format!("Added target {name} -> {parsed}")
            };
            Ok(Outcome::new(
                human,
                json!({ "name": name, "url": parsed.to_string() }),
            ))
        }
        TargetCommand::List => {
            let mut human = String::new();
            let mut list = Vec::new();
            for (name, target) in &store.config.targets {
                let is_default = store.config.default_target.as_deref() == Some(name.as_str());
                let seen = store.read_ref(&RefName::Target(name.clone()))?;
                let _ = writeln!(
                    human,
                    "{name}{} {} {}",
                    if is_default { "*" } else { "" },
                    target.url,
                    seen.map(|i| i.short()).unwrap_or_else(|| "-".into())
                );
                let mut entry = json!({ "name": name, "url": target.url, "default": is_default, "last_seen": seen });
                // S3 targets: where they are reached (never a credential).
                for (key, value) in [("endpoint", &target.endpoint), ("region", &target.region)] {
                    if let Some(v) = value {
                        entry[key] = json!(v);
                        let _ = writeln!(human, "  {key} {v}");
                    }
                }
                list.push(entry);
            }
            Ok(Outcome::new(
                human.trim_end().to_string(),
                json!({ "targets": list }),
            ))
        }
        TargetCommand::Default { name } => {
            let lock = store.lock()?;
            let mut config = store.config.clone();
            if !config.targets.contains_key(&name) {
                return Err(Error::not_found(format!("no target named '{name}'"))
                    .with_hint("list them with 'baton target list'"));
            }
            config.default_target = Some(name.clone());
            store.write_config(&lock, config)?;
            let human = if ctx.quiet {
                String::new()
            } else {
                format!("Default target is now {name}")
            };
            Ok(Outcome::new(human, json!({ "default": name })))
        }
        TargetCommand::Remove { name } => {
            let lock = store.lock()?;
            let mut config = store.config.clone();
            if config.targets.remove(&name).is_none() {
                return Err(Error::not_found(format!("no target named '{name}'"))
                    .with_hint("list them with 'baton target list'"));
            }
            if config.default_target.as_deref() == Some(name.as_str()) {
                config.default_target = None;
            }
            let ref_name = RefName::Target(name.clone());
            if store.read_ref(&ref_name)?.is_some() {
                let reason = MoveReason {
                    action: "target-remove".into(),
                    ..MoveReason::default()
                };
                store.update_ref_locked(&lock, &ref_name, Expect::Any, None, &reason)?;
            }
            store.write_config(&lock, config)?;
            let human = if ctx.quiet {
                String::new()
            } else {
                format!("Removed target {name}")
            };
            Ok(Outcome::new(human, json!({ "name": name })))
        }
    }
}
