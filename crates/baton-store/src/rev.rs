//! Resolving revisions: ids, unique prefixes, `current`, `targets/<name>`, and `~N`.

use super::Store;
use baton_error::{Error, ErrorKind, Result};
use baton_format::id::{HEX_LEN, is_lower_hex};
use baton_format::names::RefName;
use baton_format::{Bundle, MAX_METADATA_OBJECT, ObjectId};

pub const MIN_PREFIX: usize = 8;

impl Store {
    /// Resolve REV to a bundle id. Grammar: `BASE` or `BASE~N` (`BASE~` = `BASE~1`), BASE
    /// being `current`, `targets/<name>`, a full id, or a unique prefix of 8+ hex digits.
    pub fn resolve(&self, rev: &str) -> Result<ObjectId> {
        let (base, steps) = match rev.split_once('~') {
            None => (rev, 0),
            Some((base, "")) => (base, 1),
            Some((base, n)) => (
                base,
                n.bytes()
                    .all(|b| b.is_ascii_digit())
                    .then_some(())
                    .and_then(|_| n.parse::<usize>().ok())
                    .ok_or(())
                    .map_err(|_| {
                        Error::usage(format!(
                            "'{rev}' is not a valid revision: '~{n}' is not a number"
                        ))
                        .with_hint("write REV~N, e.g. current~2")
                    })?,
            ),
        };
        let mut id = self.resolve_base(base, rev)?;
        for step in 0..steps {
            let bundle = self.read_bundle(&id)?;
            id = *bundle.parents.first().ok_or_else(|| {
                Error::not_found(format!(
                    "'{rev}' goes past the first bundle (it has {step} ancestors)"
                ))
            })?;
        }
        Ok(id)
    }

    fn resolve_base(&self, base: &str, rev: &str) -> Result<ObjectId> {
        if base == "current" || base.starts_with("targets/") {
            let name = RefName::parse(base)?;
            return self.read_ref(&name)?.ok_or_else(|| match &name {
                RefName::Current => {
                    Error::not_found(format!("'{base}' does not name a bundle yet"))
                        .with_hint("save a bundle first with 'baton save DIR'")
                }
                RefName::Target(target) if !self.config.targets.contains_key(target) => {
                    Error::not_found(format!(
                        "'{base}' names no bundle: no target '{target}' is configured"
                    ))
                    .with_hint("list the targets with 'baton target list'")
                }
                RefName::Target(target) => {
                    Error::not_found(format!("'{base}' does not name a bundle yet")).with_hint(
                        format!("push to or pull from {target} first ('baton pull {target}')"),
                    )
                }
            });
        }
        if !is_lower_hex(base) {
            return Err(Error::usage(format!("'{}' is not a revision", rev.escape_debug()))
                .with_hint("use an id or unique prefix (8+ hex digits), current, current~N or targets/NAME"));
        }
        if base.len() < MIN_PREFIX {
            return Err(Error::usage(format!("id prefix '{base}' is too short"))
                .with_hint("give at least 8 hex digits"));
        }
        if base.len() > HEX_LEN {
            return Err(Error::usage(format!("'{base}' is longer than an id")));
        }
        let matches = self.bundles_with_prefix(base)?;
        match matches.as_slice() {
            [one] => Ok(*one),
            [] => Err(Error::not_found(format!("no bundle matches '{base}'"))
                .with_hint("list bundles with 'baton log'")),
            many => Err(Error::new(
                ErrorKind::Ambiguous,
                format!(
                    "'{base}' matches {} bundles: {}",
                    many.len(),
                    many.iter()
                        .map(|i| i.short())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .with_hint("give more hex digits")),
        }
    }

    fn bundles_with_prefix(&self, prefix: &str) -> Result<Vec<ObjectId>> {
        // Candidates: loose objects and packed ones (a pulled or cloned bundle is packed).
        let matches = |id: &ObjectId| id.to_hex().starts_with(prefix);
        let mut candidates = std::collections::BTreeSet::new();
        if self.objects.envelope().is_encrypted() {
            // Storage names say nothing about ids: the candidates are the bundles that
            // refs and the log name, and their ancestors.
            for root in self.all_roots()? {
                if self.objects.contains(&root) {
                    candidates.extend(self.history(&root)?.into_iter().filter(matches));
                }
            }
        } else if prefix.len() == HEX_LEN {
            // A full id names one object: look it up instead of searching every pack.
            let id = ObjectId::parse(prefix)?;
            if self.objects.contains(&id) {
                candidates.insert(id);
            }
        } else {
            self.loose_and_packed_with_prefix(prefix, &mut candidates)?;
        }
        let mut out = Vec::new();
        for id in candidates {
            // Only bundles count: a blob or tree sharing the prefix is not a revision.
            if !self
                .objects
                .peek(&id, 16)
                .is_some_and(|head| Bundle::looks_like(&head))
            {
                continue;
            }
            // A file may merely start like a manifest: an object that reads back intact
            // but does not decode as a bundle is a blob, not a revision. A damaged object
            // still fails here, loudly.
            let bytes = self.objects.get_bytes(&id, MAX_METADATA_OBJECT)?;
            if Bundle::decode(&bytes).is_err() {
                continue;
            }
            out.push(id);
        }
        Ok(out)
    }

    fn loose_and_packed_with_prefix(
        &self,
        prefix: &str,
        candidates: &mut std::collections::BTreeSet<ObjectId>,
    ) -> Result<()> {
        let matches = |id: &ObjectId| id.to_hex().starts_with(prefix);
        let fanout = self.objects.dir().join(&prefix[..2]);
        if fanout.is_dir() {
            for name in super::fsutil::read_dir_sorted(&fanout)? {
                if let Ok(id) = ObjectId::parse(&format!("{}{name}", &prefix[..2])) {
                    candidates.extend(Some(id).filter(matches));
                }
            }
        }
        // Each pack's index is searched for the prefix's range, not read whole.
        candidates.extend(self.objects.packed_with_prefix(prefix)?);
        Ok(())
    }
}
