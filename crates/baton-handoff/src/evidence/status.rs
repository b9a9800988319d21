//! Parsing `git status --porcelain=v2 --branch -z`, and the plumbing fallback when
//! `status` fails.

use super::Change;
use super::git::{Git, GitError, lossy, trim_newline};

/// What `git status --porcelain=v2 --branch -z` said.
#[derive(Debug, Default)]
pub(crate) struct Status {
    pub(crate) head: Option<String>,
    pub(crate) branch: Option<String>,
    pub(crate) detached: bool,
    pub(crate) upstream: Option<String>,
    pub(crate) ahead_behind: Option<(u64, u64)>,
    pub(crate) staged: Vec<Change>,
    pub(crate) unstaged: Vec<Change>,
    pub(crate) conflicted: Vec<String>,
    pub(crate) untracked: Vec<Vec<u8>>,
}

/// Parse porcelain v2 with `-z`: NUL-terminated records; a rename or copy record is
/// followed by one more NUL-terminated field, the original path.
pub(crate) fn parse_status(out: &[u8]) -> Status {
    let mut status = Status::default();
    let mut records = out.split(|b| *b == 0).filter(|r| !r.is_empty());
    while let Some(record) = records.next() {
        match record.first() {
            Some(b'#') => parse_header(record, &mut status),
            Some(b'1') => {
                let fields: Vec<&[u8]> = record.splitn(9, |b| *b == b' ').collect();
                if let [_, xy, sub, _, _, _, _, _, path] = fields[..] {
                    push_changes(&mut status, xy, sub, path, None);
                }
            }
            Some(b'2') => {
                let fields: Vec<&[u8]> = record.splitn(10, |b| *b == b' ').collect();
                let original = records.next().unwrap_or_default();
                if let [_, xy, sub, _, _, _, _, _, _, path] = fields[..] {
                    push_changes(&mut status, xy, sub, path, Some(original));
                }
            }
            Some(b'u') => {
                let fields: Vec<&[u8]> = record.splitn(11, |b| *b == b' ').collect();
                if let Some(path) = fields.get(10) {
                    status.conflicted.push(lossy(path));
                }
            }
            Some(b'?') => {
                if let Some(path) = record.get(2..) {
                    status.untracked.push(path.to_vec());
                }
            }
            _ => {} // `!` ignored entries, and anything a later git adds
        }
    }
    status
}

fn parse_header(record: &[u8], status: &mut Status) {
    let text = lossy(record);
    let Some(rest) = text.strip_prefix("# ") else {
        return;
    };
    let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
    match key {
        "branch.oid" if value != "(initial)" => status.head = Some(value.to_string()),
        "branch.head" if value == "(detached)" => status.detached = true,
        "branch.head" => status.branch = Some(value.to_string()),
        "branch.upstream" => status.upstream = Some(value.to_string()),
        "branch.ab" => {
            let mut parts = value.split(' ');
            let ahead = parts.next().and_then(|a| a.strip_prefix('+'));
            let behind = parts.next().and_then(|b| b.strip_prefix('-'));
            if let (Some(Ok(a)), Some(Ok(b))) =
                (ahead.map(str::parse::<u64>), behind.map(str::parse::<u64>))
            {
                status.ahead_behind = Some((a, b));
            }
        }
        _ => {}
    }
}

fn push_changes(status: &mut Status, xy: &[u8], sub: &[u8], path: &[u8], original: Option<&[u8]>) {
    let [x, y] = xy else {
        return;
    };
    let submodule = describe_submodule(sub);
    let path = lossy(path);
    let original = original.map(lossy);
    for (code, list) in [(*x, &mut status.staged), (*y, &mut status.unstaged)] {
        if code == b'.' {
            continue;
        }
        let mut text = match code {
            b'M' => "modified".to_string(),
            b'T' => "type changed".to_string(),
            b'A' => "added".to_string(),
            b'D' => "deleted".to_string(),
            b'R' => format!("renamed from {}", original.as_deref().unwrap_or("?")),
            b'C' => format!("copied from {}", original.as_deref().unwrap_or("?")),
            b'U' => "unmerged".to_string(),
            other => format!("status {}", char::from(other)),
        };
        if let Some(sub) = &submodule {
            text.push_str(sub);
        }
        list.push(Change {
            path: path.clone(),
            status: text,
        });
    }
}

/// ` (submodule)` or ` (submodule: new commits, modified content)` from the `S<c><m><u>`
/// field; `None` for an ordinary path (`N...`).
fn describe_submodule(sub: &[u8]) -> Option<String> {
    let [b'S', c, m, u] = sub else {
        return None;
    };
    let what: Vec<&str> = [
        (*c, b'C', "new commits"),
        (*m, b'M', "modified content"),
        (*u, b'U', "untracked content"),
    ]
    .iter()
    .filter(|(flag, set, _)| flag == set)
    .map(|(_, _, what)| *what)
    .collect();
    if what.is_empty() {
        Some(" (submodule)".to_string())
    } else {
        Some(format!(" (submodule: {})", what.join(", ")))
    }
}

/// When `git status` fails: HEAD and branch from plumbing, nothing else.
pub(crate) fn fallback_status(git: &Git) -> Status {
    let mut status = Status::default();
    if let Ok(out) = git.run(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]) {
        status.head = Some(lossy(trim_newline(&out)));
    }
    match git.run(&["symbolic-ref", "--quiet", "--short", "HEAD"]) {
        Ok(out) => status.branch = Some(lossy(trim_newline(&out))),
        Err(GitError::Failed { code: Some(1), .. }) => status.detached = true,
        Err(_) => {}
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_porcelain_v2() {
        let out = b"# branch.oid 0123\0# branch.head main\0# branch.upstream origin/main\0\
# branch.ab +2 -1\0\
1 M. N... 100644 100644 100644 aa bb a file\0\
1 .D N... 100644 100644 000000 aa bb gone\0\
2 R. N... 100644 100644 100644 aa bb R100 new name\0old\nname\0\
1 .M SC.. 160000 160000 160000 aa bb sub\0\
u UU N... 100644 100644 100644 100644 a b c both\0\
? un tracked\0? dir/\0! ignored\0";
        let s = parse_status(out);
        assert_eq!(s.head.as_deref(), Some("0123"));
        assert_eq!(s.branch.as_deref(), Some("main"));
        assert_eq!(s.upstream.as_deref(), Some("origin/main"));
        assert_eq!(s.ahead_behind, Some((2, 1)));
        assert_eq!(
            s.staged,
            vec![
                Change {
                    path: "a file".into(),
                    status: "modified".into()
                },
                Change {
                    path: "new name".into(),
                    status: "renamed from old\nname".into()
                },
            ]
        );
        assert_eq!(
            s.unstaged,
            vec![
                Change {
                    path: "gone".into(),
                    status: "deleted".into()
                },
                Change {
                    path: "sub".into(),
                    status: "modified (submodule: new commits)".into()
                },
            ]
        );
        assert_eq!(s.conflicted, vec!["both".to_string()]);
        assert_eq!(s.untracked, vec![b"un tracked".to_vec(), b"dir/".to_vec()]);
    }

    #[test]
    fn parses_initial_and_detached_headers() {
        let s = parse_status(b"# branch.oid (initial)\0# branch.head main\0");
        assert_eq!(
            (s.head, s.branch, s.detached),
            (None, Some("main".into()), false)
        );
        let s = parse_status(b"# branch.oid abc\0# branch.head (detached)\0");
        assert_eq!(
            (s.head, s.branch, s.detached),
            (Some("abc".into()), None, true)
        );
    }
}
