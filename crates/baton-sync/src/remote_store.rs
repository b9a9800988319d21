//! A store seen through a `Backend`: reading its state and creating it.

use crate::error::SyncError;
use baton_error::{Error, ErrorKind, Result};
use baton_format::layout;
use baton_format::layout::Kind;
use baton_format::names::{RefName, generation_name, parse_generation};
use baton_format::{LogEntry, ObjectId, StoreConfig};
use baton_store::Store;
use baton_store::packs::pack_name_id;
use baton_transport::RemoteEntry;
use baton_transport::backend::{BackendExt, Listing};

/// What one look at a remote store found (one batch, plus one for the newest ref file).
pub struct RemoteState {
    pub config: Option<StoreConfig>,
    pub generation: u64,
    pub current: Option<ObjectId>,
    pub packs: Vec<(ObjectId, RemoteEntry)>,
    pub staging: Vec<RemoteEntry>,
    /// The fanout directories under `objects/` (loose objects live there).
    pub fanouts: Vec<String>,
    /// What the store's top directory holds, when a push found no store there (a store
    /// is created only in a new or empty directory); `None`: not listed.
    pub top: Option<Vec<RemoteEntry>>,
}

/// Looks at a remote's refs allowed per state read: a generation can be published (or
/// be mid-publish) between the listing or probe that finds it and the read of its file,
/// so a look that trips over one is taken again, after a short pause.
pub const STATE_READ_ATTEMPTS: u32 = 3;

/// Take `look` again while it fails in a way a racing publisher can cause; after
/// `STATE_READ_ATTEMPTS` looks the first error stands (a dead connection fails every
/// later look at once, and the first error says why).
fn with_retries(
    remote: &mut dyn BackendExt,
    mut look: impl FnMut(&mut dyn BackendExt) -> Result<RemoteState>,
) -> Result<RemoteState> {
    let mut first = None;
    for attempt in 1..=STATE_READ_ATTEMPTS {
        match look(remote) {
            Err(e) if attempt < STATE_READ_ATTEMPTS && may_be_a_race(&e, remote) => {
                first.get_or_insert(e);
                std::thread::sleep(std::time::Duration::from_millis(50 << attempt));
            }
            Err(e) => return Err(first.unwrap_or(e)),
            Ok(state) => return Ok(state),
        }
    }
    Err(first.unwrap_or_else(|| Error::other("the remote store could not be read")))
}

/// Whether a failed look at a remote's refs may be a lost race with a publisher, worth
/// another look: a listed generation that could not be read (vanished, or a plain
/// server failure). A connection that is gone fails the next look at once; a backend
/// that retried the request itself has already waited out its deadline.
fn may_be_a_race(e: &Error, remote: &dyn BackendExt) -> bool {
    match e.kind {
        ErrorKind::Transport => !remote.retries_itself(),
        ErrorKind::Integrity => matches!(SyncError::of(e), Some(SyncError::RefVanished { .. })),
        _ => false,
    }
}

/// Read a remote store's config, newest ref generation, packs and loose fan-outs (one
/// batch, plus any bisection rounds: `read_push_state`), looking again if a push raced
/// with the look. `staging` is left empty (only a push sweeps it).
pub fn read_state(remote: &mut dyn BackendExt) -> Result<RemoteState> {
    with_retries(remote, |remote| {
        let lists = [Listing::Of(Kind::Loose), Listing::Of(Kind::Pack)];
        let (mut state, mut listings) = probe_state(remote, &lists)?;
        state.packs = listings
            .pop()
            .flatten()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|e| pack_name_id(&e.name).map(|id| (id, e)))
            .collect();
        state.fanouts = listings
            .pop()
            .flatten()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.is_dir && e.name.len() == 2)
            .map(|e| e.name)
            .collect();
        Ok(state)
    })
}

/// `read_state` of a remote that must hold a store of the same encryption as `store`
/// (a merge or a repair of it): a missing store is `not_found`.
pub fn read_existing_state(store: &Store, remote: &mut dyn BackendExt) -> Result<RemoteState> {
    let state = read_state(remote)?;
    let Some(config) = &state.config else {
        return Err(
            Error::not_found(format!("no baton store at {}", remote.describe()))
                .with_hint("check the target URL with 'baton target list'"),
        );
    };
    check_same_encryption(store, config, remote.describe().as_str())?;
    Ok(state)
}

