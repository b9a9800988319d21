//! A local store on disk: layout, opening and creating it, locking, refs and the log.
//!
//! Layout (store-format/SPEC.md): `config`, `.gitignore`, `lock`, `log`, `objects/`,
//! `refs/current`, `refs/targets/<name>`.

pub mod audit;
pub mod beneath;
mod cache_file;
mod closure_check;
pub mod codec;
mod commit;
pub mod envelope;
pub mod error;
pub mod fsutil;
mod gc;
pub mod history_cache;
pub mod ingest;
pub mod key_wrap;
pub mod leftovers;
mod log;
pub mod login_name;
pub mod memtree;
pub mod objects;
pub mod pack_batch;
mod pack_stream;
mod pack_verify;
mod pack_write;
pub mod packs;
mod quarantine;
pub mod receive;
pub mod refs;
pub mod repack;
pub mod repair;
mod restore;
mod rev;
pub mod snapshot;
pub mod statcache;
pub mod streams;
pub mod target_hints;
pub mod transcript_cache;
pub mod tree_limits;
mod verify;
mod walk;
mod write_behind;

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use baton_error::{Error, ErrorKind, IoContext, Result};
use baton_format::{Bundle, MAX_METADATA_OBJECT, ObjectId, StoreConfig, Tree, layout};
pub use error::StoreError;
use objects::Objects;

pub const DEFAULT_STORE_DIR: &str = ".baton";

pub struct Store {
    root: PathBuf,
    pub config: StoreConfig,
    pub objects: Objects,
    /// The newest generation this handle has seen of each ref (by ref directory): where
    /// the next probe starts (`refs::probe_newest`).
    newest_seen: std::sync::Mutex<Vec<(PathBuf, u64)>>,
}

/// Holding this means holding the store's exclusive write lock (an flock on `lock`,
/// released by the kernel if the process dies, so it can never go stale).
pub struct StoreLock {
    _file: File,
}

impl Store {
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Find the store: an explicit path, else the nearest `.baton/` from `start` upwards.
    pub fn discover(explicit: Option<&Path>, start: &Path) -> Result<PathBuf> {
        if let Some(path) = explicit {
            return Ok(path.to_path_buf());
        }
        for dir in start.ancestors() {
            let candidate = dir.join(DEFAULT_STORE_DIR);
            if candidate.is_dir() {
                return Ok(candidate);
            }
        }
        Err(Error::not_found(format!(
            "no baton store in {} or any parent directory",
            start.display()
        ))
        .with_hint("run 'baton init', or pass --store PATH or set BATON_STORE"))
    }

