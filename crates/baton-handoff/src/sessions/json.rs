//! Bounded reading of one JSON line (a harness's session line or a transcript line):
//! the fields baton reads, typed and borrowed from the line; everything else skipped by
//! serde_json without being built (`IgnoredAny`, which keeps one byte per level of
//! nesting, no recursion); and a budget on the JSON values a line may make baton build
//! or walk, so that memory follows the line's length, not its shape. The limits are in
//! store-format/TRANSCRIPT.md ("Limits") and docs/reliability.md.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// Longest line of a session file or a transcript (real ones stay below a few MB; a line
/// of pasted screenshots can reach tens).
pub const MAX_LINE_BYTES: usize = 64 << 20;
/// Most JSON values (each scalar, array and object counts one) baton builds or walks for
/// one line: the parts it keeps of a session line, every value of a transcript line. A
/// `serde_json::Value` costs tens of bytes a value, so a line of `[0,0,...]` would cost
/// 16 times its length without it.
pub const MAX_LINE_VALUES: usize = 100_000;
/// Deepest nesting of what baton builds or walks: serde_json's recursion limit (the
/// parts skipped are skipped without recursion).
pub const MAX_DEPTH: usize = 128;

/// Why one line was not read.
#[derive(Debug)]
pub enum LineError {
    /// The line's length in bytes, over [`MAX_LINE_BYTES`].
    TooLong(usize),
    /// More than [`MAX_LINE_VALUES`] values.
    TooManyValues,
    NotObject,
    Json(serde_json::Error),
}

impl LineError {
    /// What is wrong, for a message that names the file and line first.
    pub fn describe(&self) -> String {
        match self {
            LineError::TooLong(len) => format!(
                "{len} bytes, over the limit of {} MiB for one line",
                MAX_LINE_BYTES >> 20
            ),
            LineError::TooManyValues => {
                format!("more than {MAX_LINE_VALUES} JSON values, the limit for one line")
            }
            LineError::NotObject => "not a JSON object".into(),
            LineError::Json(e) if e.to_string().contains("recursion limit") => {
                format!("nested deeper than {MAX_DEPTH} levels, the limit for one line ({e})")
            }
            LineError::Json(e) => format!("not valid JSON ({e})"),
        }
    }

    /// Whether this is one of the limits rather than a malformed line.
    pub fn is_limit(&self) -> bool {
        match self {
            LineError::TooLong(_) | LineError::TooManyValues => true,
            LineError::Json(e) => e.to_string().contains("recursion limit"),
            LineError::NotObject => false,
        }
    }
}

/// The values one line may still make baton build or walk.
pub struct Budget {
    left: Cell<usize>,
    exceeded: Cell<bool>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            left: Cell::new(MAX_LINE_VALUES),
            exceeded: Cell::new(false),
        }
    }
}

impl Budget {
    fn take<E: de::Error>(&self) -> Result<(), E> {
        match self.left.get().checked_sub(1) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.exceeded.set(true);
                Err(E::custom("too many values"))
            }
        }
    }

    /// Take one value outside a parse (a block, an element).
    pub fn take_one(&self) -> Result<(), LineError> {
        self.take::<serde_json::Error>()
            .map_err(|_| LineError::TooManyValues)
    }

    fn error(&self, e: serde_json::Error) -> LineError {
        if self.exceeded.get() {
            LineError::TooManyValues
        } else {
            LineError::Json(e)
        }
    }
}

/// A line's bytes without surrounding whitespace, refused when over [`MAX_LINE_BYTES`].
pub fn checked_line(line: &[u8]) -> Result<&[u8], LineError> {
    if line.len() > MAX_LINE_BYTES {
        return Err(LineError::TooLong(line.len()));
    }
    Ok(line.trim_ascii())
}

/// A whole line (already trimmed) as `T`: a JSON object, or refused.
pub fn parse_object<'a, T: Deserialize<'a>>(line: &'a [u8]) -> Result<T, LineError> {
    if line.first() != Some(&b'{') {
        // Valid JSON that is not an object is refused the same as invalid JSON is.
        return Err(match serde_json::from_slice::<IgnoredAny>(line) {
            Ok(_) => LineError::NotObject,
            Err(e) => LineError::Json(e),
        });
    }
    serde_json::from_slice(line).map_err(LineError::Json)
}

