//! Sync: moving bundles between this store and a remote one (push, pull, clone), through
//! the backend traits only (a `dyn BackendExt`, over the core `Backend`), so local paths,
//! SSH and S3 share every line of protocol code.

pub mod archive;
pub mod audit;
pub mod clone;
pub mod compact;
pub mod error;
pub mod pull;
pub mod push;
mod push_hint;
mod push_parts;
pub mod queue;
pub mod remote_store;
pub mod repair;
mod target_hint;

use std::time::Duration;

use baton_error::{Error, ErrorKind, Result};
use baton_format::names::validate_target_name;
use baton_format::{ObjectId, StoreConfig};
use baton_store::Store;
use baton_transport::backend::BackendExt;
use baton_transport::s3::{S3Backend, S3Options};
use baton_transport::url::TargetUrl;
use baton_transport::{Pipelined, local::LocalRemote};

/// How to reach a target: flags that shape the connection.
#[derive(Clone, Debug, Default)]
pub struct ConnectSettings {
    pub accept_new_host_key: bool,
    pub timeout: Option<Duration>,
    /// How to ask for an SSH key file's passphrase (the command layer's terminal prompt).
    pub key_passphrase: Option<baton_transport::ssh::connect::KeyPassphrasePrompt>,
    /// An S3 target's endpoint and region from its config (`target add --endpoint`).
    pub s3: S3Options,
}

/// `settings` with what the target `name`'s config says of its endpoint and region.
pub fn target_settings(
    config: &StoreConfig,
    name: &str,
    mut settings: ConnectSettings,
) -> ConnectSettings {
    if let Some(target) = config.targets.get(name) {
        settings.s3.endpoint = target.endpoint.clone();
        settings.s3.region = target.region.clone();
    }
    settings
}

/// Connect to the store at `url`.
pub fn open_remote(url: &str, settings: &ConnectSettings) -> Result<Box<dyn BackendExt>> {
    let started = std::time::Instant::now();
    match TargetUrl::parse(url)? {
        TargetUrl::S3 { bucket, prefix } => {
            // Requests are counted and traced by the backend itself (no `Remote` calls).
            let options = S3Options {
                timeout: settings.timeout,
                ..settings.s3.clone()
            };
            Ok(Box::new(S3Backend::open(&bucket, &prefix, &options)?))
        }
        TargetUrl::Local { path } => Ok(connected(LocalRemote::new(path), started)),
        TargetUrl::Ssh {
            user,
            host,
            port,
            path,
            jump,
        } => {
            let target = baton_transport::ssh::connect::SshTarget {
                host,
                user,
                port,
                jump,
            };
            let options = baton_transport::ssh::connect::ConnectOptions {
                accept_new_host_key: settings.accept_new_host_key,
                timeout: settings.timeout,
                key_passphrase: settings.key_passphrase.clone(),
                ..Default::default()
            };
            let remote = baton_transport::ssh::SftpRemote::connect(&target, &options, &path)?;
            Ok(connected(remote, started))
        }
    }
}

/// A path transport just connected, as the `BackendExt` sync speaks; traced as connected
/// (`BATON_TRACE`: the time it took and the cipher), its calls are traced by the adapter.
fn connected<R: Pipelined + 'static>(
    remote: R,
    started: std::time::Instant,
) -> Box<dyn BackendExt> {
    tracing::debug!(
        target: baton_transport::trace::TARGET,
        kind = "connected",
        ms = baton_transport::trace::ms(started),
        cipher = remote.cipher()
    );
    Box::new(remote)
}

/// The target a command means: the one named, else the default, else the only one.
pub fn choose_target(config: &StoreConfig, named: Option<&str>) -> Result<(String, String)> {
    let name = match named {
        Some(name) => name.to_string(),
        None => match (&config.default_target, config.targets.len()) {
            (Some(name), _) => name.clone(),
            (None, 1) => config.targets.keys().next().cloned().unwrap_or_default(),
            (None, 0) => {
                return Err(Error::not_found("no target is configured")
                    .with_hint("add one with 'baton target add NAME URL'"));
            }
            (None, _) => {
                return Err(
                    Error::usage("several targets are configured and none is the default")
                        .with_hint("name one, or choose one with 'baton target default NAME'"),
                );
            }
        },
    };
    let target = config.targets.get(&name).ok_or_else(|| {
        Error::not_found(format!("no target named '{name}'")).with_hint(format!(
            "{}list them with 'baton target list'",
            did_you_mean(config, &name)
        ))
    })?;
    Ok((name, target.url.clone()))
}

/// The one refusal of a REV-or-target argument (`push NAME`, `resume NAME`) that names
/// neither a configured target nor a bundle.
pub fn no_target_or_bundle(config: &StoreConfig, word: &str) -> Error {
    Error::not_found(format!("no target or bundle named '{word}'")).with_hint(format!(
        "{}list targets with 'baton target list' and bundles with 'baton log'",
        did_you_mean(config, word)
    ))
}

/// Resolve a REV-or-target argument that is not a configured target: a word that could
/// only have been a target name and resolves to nothing is [`no_target_or_bundle`];
/// any other failure (`current~9` past the first bundle, an ambiguous prefix) is kept.
pub fn resolve_rev(store: &Store, word: &str) -> Result<ObjectId> {
    store.resolve(word).map_err(|e| {
        let could_be_a_name = validate_target_name(word).is_ok() && word != "current";
        if could_be_a_name && matches!(e.kind, ErrorKind::Usage | ErrorKind::NotFound) {
            no_target_or_bundle(&store.config, word)
        } else {
            e
        }
    })
}

/// "did you mean 'devbox'? " when a configured target is a typo away from `name` (at
/// most two edits, and fewer than the name's length), else nothing.
fn did_you_mean(config: &StoreConfig, name: &str) -> String {
    let limit = 2.min(name.chars().count().saturating_sub(1));
    config
        .targets
        .keys()
        .map(|known| (strsim::damerau_levenshtein(name, known), known))
        .filter(|(distance, _)| *distance <= limit)
        .min()
        .map(|(_, known)| format!("did you mean '{known}'? "))
        .unwrap_or_default()
}
