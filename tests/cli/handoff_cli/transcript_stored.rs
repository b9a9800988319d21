//! Handoff CLI: the transcript limits on stored transcripts (docs/reliability.md,
//! "Transcript limits"): a small store whose transcript decompresses to hundreds of MiB,
//! made by compressing as it is generated, and searched and resumed by baton under the
//! address-space limit of `transcript_limits.rs`.

use super::transcript_limits::{ADDRESS_SPACE, run_limited};
use super::*;

use std::io::Read;

use baton::format::names::RefName;
use baton::format::{Bundle, EntryKind, ObjectId, Tree, TreeEntry};
use baton::store::Store;
use baton::store::refs::{Expect, MoveReason};

/// Content made on the fly: `head`, then `repeat` for `len` bytes in all, then `tail`.
struct Generated {
    parts: Vec<(Vec<u8>, u64)>,
    part: usize,
    offset: u64,
}

impl Generated {
    /// `head`, `body` repeated until `body_len` bytes, `tail`.
    fn new(head: &str, body: &str, body_len: u64, tail: &str) -> Generated {
        Generated {
            parts: vec![
                (head.as_bytes().to_vec(), head.len() as u64),
                (body.as_bytes().to_vec(), body_len),
                (tail.as_bytes().to_vec(), tail.len() as u64),
            ],
            part: 0,
            offset: 0,
        }
    }

    fn len(&self) -> u64 {
        self.parts.iter().map(|(_, n)| n).sum()
    }
}

impl Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while let Some((pattern, len)) = self.parts.get(self.part) {
            if self.offset == *len {
                self.part += 1;
                self.offset = 0;
                continue;
            }
            let mut n = 0;
            while n < buf.len() && self.offset < *len {
                buf[n] = pattern[(self.offset % pattern.len() as u64) as usize];
                n += 1;
                self.offset += 1;
            }
            return Ok(n);
        }
        Ok(0)
    }
}

/// Store `content` as a loose object of the plain store at `store`, compressed as it is
/// generated (never whole in memory): its id and size.
fn put_streamed(store: &Path, mut content: Generated) -> (ObjectId, u64, u64) {
    let size = content.len();
    let mut hasher = blake3::Hasher::new();
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = content.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        std::io::Write::write_all(&mut encoder, &buf[..n]).unwrap();
    }
    let stored = encoder.finish().unwrap();
    let id = ObjectId::from_hash(hasher.finalize());
    let path = common::object_path(store, &id.to_hex());
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, &stored).unwrap();
    (id, size, stored.len() as u64)
}

/// Make `current` a bundle whose tree holds `transcript.jsonl` = the object `id` of
/// `size` bytes: a hostile store, as a pull from a forged remote could leave it.
fn plant_transcript(store: &Path, id: ObjectId, size: u64) {
    let store = Store::open(store).unwrap();
    let tree = Tree::new(vec![TreeEntry {
        name: "transcript.jsonl".into(),
        kind: EntryKind::File,
        size,
        id,
    }])
    .unwrap()
    .encode();
    let bundle = Bundle::new(ObjectId::of(&tree), vec![], SystemTime::now()).encode();
    let mut pack: Vec<(ObjectId, Vec<u8>)> = [&tree, &bundle]
        .iter()
        .map(|bytes| {
            let (_, name, stored) = store.objects.encode_stored(bytes).unwrap();
            (name, stored)
        })
        .collect();
    pack.sort_by_key(|(name, _)| *name);
    store.objects.write_pack(&pack).unwrap();
    let reason = MoveReason {
        action: "save".into(),
        ..MoveReason::default()
    };
    store
        .update_ref(
            &RefName::Current,
            Expect::Any,
            Some(ObjectId::of(&bundle)),
            &reason,
        )
        .unwrap();
}

/// The stored bytes of a store, all files: what a pull of it moves.
fn store_bytes(store: &Path) -> u64 {
    snapshot_files(store)
        .iter()
        .map(|(_, bytes)| bytes.len() as u64)
        .sum()
}