/// The newest generation of `refs/current` by listing the directory (a ref whose
/// generations do not run 1..=N, or more than 2^MAX_DOUBLINGS of them): its number and
/// the id it names.
fn newest_by_listing(remote: &mut dyn BackendExt) -> Result<(u64, Option<ObjectId>)> {
    let lists = [Listing::Of(Kind::Generation(RefName::Current))];
    let (_, mut listings) = remote.read_and_list(&[], &lists, 0)?;
    let generation = listings
        .pop()
        .flatten()
        .unwrap_or_default()
        .iter()
        .filter_map(|e| parse_generation(&e.name))
        .max()
        .unwrap_or(0);
    if generation == 0 {
        return Ok((0, None));
    }
    let path = layout::generation_path(&RefName::Current, generation);
    let item = (
        Kind::Generation(RefName::Current),
        generation_name(generation),
    );
    let (files, _) = remote.read_and_list(&[item], &[], 64 << 10)?;
    let bytes = files.into_iter().next().flatten().ok_or_else(|| {
        SyncError::RefVanished {
            path: path.to_string(),
            remote: remote.describe(),
        }
        .into_error()
    })?;
    Ok((generation, decode_generation(remote, &path, &bytes)?.new))
}

/// Generation probes sent together in one batch while bisecting (one round trip each).
const PROBES_PER_ROUND: u64 = 128;
/// The first batch tries generations 1 to `DENSE` and then the powers of two up to
/// 2^MAX_DOUBLINGS (29 reads: with `config` and two listings, one window of open
/// handles; over SFTP one round trip, each read sent with its open). A ref moved at most
/// `DENSE` times needs no bisection; one moved more than 2^MAX_DOUBLINGS times is listed.
const DENSE: u64 = 8;
const MAX_DOUBLINGS: u32 = 24;

/// What a push needs to know of a remote store, without listing anything that grows
/// with it: its config, its staging directories (and its top directory when it has no
/// config), and the newest generation of `refs/current`, found by probing (SPEC 8.3)
/// instead of listing `refs/current/`. The first batch reads `config` and generations 1
/// to 8, 16, 32, ...; then each round reads up to 128 generations between the newest
/// seen and the first missing one: a ref moved 10,000 times takes 1 + 2 batches.
/// `packs` and `fanouts` are left empty (a push does not need them; `read_state` lists
/// them for a pull).
pub fn read_push_state(remote: &mut dyn BackendExt) -> Result<RemoteState> {
    with_retries(remote, |remote| {
        // The top directory too (a few names): a push that finds no store creates one
        // only in a new or empty directory, and needs no second look to know.
        let (mut state, mut listings) = probe_state(remote, &[Listing::Leftovers, Listing::Root])?;
        let top = listings.pop().flatten();
        state.staging = listings.pop().flatten().unwrap_or_default();
        state.top = state.config.is_none().then(|| top.unwrap_or_default());
        Ok(state)
    })
}

/// One batch reading `config` and the first generation probes with the `lists`, then
/// the bisection rounds: the state (packs, fanouts, staging and top left empty) and the
/// listings.
#[allow(clippy::type_complexity)]
fn probe_state(
    remote: &mut dyn BackendExt,
    lists: &[Listing],
) -> Result<(RemoteState, Vec<Option<Vec<RemoteEntry>>>)> {
    let generation_path = |n: u64| layout::generation_path(&RefName::Current, n);
    let generation = |n: u64| (Kind::Generation(RefName::Current), generation_name(n));
    let mut files = vec![(Kind::Config, String::new())];
    let probes: Vec<u64> = (1..=DENSE)
        .chain(
            (0..=MAX_DOUBLINGS)
                .map(|k| 1u64 << k)
                .filter(|n| *n > DENSE),
        )
        .collect();
    files.extend(probes.iter().map(|n| generation(*n)));
    let (mut read, mut listings) = remote.read_and_list(&files, lists, 1 << 20)?;
    let config = decode_config(remote, read.first_mut().and_then(Option::take))?;
    let mut state = RemoteState {
        top: None,
        fanouts: Vec::new(),
        config,
        generation: 0,
        current: None,
        packs: Vec::new(),
        staging: Vec::new(),
    };
    if state.config.is_none() {
        return Ok((state, listings));
    }
    // Generations present run 1..=N: find the last probe present.
    let mut newest: Option<(u64, Vec<u8>)> = None;
    let mut missing = None;
    for (n, bytes) in probes.iter().zip(read.into_iter().skip(1)) {
        match bytes {
            Some(bytes) => newest = Some((*n, bytes)),
            None => {
                missing = Some(*n);
                break;
            }
        }
    }
    let (Some((mut low, mut low_bytes)), Some(mut high)) = (newest, missing) else {
        // No generation 1 (an empty ref, or one pruned by hand), or more than 2^24:
        // the listing decides.
        (state.generation, state.current) = newest_by_listing(remote)?;
        return Ok((state, listings));
    };
    while high - low > 1 {
        let step = (high - low).div_ceil(PROBES_PER_ROUND + 1).max(1);
        let probes: Vec<u64> = (1..=PROBES_PER_ROUND)
            .map(|k| low + k * step)
            .filter(|n| *n < high)
            .collect();
        let items: Vec<(Kind, String)> = probes.iter().map(|n| generation(*n)).collect();
        // The listings again, after these generations are read: a push publishes its
        // pack before its generation, so a generation found here may name objects that
        // the first batch's listings predate (and a pull would call the remote
        // incomplete). Read after the generation files, they hold everything a
        // generation read so far needs; the last round's are the ones kept.
        let (read, relisted) = remote.read_and_list(&items, lists, 64 << 10)?;
        if !lists.is_empty() {
            listings = relisted;
        }
        for (n, bytes) in probes.iter().zip(read) {
            match bytes {
                Some(bytes) => {
                    low = *n;
                    low_bytes = bytes;
                }
                None => {
                    high = *n;
                    break;
                }
            }
        }
    }
    let path = generation_path(low);
    let entry = decode_generation(remote, &path, &low_bytes)?;
    state.generation = low;
    state.current = entry.new;
    Ok((state, listings))
}

