//! Where an S3 target is and who we are there: the endpoint and region (target settings,
//! then the standard AWS environment and `~/.aws/config` profile), the credentials (only
//! the standard chain, never baton's config) and the retry deadline.

use std::path::PathBuf;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;

use baton_error::{Error, ErrorKind, Result};

/// What a target's config may say about its S3 endpoint (never a credential).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Options {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// `--timeout`: for connecting and for each request (then retried until the deadline).
    pub timeout: Option<Duration>,
}

/// How long throttled, failed (5xx) or broken requests are retried by default.
pub const DEFAULT_RETRY_SECS: u64 = 30;
/// The variable that sets it (seconds; tests of a dead server use 1 or 2).
pub const RETRY_VAR: &str = "BATON_S3_RETRY_TIMEOUT";

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The profile named by `AWS_PROFILE` (else `default`), as `~/.aws/config` and
/// `~/.aws/credentials` name it.
fn profile() -> String {
    env("AWS_PROFILE").unwrap_or_else(|| "default".to_string())
}

fn home_file(var: &str, name: &str) -> Option<PathBuf> {
    env(var)
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".aws").join(name)))
}

/// A key of a profile in an AWS ini file: `[NAME]` in credentials, `[profile NAME]`
/// (or `[default]`) in config. A missing file is no profile; a broken one is an error.
fn profile_value(file: Option<PathBuf>, config_style: bool, key: &str) -> Result<Option<String>> {
    let Some(path) = file.filter(|p| p.exists()) else {
        return Ok(None);
    };
    let ini = ini::Ini::load_from_file(&path).map_err(|e| {
        Error::usage(format!("cannot read {}: {e}", path.display()))
            .with_hint("fix the file's ini syntax or point AWS_CONFIG_FILE/AWS_SHARED_CREDENTIALS_FILE elsewhere")
    })?;
    let name = profile();
    let section = if config_style && name != "default" {
        format!("profile {name}")
    } else {
        name
    };
    Ok(ini
        .section(Some(section.as_str()))
        .and_then(|s| s.get(key))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty()))
}

fn config_value(key: &str) -> Result<Option<String>> {
    profile_value(home_file("AWS_CONFIG_FILE", "config"), true, key)
}

/// The endpoint: the target's, else `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the
/// profile's `endpoint_url`; `None`: AWS itself.
pub fn endpoint(options: &S3Options) -> Result<Option<String>> {
    let found = match &options.endpoint {
        Some(e) => Some(e.clone()),
        None => match env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL")) {
            Some(e) => Some(e),
            None => config_value("endpoint_url")?,
        },
    };
    found.map(|e| check_endpoint(&e)).transpose()
}

/// An endpoint is an http(s) URL without credentials, query or path beyond `/`.
pub fn check_endpoint(text: &str) -> Result<String> {
    let bad = |why: &str| {
        Error::usage(format!("bad S3 endpoint '{}': {why}", text.escape_debug())).with_hint(
            "use http://HOST:PORT or https://HOST (http only for a server you trust on the path)",
        )
    };
    let url = url::Url::parse(text).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials never go in the endpoint"));
    }
    if url.host_str().is_none() || url.query().is_some() || url.fragment().is_some() {
        return Err(bad("a host, and no query or fragment"));
    }
    if url.path() != "/" {
        return Err(bad("no path (the bucket is in the s3:// URL)"));
    }
    Ok(text.trim_end_matches('/').to_string())
}

/// The region: the target's, else `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's,
/// else `us-east-1` (what S3-compatible servers accept when they ignore regions).
pub fn region(options: &S3Options) -> Result<String> {
    if let Some(r) = options.region.clone().or_else(|| env("AWS_REGION")) {
        return Ok(r);
    }
    if let Some(r) = env("AWS_DEFAULT_REGION") {
        return Ok(r);
    }
    Ok(config_value("region")?.unwrap_or_else(|| "us-east-1".to_string()))
}

/// The retry deadline (`BATON_S3_RETRY_TIMEOUT` seconds).
pub fn retry_timeout() -> Result<Duration> {
    match env(RETRY_VAR) {
        None => Ok(Duration::from_secs(DEFAULT_RETRY_SECS)),
        Some(v) => v.parse::<u64>().map(Duration::from_secs).map_err(|_| {
            Error::usage(format!(
                "{RETRY_VAR} must be a number of seconds, not '{}'",
                v.escape_debug()
            ))
            .with_hint(format!(
                "unset it for the default of {DEFAULT_RETRY_SECS} s"
            ))
        }),
    }
}

/// Credentials from the standard chain: the environment (`from_env` reads it, with web
/// identity and container credentials), else the `~/.aws/credentials` profile, which
/// object_store does not read; instance metadata only when asked for
/// (`AWS_EC2_METADATA_DISABLED=false`), so that a machine without credentials gets a
/// clear error instead of a request to a link-local address.
pub fn credentials(builder: AmazonS3Builder) -> Result<AmazonS3Builder> {
    let from_env = env("AWS_ACCESS_KEY_ID").is_some() && env("AWS_SECRET_ACCESS_KEY").is_some();
    let web_identity =
        env("AWS_WEB_IDENTITY_TOKEN_FILE").is_some() && env("AWS_ROLE_ARN").is_some();
    let container = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some()
        || env("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_some();
    let metadata =
        env("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("false"));
    if from_env || web_identity || container || metadata {
        return Ok(builder);
    }
    let file = home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let key = profile_value(file.clone(), false, "aws_access_key_id")?;
    let secret = profile_value(file.clone(), false, "aws_secret_access_key")?;
    match (key, secret) {
        (Some(key), Some(secret)) => {
            let builder = builder
                .with_access_key_id(key)
                .with_secret_access_key(secret);
            Ok(match profile_value(file, false, "aws_session_token")? {
                Some(token) => builder.with_token(token),
                None => builder,
            })
        }
        _ => Err(Error::new(
            ErrorKind::Security,
            format!("no S3 credentials found (profile '{}')", profile()),
        )
        .with_hint(
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in ~/.aws/credentials (AWS_PROFILE); baton never stores credentials",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked() {
        assert_eq!(
            check_endpoint("http://127.0.0.1:9000/").unwrap(),
            "http://127.0.0.1:9000"
        );
        assert!(check_endpoint("https://s3.example.com").is_ok());
        for bad in [
            "ftp://h",
            "http://key:secret@h:9000",
            "http://h/bucket",
            "http://h?x=1",
            "h:9000",
        ] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
    }
}
