//! Validation of names that end up as path components or ref names.

use baton_error::{Error, Result};

/// A tree entry name: non-empty UTF-8, not `.` or `..`, no `/` and no NUL.
pub fn validate_entry_name(name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(Error::integrity(format!(
            "invalid tree entry name '{}'",
            name.escape_debug()
        )));
    }
    Ok(())
}

/// A target name (`targets/<name>`): 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with
/// `.` or `-`, so it is always a safe single path component and never looks like a flag.
pub fn validate_target_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        return Err(
            Error::usage(format!("invalid target name '{}'", name.escape_debug())).with_hint(
                "use 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'",
            ),
        );
    }
    Ok(())
}

/// Names of refs: `current` or `targets/<name>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RefName {
    Current,
    Target(String),
}

impl RefName {
    pub fn parse(text: &str) -> Result<Self> {
        if text == "current" {
            return Ok(RefName::Current);
        }
        if let Some(name) = text.strip_prefix("targets/") {
            validate_target_name(name)?;
            return Ok(RefName::Target(name.to_string()));
        }
        Err(
            Error::usage(format!("invalid ref name '{}'", text.escape_debug()))
                .with_hint("refs are 'current' or 'targets/<name>'"),
        )
    }

    pub fn as_string(&self) -> String {
        match self {
            RefName::Current => "current".to_string(),
            RefName::Target(name) => format!("targets/{name}"),
        }
    }
}

/// Ref generations: a ref is a directory of files named by a 20-digit, zero-padded
/// generation number; the highest generation holds the ref's value. Moving a ref creates
/// generation N+1 with a no-clobber publish, which is a compare-and-swap that needs no lock
/// (so it works the same over SFTP, where rename never overwrites).
pub const GENERATION_DIGITS: usize = 20;

pub fn generation_name(generation: u64) -> String {
    format!("{generation:0width$}", width = GENERATION_DIGITS)
}

pub fn parse_generation(name: &str) -> Option<u64> {
    if name.len() != GENERATION_DIGITS || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok().filter(|&g| g > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names() {
        for bad in ["", ".", "..", "a/b", "a\0b"] {
            assert!(validate_entry_name(bad).is_err(), "{bad:?}");
        }
        for good in ["a", ".hidden", "..x", "spaces ok", "ünïcode", "new\nline"] {
            assert!(validate_entry_name(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn target_names() {
        for bad in ["", "-x", ".x", "a/b", "a b", &"x".repeat(65)] {
            assert!(validate_target_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_target_name("devbox-1.prod_2").is_ok());
    }

    #[test]
    fn generation_names_are_strict() {
        assert_eq!(generation_name(42), "00000000000000000042");
        assert_eq!(parse_generation("00000000000000000042"), Some(42));
        for bad in [
            "42",
            "0000000000000000004a",
            "00000000000000000000",
            "+0000000000000000042",
        ] {
            assert_eq!(parse_generation(bad), None, "{bad}");
        }
    }
}
