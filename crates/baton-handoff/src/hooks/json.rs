//! An order-keeping JSON tree for editing a harness's settings file: objects keep their
//! keys in the file's order (serde_json's own `Value` sorts them, and its `preserve_order`
//! feature would change every JSON document baton prints), so a rewrite moves nothing.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    /// Keys in the file's order; a repeated key is kept as it was (the last one counts,
    /// as for `JSON.parse`).
    Object(Vec<(String, Json)>),
}

impl Json {
    pub(crate) fn parse(bytes: &[u8]) -> Result<Json, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// Two-space pretty printing with a trailing newline, keys in their order.
    pub(crate) fn to_pretty(&self) -> baton_error::Result<Vec<u8>> {
        // Every key is a string and every number finite, so this fails only on a bug.
        let mut bytes = serde_json::to_vec_pretty(self).map_err(|e| {
            baton_error::Error::internal(format!("cannot encode a settings file: {e}"))
        })?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// The same value with sorted keys: for comparing and hashing, where order is noise.
    pub(crate) fn to_value(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.clone()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect(),
            ),
        }
    }

    /// What kind of value this is, for messages ("an array").
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    pub(crate) fn str(s: &str) -> Json {
        Json::String(s.to_string())
    }

    pub(crate) fn object(entries: Vec<(&str, Json)>) -> Json {
        Json::Object(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_array(&self) -> Option<&Vec<Json>> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub(crate) fn as_array_mut(&mut self) -> Option<&mut Vec<Json>> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub(crate) fn is_empty_container(&self) -> bool {
        match self {
            Json::Array(items) => items.is_empty(),
            Json::Object(entries) => entries.is_empty(),
            _ => false,
        }
    }

    /// The value of `key` in an object (the last, when repeated).
    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|e| &e.1),
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        match self {
            Json::Object(entries) => entries
                .iter_mut()
                .rev()
                .find(|(k, _)| k == key)
                .map(|e| &mut e.1),
            _ => None,
        }
    }

    /// The value of `key`, added at the end of the object with `default` when absent.
    /// `None` when `self` is not an object.
    pub(crate) fn entry(&mut self, key: &str, default: Json) -> Option<&mut Json> {
        let Json::Object(entries) = self else {
            return None;
        };
        if !entries.iter().any(|(k, _)| k == key) {
            entries.push((key.to_string(), default));
        }
        self.get_mut(key)
    }

    /// Remove `key` (every occurrence) from an object.
    pub(crate) fn remove(&mut self, key: &str) {
        if let Json::Object(entries) = self {
            entries.retain(|(k, _)| k != key);
        }
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(b) => serializer.serialize_bool(*b),
            Json::Number(n) => n.serialize(serializer),
            Json::String(s) => serializer.serialize_str(s),
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(n)
            .map(Json::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, s: &str) -> Result<Json, E> {
        Ok(Json::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Json, E> {
        Ok(Json::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            entries.push((k, v));
        }
        Ok(Json::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_order_through_a_round_trip() {
        let text = "{\n  \"z\": 1,\n  \"a\": [\n    true,\n    null,\n    -2,\n    0.5\n  ],\n  \"m\": {\n    \"y\": \"x\",\n    \"b\": {}\n  }\n}\n";
        let doc = Json::parse(text.as_bytes()).unwrap();
        assert_eq!(String::from_utf8(doc.to_pretty().unwrap()).unwrap(), text);
        assert_eq!(
            doc.to_value(),
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
    }

    #[test]
    fn entry_adds_at_the_end_and_get_finds_the_last_of_a_repeated_key() {
        let mut doc = Json::parse(br#"{"a": 1, "a": 2}"#).unwrap();
        assert_eq!(doc.get("a"), Some(&Json::Number(2.into())));
        doc.entry("b", Json::Array(vec![]));
        let Json::Object(entries) = &doc else {
            panic!("an object")
        };
        assert_eq!(entries.last().unwrap().0, "b");
        doc.remove("a");
        assert_eq!(doc.to_value(), serde_json::json!({"b": []}));
    }
}
