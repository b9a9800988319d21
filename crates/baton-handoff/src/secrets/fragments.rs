//! Secrets split across adjacent text blocks of one message: an agent's message is an
//! array of content blocks (`[{"type":"text","text":"..."}, ...]`, in Claude Code and
//! Codex sessions alike), and a key cut between two blocks is two strings to a scan that
//! reads one string at a time. Each run of adjacent blocks with a `text` string is
//! scanned joined as well; a secret that runs across a boundary is replaced in every
//! block it touches, one placeholder per block, counted once.
//!
//! What counts as JSON is what `json.rs` takes: the whole input when it parses, else
//! each line. The blocks are found by `serde_json` walking the value (no copy of it is
//! built: memory stays that of one run of blocks), their string bodies located through
//! `RawValue`, so every cut lands inside a string literal, never inside an escape.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// What this layer does, for the policy fingerprint (`rules::fingerprint`): change it
/// with it.
pub(super) const MATCHER: &str =
    "text-block runs v1: adjacent \"text\" strings of an array, joined";

/// The key of a content block's text.
const TEXT_KEY: &[u8] = b"\"text\":";

/// A run longer than this is scanned in pieces that share one block (bounds the memory a
/// crafted array of empty blocks could take).
const MAX_RUN: usize = 4096;

/// A secret in the joined text of some blocks: where it lies in the joined text.
pub(super) struct Crossing {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) kind: &'static str,
}

/// Where each part ends in the parts joined, but the last: the boundaries between parts.
pub(super) fn boundaries(lens: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut bounds: Vec<usize> = lens
        .scan(0, |at, len| {
            *at += len;
            Some(*at)
        })
        .collect();
    bounds.pop();
    bounds
}

/// The secrets of one pass over `joined` that run across one of `bounds`, with a letter
/// or digit of the secret on both sides of it.
pub(super) fn crossings(joined: &[u8], bounds: &[usize]) -> Vec<Crossing> {
    if !super::may_hold_secret(joined) {
        return Vec::new();
    }
    // Text blocks are JSON strings, which hold no NUL byte: text.
    let (_, findings) = super::find_once(joined, super::Content::Text);
    findings
        .into_iter()
        .filter(|f| {
            bounds.iter().any(|&b| {
                f.start < b
                    && b < f.end
                    && super::claims::significant(&joined[f.start..b])
                    && super::claims::significant(&joined[b..f.end])
            })
        })
        .map(|f| Crossing {
            start: f.start,
            end: f.end,
            kind: f.kind,
        })
        .collect()
}

/// `input` with every secret that runs across adjacent text blocks replaced, and the
/// secrets counted into `counts`; `None` when there was none.
pub(super) fn redact_across_blocks(
    input: &[u8],
    counts: &mut BTreeMap<&'static str, u64>,
) -> Option<Vec<u8>> {
    if !holds_two_texts(input) {
        return None;
    }
    let first = input.iter().position(|b| !b.is_ascii_whitespace())?;
    let whole =
        matches!(input[first], b'{' | b'[') && serde_json::from_slice::<IgnoredAny>(input).is_ok();
    let units: Vec<&[u8]> = if whole {
        vec![input]
    } else {
        input
            .split_inclusive(|&b| b == b'\n')
            .filter(|line| holds_two_texts(line))
            .collect()
    };
    let mut edits = Vec::new();
    for unit in units {
        // Units are slices of `input`: an edit's place in the unit plus the unit's.
        let offset = unit.as_ptr() as usize - input.as_ptr() as usize;
        for edit in unit_edits(unit, counts) {
            edits.push(Edit {
                start: edit.start + offset,
                end: edit.end + offset,
                kind: edit.kind,
            });
        }
    }
    if edits.is_empty() {
        return None;
    }
    edits.sort_by_key(|e| e.start);
    let mut out = Vec::with_capacity(input.len());
    let mut pos = 0;
    for edit in edits {
        if edit.start < pos {
            // Overlaps the previous placeholder (two secrets in one block's end): taken.
            pos = pos.max(edit.end);
            continue;
        }
        out.extend_from_slice(&input[pos..edit.start]);
        out.extend_from_slice(super::placeholder(edit.kind).as_bytes());
        pos = edit.end;
    }
    out.extend_from_slice(&input[pos..]);
    Some(out)
}

