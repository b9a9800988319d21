//! The normalised transcript: one versioned event schema (store-format/TRANSCRIPT.md) that
//! every harness's session format is translated into, so search, the kickoff and the MCP
//! tools read one shape whatever agent wrote the session.

use serde::{Deserialize, Serialize};

/// The `v` of every event this baton writes.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    /// The output of a tool, as the harness fed it back to the model.
    Tool,
    System,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Message,
    ToolCall,
    ToolResult,
    /// A readable reasoning summary (encrypted reasoning is never kept).
    Reasoning,
    /// Session notes the harness wrote itself: summaries, compactions, and user entries
    /// the harness injected (command output, task notifications): never a turn.
    System,
    /// A content block of a type this baton does not know: `harness_type` names it, `text`
    /// holds any text it carried (store-format/TRANSCRIPT.md, "Unknown entries").
    Other,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::User, Role::Assistant, Role::Tool, Role::System];

    pub fn name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::System => "system",
        }
    }

    /// The role `name` names, ignoring case.
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL
            .into_iter()
            .find(|r| r.name().eq_ignore_ascii_case(name))
    }
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Message,
        Kind::ToolCall,
        Kind::ToolResult,
        Kind::Reasoning,
        Kind::System,
        Kind::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Message => "message",
            Kind::ToolCall => "tool_call",
            Kind::ToolResult => "tool_result",
            Kind::Reasoning => "reasoning",
            Kind::System => "system",
            Kind::Other => "other",
        }
    }

    /// The kind `name` names, ignoring case.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
    }
}

/// Who produced an event: the harness, its session id, and the sub-agent (sidechain)
/// when the event came from one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub harness: String,
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub v: u32,
    /// 1-based position in the normalised transcript.
    pub seq: u64,
    /// RFC 3339, as the harness recorded it ("" when it recorded none).
    #[serde(default)]
    pub time: String,
    pub source: Source,
    pub role: Role,
    pub kind: Kind,
    pub text: String,
    /// The tool's name, on a call and on its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Pairs a tool call with its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The harness's own name for an entry or block of kind `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_type: Option<String>,
}

/// What a harness reader produces, before sequence numbers and tool names are filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct Draft {
    pub time: String,
    pub agent: Option<String>,
    pub role: Role,
    pub kind: Kind,
    pub text: String,
    pub tool: Option<String>,
    pub call_id: Option<String>,
    /// See [`Event::harness_type`].
    pub harness_type: Option<String>,
}

/// Number the drafts, give each result its call's tool name, and drop empty texts.
pub fn finish(harness: &str, session: &str, drafts: Vec<Draft>) -> Vec<Event> {
    finish_after(harness, session, drafts, 0, &Pairing::default())
}

/// The tool pairing of normalised events, all [`finish`] carries from one line to a
/// later one: the calls that name a tool (id, tool; in order, the last of an id wins),
/// and the results whose id no call named.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pairing {
    pub calls: Vec<(String, String)>,
    pub unpaired: Vec<String>,
}

impl Pairing {
    /// The pairing of `events`.
    pub fn of(events: &[Event]) -> Pairing {
        let mut pairing = Pairing::default();
        pairing.add(events);
        pairing
    }

    /// Add the pairing of `events` that follow the ones this is of.
    pub fn add(&mut self, events: &[Event]) {
        for e in events {
            match (e.kind, &e.call_id, &e.tool) {
                (Kind::ToolCall, Some(id), Some(tool)) => {
                    self.calls.push((id.clone(), tool.clone()));
                }
                (Kind::ToolResult, Some(id), None) => self.unpaired.push(id.clone()),
                _ => {}
            }
        }
    }

