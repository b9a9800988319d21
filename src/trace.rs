//! `BATON_TRACE`: the subscriber that prints the transports' trace events (`tracing`,
//! target `baton::trace`) on stderr: every call a sync makes on its remote with its
//! duration and the round trips so far, then `trace summary: round trips: N after
//! connect` (the transport's own count over SFTP, else the calls that waited) or S3's
//! request counts. `BATON_TRACE=json` writes each event as one JSON line instead, with
//! the same counts, for tests and scripts. `BATON_TRACE_SFTP` adds SFTP's packets.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

use baton_transport::trace::{SFTP, TARGET};

/// Install the subscriber when `BATON_TRACE` or `BATON_TRACE_SFTP` asks for it.
pub fn install() {
    let on = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty() && v != "0")
    };
    let (trace, sftp) = (on("BATON_TRACE"), on("BATON_TRACE_SFTP"));
    if trace.is_none() && sftp.is_none() {
        return;
    }
    let json = [&trace, &sftp].iter().any(|v| v.as_deref() == Some("json"));
    let printer = Printer {
        trace: trace.is_some(),
        sftp: sftp.is_some(),
        json,
        state: Mutex::new(State {
            start: Instant::now(),
            batches: 0,
        }),
    };
    // Only fails when one is installed already (a test harness): that one stays.
    let _ = tracing::subscriber::set_global_default(printer);
}

struct Printer {
    trace: bool,
    sftp: bool,
    json: bool,
    state: Mutex<State>,
}

/// Of the connection traced now.
struct State {
    /// When it was made: each line's first column counts from here.
    start: Instant,
    /// Its calls that waited for an answer (the round trips of a transport that keeps
    /// no count of its own).
    batches: u64,
}

impl Printer {
    fn wants(&self, meta: &Metadata<'_>) -> bool {
        (self.trace && meta.target() == TARGET) || (self.sftp && meta.target() == SFTP)
    }

    /// The event's line: text, or the JSON object with the counts filled in.
    fn line(&self, target: &str, mut fields: BTreeMap<&'static str, Value>) -> String {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let text = |f: &BTreeMap<&'static str, Value>, k: &str| match f.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        };
        let num = |f: &BTreeMap<&'static str, Value>, k: &str| f.get(k).and_then(Value::as_u64);
        let ms = fields.get("ms").and_then(Value::as_f64).unwrap_or(0.0);
        let since = state.start.elapsed().as_secs_f64() * 1e3;
        let error = if fields.get("error") == Some(&Value::Bool(true)) {
            " (error)"
        } else {
            ""
        };
        let kind = if target == SFTP {
            "sftp".to_string()
        } else {
            text(&fields, "kind")
        };
        let mut out = String::new();
        match kind.as_str() {
            "connected" | "opened" => {
                state.start = Instant::now();
                state.batches = 0;
                let cipher = fields
                    .get("cipher")
                    .map(|_| format!(", cipher {}", text(&fields, "cipher")))
                    .unwrap_or_default();
                if kind == "connected" {
                    let _ = write!(out, "trace: connected in {ms:.1} ms{cipher}");
                }
            }
            "call" | "upload" => {
                if fields.get("waited") == Some(&Value::Bool(true)) {
                    state.batches += 1;
                }
                let rt = num(&fields, "round_trips").unwrap_or(state.batches);
                fields.insert("round_trips", rt.into());
                let what = text(&fields, "what");
                let _ = if kind == "call" {
                    write!(
                        out,
                        "trace: {since:>8.1} ms  {ms:>7.1} ms  {rt:>3} rt  {what}{error}"
                    )
                } else {
                    write!(out, "trace: {since:>8.1} ms  {ms:>7.1} ms  {what}{error}")
                };
            }
            "summary" => {
                let rt = num(&fields, "round_trips").unwrap_or(state.batches);
                fields.insert("round_trips", rt.into());
                let _ = write!(out, "trace summary: round trips: {rt} after connect");
            }
            "requests" => {
                let n = |k: &str| num(&fields, k).unwrap_or(0);
                let _ = write!(
                    out,
                    "trace summary: requests: {} (GET {}, HEAD {}, PUT {}, LIST {}, DELETE {}, POST {})",
                    n("total"),
                    n("get"),
                    n("head"),
                    n("put"),
                    n("list"),
                    n("delete"),
                    n("post")
                );
            }
            "s3" => {
                let _ = write!(
                    out,
                    "trace: {since:>8.1} ms  {ms:>7.1} ms  s3 {} {} -> {}",
                    text(&fields, "request"),
                    text(&fields, "path"),
                    text(&fields, "status")
                );
            }
            _ => {
                let _ = write!(out, "{kind}: {}", text(&fields, "message"));
            }
        }
        if !self.json {
            return out;
        }
        fields.insert("at_ms", json!(since));
        fields.entry("kind").or_insert_with(|| kind.clone().into());
        let object: Map<String, Value> = fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        Value::Object(object).to_string()
    }
}

impl Subscriber for Printer {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.wants(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        self.wants(meta)
    }

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let line = self.line(event.metadata().target(), fields.0);
        if !line.is_empty() {
            eprintln!("{line}");
        }
    }

    // Spans are not used: the events carry their own durations.
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// An event's fields as JSON values.
#[derive(Default)]
struct Fields(BTreeMap<&'static str, Value>);

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name(), json!(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printer(json: bool) -> Printer {
        Printer {
            trace: true,
            sftp: false,
            json,
            state: Mutex::new(State {
                start: Instant::now(),
                batches: 0,
            }),
        }
    }

    fn event(pairs: &[(&'static str, Value)]) -> BTreeMap<&'static str, Value> {
        pairs.iter().cloned().collect()
    }

    /// Without a count of the transport's own, the summary is the calls that waited;
    /// with one, the transport's.
    #[test]
    fn the_summary_counts_the_calls_that_waited_unless_the_transport_counts() {
        let p = printer(false);
        p.line(TARGET, event(&[("kind", "connected".into())]));
        for waited in [true, false, true] {
            let call = event(&[
                ("kind", "call".into()),
                ("what", "read_many".into()),
                ("waited", waited.into()),
            ]);
            assert!(p.line(TARGET, call).ends_with("rt  read_many"));
        }
        let summary = p.line(TARGET, event(&[("kind", "summary".into())]));
        assert_eq!(summary, "trace summary: round trips: 2 after connect");
        let own = event(&[("kind", "summary".into()), ("round_trips", 7.into())]);
        assert_eq!(
            p.line(TARGET, own),
            "trace summary: round trips: 7 after connect"
        );
    }

    #[test]
    fn json_lines_carry_the_counts() {
        let p = printer(true);
        p.line(TARGET, event(&[("kind", "connected".into())]));
        let call = event(&[("kind", "call".into()), ("waited", true.into())]);
        let line: Value = serde_json::from_str(&p.line(TARGET, call)).unwrap();
        assert_eq!(line["round_trips"], 1, "{line}");
        let summary = p.line(TARGET, event(&[("kind", "summary".into())]));
        let line: Value = serde_json::from_str(&summary).unwrap();
        assert_eq!(
            (line["kind"].as_str(), line["round_trips"].as_u64()),
            (Some("summary"), Some(1))
        );
    }
}
