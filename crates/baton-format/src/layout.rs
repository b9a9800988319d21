//! Where everything lives in a store, local or remote: the one place that spells the
//! layout of store-format/SPEC.md §5 (every other module names things by kind and name).

use super::ObjectId;
use super::names::{RefName, generation_name};

pub const CONFIG: &str = "config";
pub const LOG: &str = "log";
pub const LOCK: &str = "lock";
pub const GITIGNORE: &str = ".gitignore";
pub const OBJECTS: &str = "objects";
pub const PACKS: &str = "packs";
pub const REFS: &str = "refs";
pub const TARGETS: &str = "refs/targets";
pub const CURRENT: &str = "refs/current";
pub const STAGING: &str = "staging";
pub const PACK_SUFFIX: &str = ".pack";
/// The stat cache of `save DIR` (SPEC §5.1): local only, never synced, never verified.
pub const STATCACHE: &str = "statcache";
/// The target hints of push and pull (SPEC §5.2): local only, never synced, never verified.
pub const TARGET_HINTS: &str = "targethints";
/// The log of `baton checkpoint --hook` (SPEC §5.3): local only, never synced, never verified.
pub const CHECKPOINT_LOG: &str = "checkpoint.log";
/// The push queue of `checkpoint --push` and `baton sync` (SPEC §5.4): local only.
pub const PUSH_QUEUE: &str = "push-queue";

/// The directories of a store, each after its parent.
pub const DIRS: [&str; 6] = [OBJECTS, PACKS, REFS, CURRENT, TARGETS, STAGING];

/// Every name a store's top directory may hold (a store being created holds some of them).
pub const TOP_NAMES: [&str; 12] = [
    OBJECTS,
    PACKS,
    REFS,
    STAGING,
    GITIGNORE,
    LOG,
    LOCK,
    CONFIG,
    STATCACHE,
    TARGET_HINTS,
    CHECKPOINT_LOG,
    PUSH_QUEUE,
];

/// The small files a new store starts with besides `config`, which is written last (a
/// store with a config is complete).
pub const INITIAL_FILES: [(&str, &[u8]); 3] = [(GITIGNORE, b"*\n"), (LOG, b""), (LOCK, b"")];

/// What a backend stores, by kind: repository logic names things by kind and name and
/// never by path (restic's shape); `path` is the only mapping to a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `config` (the name is ignored).
    Config,
    /// The audit log (the name is ignored).
    Log,
    /// `packs/<id>.pack`: a pack with its index.
    Pack,
    /// `objects/<2 hex>/<62 hex>`: a loose object under its storage name.
    Loose,
    /// A ref's generation files: `refs/current/<20 digits>`, `refs/targets/<t>/<20 digits>`.
    Generation(RefName),
}

/// The path of `name` of `kind`, relative to the store root, with `/` separators.
pub fn path(kind: &Kind, name: &str) -> String {
    match kind {
        Kind::Config => CONFIG.to_string(),
        Kind::Log => LOG.to_string(),
        Kind::Pack => format!("{PACKS}/{name}"),
        Kind::Loose => match (name.get(..2), name.get(2..)) {
            (Some(fanout), Some(rest)) => format!("{OBJECTS}/{fanout}/{rest}"),
            _ => format!("{OBJECTS}/{name}"),
        },
        Kind::Generation(r) => format!("{}/{name}", ref_dir(r)),
    }
}

/// The directory listed to enumerate `kind` (loose objects: one per fan-out directory).
pub fn dir(kind: &Kind) -> String {
    match kind {
        Kind::Config | Kind::Log => String::new(),
        Kind::Pack => PACKS.to_string(),
        Kind::Loose => OBJECTS.to_string(),
        Kind::Generation(r) => ref_dir(r),
    }
}

/// A ref's directory of generation files.
pub fn ref_dir(name: &RefName) -> String {
    match name {
        RefName::Current => CURRENT.to_string(),
        RefName::Target(t) => format!("{TARGETS}/{t}"),
    }
}

/// The file name of generation `n` of ref `name`, as a path.
pub fn generation_path(name: &RefName, n: u64) -> String {
    path(&Kind::Generation(name.clone()), &generation_name(n))
}

/// `<id>.pack`.
pub fn pack_file_name(id: &ObjectId) -> String {
    format!("{id}{PACK_SUFFIX}")
}

/// The pack id of a file name `<id>.pack`, if it is one.
pub fn pack_name_id(name: &str) -> Option<ObjectId> {
    ObjectId::parse(name.strip_suffix(PACK_SUFFIX)?).ok()
}

/// The path of a loose object stored under `name`.
pub fn loose_path(name: &ObjectId) -> String {
    path(&Kind::Loose, &name.to_hex())
}

/// A staging directory's path.
pub fn staging_dir(name: &str) -> String {
    format!("{STAGING}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_spec() {
        assert_eq!(path(&Kind::Config, ""), "config");
        assert_eq!(
            generation_path(&RefName::Current, 7),
            "refs/current/00000000000000000007"
        );
        assert_eq!(
            generation_path(&RefName::Target("box".into()), 1),
            "refs/targets/box/00000000000000000001"
        );
        let id = ObjectId::of(b"x");
        let hex = id.to_hex();
        assert_eq!(
            loose_path(&id),
            format!("objects/{}/{}", &hex[..2], &hex[2..])
        );
        assert_eq!(pack_name_id(&pack_file_name(&id)), Some(id));
        assert_eq!(pack_name_id("x.pack"), None);
        for d in DIRS {
            let parent = d.rsplit_once('/').map(|(p, _)| p);
            if let Some(parent) = parent {
                let at = DIRS.iter().position(|x| *x == d);
                let parent_at = DIRS.iter().position(|x| *x == parent);
                assert!(parent_at < at, "{parent} must come before {d}");
            }
        }
    }
}
