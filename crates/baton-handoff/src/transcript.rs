//! The session transcript, `transcript.jsonl` (one JSON object per line): validation,
//! reading a stored one line by line, and search in pages bounded so that a result always
//! fits an agent's context. Every line is held alone and checked against the line limits
//! of `sessions::json` before anything is built of it.

use std::cell::RefCell;

use serde::Serialize;
use serde_json::Value;

use super::events::{self, Event, Kind, Role};
use super::sessions::json::{self, LineError};
use baton_error::{Error, ErrorKind, Result};

mod lines;
mod prefilter;
mod view;
use lines::{check_line, line_error};
pub use lines::{read_stored, validate};

/// Most events on one page of search results.
pub const MAX_EVENTS: usize = 50;
/// Most estimated tokens (see [`estimate_tokens`]) on one page of search results.
pub const MAX_TOKENS: usize = 8000;

/// Cursors are `c1.<line>`: format version 1, then the 1-based line where the next page
/// starts. Opaque to callers, but plain so that it is stable across runs and versions.
const CURSOR_PREFIX: &str = "c1.";

/// The token estimate used everywhere in baton: one token per four characters, rounded
/// up. Tokenizers differ; this errs on the generous side for English and code, and being
/// one simple rule keeps every budget comparable.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// One matching event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    /// 1-based line of the event in `transcript.jsonl`.
    pub line: usize,
    /// The event, with long strings cut if it alone exceeded the page budget.
    pub event: Value,
    /// `estimate_tokens` of the event as compact JSON.
    pub tokens: usize,
}

/// One page of search results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Page {
    pub hits: Vec<Hit>,
    /// Pass this to get the next page; `None` when no matches remain.
    pub next_cursor: Option<String>,
    /// Matching events in the whole transcript, whatever the cursor; `None` for a
    /// search told not to count them ([`Search::without_total`]).
    pub total_matches: Option<usize>,
    /// Hits on this page whose strings were cut to fit the token budget.
    pub truncated_events: usize,
}

/// Which events a search may return, besides matching its terms.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub roles: Vec<Role>,
    pub kinds: Vec<Kind>,
    /// Tool names, compared ignoring case.
    pub tools: Vec<String>,
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.roles.is_empty() && self.kinds.is_empty() && self.tools.is_empty()
    }

    /// A normalised event passes when it has one of the roles, kinds and tools asked
    /// for (each list empty: any); any other line passes only an empty filter.
    fn admits(&self, event: Option<&view::EventView>) -> bool {
        let Some(e) = event else {
            return self.is_empty();
        };
        (self.roles.is_empty() || self.roles.contains(&e.role))
            && (self.kinds.is_empty() || self.kinds.contains(&e.kind))
            && (self.tools.is_empty()
                || e.tool
                    .as_ref()
                    .is_some_and(|t| self.tools.iter().any(|w| w.eq_ignore_ascii_case(t))))
    }
}

/// Events that contain every whitespace-separated term of `query`, ignoring case, and
/// pass `filter`, one page at a time: at most [`MAX_EVENTS`] hits and [`MAX_TOKENS`]
/// estimated tokens. An empty query matches every event. In a normalised transcript
/// (store-format/TRANSCRIPT.md) only what was said, an event's `text`, is matched, never
/// its ids, times or other metadata; in other JSON lines every string value is.
///
/// A page is never empty while matches remain: an event too big for a whole page comes
/// alone, with its strings cut to fit. A line read to decide whether it matches that is
/// not a JSON object within the line limits is refused (integrity: the transcripts
/// searched are stored ones); lines that cannot match are passed over unparsed, as
/// ripgrep passes over them (`prefilter.rs`), and past the page an empty query with no
/// filter only counts lines.
pub fn search(jsonl: &[u8], query: &str, filter: &Filter, cursor: Option<&str>) -> Result<Page> {
    let mut search = Search::new(query, filter, cursor)?;
    for (i, line) in jsonl.split(|&b| b == b'\n').enumerate() {
        search.line(i + 1, line)?;
    }
    Ok(search.finish())
}