/// `raw` as `T` when it is an object, else `T::default()` (as reading fields of a
/// non-object finds none).
pub fn object<'a, T: Deserialize<'a> + Default>(raw: Option<&'a RawValue>) -> Result<T, LineError> {
    match raw {
        Some(raw) if raw.get().starts_with('{') => {
            serde_json::from_str(raw.get()).map_err(LineError::Json)
        }
        _ => Ok(T::default()),
    }
}

/// The elements of the array `raw`, each still raw, counted against `budget`; `None`
/// when `raw` is not an array.
pub fn elements<'a>(
    raw: &'a RawValue,
    budget: &Budget,
) -> Result<Option<Vec<&'a RawValue>>, LineError> {
    if !raw.get().starts_with('[') {
        return Ok(None);
    }
    struct Elements<'b>(&'b Budget);
    impl<'de, 'b> Visitor<'de> for Elements<'b> {
        type Value = Vec<&'de RawValue>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<&'de RawValue>()? {
                self.0.take()?;
                out.push(item);
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    de.deserialize_seq(Elements(budget))
        .map(Some)
        .map_err(|e| budget.error(e))
}

/// `raw` built as a `Value`, after its values were counted against `budget`.
pub fn value(raw: &RawValue, budget: &Budget) -> Result<serde_json::Value, LineError> {
    walk(raw.get().as_bytes(), budget, None)?;
    serde_json::from_str(raw.get()).map_err(LineError::Json)
}

/// Count every value of the JSON text `json` against `budget` (nested at most
/// [`MAX_DEPTH`] levels), building none; with `strings`, append each string value (not
/// the keys) and a newline to it.
pub fn walk(
    json: &[u8],
    budget: &Budget,
    strings: Option<&RefCell<String>>,
) -> Result<(), LineError> {
    let mut de = serde_json::Deserializer::from_slice(json);
    Walk { budget, strings }
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| budget.error(e))
}

#[derive(Clone, Copy)]
struct Walk<'b> {
    budget: &'b Budget,
    strings: Option<&'b RefCell<String>>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.budget.take()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.budget.take()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.budget.take()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.budget.take()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.budget.take()
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.budget.take()?;
        if let Some(strings) = self.strings {
            let mut strings = strings.borrow_mut();
            strings.push_str(v);
            strings.push('\n');
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.budget.take()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.budget.take()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// The text of a string, or of an array of `{type, text}` blocks (or strings) joined by
/// blank lines; `null` or absent is empty; any other value is its JSON text.
pub fn text_of(raw: Option<&RawValue>, budget: &Budget) -> Result<String, LineError> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct TextItem<'a> {
        #[serde(borrow)]
        text: Field<'a>,
    }
    let Some(raw) = raw else {
        return Ok(String::new());
    };
    let json = raw.get();
    if json.starts_with('"') {
        return serde_json::from_str(json).map_err(LineError::Json);
    }
    if json == "null" {
        return Ok(String::new());
    }
    let Some(items) = elements(raw, budget)? else {
        return Ok(value(raw, budget)?.to_string());
    };
    let mut texts: Vec<Cow<'_, str>> = Vec::new();
    for item in items {
        if item.get().starts_with('"') {
            texts.push(serde_json::from_str(item.get()).map_err(LineError::Json)?);
        } else if let Some(text) = object::<TextItem>(Some(item))?.text.into_str() {
            texts.push(text);
        }
    }
    // Blocks apart, but joined as written where a secret runs across them, so that the
    // scan sees it whole.
    let parts: Vec<&str> = texts.iter().map(|t| t.as_ref()).collect();
    let across = crate::secrets::secret_across(&parts);
    let mut text = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 && !across[i - 1] {
            text.push_str("\n\n");
        }
        text.push_str(part);
    }
    Ok(text)
}

/// A field read leniently, as reading a `Value` would: a string, a boolean, or anything
/// else (skipped unbuilt); absent is [`Field::Other`] too.
#[derive(Debug, Default)]
pub enum Field<'a> {
    Str(Cow<'a, str>),
    Bool(bool),
    #[default]
    Other,
}

