//! Verifying one pack in one pass: the file is read once, in windows that end at object
//! boundaries, each window hashed into the pack's id while the objects in it are
//! decompressed and rehashed from the same bytes, in parallel. (Hashing the file and
//! then reading every object again read each pack byte twice.)

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;

use rayon::prelude::*;

use super::codec::{decode_named, decode_named_bytes};
use super::envelope::Envelope;
use super::packs::PackIndex;
use super::streams::TeeReader;
use baton_error::{IoContext, Result};
use baton_format::ObjectId;
use baton_format::pack::PackEntry;

/// Bytes read, hashed and decoded at a time; an object larger than this is streamed
/// through the hash and its decoder together.
const WINDOW: u64 = 8 << 20;

/// What verifying one pack found.
#[derive(Default)]
pub(crate) struct PackCheck {
    pub objects: u64,
    pub bytes: u64,
    pub problems: Vec<String>,
    /// The id and content length of every object that checked (`verify` compares them
    /// with the sizes trees declare).
    pub sizes: Vec<(ObjectId, u64)>,
}

/// Rehash a pack file against its name, and decompress and rehash every object in it
/// (index entries hold storage names). A locked encrypted store checks the pack's hash
/// only.
pub(crate) fn verify_pack(pack: &PackIndex, envelope: &Envelope) -> PackCheck {
    verify_in_windows(pack, envelope, WINDOW)
}

fn verify_in_windows(pack: &PackIndex, envelope: &Envelope, window: u64) -> PackCheck {
    let mut check = PackCheck::default();
    let mut results = Vec::with_capacity(pack.entries.len());
    let hashed = File::open(&pack.path).and_then(|file| {
        let mut pass = Pass {
            file: &file,
            path: &pack.path,
            envelope,
            hasher: blake3::Hasher::new(),
            at: 0,
            buf: Vec::new(),
        };
        pass.run(&pack.entries, window, &mut results)?;
        Ok(ObjectId::from_hash(pass.hasher.finalize()))
    });
    match hashed {
        Ok(actual) if actual == pack.id => {}
        Ok(actual) => check.problems.push(format!(
            "pack {} is corrupt: its bytes hash to {actual}",
            pack.id
        )),
        Err(e) => check
            .problems
            .push(format!("cannot read pack {}: {e}", pack.id)),
    }
    if envelope.is_locked() {
        check.objects = pack.entries.len() as u64;
        return check;
    }
    for result in results {
        check.objects += 1;
        match result {
            Ok((id, bytes)) => {
                check.bytes += bytes;
                check.sizes.push((id, bytes));
            }
            Err(e) => check
                .problems
                .push(format!("in pack {}: {}", pack.id, e.message)),
        }
    }
    check
}

/// One pass over a pack file: `at` bytes of it hashed so far.
struct Pass<'a> {
    file: &'a File,
    path: &'a std::path::Path,
    envelope: &'a Envelope,
    hasher: blake3::Hasher,
    at: u64,
    buf: Vec<u8>,
}

type Decoded = Result<(ObjectId, u64)>;

/// A step of the pass, planned from the index before anything is read.
enum Step {
    /// Bytes `start..end` read whole: hashed, and `members` (indexes into the ordered
    /// entries) decoded from them.
    Window {
        start: u64,
        end: u64,
        members: std::ops::Range<usize>,
    },
    /// An object larger than a window: through the hash and the decoder at once.
    Streamed(usize),
    /// An object overlapping one before it (no writer makes one): read on its own.
    Alone(usize),
}

/// The steps that cover `ordered` (sorted by offset), windows at most `window` long.
fn plan(ordered: &[&PackEntry], window: u64) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut at = 0u64;
    let mut i = 0;
    while i < ordered.len() {
        let entry = ordered[i];
        let end = entry.offset.saturating_add(entry.length);
        if entry.offset < at {
            steps.push(Step::Alone(i));
            i += 1;
            continue;
        }
        if end - at > window {
            steps.push(Step::Streamed(i));
            at = end;
            i += 1;
            continue;
        }
        // The objects from here that fit, back to back or with gaps.
        let mut last = i;
        let mut window_end = end;
        while let Some(next) = ordered.get(last + 1) {
            let next_end = next.offset.saturating_add(next.length);
            if next.offset < window_end || next_end - at > window {
                break;
            }
            last += 1;
            window_end = next_end;
        }
        steps.push(Step::Window {
            start: at,
            end: window_end,
            members: i..last + 1,
        });
        at = window_end;
        i = last + 1;
    }
    steps
}