#[test]
fn search_and_resume_of_a_decompression_bomb_transcript_are_refused_in_bounded_memory() {
    // (a) one line of 200 MiB; (b) a line of 40 MiB holding 20 million values: a store of
    // kilobytes either way. Read whole and built as a `Value` a line, either aborted.
    let cases = [
        (
            "a 200 MiB line",
            Generated::new("{\"text\":\"", "needle ", 200 << 20, "\"}\n"),
            "over the limit of 64 MiB for one line",
            4,
        ),
        (
            "a line of 20 million values",
            Generated::new("{\"text\":\"needle\",\"junk\":[", "0,", 40 << 20, "0]}\n"),
            "more than 100000 JSON values",
            0,
        ),
    ];
    for (what, content, refusal, resume_exit) in cases {
        let env = Env::new();
        env.init();
        let (id, size, stored) = put_streamed(&env.store(), content);
        plant_transcript(&env.store(), id, size);
        let pulled = store_bytes(&env.store());
        println!("[limits] {what}: {size} bytes stored in {stored} ({pulled} bytes of store)");
        assert!(
            pulled < 1 << 20,
            "{what}: the store is small ({pulled} bytes)"
        );
        let run = run_limited(
            &env,
            env.path(),
            &["search", "current", "needle"],
            ADDRESS_SPACE,
        );
        run.expect(4, &format!("{what}: search"));
        let message = run.message();
        assert!(
            message.contains("transcript.jsonl line 1") && message.contains(refusal),
            "{what}: search: {message}"
        );
        println!("[limits] {what}: search refused in {:.1?}", run.elapsed);
        // Resume reads events typed, building nothing else of a line: only a line it
        // cannot hold is refused; a line that is no event is passed over.
        let run = run_limited(&env, env.path(), &["resume"], ADDRESS_SPACE);
        run.expect(resume_exit, &format!("{what}: resume"));
        if resume_exit == 4 {
            assert!(
                run.message().contains(refusal),
                "{what}: resume: {}",
                run.message()
            );
        } else {
            assert!(
                !run.stdout.contains("Recent turns"),
                "{what}: {}",
                run.stdout
            );
        }
        println!(
            "[limits] {what}: resume exit {resume_exit} in {:.1?}",
            run.elapsed
        );
    }
}

#[test]
fn a_stored_transcript_declared_over_the_size_limit_is_refused_before_it_is_read() {
    // A tree entry may declare any size: 2 GiB, over MAX_TRANSCRIPT_BYTES, is refused from
    // the declaration, nothing decompressed. (Also exit 4 before the limit, later: as a
    // size mismatch once the object was read.)
    let env = Env::new();
    env.init();
    let (id, _, _) = put_streamed(
        &env.store(),
        Generated::new("{\"text\":\"needle\"}\n", "", 0, ""),
    );
    plant_transcript(&env.store(), id, 2 << 30);
    let run = run_limited(
        &env,
        env.path(),
        &["search", "current", "needle"],
        ADDRESS_SPACE,
    );
    run.expect(4, "search");
    assert!(
        run.message()
            .contains("transcript.jsonl is 2048 MiB, over the limit of 1024 MiB"),
        "{}",
        run.message()
    );
    // Resume verifies the bundle first, which finds the object shorter than declared.
    let run = run_limited(&env, env.path(), &["resume"], ADDRESS_SPACE);
    run.expect(4, "resume");
}

#[test]
fn a_stored_transcript_is_searched_and_resumed_line_by_line() {
    // 160 MiB of ordinary events: whole in memory it did not fit the address space.
    let env = Env::new();
    env.init();
    let event = |seq: u64, role: &str, text: &str| {
        json!({
            "v": 1, "seq": seq, "time": "2026-01-01T00:00:00Z",
            "source": {"harness": "claude-code", "session": "s-big"},
            "role": role, "kind": "message", "text": text,
        })
        .to_string()
            + "\n"
    };
    let filler = event(1, "assistant", &"lorem ipsum ".repeat(5000));
    let head = event(1, "user", "the first question");
    let tail =
        event(2, "user", "the last needle question") + &event(3, "assistant", "the last answer");
    let body_len = (160u64 << 20) / filler.len() as u64 * filler.len() as u64;
    let (id, size, _) = put_streamed(
        &env.store(),
        Generated::new(&head, &filler, body_len, &tail),
    );
    plant_transcript(&env.store(), id, size);
    let run = run_limited(
        &env,
        env.path(),
        &["search", "current", "needle"],
        256 << 20,
    );
    run.expect(0, "search of a 160 MiB transcript");
    let doc = run.doc();
    assert_eq!(doc["total_matches"], 1, "{doc}");
    assert_eq!(doc["hits"][0]["event"]["text"], "the last needle question");
    println!("[limits] search of {size} bytes in {:.1?}", run.elapsed);
    let run = run_limited(
        &env,
        env.path(),
        &["resume", "--budget", "20000"],
        256 << 20,
    );
    run.expect(0, "resume of a 160 MiB transcript");
    let kickoff = run.doc()["prompt"].as_str().unwrap_or_default().to_string();
    assert!(
        kickoff.contains("Last 2 of 2 turns") && kickoff.contains("- assistant: the last answer"),
        "{kickoff}"
    );
}