    /// Whether a call in `drafts` (coming after these events) would change how any of
    /// these events is paired: it names an id a call or an unpaired result here has.
    pub fn touched_by(&self, drafts: &[Draft]) -> bool {
        let ids: std::collections::HashSet<&str> = self
            .calls
            .iter()
            .map(|(id, _)| id.as_str())
            .chain(self.unpaired.iter().map(String::as_str))
            .collect();
        drafts
            .iter()
            .filter(|d| d.kind == Kind::ToolCall)
            .filter_map(|d| d.call_id.as_deref())
            .any(|id| ids.contains(id))
    }
}

/// Whether a draft becomes an event: empty texts are left out, tool calls, tool results
/// (an empty output is still the answer to its call) and blocks of an unknown type (their
/// type is kept) excepted.
/// Readers drop the others as they go, so that nothing is kept of them.
pub fn keeps(d: &Draft) -> bool {
    !d.text.trim().is_empty() || matches!(d.kind, Kind::ToolCall | Kind::ToolResult | Kind::Other)
}

/// Makes events of drafts one at a time, numbered on from `before`, each result given the
/// tool of its call (`tools`: call id to tool name, for every call of the transcript).
pub struct Finisher<'a> {
    harness: &'a str,
    session: &'a str,
    tools: std::collections::HashMap<String, String>,
    before: u64,
}

impl<'a> Finisher<'a> {
    pub fn new(
        harness: &'a str,
        session: &'a str,
        tools: std::collections::HashMap<String, String>,
        before: u64,
    ) -> Finisher<'a> {
        Finisher {
            harness,
            session,
            tools,
            before,
        }
    }

    /// The event of `d`, which [`keeps`] must accept.
    pub fn event(&mut self, d: Draft) -> Event {
        self.before += 1;
        let tool = d.tool.or_else(|| {
            d.call_id
                .as_ref()
                .filter(|_| d.kind == Kind::ToolResult)
                .and_then(|id| self.tools.get(id).cloned())
        });
        Event {
            v: SCHEMA_VERSION,
            seq: self.before,
            time: d.time,
            source: Source {
                harness: self.harness.to_string(),
                session: self.session.to_string(),
                agent: d.agent,
            },
            role: d.role,
            kind: d.kind,
            text: d.text,
            tool,
            call_id: d.call_id,
            harness_type: d.harness_type,
        }
    }
}

/// [`finish`] of drafts that follow `before` events whose pairing is `prior`: numbered
/// from `before + 1`, results paired with the calls of `prior` and of `drafts`. When no
/// call of `drafts` is [`Pairing::touched_by`] `prior`, the events of all the lines
/// are exactly those of the earlier lines followed by these.
pub fn finish_after(
    harness: &str,
    session: &str,
    drafts: Vec<Draft>,
    before: u64,
    prior: &Pairing,
) -> Vec<Event> {
    let mut tools: std::collections::HashMap<String, String> =
        prior.calls.iter().cloned().collect();
    for d in &drafts {
        if let (Kind::ToolCall, Some(id), Some(tool)) = (d.kind, &d.call_id, &d.tool) {
            tools.insert(id.clone(), tool.clone());
        }
    }
    let mut finisher = Finisher::new(harness, session, tools, before);
    drafts
        .into_iter()
        .filter(keeps)
        .map(|d| finisher.event(d))
        .collect()
}

/// The events as JSON lines, the bytes of a bundle's `transcript.jsonl`.
pub fn to_jsonl(events: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        write_jsonl(&mut out, e);
    }
    out
}

/// Append `e` to `out` as one JSON line.
pub fn write_jsonl(out: &mut Vec<u8>, e: &Event) {
    // An Event holds only strings, numbers and enums: serialising it into memory cannot
    // fail.
    if serde_json::to_writer(&mut *out, e).is_ok() {
        out.push(b'\n');
    }
}

/// A transcript line as a normalised event, when it is one (older bundles and plain
/// `--transcript FILE` inputs hold other JSON objects).
pub fn parse(value: &serde_json::Value) -> Option<Event> {
    if value.get("v").and_then(|v| v.as_u64()) != Some(SCHEMA_VERSION as u64) {
        return None;
    }
    serde_json::from_value(value.clone()).ok()
}