impl Pass<'_> {
    /// Hash the whole file and decode every entry into `results` (none when locked).
    /// Each window's bytes are read while the window before is hashed and decoded.
    fn run(
        &mut self,
        entries: &[PackEntry],
        window: u64,
        results: &mut Vec<Decoded>,
    ) -> io::Result<()> {
        let decode = !self.envelope.is_locked();
        let mut ordered: Vec<&PackEntry> = entries.iter().collect();
        ordered.sort_by_key(|e| e.offset);
        let steps = plan(&ordered, window);
        let file = self.file;
        let read = |buf: &mut Vec<u8>, step: Option<&Step>| -> io::Result<()> {
            if let Some(Step::Window { start, end, .. }) = step {
                buf.resize((end - start) as usize, 0);
                file.read_exact_at(buf, *start)?;
            }
            Ok(())
        };
        let mut next = Vec::new();
        read(&mut next, steps.first())?;
        for (k, step) in steps.iter().enumerate() {
            match step {
                Step::Alone(i) => {
                    if decode {
                        results.push(self.decode_at(ordered[*i]));
                    }
                    read(&mut next, steps.get(k + 1))?;
                }
                Step::Streamed(i) => {
                    self.hash_to(ordered[*i].offset)?;
                    results.extend(self.decode_streamed(ordered[*i], decode)?);
                    read(&mut next, steps.get(k + 1))?;
                }
                Step::Window {
                    start,
                    end,
                    members,
                } => {
                    let current = std::mem::take(&mut next);
                    let hasher = &mut self.hasher;
                    let envelope = self.envelope;
                    let members = &ordered[members.clone()];
                    let (prefetched, decoded) = rayon::join(
                        || {
                            let mut buf = std::mem::take(&mut self.buf);
                            read(&mut buf, steps.get(k + 1)).map(|()| buf)
                        },
                        || {
                            rayon::join(
                                || hasher.update(&current),
                                || decode_members(envelope, members, *start, &current, decode),
                            )
                            .1
                        },
                    );
                    results.extend(decoded);
                    next = prefetched?;
                    self.buf = current;
                    self.at = *end;
                }
            }
        }
        // The index and footer.
        let len = self.file.metadata()?.len();
        self.hash_to(len)
    }

    /// Hash the file's bytes from `at` up to `end`.
    fn hash_to(&mut self, end: u64) -> io::Result<()> {
        while self.at < end {
            let n = (end - self.at).min(WINDOW);
            self.buf.resize(n as usize, 0);
            self.file.read_exact_at(&mut self.buf, self.at)?;
            self.hasher.update(&self.buf);
            self.at += n;
        }
        Ok(())
    }

    /// An object read on its own, outside the pass's hash.
    fn decode_at(&self, entry: &PackEntry) -> Decoded {
        let stored = stored(self.file, entry).ctx_in_store("cannot read pack", self.path)?;
        decode_named(self.envelope, &entry.id, stored, &mut io::sink())
    }

    /// An object at `at`, read once: hashed into the pack's id as it is decoded.
    fn decode_streamed(&mut self, entry: &PackEntry, decode: bool) -> io::Result<Option<Decoded>> {
        let inner = stored(self.file, entry)?;
        let mut stored = TeeReader {
            inner,
            sink: &mut self.hasher,
            count: 0,
            sink_error: None,
        };
        let result =
            decode.then(|| decode_named(self.envelope, &entry.id, &mut stored, &mut io::sink()));
        // What the decoder left (nothing, for a valid object) is hashed all the same.
        io::copy(&mut stored, &mut io::sink())?;
        if stored.inner.limit() != 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the pack ends inside an object",
            ));
        }
        self.at = entry.offset + entry.length;
        Ok(result)
    }
}

/// The stored bytes of `entry`, read from the file's position (the pass reads its
/// windows positioned, so only these reads move it).
fn stored<'f>(mut file: &'f File, entry: &PackEntry) -> io::Result<io::Take<&'f File>> {
    file.seek(SeekFrom::Start(entry.offset))?;
    Ok(file.take(entry.length))
}