    pub fn open(root: &Path) -> Result<Store> {
        let meta = match fs::metadata(root) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(
                    Error::not_found(format!("no baton store at {}", root.display()))
                        .with_hint("run 'baton init' to create one, or pass the right --store"),
                );
            }
            Err(e) => return Err(Error::io("cannot open store", root, e)),
        };
        if !meta.is_dir() {
            return Err(
                Error::usage(format!("store path {} is not a directory", root.display()))
                    .with_hint("pass --store the path of a baton store directory"),
            );
        }
        let config_path = root.join(layout::CONFIG);
        if !config_path.exists() {
            return Err(Error::not_found(format!(
                "{} is not a baton store (no config)",
                root.display()
            ))
            .with_hint("run 'baton init' to create one, or pass the right --store"));
        }
        let config =
            StoreConfig::decode(&fsutil::read_limited(&config_path, 1 << 20)?).map_err(|e| {
                Error {
                    message: format!("{}: {}", config_path.display(), e.message),
                    ..e
                }
            })?;
        let mut objects = Objects::new(root.join(layout::OBJECTS), root.join(layout::PACKS));
        if config.encryption.is_some() {
            objects.set_envelope(envelope::Envelope::Locked);
        }
        Ok(Store {
            objects,
            root: root.to_path_buf(),
            config,
            newest_seen: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Unlock an encrypted store's keys (a plain store needs none).
    pub fn unlock(&mut self, source: &envelope::KeySource) -> Result<()> {
        if let Some(enc) = &self.config.encryption {
            let env = envelope::unlock(enc, source)?;
            self.objects.set_envelope(env);
        }
        Ok(())
    }

    pub fn is_encrypted(&self) -> bool {
        self.config.encryption.is_some()
    }

    /// Create a new store at `root`, atomically: it is built in a temp directory beside
    /// `root` and renamed into place, so a crash never leaves a half-made store.
    pub fn init(root: &Path) -> Result<Store> {
        Store::init_with(root, &StoreConfig::default())
    }

    /// Create a new store with `config` (e.g. an encrypted one).
    pub fn init_with(root: &Path, config: &StoreConfig) -> Result<Store> {
        Store::check_new_root(root)?;
        let parent = match root.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fsutil::create_dir_all_private(&parent)?;
        let staging = fsutil::private_temp_dir_in(&parent, ".baton-init-")?;
        let dir = staging.path();
        for sub in layout::DIRS {
            fsutil::ensure_private_dir(&dir.join(sub))?;
        }
        for (name, bytes) in layout::INITIAL_FILES {
            fsutil::create_new_private(&dir.join(name), bytes)?;
        }
        fsutil::create_new_private(&dir.join(layout::CONFIG), &config.encode())?;
        fs::set_permissions(
            dir,
            std::os::unix::fs::PermissionsExt::from_mode(fsutil::DIR_MODE),
        )
        .ctx("cannot set permissions of", dir)?;
        fsutil::fsync_dir(dir)?;
        // What goes into place must still be the directory made above.
        let id = fsutil::check_private_dir(dir)?;
        let staged = staging.keep();
        if let Err(e) = fs::rename(&staged, root) {
            let _ = fs::remove_dir_all(&staged);
            return Err(Error::io("cannot create store", root, e));
        }
        fsutil::check_same_dir(root, id)?;
        fsutil::fsync_dir(&parent)?;
        Store::open(root)
    }

    /// Refuse a store path `init` cannot use (an existing store, a non-empty directory,
    /// a file), before anything else is asked or done: a usage error (exit 2).
    pub fn check_new_root(root: &Path) -> Result<()> {
        match fs::symlink_metadata(root) {
            Ok(meta) if meta.is_dir() => {
                if root.join(layout::CONFIG).exists() {
                    return Err(Error::usage(format!(
                        "{} is already a baton store",
                        root.display()
                    ))
                    .with_hint("use it as it is, or choose another --store path"));
                }
                if fs::read_dir(root)
                    .ctx("cannot list", root)?
                    .next()
                    .is_some()
                {
                    return Err(Error::usage(format!(
                        "{} exists and is not empty",
                        root.display()
                    ))
                    .with_hint("choose a new or empty directory for the store"));
                }
            }
            Ok(_) => {
                return Err(Error::usage(format!(
                    "store path {} is not a directory",
                    root.display()
                ))
                .with_hint("choose a path that does not exist yet"));
            }
            Err(_) => {}
        }
        Ok(())
    }

    pub fn lock(&self) -> Result<StoreLock> {
        let path = self.root.join(layout::LOCK);
        let file = File::options()
            .read(true)
            .open(&path)
            .ctx("cannot open lock file", &path)?;
        file.lock().ctx("cannot lock", &path)?;
        Ok(StoreLock { _file: file })
    }

    pub fn read_tree(&self, id: &ObjectId) -> Result<Tree> {
        let bytes = self.objects.get_bytes(id, MAX_METADATA_OBJECT)?;
        Tree::decode(&bytes).map_err(|e| e.recast(ErrorKind::Integrity, format!("tree {id}")))
    }

    pub fn read_bundle(&self, id: &ObjectId) -> Result<Bundle> {
        let bytes = self.objects.get_bytes(id, MAX_METADATA_OBJECT)?;
        Bundle::decode(&bytes).map_err(|e| e.recast(ErrorKind::Integrity, format!("bundle {id}")))
    }
}

impl Store {
    /// Replace the config (targets and settings), atomically, under the lock.
    pub fn write_config(&mut self, _lock: &StoreLock, config: StoreConfig) -> Result<()> {
        fsutil::write_atomic(&self.root.join(layout::CONFIG), &config.encode())?;
        self.config = config;
        Ok(())
    }
}
