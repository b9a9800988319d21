//! Repair, the store's side: find every object that is missing or damaged here, then put
//! verified replacements in place as loose objects (atomic renames over damaged files)
//! and retire each damaged pack once every object it held is loose (SPEC 16.1).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::objects::{ListedObject, PendingDirs};
use super::packs::PackIndex;
use super::{Store, fsutil};
use baton_error::{Error, ErrorKind, IoContext, Result};
use baton_format::{Bundle, EntryKind, MAX_METADATA_OBJECT, ObjectId, Tree};

/// What is damaged here: storage names whose stored bytes fail their check, and the
/// packs that hold one (or whose bytes do not hash to their name).
#[derive(Default)]
pub struct Damage {
    pub damaged: BTreeSet<ObjectId>,
    pub packs: Vec<PackIndex>,
    /// Damaged loose files with a healthy copy in a healthy pack: removing the file
    /// (which lookups read first) is their repair.
    /// Each maps to its healthy packed copy (pack file, offset, length).
    pub shadowing: BTreeMap<ObjectId, (PathBuf, u64, u64)>,
    /// The content length of every object that checked, by id: what the sizes trees
    /// declare are checked against once the repair is done (`declared_size_problems`).
    pub sizes: HashMap<ObjectId, u64>,
}

/// A verified replacement received for storage name `name`, not yet published.
pub struct Received {
    pub name: ObjectId,
    pub temp: tempfile::NamedTempFile,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bundle,
    Tree,
    Blob,
}

impl Store {
    /// Rehash every loose object and every packed one (as `verify` does); the names that
    /// fail, and the packs that hold them or fail their own hash.
    pub fn scan_damage(&self) -> Result<Damage> {
        let mut damage = Damage::default();
        let loose: Vec<(ObjectId, PathBuf)> = self
            .objects
            .list()?
            .into_iter()
            .filter_map(|l| match l {
                ListedObject::Object(name, path) => Some((name, path)),
                _ => None,
            })
            .collect();
        let checked: Vec<(ObjectId, Option<(ObjectId, u64)>)> = loose
            .par_iter()
            .map(|(name, path)| {
                let sized = File::open(path)
                    .map_err(|e| Error::io("cannot read object", path, e))
                    .and_then(|f| self.objects.decode_named(name, f, &mut std::io::sink()));
                (*name, sized.ok())
            })
            .collect();
        for (name, sized) in checked {
            match sized {
                Some((id, size)) => {
                    damage.sizes.insert(id, size);
                }
                None => {
                    damage.damaged.insert(name);
                }
            }
        }
        // A damaged pack entry with a healthy loose copy needs nothing fetched: lookups
        // already read the loose copy, and retiring the pack keeps it.
        let healthy_loose = |name: &ObjectId| {
            !damage.damaged.contains(name) && self.objects.name_path(name).is_file()
        };
        let mut packed_bad = Vec::new();
        for pack in self.objects.packs()?.iter() {
            let check = super::packs::verify_pack(pack, self.objects.envelope());
            damage.sizes.extend(check.sizes);
            if check.problems.is_empty() {
                continue;
            }
            for entry in &pack.entries {
                if read_entry(&pack.path, entry.offset, entry.length)
                    .and_then(|bytes| {
                        self.objects
                            .decode_named(&entry.id, &bytes[..], &mut std::io::sink())
                    })
                    .is_err()
                    && !healthy_loose(&entry.id)
                {
                    packed_bad.push(entry.id);
                }
            }
            damage.packs.push(PackIndex {
                id: pack.id,
                path: pack.path.clone(),
                entries: pack.entries.clone(),
            });
        }
        damage.damaged.extend(packed_bad);
        let damaged_packs: BTreeSet<ObjectId> = damage.packs.iter().map(|p| p.id).collect();
        let packs = self.objects.packs()?;
        for name in damage.damaged.clone() {
            let healthy_packed = packs
                .iter()
                .filter(|p| !damaged_packs.contains(&p.id))
                .filter_map(|p| p.find(&name).map(|e| (p, *e)))
                .find(|(p, e)| {
                    read_entry(&p.path, e.offset, e.length)
                        .and_then(|b| {
                            self.objects
                                .decode_named(&name, &b[..], &mut std::io::sink())
                        })
                        .is_ok()
                });
            if let Some((pack, entry)) = healthy_packed
                && self.objects.name_path(&name).is_file()
            {
                damage.damaged.remove(&name);
                damage
                    .shadowing
                    .insert(name, (pack.path.clone(), entry.offset, entry.length));
            }
        }
        Ok(damage)
    }