/// What a push reads to check a hint that the newest generation is `n`: `config`,
/// generations `n` and `n + 1`, and the staging listing (`check_hint` takes the answers).
pub fn hint_reads(n: u64) -> (Vec<(Kind, String)>, Vec<Listing>) {
    let generation = |n: u64| (Kind::Generation(RefName::Current), generation_name(n));
    (
        vec![
            (Kind::Config, String::new()),
            generation(n),
            generation(n + 1),
        ],
        vec![Listing::Leftovers],
    )
}

/// The remote state the answers to `hint_reads(n)` show if they bear the hint out: a
/// store whose generation `n` names `current` and that has no generation `n + 1`.
/// `None`: the hint is off (or something it read is damaged), and the caller looks the
/// long way, which reports any damage.
#[allow(clippy::type_complexity)]
pub fn check_hint(
    remote: &dyn BackendExt,
    (files, mut lists): (Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>),
    n: u64,
    current: ObjectId,
) -> Option<RemoteState> {
    let mut files = files.into_iter();
    let (config, at_n, after) = (files.next()?, files.next()?, files.next()?);
    let config = decode_config(remote, config).ok()??;
    if after.is_some() {
        return None;
    }
    let path = layout::generation_path(&RefName::Current, n);
    let entry = decode_generation(remote, &path, &at_n?).ok()?;
    if entry.new != Some(current) {
        return None;
    }
    Some(RemoteState {
        config: Some(config),
        generation: n,
        current: Some(current),
        packs: Vec::new(),
        staging: lists.pop().flatten().unwrap_or_default(),
        fanouts: Vec::new(),
        top: None,
    })
}

/// The remote's `config`, if it has one; damage names the remote.
fn decode_config(remote: &dyn BackendExt, bytes: Option<Vec<u8>>) -> Result<Option<StoreConfig>> {
    bytes
        .map(|bytes| {
            StoreConfig::decode(&bytes).map_err(|e| Error {
                message: format!("remote store {}: {}", remote.describe(), e.message),
                ..e
            })
        })
        .transpose()
}

/// A remote ref generation file's log line; damage names the file and the remote.
fn decode_generation(remote: &dyn BackendExt, path: &str, bytes: &[u8]) -> Result<LogEntry> {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    LogEntry::decode_line(line, 1).map_err(|e| {
        Error::integrity(format!(
            "remote ref {path} at {} is damaged: {}",
            remote.describe(),
            e.message
        ))
    })
}

/// The `config` a new remote store gets: the local store's format, features and
/// encryption (never its targets), so an encrypted store stays the same encrypted store
/// over there.
pub fn new_store_config(local: &StoreConfig) -> Vec<u8> {
    StoreConfig {
        format: local.format.clone(),
        version: local.version,
        features: local.features.clone(),
        encryption: local.encryption.clone(),
        ..StoreConfig::default()
    }
    .encode()
}

