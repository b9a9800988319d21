//! A Gemini CLI session log (`.jsonl`) replayed: message records, a message recorded
//! again, `$set` updates and `$rewindTo` marks, to the messages the log leaves.

use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::super::json::{Budget, LineError, Raw, elements, object, parse_object};
use super::super::{line_error, unexpected};
use super::{Chat, Doc, Record, is_log_start};
use baton_error::Result;

/// A session log's messages as its records leave them: each the last record of its id,
/// in the place of its first; a rewind drops a message and those after it; a `$set` of
/// `messages` replaces them all.
#[derive(Default)]
pub(super) struct Log<'a> {
    pub messages: Vec<(&'a RawValue, usize)>,
    /// Message id to its place in `messages`.
    index: std::collections::HashMap<String, usize>,
}

impl<'a> Log<'a> {
    pub fn record(
        &mut self,
        path: &Path,
        line: usize,
        raw: &'a [u8],
        chat: &mut Chat,
    ) -> Result<()> {
        let fail = |e: LineError| line_error(path, line, &e);
        let value: &RawValue = serde_json::from_slice(raw).map_err(|e| fail(LineError::Json(e)))?;
        if !value.get().starts_with('{') {
            return Err(fail(LineError::NotObject));
        }
        let record: Record = object(Some(value)).map_err(fail)?;
        if record.id.as_str().is_some() {
            self.push(value, line).map_err(fail)?;
        } else if let Some(to) = record.rewind_to.as_str() {
            let at = self.index.get(to).copied().unwrap_or(0);
            self.messages.truncate(at);
            self.index.retain(|_, i| *i < at);
        } else if let Some(set) = record.set.0 {
            #[derive(Deserialize, Default)]
            #[serde(default)]
            struct Set<'a> {
                #[serde(borrow)]
                messages: Raw<'a>,
            }
            let set: Set = object(Some(set)).map_err(fail)?;
            if let Some(list) = set.messages.0 {
                self.messages.clear();
                self.index.clear();
                for m in elements(list, &Budget::default())
                    .map_err(fail)?
                    .unwrap_or_default()
                {
                    self.push(m, line).map_err(fail)?;
                }
            }
        } else if chat.session.is_none() && is_log_start(raw) {
            let doc: Doc = parse_object(raw).map_err(fail)?;
            chat.session = doc.session_id.as_str().map(str::to_string);
        } else {
            return Err(unexpected(
                path,
                line,
                "Gemini CLI record (no id, $set or $rewindTo)",
            ));
        }
        Ok(())
    }

    fn push(&mut self, message: &'a RawValue, line: usize) -> std::result::Result<(), LineError> {
        let record: Record = object(Some(message))?;
        match record.id.as_str() {
            Some(id) => match self.index.get(id) {
                Some(&at) => {
                    if let Some(slot) = self.messages.get_mut(at) {
                        *slot = (message, line);
                    }
                }
                None => {
                    self.index.insert(id.to_string(), self.messages.len());
                    self.messages.push((message, line));
                }
            },
            None => self.messages.push((message, line)),
        }
        Ok(())
    }
}
