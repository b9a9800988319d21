//! Timestamps in import file names and manifests (`%Y-%m-%dT%H-%M-%S` or RFC 3339-like).

use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use regex::Regex;

pub(super) const TS_CORE: &str = concat!(
    r"(?P<y>\d{4})-?(?P<mo>\d{2})-?(?P<d>\d{2})",
    r"[T_ ](?P<h>\d{2})[-:]?(?P<mi>\d{2})[-:]?(?P<s>\d{2})",
    r"(?:[.,](?P<frac>\d{1,9}))?",
    r"(?P<zone>Z|[+-]\d{2}:\d{2})?",
);

/// In a file name the seconds may be missing: prowl stamps its archive and session files
/// `yyyy-MM-dd'T'HHmm` (`2026-11-20T1000-claude-to-codex.md`).
pub(super) static NAME_TS: LazyLock<Regex> = LazyLock::new(|| {
    let core = TS_CORE.replace(r"[-:]?(?P<s>\d{2})", r"(?:[-:]?(?P<s>\d{2}))?");
    Regex::new(&format!(r"^{core}-(?P<rest>.+)$")).expect("valid regex")
});
pub(super) static FULL_TS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"^{TS_CORE}$")).expect("valid regex"));

/// Split `<ts>-<rest>` (a file stem): `None` when it does not start with a timestamp,
/// `Some(Err)` when it does but the time is impossible.
pub(super) fn name_timestamp(
    stem: &str,
) -> Option<std::result::Result<(SystemTime, &str), String>> {
    let c = NAME_TS.captures(stem)?;
    let rest = c.name("rest").map_or("", |m| m.as_str());
    Some(captured_time(&c).map(|t| (t, rest)))
}

pub(super) fn full_timestamp(text: &str) -> Option<std::result::Result<SystemTime, String>> {
    let c = FULL_TS.captures(text.trim())?;
    Some(captured_time(&c))
}

/// Rebuild the captured parts as RFC 3339 UTC for humantime, then apply the offset.
pub(super) fn captured_time(c: &regex::Captures) -> std::result::Result<SystemTime, String> {
    let part = |name: &str| c.name(name).map_or("", |m| m.as_str());
    let frac = c
        .name("frac")
        .map_or(String::new(), |m| format!(".{}", m.as_str()));
    let seconds = c.name("s").map_or("00", |m| m.as_str());
    let utc = format!(
        "{}-{}-{}T{}:{}:{seconds}{frac}Z",
        part("y"),
        part("mo"),
        part("d"),
        part("h"),
        part("mi"),
    );
    let bad = || format!("timestamp `{}` is not a valid time", &c[0]);
    let local = humantime::parse_rfc3339_weak(&utc).map_err(|_| bad())?;
    let zone = part("zone");
    if zone.is_empty() || zone == "Z" {
        return Ok(local);
    }
    let (sign, hhmm) = zone.split_at(1);
    let (hh, mm) = hhmm.split_once(':').ok_or_else(bad)?;
    let hours: u64 = hh.parse().map_err(|_| bad())?;
    let minutes: u64 = mm.parse().map_err(|_| bad())?;
    if hours > 23 || minutes > 59 {
        return Err(bad());
    }
    let offset = Duration::from_secs(hours * 3600 + minutes * 60);
    let utc = if sign == "+" {
        local.checked_sub(offset)
    } else {
        local.checked_add(offset)
    };
    utc.ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::test_util::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn name_timestamps() {
        let t = at("2024-05-01T10:00:00Z");
        for stem in [
            "2024-05-01T10-00-00-claude",
            "2024-05-01T10:00:00Z-claude",
            "2024-05-01T10-00-00Z-claude",
            "20240501T100000Z-claude",
            "2024-05-01T12:00:00+02:00-claude",
            "2024-05-01T09:30:00-00:30-claude",
        ] {
            assert_eq!(name_timestamp(stem), Some(Ok((t, "claude"))), "{stem}");
        }
        let frac = name_timestamp("2024-05-01T10-00-00.250-x")
            .unwrap()
            .unwrap();
        assert_eq!(frac.0, t + Duration::from_millis(250));
        // Prowl's own stamp: minutes, no seconds.
        assert_eq!(
            name_timestamp("2024-05-01T1000-claude-to-codex"),
            Some(Ok((t, "claude-to-codex")))
        );
        assert_eq!(name_timestamp("2024-05-01T10-00-x"), Some(Ok((t, "x"))));
        // A full timestamp (a log line's) still needs its seconds.
        assert_eq!(full_timestamp("2024-05-01T1000"), None);
        assert_eq!(name_timestamp("yesterday-claude"), None);
        assert_eq!(name_timestamp("2024-05-01-claude"), None);
        assert!(matches!(
            name_timestamp("2024-13-01T10-00-00-claude"),
            Some(Err(_))
        ));
        assert!(t.duration_since(UNIX_EPOCH).is_ok());
    }
}