/// Someone created the store at the same time; theirs must be a store we read.
pub fn check_twin_config(remote: &mut dyn BackendExt) -> Result<()> {
    let (files, _) = remote.read_and_list(&[(Kind::Config, String::new())], &[], 1 << 20)?;
    let theirs = files.into_iter().next().flatten().ok_or_else(|| {
        Error::integrity(format!(
            "the remote store {} lost its config while being created",
            remote.describe()
        ))
    })?;
    StoreConfig::decode(&theirs)?;
    Ok(())
}

/// A store is created only in a new or empty directory (or over a half-made store):
/// never beside someone's files. `entries`: what the directory holds.
pub fn check_room_for_store(remote: &dyn BackendExt, entries: &[RemoteEntry]) -> Result<()> {
    let foreign: Vec<&str> = entries
        .iter()
        .map(|e| e.name.as_str())
        .filter(|name| !layout::TOP_NAMES.contains(name))
        .collect();
    if foreign.is_empty() {
        return Ok(());
    }
    Err(Error::usage(format!(
        "{} is a directory that is not empty and not a baton store (it holds {}{})",
        remote.describe(),
        foreign
            .iter()
            .take(3)
            .map(|n| n.escape_debug().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if foreign.len() > 3 { ", ..." } else { "" }
    ))
    .with_hint("choose an empty or new directory for the target"))
}

/// Both stores must hold objects the same way: the same encryption setting and, when
/// encrypted, the same name key (the wrapped key is copied verbatim between them).
pub fn check_same_encryption(
    store: &baton_store::Store,
    remote: &baton_format::StoreConfig,
    described: &str,
) -> Result<()> {
    let ours = store.config.encryption.as_ref().map(|e| &e.name_key);
    let theirs = remote.encryption.as_ref().map(|e| &e.name_key);
    if ours == theirs {
        return Ok(());
    }
    let what = match (ours, theirs) {
        (None, Some(_)) => "the remote store is encrypted and this one is not",
        (Some(_), None) => "this store is encrypted and the remote store is not",
        _ => "the remote store is encrypted with another key",
    };
    Err(Error::usage(format!(
        "refusing to sync with {described}: {what}"
    ))
    .with_hint("clone the remote into a new store instead (it copies the remote's encryption settings)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_store::packs::pack_file_name;
    use baton_transport::local::LocalRemote;
    use baton_transport::{Pipelined, Published, Remote, Upload};

    #[derive(Clone, Copy)]
    enum Race {
        /// The listed generation cannot be found when read (it moved under the look).
        Vanished,
        /// The server answers the read with a plain failure (seen over SFTP under load).
        Failure,
    }

    /// A local remote whose first `left` reads of `path` lose a race with a publisher,
    /// and where `then` (a push) runs once, just after the first look.
    struct Racing {
        inner: LocalRemote,
        path: String,
        left: u32,
        race: Race,
        then: Option<Box<dyn FnOnce()>>,
    }

    impl Remote for Racing {
        fn describe(&self) -> String {
            Remote::describe(&self.inner)
        }
        fn read_many(
            &mut self,
            files: &[String],
            dirs: &[String],
            limit: u64,
        ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
            let (mut read, listed) = self.inner.read_many(files, dirs, limit)?;
            if let Some(push) = self.then.take() {
                push();
            }
            if let Some(i) = files.iter().position(|f| *f == self.path)
                && self.left > 0
            {
                self.left -= 1;
                match self.race {
                    Race::Vanished => read[i] = None,
                    Race::Failure => {
                        return Err(Error::new(
                            ErrorKind::Transport,
                            format!("read {} failed: Failure (Failure)", self.path),
                        ));
                    }
                }
            }
            Ok((read, listed))
        }
        fn make_dirs(&mut self, dirs: &[String]) -> Result<()> {
            self.inner.make_dirs(dirs)
        }
        fn create(&mut self, path: &str) -> Result<Box<dyn Upload + '_>> {
            self.inner.create(path)
        }
        fn publish_many(&mut self, moves: &[(String, String)]) -> Result<Vec<Published>> {
            self.inner.publish_many(moves)
        }
        fn read_file_sized(
            &mut self,
            path: &str,
            len: u64,
            sink: &mut dyn std::io::Write,
        ) -> Result<()> {
            self.inner.read_file_sized(path, len, sink)
        }
        fn read_range(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
            Remote::read_range(&mut self.inner, path, offset, len)
        }
        fn remove_dir_all(&mut self, dir: &str) -> Result<()> {
            self.inner.remove_dir_all(dir)
        }
        fn remove_file(&mut self, path: &str) -> Result<bool> {
            self.inner.remove_file(path)
        }
    }

    impl Pipelined for Racing {
        fn remove_empty_dir(&mut self, dir: &str) {
            self.inner.remove_empty_dir(dir)
        }
    }

    /// A remote store with generations 1..=3 of `refs/current`; the id of the newest.
    fn store_with_generations(dir: &std::path::Path) -> ObjectId {
        std::fs::create_dir_all(dir.join(layout::ref_dir(&RefName::Current))).unwrap();
        std::fs::write(dir.join(layout::CONFIG), StoreConfig::default().encode()).unwrap();
        add_generations(dir, 1..=3, None)
    }

    /// Generations `range` of `refs/current` after `old`; the id of the newest.
    fn add_generations(
        dir: &std::path::Path,
        range: std::ops::RangeInclusive<u64>,
        mut old: Option<ObjectId>,
    ) -> ObjectId {
        for n in range {
            let new = ObjectId::of(format!("bundle {n}").as_bytes());
            let entry = LogEntry {
                time: "2026-12-01T00:00:00Z".into(),
                ref_name: "current".into(),
                old,
                new: Some(new),
                action: "push".into(),
                from: String::new(),
                to: String::new(),
                host: "h".into(),
                user: "u".into(),
            };
            let path = dir.join(layout::generation_path(&RefName::Current, n));
            std::fs::write(path, entry.encode_line()).unwrap();
            old = Some(new);
        }
        old.unwrap()
    }

    /// Generations past the first batch's probes are found in later rounds; a push
    /// between the first batch and those rounds published a pack the first listing may
    /// not hold. The packs listed are those as of the generation found.
    #[test]
    fn a_generation_found_after_the_first_look_comes_with_its_packs() {
        let dir = tempfile::tempdir().unwrap();
        store_with_generations(dir.path());
        // 1..=9: the first batch finds 1..=8 and misses 16, so later rounds look at 9..=15.
        add_generations(dir.path(), 4..=9, Some(ObjectId::of(b"bundle 3")));
        let pack = ObjectId::of(b"the pushed pack");
        let at = dir.path().to_path_buf();
        let mut remote = racing(dir.path(), 0, Race::Vanished);
        // The push: its pack, then generations 10 and 11 naming it.
        remote.then = Some(Box::new(move || {
            let packs = at.join(layout::PACKS);
            std::fs::create_dir_all(&packs).unwrap();
            std::fs::write(packs.join(pack_file_name(&pack)), b"pack").unwrap();
            add_generations(&at, 10..=11, Some(ObjectId::of(b"bundle 9")));
        }));
        let state = read_state(&mut remote).unwrap();
        let pushed = ObjectId::of(b"bundle 11");
        assert_eq!((state.generation, state.current), (11, Some(pushed)));
        assert!(
            state.packs.iter().any(|(id, _)| *id == pack),
            "the pack of generation 11 is listed: {:?}",
            state.packs
        );
    }

    fn racing(dir: &std::path::Path, left: u32, race: Race) -> Racing {
        Racing {
            inner: LocalRemote::new(dir.to_path_buf()),
            path: layout::generation_path(&RefName::Current, 3),
            left,
            race,
            then: None,
        }
    }

    #[test]
    fn a_generation_read_that_loses_a_race_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let newest = store_with_generations(dir.path());
        let state = read_state(&mut racing(dir.path(), 1, Race::Failure)).unwrap();
        assert_eq!((state.generation, state.current), (3, Some(newest)));
        let state = read_push_state(&mut racing(dir.path(), 2, Race::Failure)).unwrap();
        assert_eq!((state.generation, state.current), (3, Some(newest)));
        // A probe that misses a generation sees an older one: the push then publishes
        // that generation again, which the no-clobber rename refuses (store_conflict).
        for look in [read_push_state, read_state] {
            let state = look(&mut racing(dir.path(), 1, Race::Vanished)).unwrap();
            assert_eq!(state.generation, 2);
        }
    }

    #[test]
    fn a_generation_that_stays_unreadable_is_still_reported() {
        let dir = tempfile::tempdir().unwrap();
        store_with_generations(dir.path());
        let err = read_state(&mut racing(dir.path(), 99, Race::Failure))
            .err()
            .unwrap();
        assert_eq!(err.kind, ErrorKind::Transport, "{}", err.message);
        let err = read_push_state(&mut racing(dir.path(), 99, Race::Failure))
            .err()
            .unwrap();
        assert_eq!(err.kind, ErrorKind::Transport, "{}", err.message);
    }
}