/// Whether `text` holds the key of two text blocks (a run needs two).
fn holds_two_texts(text: &[u8]) -> bool {
    memchr::memmem::find_iter(text, TEXT_KEY).nth(1).is_some()
}

/// A replacement within one string body.
struct Edit {
    start: usize,
    end: usize,
    kind: &'static str,
}

/// The edits of one JSON value (`unit`): each secret across adjacent blocks.
fn unit_edits(unit: &[u8], counts: &mut BTreeMap<&'static str, u64>) -> Vec<Edit> {
    let Ok(text) = std::str::from_utf8(unit) else {
        return Vec::new();
    };
    let state = RefCell::new(State {
        unit,
        edits: Vec::new(),
        counts,
    });
    let walk = Walk {
        base: text.as_ptr() as usize,
        state: &state,
    };
    // A value that turns out not to be JSON further on keeps the edits of the blocks
    // read before (a line cut short still had them).
    let _ = walk.deserialize(&mut serde_json::Deserializer::from_str(text));
    state.into_inner().edits
}

struct State<'u, 'c> {
    unit: &'u [u8],
    edits: Vec<Edit>,
    counts: &'c mut BTreeMap<&'static str, u64>,
}

impl State<'_, '_> {
    /// Scan the blocks of one run (string bodies, by range) joined.
    fn run(&mut self, bodies: &[Range<usize>]) {
        if bodies.len() < 2 {
            return;
        }
        let mut joined = Vec::new();
        for body in bodies {
            joined.extend_from_slice(&self.unit[body.clone()]);
        }
        let bounds = boundaries(bodies.iter().map(|b| b.len()));
        for crossing in crossings(&joined, &bounds) {
            *self.counts.entry(crossing.kind).or_insert(0) += 1;
            let mut at = 0;
            for body in bodies {
                let (from, to) = (at, at + body.len());
                at = to;
                let start = crossing.start.max(from);
                let end = crossing.end.min(to);
                if start >= end {
                    continue;
                }
                let (start, end) =
                    outside_escapes(&self.unit[body.clone()], start - from, end - from);
                self.edits.push(Edit {
                    start: body.start + start,
                    end: body.start + end,
                    kind: crossing.kind,
                });
            }
        }
    }
}

/// `start..end` within a JSON string body, widened so that neither end falls inside a
/// backslash escape.
fn outside_escapes(body: &[u8], mut start: usize, mut end: usize) -> (usize, usize) {
    let mut i = 0;
    while i < body.len() && i < end {
        if body[i] != b'\\' {
            i += 1;
            continue;
        }
        let len = if body.get(i + 1) == Some(&b'u') { 6 } else { 2 };
        let escape_end = (i + len).min(body.len());
        if i < start && start < escape_end {
            start = i;
        }
        if i < end && end < escape_end {
            end = escape_end;
        }
        i = escape_end;
    }
    (start, end)
}

/// A JSON value being walked: reports the body of its `text` string when it is an object
/// with one, and scans each run of such values in an array.
#[derive(Clone, Copy)]
struct Walk<'s, 'u, 'c> {
    /// The address of the text walked, for a string's place in it.
    base: usize,
    state: &'s RefCell<State<'u, 'c>>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_, '_, '_> {
    type Value = Option<Range<usize>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_, '_> {
    type Value = Option<Range<usize>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut run: Vec<Range<usize>> = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            match item {
                Some(body) => {
                    run.push(body);
                    if run.len() >= MAX_RUN {
                        self.state.borrow_mut().run(&run);
                        run.drain(..run.len() - 1);
                    }
                }
                None => {
                    self.state.borrow_mut().run(&run);
                    run.clear();
                }
            }
        }
        self.state.borrow_mut().run(&run);
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut text = None;
        while let Some(is_text) = map.next_key_seed(IsText)? {
            if !is_text {
                map.next_value_seed(self)?;
                continue;
            }
            let raw: &'de RawValue = map.next_value()?;
            let literal = raw.get();
            text = None;
            if literal.len() >= 2 && literal.starts_with('"') {
                let at = literal.as_ptr() as usize - self.base;
                text = Some(at + 1..at + literal.len() - 1);
            }
        }
        Ok(text)
    }
}

/// A map key: whether it is `text`.
struct IsText;

impl<'de> DeserializeSeed<'de> for IsText {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for IsText {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(key == "text")
    }
}