impl<'a> Field<'a> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Field::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn into_str(self) -> Option<Cow<'a, str>> {
        match self {
            Field::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The string, or `""`.
    pub fn or_empty(&self) -> &str {
        self.as_str().unwrap_or_default()
    }

    pub fn is_true(&self) -> bool {
        matches!(self, Field::Bool(true))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Lenient<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Lenient<'a> {
            type Value = Field<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Field<'a>, E> {
                Ok(Field::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Field<'a>, E> {
                Ok(Field::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Field<'a>, E> {
                Ok(Field::Str(Cow::Owned(v)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Field<'a>, E> {
                Ok(Field::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Field<'a>, E> {
                Ok(Field::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Field<'a>, E> {
                Ok(Field::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Field<'a>, E> {
                Ok(Field::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Field<'a>, E> {
                Ok(Field::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Field<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Field::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Field<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Field::Other)
            }
        }
        d.deserialize_any(Lenient(PhantomData))
    }
}

/// A field kept as its raw JSON text, unbuilt; present even when `null` (absent is
/// `Raw(None)`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Raw<'a>(pub Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for Raw<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'de RawValue>::deserialize(d).map(|raw| Raw(Some(raw)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_of_many_values_is_refused_before_it_is_built() {
        let line = format!("{{\"a\":[{}0]}}", "0,".repeat(MAX_LINE_VALUES));
        let budget = Budget::default();
        let err = walk(line.as_bytes(), &budget, None).unwrap_err();
        assert!(matches!(err, LineError::TooManyValues), "{err:?}");
        let small = Budget::default();
        walk(br#"{"a":[0,1,"x"]}"#, &small, None).unwrap();
        assert_eq!(small.left.get(), MAX_LINE_VALUES - 5);
    }

    #[test]
    fn nesting_past_the_limit_is_refused_and_skipped_nesting_is_not() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let err = walk(deep.as_bytes(), &Budget::default(), None).unwrap_err();
        assert!(err.is_limit(), "{err:?}");
        assert!(
            err.describe().contains("deeper than 128"),
            "{}",
            err.describe()
        );
        #[derive(Deserialize)]
        struct Only<'a> {
            #[serde(borrow, rename = "type")]
            kind: Field<'a>,
        }
        // A million levels in a field nobody reads: skipped, one byte a level.
        let skipped = format!(
            "{{\"type\":\"x\",\"junk\":{}{}}}",
            "[".repeat(1 << 20),
            "]".repeat(1 << 20)
        );
        let only: Only = parse_object(skipped.as_bytes()).unwrap();
        assert_eq!(only.kind.as_str(), Some("x"));
    }

    #[test]
    fn text_of_reads_strings_blocks_and_other_values_as_a_value_would() {
        let raw = |s: &'static str| Some(serde_json::from_str::<&RawValue>(s).unwrap());
        let b = Budget::default();
        assert_eq!(text_of(raw(r#""a\nb""#), &b).unwrap(), "a\nb");
        assert_eq!(
            text_of(raw(r#"[{"type":"text","text":"one"},"two",{"x":1},3]"#), &b).unwrap(),
            "one\n\ntwo"
        );
        assert_eq!(text_of(raw("null"), &b).unwrap(), "");
        assert_eq!(text_of(None, &b).unwrap(), "");
        assert_eq!(
            text_of(raw(r#"{"b":1,"a":[true]}"#), &b).unwrap(),
            r#"{"a":[true],"b":1}"#
        );
        assert_eq!(text_of(raw("12"), &b).unwrap(), "12");
    }

    #[test]
    fn fields_are_lenient_and_raw_keeps_null() {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Line<'a> {
            #[serde(borrow)]
            a: Field<'a>,
            #[serde(borrow)]
            b: Field<'a>,
            #[serde(borrow)]
            c: Raw<'a>,
            #[serde(borrow)]
            d: Raw<'a>,
        }
        let line: Line = parse_object(br#"{"a":[1,{"x":2}],"b":true,"c":null}"#).unwrap();
        assert!(line.a.as_str().is_none() && line.b.is_true());
        assert_eq!(line.c.0.map(RawValue::get), Some("null"));
        assert!(line.d.0.is_none());
        assert!(matches!(
            parse_object::<Line>(b"[1]"),
            Err(LineError::NotObject)
        ));
        assert!(matches!(
            parse_object::<Line>(b"{"),
            Err(LineError::Json(_))
        ));
    }
}