/// A search fed one line at a time (see [`search`]), so that a stored transcript is
/// searched as it is read ([`read_stored`]).
pub struct Search<'f> {
    filter: &'f Filter,
    start: usize,
    terms: Vec<String>,
    prefilter: Option<prefilter::Prefilter>,
    hits: Vec<Hit>,
    used: usize,
    full: bool,
    next_cursor: Option<String>,
    total_matches: usize,
    truncated_events: usize,
    count_total: bool,
}

impl<'f> Search<'f> {
    pub fn new(query: &str, filter: &'f Filter, cursor: Option<&str>) -> Result<Search<'f>> {
        let start = match cursor {
            Some(c) => parse_cursor(c)?,
            None => 1,
        };
        let terms: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        Ok(Search {
            filter,
            start,
            prefilter: prefilter::Prefilter::new(&terms),
            terms,
            hits: Vec::new(),
            used: 0,
            full: false,
            next_cursor: None,
            total_matches: 0,
            truncated_events: 0,
            count_total: true,
        })
    }

    /// Stop looking once the page is whole and the next match has given the cursor: no
    /// total, and no line after that parsed or checked (a caller reading a stored
    /// transcript still reads it to the end, to verify its hash).
    pub fn without_total(mut self) -> Self {
        self.count_total = false;
        self
    }

    /// Line `line` (1-based) of the transcript, without its newline.
    pub fn line(&mut self, line: usize, raw: &[u8]) -> Result<()> {
        if self.next_cursor.is_some() && !self.count_total {
            return Ok(());
        }
        let fail = |e: LineError| line_error(line, &e, ErrorKind::Integrity);
        let text = json::checked_line(raw).map_err(fail)?;
        if self.prefilter.as_ref().is_some_and(|p| p.rules_out(text)) {
            return Ok(());
        }
        if self.next_cursor.is_some() && self.terms.is_empty() && self.filter.is_empty() {
            // Every line matches; what is left to do is count them.
            self.total_matches += usize::from(!text.is_empty());
            return Ok(());
        }
        let normalised = view::parse(text);
        // A plain line's strings are matched: collected by the walk that checks it.
        let strings = (normalised.is_none() && !self.terms.is_empty() && self.filter.is_empty())
            .then(|| RefCell::new(String::new()));
        // The walk bounds what building a line as a `Value` costs: needed for a line
        // that may go on this page, and to read a plain line's strings; an event only
        // counted was read typed, its unknown fields skipped unbuilt.
        let on_page = line >= self.start && self.next_cursor.is_none();
        if (normalised.is_none() || on_page) && !check_line(text, strings.as_ref()).map_err(fail)? {
            return Ok(());
        }
        if !self.filter.admits(normalised.as_ref()) {
            return Ok(());
        }
        let found = match (&normalised, strings) {
            (Some(e), _) => self.has_all_terms(&e.text),
            (None, Some(strings)) => self.has_all_terms(&strings.into_inner()),
            (None, None) => true,
        };
        if !found {
            return Ok(());
        }
        self.total_matches += 1;
        if line < self.start || self.next_cursor.is_some() {
            return Ok(());
        }
        if self.full || self.hits.len() == MAX_EVENTS {
            self.next_cursor = Some(format!("{CURSOR_PREFIX}{line}"));
            return Ok(());
        }
        // Within the line limits (checked above), so bounded by the line's length.
        let event: Value = serde_json::from_slice(text).map_err(|e| fail(LineError::Json(e)))?;
        let tokens = estimate_tokens(&compact(&event));
        if self.used + tokens <= MAX_TOKENS {
            self.used += tokens;
            self.hits.push(Hit {
                line,
                event,
                tokens,
            });
        } else if self.hits.is_empty() {
            let (event, tokens) = shrink(&event, MAX_TOKENS);
            self.used += tokens;
            self.truncated_events += 1;
            self.hits.push(Hit {
                line,
                event,
                tokens,
            });
        } else {
            self.full = true;
            self.next_cursor = Some(format!("{CURSOR_PREFIX}{line}"));
        }
        Ok(())
    }

    /// Whether `text` holds every term, ignoring case.
    fn has_all_terms(&self, text: &str) -> bool {
        match &self.prefilter {
            // ASCII text: its lower case is ASCII's, which the prefilter's finders ignore.
            Some(p) if text.is_ascii() => p.finds_all(text.as_bytes()),
            _ => contains_all(text, &self.terms),
        }
    }

    pub fn finish(self) -> Page {
        Page {
            hits: self.hits,
            next_cursor: self.next_cursor,
            total_matches: self.count_total.then_some(self.total_matches),
            truncated_events: self.truncated_events,
        }
    }
}

/// A transcript line (trimmed) as a normalised event, when it is one: read typed, its
/// unknown fields skipped unbuilt.
pub fn parse_event(line: &[u8]) -> Option<Event> {
    serde_json::from_slice::<Event>(line)
        .ok()
        .filter(|e| e.v == events::SCHEMA_VERSION)
}

fn parse_cursor(cursor: &str) -> Result<usize> {
    let line = cursor
        .strip_prefix(CURSOR_PREFIX)
        .filter(|d| !d.is_empty() && !d.starts_with('0') && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse::<usize>().ok());
    line.ok_or_else(|| {
        let shown: String = cursor.chars().take(40).collect();
        Error::usage(format!("malformed cursor '{}'", shown.escape_debug())).with_hint(
            "pass the next_cursor of the previous page unchanged, or no cursor for the first page",
        )
    })
}

fn contains_all(text: &str, terms: &[String]) -> bool {
    if terms.is_empty() {
        return true;
    }
    let text = text.to_lowercase();
    terms.iter().all(|t| text.contains(t.as_str()))
}

fn compact(value: &Value) -> String {
    // Serializing a `Value` to a string cannot fail: its keys are strings and it holds no
    // non-finite floats.
    serde_json::to_string(value).unwrap_or_default()
}

/// The event with every string cut to the longest length that fits `budget` tokens, and
/// its token count. An event that does not fit even with empty strings (thousands of
/// keys or numbers) becomes a stub saying so.
fn shrink(event: &Value, budget: usize) -> (Value, usize) {
    let tokens_at = |limit: usize| {
        let v = cap(event, limit);
        let t = estimate_tokens(&compact(&v));
        (v, t)
    };
    let (mut best, mut best_tokens) = tokens_at(0);
    if best_tokens > budget {
        let stub = serde_json::json!({
            "baton_truncated": format!(
                "event of {} estimated tokens does not fit the {budget}-token page",
                estimate_tokens(&compact(event))
            )
        });
        let t = estimate_tokens(&compact(&stub));
        return (stub, t);
    }
    // Cutting adds a marker, so size is not quite monotonic in the limit; the search only
    // ever keeps a limit it has seen fit.
    let (mut lo, mut hi) = (0, longest_string(event));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        let (v, t) = tokens_at(mid);
        if t <= budget {
            lo = mid;
            best = v;
            best_tokens = t;
        } else {
            hi = mid - 1;
        }
    }
    (best, best_tokens)
}