    /// Storage names a repair still needs: every object reachable from the store's roots
    /// that is neither healthy here nor among `received`, and every damaged object not
    /// received. Received bundles and trees are read from their temp files, so the walk
    /// goes on below a missing tree once it has arrived.
    pub fn repair_needs(
        &self,
        damage: &Damage,
        received: &HashMap<ObjectId, Received>,
    ) -> Result<BTreeSet<ObjectId>> {
        let mut needs: BTreeSet<ObjectId> = damage
            .damaged
            .iter()
            .filter(|n| !received.contains_key(n))
            .copied()
            .collect();
        let mut seen = HashSet::new();
        let mut stack: Vec<(ObjectId, Kind)> = self
            .all_roots()?
            .into_iter()
            .map(|id| (id, Kind::Bundle))
            .collect();
        while let Some((id, kind)) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let name = self.objects.name_of(&id);
            let here = !damage.damaged.contains(&name) && self.objects.contains_name(&name);
            let bytes = if let Some((pack, offset, length)) = damage.shadowing.get(&name) {
                // Its loose file is damaged (removed on install): read the packed copy.
                if kind == Kind::Blob {
                    continue;
                }
                let stored = read_entry(pack, *offset, *length)?;
                let mut bytes = Vec::new();
                self.objects.decode_named(&name, &stored[..], &mut bytes)?;
                bytes
            } else if here {
                if kind == Kind::Blob {
                    continue;
                }
                self.objects.get_bytes(&id, MAX_METADATA_OBJECT)?
            } else if let Some(got) = received.get(&name) {
                if kind == Kind::Blob {
                    continue;
                }
                let file = File::open(got.temp.path()).ctx("cannot read", got.temp.path())?;
                let mut bytes = Vec::new();
                self.objects
                    .decode_named(&name, file.take(MAX_METADATA_OBJECT * 2), &mut bytes)?;
                bytes
            } else {
                needs.insert(name);
                continue;
            };
            match kind {
                Kind::Bundle => {
                    let bundle = Bundle::decode(&bytes)
                        .map_err(|e| e.recast(ErrorKind::Integrity, format!("bundle {id}")))?;
                    stack.push((bundle.tree, Kind::Tree));
                    stack.extend(bundle.parents.iter().map(|p| (*p, Kind::Bundle)));
                }
                Kind::Tree => {
                    let tree = Tree::decode(&bytes)
                        .map_err(|e| e.recast(ErrorKind::Integrity, format!("tree {id}")))?;
                    for entry in tree.entries {
                        let kind = if entry.kind == EntryKind::Dir {
                            Kind::Tree
                        } else {
                            Kind::Blob
                        };
                        stack.push((entry.id, kind));
                    }
                }
                Kind::Blob => {}
            }
        }
        Ok(needs)
    }

    /// Publish every received replacement loose (replacing a damaged loose file by an
    /// atomic rename), fsync their directories, then retire each damaged pack: its
    /// healthy objects are stored loose first, then the pack file is removed. Lookups
    /// read a loose object before a packed one, so from the first rename on, a repaired
    /// object is read from its good copy. Returns the number of packs retired.
    pub fn install_repairs(&self, received: Vec<Received>, damage: &Damage) -> Result<u64> {
        let pending = PendingDirs::default();
        for name in damage.shadowing.keys() {
            let path = self.objects.name_path(name);
            std::fs::remove_file(&path).ctx("cannot remove damaged object", &path)?;
            if let Some(dir) = path.parent() {
                pending.add(dir.to_path_buf());
            }
        }
        for got in received {
            let dest = self.objects.name_path(&got.name);
            fsutil::publish(got.temp, &dest, false)?;
            if let Some(dir) = dest.parent() {
                pending.add(dir.to_path_buf());
            }
        }
        pending.sync()?;
        for pack in &damage.packs {
            for entry in &pack.entries {
                let dest = self.objects.name_path(&entry.id);
                if dest.is_file() {
                    continue;
                }
                // A healthy entry (every damaged one was received above): checked as
                // every read checks it, then stored loose.
                let bytes = read_entry(&pack.path, entry.offset, entry.length)?;
                self.objects
                    .decode_named(&entry.id, &bytes[..], &mut std::io::sink())?;
                fsutil::publish(self.temp_with(&entry.id, &bytes)?, &dest, false)?;
                if let Some(dir) = dest.parent() {
                    pending.add(dir.to_path_buf());
                }
            }
        }
        pending.sync()?;
        for pack in &damage.packs {
            std::fs::remove_file(&pack.path).ctx("cannot remove damaged pack", &pack.path)?;
        }
        if !damage.packs.is_empty() {
            fsutil::fsync_dir(self.objects.packs_dir())?;
            self.objects.refresh_packs();
        }
        Ok(damage.packs.len() as u64)
    }

    fn temp_with(&self, name: &ObjectId, bytes: &[u8]) -> Result<tempfile::NamedTempFile> {
        use std::io::Write;
        let mut temp = self.objects.temp_for_name(name)?;
        temp.write_all(bytes).ctx("cannot write", temp.path())?;
        Ok(temp)
    }
}

/// The stored bytes of one pack entry.
fn read_entry(pack: &Path, offset: u64, length: u64) -> Result<Vec<u8>> {
    let mut file = File::open(pack).ctx("cannot open pack", pack)?;
    file.seek(SeekFrom::Start(offset))
        .ctx("cannot read pack", pack)?;
    let mut bytes = Vec::new();
    file.take(length)
        .read_to_end(&mut bytes)
        .ctx("cannot read pack", pack)?;
    Ok(bytes)
}
