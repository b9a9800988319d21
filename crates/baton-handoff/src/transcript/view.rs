//! A transcript line read as a normalised event for matching only: the fields and types
//! of [`Event`](crate::events::Event), so that exactly the lines `parse_event` takes
//! are taken, with its strings borrowed from the line where they hold no escape (a
//! search counts tens of thousands of events and builds none of them).

use std::borrow::Cow;

use serde::Deserialize;

use crate::events::{Kind, Role, SCHEMA_VERSION};

#[derive(Deserialize)]
pub(super) struct EventView<'a> {
    v: u32,
    #[serde(rename = "seq")]
    _seq: u64,
    #[serde(default, borrow, rename = "time")]
    _time: Cow<'a, str>,
    #[serde(borrow, rename = "source")]
    _source: SourceView<'a>,
    pub role: Role,
    pub kind: Kind,
    #[serde(borrow)]
    pub text: Cow<'a, str>,
    #[serde(default, borrow)]
    pub tool: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "call_id")]
    _call_id: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "harness_type")]
    _harness_type: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct SourceView<'a> {
    #[serde(borrow, rename = "harness")]
    _harness: Cow<'a, str>,
    #[serde(borrow, rename = "session")]
    _session: Cow<'a, str>,
    #[serde(default, borrow, rename = "agent")]
    _agent: Option<Cow<'a, str>>,
}

/// `line` (trimmed) as a normalised event of this schema, when it is one.
pub(super) fn parse(line: &[u8]) -> Option<EventView<'_>> {
    serde_json::from_slice::<EventView>(line)
        .ok()
        .filter(|e| e.v == SCHEMA_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_exactly_the_lines_an_event_is_read_from() {
        let lines: [&[u8]; 12] = [
            br#"{"v":1,"seq":1,"source":{"harness":"h","session":"s"},"role":"user","kind":"message","text":"hi"}"#,
            br#"{"v":1,"seq":1,"time":"t","source":{"harness":"h","session":"s","agent":"a"},"role":"tool","kind":"tool_result","text":"a \"q\"","tool":"Bash","call_id":"c","harness_type":null,"extra":[1]}"#,
            br#"{"v":2,"seq":1,"source":{"harness":"h","session":"s"},"role":"user","kind":"message","text":"hi"}"#,
            br#"{"v":1,"source":{"harness":"h","session":"s"},"role":"user","kind":"message","text":"no seq"}"#,
            br#"{"v":1,"seq":-1,"source":{"harness":"h","session":"s"},"role":"user","kind":"message","text":"x"}"#,
            br#"{"v":1,"seq":1,"source":{"harness":"h"},"role":"user","kind":"message","text":"no session"}"#,
            br#"{"v":1,"seq":1,"source":{"harness":"h","session":"s"},"role":"robot","kind":"message","text":"x"}"#,
            br#"{"v":1,"seq":1,"source":{"harness":"h","session":"s"},"role":"user","kind":"message","text":7}"#,
            br#"{"v":1,"seq":1,"source":{"harness":"h","session":"s"},"role":"user","kind":"message","text":"x","tool":3}"#,
            br#"{"v":1,"seq":1,"seq":2,"source":{"harness":"h","session":"s"},"role":"user","kind":"message","text":"dup"}"#,
            br#"{"v":1,"seq":1,"source":{"harness":"h","session":"s"},"role":"user","kind":"message","text":"x"} trailing"#,
            br#"{"note":"a plain line"}"#,
        ];
        for line in lines {
            let full = crate::transcript::parse_event(line);
            let view = parse(line);
            assert_eq!(
                full.is_some(),
                view.is_some(),
                "{}",
                String::from_utf8_lossy(line)
            );
            if let (Some(full), Some(view)) = (full, view) {
                assert_eq!((full.role, full.kind), (view.role, view.kind));
                assert_eq!(full.text, view.text);
                assert_eq!(full.tool.as_deref(), view.tool.as_deref());
            }
        }
    }
}