/// The objects `members` of a window read from `start` into `bytes`, decoded in parallel.
fn decode_members(
    envelope: &Envelope,
    members: &[&PackEntry],
    start: u64,
    bytes: &[u8],
    decode: bool,
) -> Vec<Decoded> {
    if !decode {
        return Vec::new();
    }
    members
        .par_iter()
        .map(|e| {
            let from = (e.offset - start) as usize;
            let stored = &bytes[from..from + e.length as usize];
            decode_named_bytes(envelope, &e.id, stored, &mut io::sink())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packs::{load_all, write_pack};

    /// A pack in `dir` of objects of the given content sizes (compressible and not).
    fn pack_of(dir: &std::path::Path, sizes: &[usize]) -> PackIndex {
        let objects: Vec<(ObjectId, Vec<u8>)> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let content: Vec<u8> = (0..n)
                    .map(|j| {
                        if i % 2 == 0 {
                            (j % 7) as u8
                        } else {
                            (j * 31 + i * 17 % 251) as u8 ^ (j >> 3) as u8
                        }
                    })
                    .collect();
                let stored = zstd::bulk::compress(&content, 1).unwrap();
                (ObjectId::of(&content), stored)
            })
            .collect();
        write_pack(dir, &objects).unwrap();
        load_all(dir).unwrap().remove(0)
    }

    const SIZES: &[usize] = &[0, 1, 100, 5000, 70_000, 300, 250_000, 9, 40_000, 120_000];

    #[test]
    fn every_window_size_checks_every_object_and_the_pack_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = pack_of(tmp.path(), SIZES);
        let mut want: Vec<u64> = SIZES.iter().map(|&n| n as u64).collect();
        want.sort();
        // Windows smaller than most objects (streamed), than some, and than none.
        for window in [1, 64, 4096, 60_000, WINDOW] {
            let check = verify_in_windows(&pack, &Envelope::default(), window);
            assert_eq!(check.problems, Vec::<String>::new(), "window {window}");
            assert_eq!(check.objects, SIZES.len() as u64, "window {window}");
            let mut got: Vec<u64> = check.sizes.iter().map(|(_, n)| *n).collect();
            got.sort();
            assert_eq!(got, want, "window {window}");
        }
    }

    #[test]
    fn a_flipped_byte_is_found_in_its_object_and_in_the_pack_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = pack_of(tmp.path(), SIZES);
        let victim = *pack.entries.iter().max_by_key(|e| e.length).unwrap();
        let mut bytes = std::fs::read(&pack.path).unwrap();
        bytes[(victim.offset + victim.length / 2) as usize] ^= 0x5a;
        std::fs::write(&pack.path, &bytes).unwrap();
        for window in [64, 4096, WINDOW] {
            let check = verify_in_windows(&pack, &Envelope::default(), window);
            assert_eq!(
                check.problems.len(),
                2,
                "window {window}: {:?}",
                check.problems
            );
            assert!(
                check.problems[0].contains("its bytes hash to"),
                "{:?}",
                check.problems
            );
            assert!(
                check.problems[1].contains(&victim.id.to_hex()),
                "window {window}: {:?}",
                check.problems
            );
            assert_eq!(check.sizes.len(), SIZES.len() - 1, "window {window}");
        }
        // A byte of the index (past every object) changes only the pack's hash.
        let mut bytes = std::fs::read(&pack.path).unwrap();
        bytes[(victim.offset + victim.length / 2) as usize] ^= 0x5a;
        let footer_count = bytes.len() - 32;
        bytes[footer_count - 1] ^= 1;
        std::fs::write(&pack.path, &bytes).unwrap();
        let check = verify_in_windows(&pack, &Envelope::default(), 4096);
        assert_eq!(check.problems.len(), 1, "{:?}", check.problems);
        assert!(check.problems[0].contains("its bytes hash to"));
    }

    #[test]
    fn an_entry_overlapping_another_is_read_on_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let mut pack = pack_of(tmp.path(), SIZES);
        // The same object listed twice (no writer does that; a reader need not refuse it).
        let mut by_offset = pack.entries.clone();
        by_offset.sort_by_key(|e| e.offset);
        pack.entries.push(by_offset[4]);
        for window in [1, 64, 4096, 60_000, WINDOW] {
            let check = verify_in_windows(&pack, &Envelope::default(), window);
            assert_eq!(check.problems, Vec::<String>::new(), "window {window}");
            assert_eq!(check.sizes.len(), SIZES.len() + 1, "window {window}");
        }
    }

    #[test]
    fn a_pack_cut_short_is_reported_unreadable() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = pack_of(tmp.path(), SIZES);
        let bytes = std::fs::read(&pack.path).unwrap();
        std::fs::write(&pack.path, &bytes[..bytes.len() / 2]).unwrap();
        for window in [64, WINDOW] {
            let check = verify_in_windows(&pack, &Envelope::default(), window);
            assert!(
                check
                    .problems
                    .iter()
                    .any(|p| p.starts_with("cannot read pack")),
                "window {window}: {:?}",
                check.problems
            );
        }
    }
}