fn cap(value: &Value, limit: usize) -> Value {
    match value {
        Value::String(s) => {
            let len = s.chars().count();
            if len <= limit {
                Value::String(s.clone())
            } else {
                let kept: String = s.chars().take(limit).collect();
                Value::String(format!("{kept}…[{} more chars]", len - limit))
            }
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| cap(v, limit)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), cap(v, limit)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn longest_string(value: &Value) -> usize {
    match value {
        Value::String(s) => s.chars().count(),
        Value::Array(items) => items.iter().map(longest_string).max().unwrap_or(0),
        Value::Object(map) => map.values().map(longest_string).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_error::ErrorKind;
    use serde_json::json;

    fn jsonl(events: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in events {
            out.extend_from_slice(compact(e).as_bytes());
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn estimate_rounds_up_by_chars() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abc"), 1);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("ééééé"), 2);
    }

    #[test]
    fn pages_of_130_matches() {
        let events: Vec<Value> = (0..260)
            .map(|i| {
                let text = if i % 2 == 0 {
                    "ran cargo Test"
                } else {
                    "edited file"
                };
                json!({"n": i, "role": "tool", "text": text})
            })
            .collect();
        let data = jsonl(&events);

        let mut cursor: Option<String> = None;
        let mut sizes = Vec::new();
        let mut cursors = Vec::new();
        let mut lines = Vec::new();
        loop {
            let page =
                search(&data, "CARGO test", &Filter::default(), cursor.as_deref()).expect("search");
            assert_eq!(
                page,
                search(&data, "cargo TEST", &Filter::default(), cursor.as_deref()).expect("again")
            );
            assert_eq!(page.total_matches, Some(130));
            assert_eq!(page.truncated_events, 0);
            sizes.push(page.hits.len());
            lines.extend(page.hits.iter().map(|h| h.line));
            cursor = page.next_cursor;
            match &cursor {
                Some(c) => cursors.push(c.clone()),
                None => break,
            }
        }
        assert_eq!(sizes, [50, 50, 30]);
        assert_eq!(cursors, ["c1.101", "c1.201"]);
        assert_eq!(lines, (0..130).map(|i| 2 * i + 1).collect::<Vec<_>>());
    }

    #[test]
    fn token_budget_caps_a_page() {
        let big = "lorem ".repeat(700); // 4200 chars, over 1000 tokens per event
        let events: Vec<Value> = (0..20).map(|i| json!({"i": i, "text": big})).collect();
        let data = jsonl(&events);
        let first = search(&data, "lorem", &Filter::default(), None).expect("search");
        let per_event = estimate_tokens(&compact(&events[0]));
        assert!(per_event > 1000);
        assert_eq!(first.hits.len(), MAX_TOKENS / per_event);
        assert!(first.hits.iter().map(|h| h.tokens).sum::<usize>() <= MAX_TOKENS);
        assert_eq!(first.truncated_events, 0);
        let next_line = first.hits.len() + 1;
        assert_eq!(first.next_cursor, Some(format!("c1.{next_line}")));
        let second = search(
            &data,
            "lorem",
            &Filter::default(),
            first.next_cursor.as_deref(),
        )
        .expect("search");
        assert_eq!(second.hits[0].line, next_line);
    }

    #[test]
    fn oversized_event_is_cut_to_fit() {
        let huge = "x".repeat(100_000);
        let data = jsonl(&[
            json!({"role": "user", "text": format!("needle {huge}"), "tail": "short needle"}),
            json!({"role": "tool", "text": "needle again"}),
        ]);
        let page = search(&data, "needle", &Filter::default(), None).expect("search");
        assert_eq!(page.hits.len(), 1);
        assert_eq!(page.truncated_events, 1);
        let hit = &page.hits[0];
        assert!(
            hit.tokens <= MAX_TOKENS && hit.tokens > MAX_TOKENS - 10,
            "{}",
            hit.tokens
        );
        assert_eq!(hit.tokens, estimate_tokens(&compact(&hit.event)));
        assert_eq!(hit.event["tail"], "short needle");
        let text = hit.event["text"].as_str().unwrap_or_default();
        assert!(text.starts_with("needle xxx") && text.ends_with(" more chars]"));
        assert_eq!(page.next_cursor.as_deref(), Some("c1.2"));
        let rest = search(&data, "needle", &Filter::default(), Some("c1.2")).expect("search");
        assert_eq!(rest.hits.len(), 1);
        assert_eq!(rest.next_cursor, None);
        assert_eq!(rest.total_matches, Some(2));
    }

    #[test]
    fn event_too_big_even_when_emptied_becomes_a_stub() {
        let keys: serde_json::Map<String, Value> =
            (0..20_000).map(|i| (format!("key{i}"), json!(i))).collect();
        let mut event = Value::Object(keys);
        event["text"] = json!("needle");
        let page = search(&jsonl(&[event]), "needle", &Filter::default(), None).expect("search");
        assert_eq!(page.truncated_events, 1);
        assert!(page.hits[0].tokens <= MAX_TOKENS);
        assert!(page.hits[0].event["baton_truncated"].is_string());
    }

    #[test]
    fn matching_rules() {
        let data = jsonl(&[
            json!({"role": "assistant", "content": [{"type": "text", "text": "Fixed the Parser"}]}),
            json!({"role": "tool", "exit": 42, "text": "ok"}),
        ]);
        let find = |q: &str| -> Vec<usize> {
            search(&data, q, &Filter::default(), None)
                .expect("search")
                .hits
                .iter()
                .map(|h| h.line)
                .collect()
        };
        assert_eq!(find("parser fixed"), [1]);
        assert_eq!(find("  PARSER  "), [1]);
        assert_eq!(find("parser missing"), Vec::<usize>::new());
        assert_eq!(find("role"), Vec::<usize>::new(), "keys are not searched");
        assert_eq!(find("42"), Vec::<usize>::new(), "numbers are not searched");
        assert_eq!(find("the pars"), [1]);
        assert_eq!(find(""), [1, 2]);
    }

    /// The page of a search that parses every line (no prefilter): what the prefilter
    /// must never change.
    fn search_parsing_every_line(jsonl: &[u8], query: &str, cursor: Option<&str>) -> Page {
        let filter = Filter::default();
        let mut search = Search::new(query, &filter, cursor).expect("search");
        search.prefilter = None;
        for (i, line) in jsonl.split(|&b| b == b'\n').enumerate() {
            search.line(i + 1, line).expect("line");
        }
        search.finish()
    }

    #[test]
    fn the_prefilter_changes_no_page() {
        // Events and plain lines whose text mixes ASCII, JSON escapes (\", \\, \/, \n,
        // \u00xx), accents and the Kelvin sign (whose lower case is an ASCII k), so that
        // every way a plain line's bytes and its strings differ is met.
        let pieces = [
            "Parser",
            "fixed",
            "a/b",
            "say \"hi\"",
            "C:\\users",
            "caf\u{e9}",
            "\u{212a}elvin",
            "kelvin",
            "line\nbreak",
            "tab\there",
            "x",
            "K",
            "\u{130}stanbul",
            "istanbul",
        ];
        let mut state = 7u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize % n
        };
        let mut lines = Vec::new();
        for seq in 1..=400u64 {
            let text: Vec<&str> = (0..1 + next(4))
                .map(|_| pieces[next(pieces.len())])
                .collect();
            let text = text.join(if next(2) == 0 { " " } else { "" });
            let value = if next(3) == 0 {
                json!({"note": text, "n": seq})
            } else {
                json!({"v": 1, "seq": seq, "time": "", "source": {"harness": "h", "session": "s"},
                       "role": "assistant", "kind": "message", "text": text})
            };
            let mut line = compact(&value);
            if next(4) == 0 {
                // The same text with every letter a \u escape.
                line = line.replace("kelvin", "\\u006belvin");
            }
            lines.push(line);
        }
        let data = lines.join("\n").into_bytes();
        let queries = [
            "parser",
            "PARSER fixed",
            "a/b",
            "\"hi\"",
            "users",
            "caf\u{e9}",
            "CAF\u{c9}",
            "k",
            "kelvin",
            "\u{212a}",
            "break",
            "x k",
            "i",
            "\u{130}",
            "zzz",
            "",
        ];
        for query in queries {
            let mut cursor: Option<String> = None;
            loop {
                let filtered =
                    search(&data, query, &Filter::default(), cursor.as_deref()).expect("search");
                let parsed = search_parsing_every_line(&data, query, cursor.as_deref());
                assert_eq!(filtered, parsed, "query {query:?} cursor {cursor:?}");
                match filtered.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
        }
    }

    #[test]
    fn without_the_total_a_page_and_its_cursor_are_the_same() {
        let events: Vec<Value> = (0..300)
            .map(|i| json!({"text": format!("needle {i}")}))
            .collect();
        let data = jsonl(&events);
        let any = Filter::default();
        let mut cursor = None;
        loop {
            let counted = search(&data, "needle", &Filter::default(), cursor.as_deref()).unwrap();
            let mut search = Search::new("needle", &any, cursor.as_deref())
                .unwrap()
                .without_total();
            for (i, line) in data.split(|&b| b == b'\n').enumerate() {
                search.line(i + 1, line).unwrap();
            }
            let uncounted = search.finish();
            assert_eq!(counted.total_matches, Some(300));
            assert_eq!(uncounted.total_matches, None);
            assert_eq!(uncounted.hits, counted.hits);
            assert_eq!(uncounted.next_cursor, counted.next_cursor);
            cursor = counted.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
        // Past the page nothing is looked at: a line that would be refused is not.
        let mut bad = jsonl(&events);
        bad.extend_from_slice(b"{\"text\": \"needle\" not json\n");
        let mut search = Search::new("needle", &any, None).unwrap().without_total();
        for (i, line) in bad.split(|&b| b == b'\n').enumerate() {
            search.line(i + 1, line).unwrap();
        }
        assert!(search.finish().next_cursor.is_some());
        assert!(super::search(&bad, "needle", &Filter::default(), None).is_err());
    }

    #[test]
    fn no_match() {
        let data = jsonl(&[json!({"text": "hello"})]);
        let page = search(&data, "absent", &Filter::default(), None).expect("search");
        assert_eq!(
            page,
            Page {
                hits: vec![],
                next_cursor: None,
                total_matches: Some(0),
                truncated_events: 0
            }
        );
        assert_eq!(
            search(b"", "x", &Filter::default(), None)
                .expect("empty")
                .total_matches,
            Some(0)
        );
    }

    #[test]
    fn cursor_past_the_end_gives_an_empty_page() {
        let data = jsonl(&[json!({"text": "hello"})]);
        let page = search(&data, "hello", &Filter::default(), Some("c1.99")).expect("search");
        assert!(page.hits.is_empty() && page.next_cursor.is_none());
        assert_eq!(page.total_matches, Some(1));
    }

    #[test]
    fn bad_cursors() {
        let data = jsonl(&[json!({"text": "hello"})]);
        for bad in [
            "",
            "c1.",
            "c1.0",
            "c1.01",
            "c2.5",
            "c1.5x",
            "c1.-1",
            "c1.+1",
            "C1.5",
            " c1.5",
            "c1.99999999999999999999999",
            "5",
        ] {
            let e = search(&data, "hello", &Filter::default(), Some(bad)).expect_err(bad);
            assert_eq!(e.kind, ErrorKind::Usage, "{bad}");
            assert!(e.message.starts_with("malformed cursor"), "{}", e.message);
            assert!(!e.message.contains('\n'));
        }
        let e = search(&data, "x", &Filter::default(), Some("c1.\n2")).expect_err("newline");
        assert!(!e.message.contains('\n'));
    }

    #[test]
    fn validate_counts_and_names_bad_lines() {
        let good = b"{\"a\":1}\r\n\n  \n{\"b\":[1,2]}\n";
        assert_eq!(validate(good).expect("valid"), 2);
        assert_eq!(validate(b"").expect("empty"), 0);

        let bad = b"{\"a\":1}\n\n[1,2]\n{\"b\":2}\n";
        let e = validate(bad).expect_err("array line");
        assert_eq!(e.kind, ErrorKind::Usage);
        assert_eq!(e.message, "transcript.jsonl line 3: not a JSON object");
        let e = search(bad, "2", &Filter::default(), None).expect_err("search validates too");
        assert!(e.message.contains("line 3"));
        // What cannot match is not parsed (as ripgrep passes over a line), nor validated.
        let page = search(bad, "x", &Filter::default(), None).expect("passed over");
        assert_eq!(page.total_matches, Some(0));

        let e = validate(b"{\"a\":1}\n{\"a\":\n").expect_err("broken line");
        assert!(
            e.message
                .starts_with("transcript.jsonl line 2: not valid JSON"),
            "{}",
            e.message
        );
        let e = validate(b"\"just a string\"").expect_err("string");
        assert!(e.message.contains("line 1"));
        let e = validate(&[b'{', 0xff, b'}']).expect_err("binary");
        assert!(e.message.contains("line 1"));
    }
}
