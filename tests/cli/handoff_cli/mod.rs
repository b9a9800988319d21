//! Handoffs through the real binary: `save --brief` against real git repositories
//! (staged, unstaged, untracked and conflicted files; a workspace that must not change),
//! a save/push/clone/resume round trip across two stores with every HEAD relation,
//! secrets that must never reach the store, invalid briefings, kickoff budget snapshots,
//! transcript search pages, and `import-handoff` of every fixture format.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::SystemTime;

use baton::handoff::secrets::KINDS;
use common::{Env, git, git_cmd, snapshot_files};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Helpers: git
// ---------------------------------------------------------------------------------------

/// Run git that is expected to fail (a merge that conflicts).
fn git_fails(dir: &Path, args: &[&str]) {
    let out = git_cmd(dir, args).output().expect("run git");
    assert!(
        !out.status.success(),
        "git {args:?} in {} should have failed",
        dir.display()
    );
}

fn git_init(dir: &Path) -> PathBuf {
    fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q"]);
    dir.to_path_buf()
}

/// Write `file`, stage it, commit; return the new HEAD.
fn commit(dir: &Path, file: &str, content: &str, message: &str) -> String {
    let path = dir.join(file);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(&path, content).expect("write");
    git(dir, &["add", "--", file]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

fn git_clone(from: &Path, to: &Path) -> PathBuf {
    git(
        from.parent().expect("parent"),
        &["clone", "-q", &s(from), &s(to)],
    );
    to.to_path_buf()
}

fn s(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn canonical(path: &Path) -> String {
    s(&fs::canonicalize(path).expect("canonicalize"))
}

// ---------------------------------------------------------------------------------------
// Helpers: baton
// ---------------------------------------------------------------------------------------

/// Run baton with `dir` as the working directory.
fn baton_in(env: &Env, dir: &Path, args: &[&str]) -> Output {
    env.cmd()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run baton")
}

/// Run baton in `dir` with `input` on stdin.
fn baton_stdin(env: &Env, dir: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = env
        .cmd()
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn baton");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("wait for baton")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Require success; returns stdout.
fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status.code(),
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// The one JSON document on stdout.
fn doc(out: &Output) -> Value {
    serde_json::from_str(stdout(out).trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {:?} stderr {:?}",
            stdout(out),
            stderr(out)
        )
    })
}

/// Run with --json in `dir`, require success, return the document.
fn json_in(env: &Env, dir: &Path, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = baton_in(env, dir, &full);
    let value = doc(&out);
    assert!(
        out.status.success(),
        "baton {full:?} failed: {value}\nstderr: {}",
        stderr(&out)
    );
    value
}

fn json_ok(env: &Env, args: &[&str]) -> Value {
    json_in(env, env.path(), args)
}

/// `baton cat REV:PATH` as text.
fn cat(env: &Env, spec: &str) -> String {
    ok(baton_in(env, env.path(), &["cat", spec]), spec)
}

/// `baton cat REV:PATH` as bytes.
fn cat_bytes(env: &Env, spec: &str) -> Vec<u8> {
    let out = baton_in(env, env.path(), &["cat", spec]);
    assert!(out.status.success(), "cat {spec}: {}", stderr(&out));
    out.stdout
}

/// Paths of the files of a bundle (`show --json` entries that are files).
fn bundle_files(env: &Env, rev: &str) -> BTreeMap<String, Value> {
    files_of(&json_ok(env, &["show", rev]))
}

/// The file entries of a `show --json` document by path.
fn files_of(show: &Value) -> BTreeMap<String, Value> {
    show["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["kind"] == "file")
        .map(|e| (e["path"].as_str().expect("path").to_string(), e.clone()))
        .collect()
}

/// Every entry under `root`: kind, bytes, mode and modification time (directories too,
/// so a file created and removed again still shows as a changed directory mtime).
type DirState = BTreeMap<PathBuf, (char, Vec<u8>, u32, SystemTime)>;

fn dir_state(root: &Path) -> DirState {
    let mut map = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = fs::symlink_metadata(&path).expect("metadata");
        let (kind, bytes) = if meta.is_dir() {
            for entry in fs::read_dir(&path).expect("read_dir") {
                stack.push(entry.expect("entry").path());
            }
            ('d', Vec::new())
        } else if meta.file_type().is_symlink() {
            (
                'l',
                fs::read_link(&path)
                    .expect("readlink")
                    .into_os_string()
                    .into_encoded_bytes(),
            )
        } else {
            ('f', fs::read(&path).expect("read"))
        };
        let mode = meta.permissions().mode();
        map.insert(
            path.strip_prefix(root).expect("prefix").to_path_buf(),
            (kind, bytes, mode, meta.modified().expect("mtime")),
        );
    }
    map
}

fn assert_same_dir_state(before: &DirState, after: &DirState, what: &str) {
    let b: Vec<_> = before.keys().collect();
    let a: Vec<_> = after.keys().collect();
    assert_eq!(b, a, "{what}: entries were created or removed");
    for (path, state) in before {
        assert!(after[path] == *state, "{what}: {} changed", path.display());
    }
}

// ---------------------------------------------------------------------------------------
// Helpers: store contents
// ---------------------------------------------------------------------------------------

fn be64(bytes: &[u8]) -> usize {
    u64::from_be_bytes(bytes.try_into().expect("8 bytes")) as usize
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The index of a pack: (object id, offset, length) per entry.
fn pack_index(pack: &[u8]) -> Vec<(String, usize, usize)> {
    let len = pack.len();
    assert!(len >= 48, "pack too short");
    assert!(pack.ends_with(b"baton-pack-end\n\0"), "not a pack");
    let count = be64(&pack[len - 32..len - 24]);
    let index_offset = be64(&pack[len - 24..len - 16]);
    (0..count)
        .map(|i| {
            let e = &pack[index_offset + 48 * i..index_offset + 48 * (i + 1)];
            (hex(&e[..32]), be64(&e[32..40]), be64(&e[40..48]))
        })
        .collect()
}

/// Every object of a store, decompressed: loose files under `objects/` and every object
/// of every pack under `packs/`. Returns (where, content).
fn all_objects(store: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (rel, bytes) in snapshot_files(store) {
        let rel_s = s(&rel);
        if bytes == b"<dir>"
            && fs::symlink_metadata(store.join(&rel))
                .expect("meta")
                .is_dir()
        {
            continue;
        }
        let name = rel.file_name().map(|n| s(Path::new(n))).unwrap_or_default();
        if name.starts_with(".tmp-") {
            continue;
        }
        if rel_s.starts_with("objects/") {
            let content = zstd::decode_all(&bytes[..])
                .unwrap_or_else(|e| panic!("{rel_s} is not a zstd frame: {e}"));
            out.push((rel_s, content));
        } else if rel_s.starts_with("packs/") && rel_s.ends_with(".pack") {
            for (id, offset, length) in pack_index(&bytes) {
                let content = zstd::decode_all(&bytes[offset..offset + length])
                    .unwrap_or_else(|e| panic!("{rel_s} object {id}: {e}"));
                out.push((format!("{rel_s}#{id}"), content));
            }
        }
    }
    out
}

/// Every non-object file of a store (log, refs, config...) as it is on disk.
fn plain_files(store: &Path) -> Vec<(String, Vec<u8>)> {
    snapshot_files(store)
        .into_iter()
        .filter(|(rel, _)| {
            let r = s(rel);
            !r.starts_with("objects/") && !r.starts_with("packs/") && store.join(rel).is_file()
        })
        .map(|(rel, bytes)| (s(&rel), bytes))
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Flip a byte inside object `id` of a store, loose or packed.
fn corrupt_object(store: &Path, id: &str) {
    let loose = common::object_path(store, id);
    if loose.is_file() {
        let mut bytes = fs::read(&loose).expect("read object");
        let at = bytes.len() / 2;
        bytes[at] ^= 0x5a;
        fs::write(&loose, bytes).expect("write object");
        return;
    }
    for pack in common::pack_files(store) {
        let mut bytes = fs::read(&pack).expect("read pack");
        if let Some((_, offset, length)) = pack_index(&bytes).into_iter().find(|(i, _, _)| i == id)
        {
            bytes[offset + length / 2] ^= 0x5a;
            fs::write(&pack, bytes).expect("write pack");
            return;
        }
    }
    panic!("object {id} is not in {}", store.display());
}

// ---------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------

const SKELETON_LINES: [&str; 4] = [
    "# Handoff",
    "## Objective",
    "## Current State",
    "## Next Steps",
];

/// A chat answer wrapping a valid briefing: preamble, a ```markdown fence, postamble.
fn chat_briefing(objective: &str) -> String {
    format!(
        "Sure! Here is the handoff for the next agent:\n\n```markdown\n# Handoff\n\n\
         ## Objective\n\n{objective}\n\n## Current State\n\nThe parser handles merges; \
         the conflict in conflict.txt is unresolved.\n\n## Next Steps\n\n1. Resolve \
         conflict.txt.\n2. Run the tests.\n```\n\nLet me know if you need anything else!\n"
    )
}

/// The normalized document inside [`chat_briefing`].
fn normalized_briefing(objective: &str) -> String {
    format!(
        "# Handoff\n\n## Objective\n\n{objective}\n\n## Current State\n\nThe parser handles \
         merges; the conflict in conflict.txt is unresolved.\n\n## Next Steps\n\n1. Resolve \
         conflict.txt.\n2. Run the tests.\n"
    )
}

const VALID_BRIEF: &str = "# Handoff\n\n## Objective\n\nShip the thing. Then rest.\n\n\
    ## Current State\n\nHalf done.\n\n## Next Steps\n\n1. Finish it.\n";

// ---------------------------------------------------------------------------------------
// 1. save --brief against a real repository with every kind of change
// ---------------------------------------------------------------------------------------

/// A bare origin, a workspace clone on `feature` that is one commit ahead of and one
/// behind `origin/feature`, in the middle of a conflicted merge, with staged, unstaged and
/// untracked files. Returns (origin, workspace, root commit).
fn messy_workspace(root: &Path) -> (PathBuf, PathBuf, String) {
    let origin = root.join("origin.git");
    fs::create_dir_all(root).expect("mkdir");
    git(root, &["init", "-q", "--bare", "origin.git"]);
    let seed = git_init(&root.join("seed"));
    git(&seed, &["remote", "add", "origin", &s(&origin)]);
    let first = commit(&seed, "README.md", "# project\n", "first");
    commit(&seed, "tracked.txt", "tracked\n", "add tracked");
    commit(&seed, "conflict.txt", "base\n", "add conflict.txt");
    git(&seed, &["push", "-q", "-u", "origin", "main"]);
    git(&seed, &["checkout", "-q", "-b", "feature"]);
    commit(&seed, "feature.txt", "feature\n", "start feature");
    git(&seed, &["push", "-q", "-u", "origin", "feature"]);

    let work = git_clone(&origin, &root.join("work"));
    git(&work, &["checkout", "-q", "feature"]);
    // Someone else pushes to origin/feature; the workspace fetches: behind by 1.
    commit(&seed, "upstream.txt", "upstream\n", "upstream change");
    git(&seed, &["push", "-q", "origin", "feature"]);
    // A side branch that conflicts with the workspace's own commit.
    git(&work, &["checkout", "-q", "-b", "other"]);
    commit(&work, "conflict.txt", "theirs\n", "theirs");
    commit(&work, "merged-clean.txt", "clean\n", "clean addition");
    git(&work, &["checkout", "-q", "feature"]);
    // A local commit whose subject holds a token: evidence carries commit subjects.
    commit(
        &work,
        "conflict.txt",
        "ours\n",
        "ours (rotated ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789)",
    );
    git(&work, &["fetch", "-q", "origin"]);
    git_fails(&work, &["merge", "-q", "--no-edit", "other"]);
    // During the conflicted merge: a staged new file, an unstaged edit, an untracked file.
    fs::write(work.join("staged.txt"), "staged content\n").expect("write");
    git(&work, &["add", "staged.txt"]);
    fs::write(work.join("tracked.txt"), "tracked changed\n").expect("write");
    fs::create_dir_all(work.join("notes")).expect("mkdir");
    fs::write(work.join("notes/todo.txt"), "remember the milk\n").expect("write");
    (origin, work, first)
}

#[test]
fn save_captures_git_evidence_and_never_touches_the_workspace() {
    let env = Env::new();
    env.init();
    let (origin, work, first) = messy_workspace(&env.path().join("git"));
    let head = git(&work, &["rev-parse", "HEAD"]);
    fs::write(
        env.path().join("transcript.jsonl"),
        "{\"role\":\"user\",\"content\":\"merge other into feature\"}\n",
    )
    .expect("write");
    fs::write(env.path().join("notes.md"), "attached notes\n").expect("write");

    // Stat-dirty but content-clean: a `git status` that may take locks, or a porcelain
    // `git diff`, would refresh and rewrite the index for this file.
    fs::File::options()
        .write(true)
        .open(work.join("README.md"))
        .expect("open")
        .set_modified(SystemTime::now() - std::time::Duration::from_secs(400 * 86_400))
        .expect("set mtime");
    let index = work.join(".git/index");
    let index_before = fs::read(&index).expect("index");
    let before = dir_state(&work);

    // Briefing on stdin, run inside the workspace; the store is found upwards.
    let objective = "Merge the other branch into feature. Keep both changes.";
    let transcript = s(&env.path().join("transcript.jsonl"));
    let notes = s(&env.path().join("notes.md"));
    let out = baton_stdin(
        &env,
        &work,
        &[
            "--json",
            "save",
            "--brief",
            "-",
            "--from",
            "claude",
            "--to",
            "codex",
            "--transcript",
            &transcript,
            "--attach",
            &notes,
            "--note",
            "mid-merge",
        ],
        chat_briefing(objective).as_bytes(),
    );
    let saved = doc(&out);
    assert!(out.status.success(), "{saved} {}", stderr(&out));
    let id = saved["bundle"].as_str().expect("bundle id").to_string();
    assert_eq!(saved["kind"], "handoff");
    assert_eq!(saved["partial"], json!([]));
    // The token in a commit subject is found twice: evidence.json and context.md.
    assert_eq!(saved["secrets"], json!({ "github_token": 2 }));

    // Baton changed nothing in the workspace, .git/index included.
    assert!(
        fs::read(&index).expect("index") == index_before,
        ".git/index changed"
    );
    assert_same_dir_state(&before, &dir_state(&work), "after save");

    // The manifest.
    let show = json_ok(&env, &["show", &id]);
    assert_eq!(show["from"], "claude");
    assert_eq!(show["to"], "codex");
    assert_eq!(show["note"], "mid-merge");
    assert_eq!(show["summary"], "Merge the other branch into feature.");
    assert_eq!(show["metadata"]["kind"], "handoff");
    assert_eq!(show["metadata"]["workspace"], canonical(&work).as_str());
    assert_eq!(show["metadata"]["secrets.redacted"], "github_token: 2");
    assert!(
        show["metadata"].get("evidence.partial").is_none(),
        "{}",
        show["metadata"]
    );
    let files = bundle_files(&env, &id);
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "attachments/notes.md",
            "context.md",
            "evidence/evidence.json",
            "evidence/staged.patch",
            "evidence/unstaged.patch",
            "handoff.md",
            "transcript.jsonl",
        ]
    );
    assert_eq!(
        cat(&env, "current:handoff.md"),
        normalized_briefing(objective)
    );
    assert_eq!(
        cat(&env, "current:attachments/notes.md"),
        "attached notes\n"
    );

    // evidence.json, field by field.
    let evidence: Value =
        serde_json::from_str(&cat(&env, "current:evidence/evidence.json")).expect("evidence");
    assert_eq!(evidence["version"], 1);
    assert_eq!(evidence["workspace"], canonical(&work).as_str());
    assert_eq!(evidence["partial"], json!([]));
    let g = &evidence["git"];
    assert_eq!(g["root"], canonical(&work).as_str());
    assert_eq!(g["branch"], "feature");
    assert_eq!(g["head"], head.as_str());
    assert_eq!(g["upstream"], "origin/feature");
    assert_eq!(
        (g["ahead"].clone(), g["behind"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(
        g["remotes"],
        json!([{ "name": "origin", "url": s(&origin) }])
    );
    assert_eq!(g["root_commits"], json!([first]));
    let subjects: Vec<&str> = g["recent_commits"]
        .as_array()
        .expect("commits")
        .iter()
        .map(|c| c["subject"].as_str().expect("subject"))
        .collect();
    assert_eq!(
        subjects,
        [
            "ours (rotated [REDACTED:github_token])",
            "start feature",
            "add conflict.txt",
            "add tracked",
            "first"
        ]
    );
    assert_eq!(g["recent_commits"][0]["id"], head.as_str());
    assert_eq!(
        g["recent_commits"][0]["author"],
        "Test Author <test@example.com>"
    );
    assert_eq!(
        g["staged"],
        json!([
            { "path": "merged-clean.txt", "status": "added" },
            { "path": "staged.txt", "status": "added" },
        ])
    );
    assert_eq!(
        g["unstaged"],
        json!([{ "path": "tracked.txt", "status": "modified" }])
    );
    assert_eq!(g["conflicted"], json!(["conflict.txt"]));
    let todo = b"remember the milk\n";
    assert_eq!(
        g["untracked"],
        json!([{
            "path": "notes/todo.txt",
            "size": todo.len(),
            "id": blake3::hash(todo).to_hex().to_string(),
        }])
    );

    // The patches are there, with the right halves of the change in each.
    let staged = cat_bytes(&env, "current:evidence/staged.patch");
    let unstaged = cat_bytes(&env, "current:evidence/unstaged.patch");
    assert_eq!(g["staged_patch_bytes"], staged.len());
    assert_eq!(g["unstaged_patch_bytes"], unstaged.len());
    assert_eq!(files["evidence/staged.patch"]["size"], staged.len());
    let staged = String::from_utf8_lossy(&staged);
    let unstaged = String::from_utf8_lossy(&unstaged);
    assert!(
        staged.contains("diff --git a/staged.txt b/staged.txt"),
        "{staged}"
    );
    assert!(staged.contains("+staged content"), "{staged}");
    assert!(staged.contains("+clean"), "{staged}");
    assert!(!staged.contains("tracked changed"), "{staged}");
    assert!(
        unstaged.contains("diff --git a/tracked.txt b/tracked.txt"),
        "{unstaged}"
    );
    assert!(unstaged.contains("+tracked changed"), "{unstaged}");
    assert!(!unstaged.contains("staged content"), "{unstaged}");

    // context.md says the same in prose.
    let context = cat(&env, "current:context.md");
    for line in [
        format!("Captured read-only from `{}` at ", canonical(&work)),
        "- branch: feature".to_string(),
        format!("- HEAD: {head}"),
        "- upstream: origin/feature (ahead 1, behind 1)".to_string(),
        format!("- remote origin: {}", s(&origin)),
        format!("- root commit(s): {first}"),
        "Staged: 2".to_string(),
        "- merged-clean.txt (added)".to_string(),
        "- staged.txt (added)".to_string(),
        "Unstaged: 1".to_string(),
        "- tracked.txt (modified)".to_string(),
        "Conflicted: 1".to_string(),
        "- conflict.txt".to_string(),
        "Untracked: 1 (18 bytes; contents not saved unless attached)".to_string(),
        "- notes/todo.txt (18 bytes, ".to_string(),
        format!(
            "- staged.patch: {} bytes, in `evidence/staged.patch`",
            staged.len()
        ),
        format!(
            "- unstaged.patch: {} bytes, in `evidence/unstaged.patch`",
            unstaged.len()
        ),
        "ours (rotated [REDACTED:github_token])".to_string(),
    ] {
        assert!(
            context.contains(&line),
            "context.md lacks {line:?}:\n{context}"
        );
    }
    assert!(!context.contains("Partial capture"), "{context}");

    // Resuming in the same workspace: the redacted evidence still parses, HEAD is the
    // same, and resume does not change the workspace either.
    let resume = json_in(&env, &work, &["resume"]);
    assert_eq!(resume["verified"], true);
    assert_eq!(resume["bundle"], id.as_str());
    assert_eq!(resume["workspace"]["head"], "same");
    assert_eq!(resume["workspace"]["same_repository"], true);
    assert_eq!(resume["workspace"]["captured_uncommitted"], true);
    assert!(
        fs::read(&index).expect("index") == index_before,
        ".git/index changed"
    );
    assert_same_dir_state(&before, &dir_state(&work), "after resume");

    // Control: an ordinary `git status` does rewrite the index here, so the checks above
    // would have seen a capture that did the same.
    git(&work, &["status", "--porcelain"]);
    assert!(
        fs::read(&index).expect("index") != index_before,
        "control: git status left the index alone"
    );
}

#[test]
fn large_patches_become_attachments_summarised_in_context() {
    let env = Env::new();
    env.init();
    let repo = git_init(&env.path().join("repo"));
    commit(&repo, "small.txt", "small\n", "base");
    // Over 256 KiB of staged text, and a small unstaged edit.
    let big: String = (0..12_000)
        .map(|i| format!("line {i:06} of a generated file\n"))
        .collect();
    assert!(big.len() > 256 << 10);
    fs::write(repo.join("big.txt"), &big).expect("write");
    git(&repo, &["add", "big.txt"]);
    fs::write(repo.join("small.txt"), "small edited\n").expect("write");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let out = baton_in(&env, &repo, &["save", "--brief", &s(&brief)]);
    ok(out, "save");
    let files = bundle_files(&env, "current");
    assert!(
        files.contains_key("attachments/patches/staged.patch"),
        "{files:?}"
    );
    assert!(!files.contains_key("evidence/staged.patch"), "{files:?}");
    assert!(files.contains_key("evidence/unstaged.patch"), "{files:?}");
    let size = files["attachments/patches/staged.patch"]["size"]
        .as_u64()
        .expect("size");
    assert!(size > 256 << 10);
    let context = cat(&env, "current:context.md");
    assert!(
        context.contains(&format!(
            "- staged.patch: {size} bytes, in `attachments/patches/staged.patch`"
        )),
        "{context}"
    );
    let patch = cat(&env, "current:attachments/patches/staged.patch");
    assert!(patch.contains("+line 011999 of a generated file"));
}

// ---------------------------------------------------------------------------------------
// 2. save, push, clone, resume across two stores
// ---------------------------------------------------------------------------------------

#[test]
fn handoff_round_trip_across_stores_with_every_head_relation() {
    let a = Env::new();
    a.init();
    let root = a.path().join("git");
    fs::create_dir_all(&root).expect("mkdir");
    git(&root, &["init", "-q", "--bare", "origin.git"]);
    let origin = root.join("origin.git");
    let w = git_init(&root.join("w"));
    git(&w, &["remote", "add", "origin", &s(&origin)]);
    commit(&w, "a.txt", "a\n", "one");
    commit(&w, "b.txt", "b\n", "two");
    let captured = commit(&w, "c.txt", "c\n", "three");
    git(&w, &["push", "-q", "-u", "origin", "main"]);
    fs::write(w.join("a.txt"), "work in progress\n").expect("write");

    let brief = a.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let id = ok(
        baton_in(
            &a,
            &w,
            &["save", "--brief", &s(&brief), "--from", "a", "--to", "b"],
        ),
        "save",
    )
    .trim()
    .to_string();
    assert_eq!(id.len(), 64, "{id}");
    let remote = a.path().join("remote-store");
    a.ok(&["target", "add", "r", &s(&remote)]);
    let push = json_ok(&a, &["push"]);
    assert_eq!(push["report"]["bundle"], id.as_str());

    // Store B: a clone, used from elsewhere with --store.
    let b = Env::new();
    let store_b = b.path().join("store-b");
    ok(
        baton_in(&b, b.path(), &["clone", &s(&remote), &s(&store_b)]),
        "clone",
    );
    let sb = s(&store_b);
    let resume_in = |dir: &Path| -> Value {
        let value = json_in(&b, dir, &["--store", &sb, "resume"]);
        assert_eq!(value["bundle"], id.as_str());
        assert_eq!(value["verified"], true);
        value
    };
    let workspace_text = |v: &Value| -> String {
        v["kickoff"]["sections"]
            .as_array()
            .expect("sections")
            .iter()
            .find(|s| s["title"] == "Workspace")
            .map(|s| s["text"].as_str().unwrap_or_default().to_string())
            .expect("a Workspace section")
    };

    // (a) the same repository.
    let same = resume_in(&w);
    assert_eq!(same["workspace"]["head"], "same");
    assert_eq!(same["workspace"]["same_repository"], true);
    assert!(workspace_text(&same).contains("- HEAD: same"), "{same}");
    // The kickoff from B equals the one from A: same bundle, same workspace.
    let human_b = ok(
        baton_in(&b, &w, &["--store", &sb, "resume"]),
        "resume from B",
    );
    let human_a = ok(baton_in(&a, &w, &["resume"]), "resume from A");
    assert_eq!(human_a, human_b);

    // (b) a clone with one more commit: ahead.
    let ahead = git_clone(&origin, &root.join("ahead"));
    commit(&ahead, "d.txt", "d\n", "four");
    let v = resume_in(&ahead);
    assert_eq!(v["workspace"]["head"], "ahead");
    assert_eq!(
        (
            v["workspace"]["commits_ahead"].clone(),
            v["workspace"]["commits_behind"].clone()
        ),
        (json!(1), json!(0))
    );
    assert!(
        workspace_text(&v).contains("- HEAD: ahead (live is 1 ahead, 0 behind the captured HEAD)"),
        "{v}"
    );

    // (c) a clone reset to an older commit: behind.
    let behind = git_clone(&origin, &root.join("behind"));
    git(&behind, &["reset", "-q", "--hard", "HEAD~2"]);
    let v = resume_in(&behind);
    assert_eq!(v["workspace"]["head"], "behind");
    assert_eq!(v["workspace"]["commits_behind"], 2);
    assert!(workspace_text(&v).contains("- HEAD: behind"), "{v}");

    // (d) a clone that went its own way: diverged.
    let diverged = git_clone(&origin, &root.join("diverged"));
    git(&diverged, &["reset", "-q", "--hard", "HEAD~1"]);
    commit(&diverged, "e.txt", "e\n", "elsewhere");
    let v = resume_in(&diverged);
    assert_eq!(v["workspace"]["head"], "diverged");
    assert_eq!(
        (
            v["workspace"]["commits_ahead"].clone(),
            v["workspace"]["commits_behind"].clone()
        ),
        (json!(1), json!(1))
    );
    assert!(workspace_text(&v).contains("- HEAD: diverged"), "{v}");

    // (e) an unrelated repository.
    let unrelated = git_init(&root.join("unrelated"));
    commit(&unrelated, "x.txt", "something else\n", "unrelated root");
    let v = resume_in(&unrelated);
    assert_eq!(v["workspace"]["head"], "unrelated");
    assert_eq!(v["workspace"]["same_repository"], false);
    assert!(workspace_text(&v).contains("- HEAD: unrelated"), "{v}");
    assert!(
        workspace_text(&v).contains("a different repository than the one captured"),
        "{v}"
    );

    // (f) not a git directory at all.
    let plain = root.join("plain");
    fs::create_dir_all(&plain).expect("mkdir");
    let v = resume_in(&plain);
    assert_eq!(v["workspace"]["head"], "unknown");
    assert_eq!(v["workspace"]["same_repository"], Value::Null);
    assert!(workspace_text(&v).contains("- HEAD: unknown"), "{v}");
    assert!(workspace_text(&v).contains("not a git repository"), "{v}");

    // The captured HEAD never moved in any of this.
    assert_eq!(git(&w, &["rev-parse", "HEAD"]), captured);

    // A corrupted object of the bundle in B: resume refuses with exit 4.
    let show = json_in(&b, b.path(), &["--store", &sb, "show", &id]);
    let blob = files_of(&show)["handoff.md"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    corrupt_object(&store_b, &blob);
    let out = baton_in(&b, &w, &["--store", &sb, "resume"]);
    assert_eq!(code(&out), 4, "{} {}", stdout(&out), stderr(&out));
    assert!(stdout(&out).is_empty(), "no kickoff: {}", stdout(&out));
    let out = baton_in(&b, &w, &["--json", "--store", &sb, "resume"]);
    assert_eq!(code(&out), 4);
    assert_eq!(doc(&out)["error"]["code"], "integrity");
    // A still resumes: its copy is intact.
    assert_eq!(json_in(&a, &w, &["resume"])["verified"], true);
}

// ---------------------------------------------------------------------------------------
// 3. Secrets never reach the store
// ---------------------------------------------------------------------------------------

/// One planted example per secret kind: (kind, the secret value that must vanish, the
/// line it is planted in).
fn planted_secrets() -> Vec<(&'static str, String, String)> {
    let pem_body = "MIIEowIBAAKCAQEAv1QmZx7Yp3kTnR8sWqLd2Fh0Uc9JbVe4Ga6KoXiMtNwPyEzDr";
    let pem = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\nQm5hY2tlZCBrZXkgbWF0ZXJpYWwgZm9yIHRlc3RpbmcgcHVycG9zZXMgb25seQ\n-----END RSA PRIVATE KEY-----"
    );
    let aws_id = "AKIAQWERTYUIOPASDF12".to_string();
    let aws_secret = "Zx9/Kq2+Lm4Np6Rs8Tu0Vw1Xy3Za5Bc7De9Fg2Hj".to_string();
    let ghp = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8".to_string();
    let pat = "github_pat_11AAAAAAA0bcdefghijklm_NOPQRSTUVWXYZabcdef0123456789".to_string();
    let ant = "sk-ant-api03-Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe_dcba-9876".to_string();
    let oai = "sk-proj-Mn8Bv7Cx6Zl5Kj4Hg3Fd2Sa1Qw0ErTyUiOp".to_string();
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZXBsb3kiLCJleHAiOjk5OTk5OTk5OTl9.dGhpcy1pcy1ub3QtYS1yZWFsLXNpZ25hdHVyZQ".to_string();
    let slack = "xoxb-2048-4096-QwErTyUiOpAsDfGh".to_string();
    let stripe = "sk_live_51HxYzAbCdEfGhIjKlMnOpQr".to_string();
    let google = "AIzaSyB-abcdefghij0123456789_KLMNOPQRST".to_string();
    let gitlab = "glpat-x1Y2z3W4v5U6t7S8r9Q0".to_string();
    let npm = "npm_Zq8Wx7Ec6Rv5Tb4Yn3Um2Ik1Ol0PaSdFgHjK".to_string();
    let hf = "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".to_string();
    let bearer = "8f14e45fceea167a5a36dedd4bea2543aa01".to_string();
    let url_pw = "Tr0ub4dor-and-3".to_string();
    let db_pw = "Corr3ct-H0rse-Battery".to_string();
    let mut planted = vec![
        (
            "aws_access_key",
            aws_id.clone(),
            format!("The deploy user is {aws_id} in us-east-1."),
        ),
        (
            "aws_secret_key",
            aws_secret.clone(),
            format!("aws_secret_access_key = {aws_secret}"),
        ),
        (
            "github_token",
            ghp.clone(),
            format!("CI uses {ghp} for releases."),
        ),
        (
            "github_token",
            pat.clone(),
            format!("The bot's fine-grained token: {pat}"),
        ),
        (
            "anthropic_api_key",
            ant.clone(),
            format!("Claude key {ant} is in the vault."),
        ),
        (
            "openai_api_key",
            oai.clone(),
            format!("The embedding job calls {oai} nightly."),
        ),
        ("private_key_block", pem_body.to_string(), pem),
        (
            "bearer_jwt",
            jwt.clone(),
            format!("A session cookie looked like {jwt} in the log."),
        ),
        (
            "slack_token",
            slack.clone(),
            format!("Alerts post with {slack} to #ops."),
        ),
        (
            "stripe_key",
            stripe.clone(),
            format!("Billing tests were run with {stripe} by mistake."),
        ),
        (
            "google_api_key",
            google.clone(),
            format!("Maps are loaded with {google} today."),
        ),
        (
            "gitlab_token",
            gitlab.clone(),
            format!("The mirror pushes with {gitlab} nightly."),
        ),
        (
            "npm_token",
            npm.clone(),
            format!("Publishing uses {npm} from CI."),
        ),
        (
            "huggingface_token",
            hf.clone(),
            format!("Model downloads use {hf} for auth."),
        ),
        (
            "bearer_token",
            bearer.clone(),
            format!("curl -H 'Authorization: Bearer {bearer}' https://api.example.com/v1/me"),
        ),
        (
            "url_credentials",
            url_pw.clone(),
            format!(
                "The old remote was https://deploy:{url_pw}@git.example.com/app.git until May."
            ),
        ),
        (
            "password_assignment",
            db_pw.clone(),
            format!("DB_PASSWORD={db_pw}"),
        ),
    ];
    // The kinds added for issue 10, each in a sentence (SendGrid and PyPI went through
    // in full before).
    for (kind, value) in [
        (
            "sendgrid_api_key",
            "SG.u8jzPde0IgxLd6GncfBAep.fJBd0Kh8oOOL8dKLzdocJ2isAjIhKtJ0RlgLKOmxgJT",
        ),
        (
            "pypi_token",
            "pypi-AgEIcHlwaS5vcmcihA-2O76UMFxFkM-R5Kjp1vRt_1fjORS-6ilI8ihN5KXSc7Tvo-hBKqFYY-k",
        ),
        ("twilio_key", "SK5ec84d8dbc74254770f58904dba41ecc"),
        (
            "digitalocean_token",
            "dop_v1_ff9243a8f506b40928b5b7a767c76fb008f86bebb2737f6a6f0fb23c6f5da2ce",
        ),
        ("shopify_token", "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"),
        (
            "age_secret_key",
            "AGE-SECRET-KEY-16GFPUTQFTF78R57XR0V3ZXUPYU5V3U70SVUG68EU5Y0MYDN8FHFSGAWXEL",
        ),
        (
            "vault_token",
            "hvs.kQ1okTBGzvAmwufUxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B26R08qzjI6GKFSufrdZSlB5er8bOfZqfM2oeq3hDavJA7",
        ),
        (
            "doppler_token",
            "dp.pt.6rNicHTp8hkqdlm7tOtHWnsCGRlrwZbqcabUGJmGEp7",
        ),
        ("databricks_token", "dapie3dfc967a64cb14028d512c9791e558e"),
        (
            "linear_api_key",
            "lin_api_aqx9vJupc94tnwlavyfErGPmpGXafq0fjzLczbtt",
        ),
        (
            "postman_api_key",
            "PMAK-724caf4941d4072014b3ce10-7f80e222f828767efc2f91624a8940f1f8",
        ),
        (
            "pulumi_token",
            "pul-36f99eee3692f09e2e8c662248b483b7ffc050fe",
        ),
        ("square_token", "sq0atp-ztUjAwyuh1vauWv1zh87mT"),
        (
            "grafana_token",
            "glsa_a5Vsqxezy3Lex7BWr2drgd1QsO7jprBG_a6bd0c62",
        ),
        (
            "sentry_token",
            "sntrys_d7UACNWiP3sFd67JikEAvstqVVPqzPptEJQzhkPkenG5ZFJoC6vWCBiJmpfl",
        ),
        ("new_relic_key", "NRAK-V9FUPXQMB0Y07NYRVD5RXI67NFR"),
        ("mailchimp_api_key", "7cced9041dff02cee737443e21047194-us14"),
    ] {
        planted.push((
            kind,
            value.to_string(),
            format!("Also found {value} in a config."),
        ));
    }
    let basic = "dXNlcjpodW50ZXIyLWJhc2ljLWF1dGg=";
    planted.push((
        "basic_auth",
        basic.to_string(),
        format!("curl -H 'Authorization: Basic {basic}' https://api.example.com/"),
    ));
    planted
}

/// A valid briefing with every planted secret in its Current State.
fn secret_briefing(secrets: &[(&str, String, String)]) -> String {
    let mut text = String::from(
        "# Handoff\n\n## Objective\n\nRotate every credential that leaked into the repository.\n\n\
         ## Current State\n\nFound so far:\n\n",
    );
    for (_, _, line) in secrets {
        text.push_str("```\n");
        text.push_str(line);
        text.push_str("\n```\n\n");
    }
    text.push_str("## Next Steps\n\n1. Revoke each of them.\n");
    text
}

/// A transcript with each planted line as a JSON string value.
fn secret_transcript(secrets: &[(&str, String, String)]) -> String {
    let mut text = String::new();
    text.push_str(&json!({ "role": "user", "content": "find the leaked credentials" }).to_string());
    text.push('\n');
    for (i, (_, _, line)) in secrets.iter().enumerate() {
        let event =
            json!({ "role": "tool", "n": i, "content": format!("$ grep -r creds\n{line}\n") });
        text.push_str(&event.to_string());
        text.push('\n');
    }
    text
}

#[test]
fn secrets_are_redacted_everywhere_and_block_writes_nothing() {
    let secrets = planted_secrets();
    let planted_kinds: BTreeSet<&str> = secrets.iter().map(|(k, _, _)| *k).collect();
    let known: BTreeSet<&str> = KINDS.iter().copied().collect();
    assert_eq!(
        planted_kinds, known,
        "plant one example of every kind in KINDS"
    );

    let env = Env::new();
    env.init();
    // The workspace is a git repository with the same secrets in a staged file, so they
    // are in the staged patch too.
    let work = git_init(&env.path().join("work"));
    commit(&work, "README.md", "# app\n", "first");
    let all_lines: String = secrets.iter().map(|(_, _, l)| format!("{l}\n")).collect();
    fs::write(work.join("leak.txt"), &all_lines).expect("write");
    git(&work, &["add", "leak.txt"]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, secret_briefing(&secrets)).expect("write");
    let transcript = env.path().join("session.jsonl");
    fs::write(&transcript, secret_transcript(&secrets)).expect("write");
    let attach_dir = env.path().join("evidence-files");
    fs::create_dir_all(&attach_dir).expect("mkdir");
    fs::write(attach_dir.join("creds.txt"), &all_lines).expect("write");
    let save_args = |mode: &str| -> Vec<String> {
        vec![
            "save".into(),
            "--brief".into(),
            s(&brief),
            "--transcript".into(),
            s(&transcript),
            "--attach".into(),
            s(&attach_dir),
            "--secrets".into(),
            mode.into(),
        ]
    };
    let no_values = |text: &str, what: &str| {
        for (kind, value, _) in &secrets {
            assert!(
                !text.contains(value.as_str()),
                "{what} shows the {kind} value: {text}"
            );
        }
    };

    // Every location holds every planted line once: briefing, transcript, attachment,
    // staged patch. github_token has two examples.
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for (kind, _, _) in &secrets {
        *expected.entry(kind.to_string()).or_insert(0) += 4;
    }
    let described = expected
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");

    // Block: refused with exit 6, nothing written, no value echoed.
    let before = snapshot_files(&env.store());
    let args = save_args("block");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = baton_in(&env, &work, &args);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: refusing to save: the handoff contains secrets ("),
        "{err}"
    );
    assert!(err.contains(&described), "{err}");
    no_values(&err, "block stderr");
    no_values(&stdout(&out), "block stdout");
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "block wrote to the store"
    );
    let mut json_args = vec!["--json"];
    json_args.extend_from_slice(&args);
    let out = baton_in(&env, &work, &json_args);
    assert_eq!(code(&out), 6);
    let d = doc(&out);
    assert_eq!(d["error"]["code"], "security");
    no_values(&d.to_string(), "block --json");
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "block wrote to the store"
    );

    // Redact (the default): kinds and counts in the note, never a value.
    let args = save_args("redact");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = baton_in(&env, &work, &args[..args.len() - 2]);
    let out_text = ok(out.clone(), "save");
    assert_eq!(out_text.trim().len(), 64, "{out_text}");
    let err = stderr(&out);
    assert!(
        err.contains(&format!("note: redacted secrets ({described})")),
        "{err}"
    );
    no_values(&err, "save stderr");
    no_values(&out_text, "save stdout");
    let saved = json_in(&env, &work, &args);
    assert_eq!(
        saved["secrets"],
        serde_json::to_value(&expected).expect("json")
    );
    no_values(&saved.to_string(), "save --json");
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["metadata"]["secrets.redacted"], described.as_str());
    assert_eq!(
        show["summary"],
        "Rotate every credential that leaked into the repository."
    );

    // The redacted files are still what they were: a valid briefing, JSON lines.
    let handoff = cat(&env, "current:handoff.md");
    let transcript_back = cat(&env, "current:transcript.jsonl");
    for line in transcript_back.lines() {
        serde_json::from_str::<Value>(line).expect("transcript line is still JSON");
    }
    let attachment = cat(&env, "current:attachments/evidence-files/creds.txt");
    let patch = cat(&env, "current:evidence/staged.patch");
    for (kind, _, _) in &secrets {
        let placeholder = format!("[REDACTED:{kind}]");
        for (what, text) in [
            ("handoff.md", &handoff),
            ("transcript", &transcript_back),
            ("attachment", &attachment),
            ("staged.patch", &patch),
        ] {
            assert!(
                text.contains(&placeholder),
                "{what} lacks {placeholder}:\n{text}"
            );
        }
    }
    let found = json_ok(&env, &["search", "current", "REDACTED"]);
    assert_eq!(found["total_matches"], secrets.len());

    // Every byte of the store: decompressed objects (loose and packed) and plain files.
    let objects = all_objects(&env.store());
    assert!(objects.len() >= 10, "{} objects", objects.len());
    for (where_, content) in objects.iter().chain(plain_files(&env.store()).iter()) {
        for (kind, value, _) in &secrets {
            assert!(
                !contains(content, value.as_bytes()),
                "the {kind} value is in {where_}"
            );
        }
    }
    for kind in KINDS {
        let placeholder = format!("[REDACTED:{kind}]");
        assert!(
            objects
                .iter()
                .any(|(_, c)| contains(c, placeholder.as_bytes())),
            "no object holds {placeholder}"
        );
    }
    // The same holds after a push: the remote holds packs, and they are clean too.
    let remote = env.path().join("remote");
    env.ok(&["target", "add", "r", &s(&remote)]);
    env.ok(&["push"]);
    let packed = all_objects(&remote);
    assert!(
        packed.iter().any(|(w, _)| w.starts_with("packs/")),
        "no packs"
    );
    for (where_, content) in &packed {
        for (kind, value, _) in &secrets {
            assert!(
                !contains(content, value.as_bytes()),
                "the {kind} value is in {where_}"
            );
        }
    }
}

/// Tokens hidden by JSON escapes in a transcript and a JSON attachment: a `\u0061` in a
/// GitHub token (stored verbatim before), a `\/` splitting an Anthropic key (half
/// redacted before). They are found decoded, and the stored lines stay JSON.
#[test]
fn secrets_behind_json_escapes_never_reach_the_store() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let gh = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8";
    let ant = "sk-ant-api03-Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe_dcba-9876";
    // Pieces that must not survive anywhere, escaped or not.
    let pieces = [&gh[5..], &ant[..24], &ant[25..]];
    let gh_escaped = format!("{}\\u0031{}", &gh[..4], &gh[5..]);
    let ant_split = format!("{}\\/{}", &ant[..24], &ant[24..]);
    let transcript = env.path().join("session.jsonl");
    fs::write(
        &transcript,
        format!(
            "{{\"role\":\"user\",\"content\":\"hi\"}}\n\
             {{\"role\":\"tool\",\"content\":\"GH_TOKEN is {gh_escaped}\\n\"}}\n\
             {{\"role\":\"tool\",\"content\":\"key {ant_split} \\ud83d\\ude00\"}}\n"
        ),
    )
    .expect("write");
    let attach = env.path().join("creds.json");
    fs::write(
        &attach,
        format!("{{\n  \"a\": \"{gh_escaped}\",\n  \"b\": [\"{ant_split}\"]\n}}\n"),
    )
    .expect("write");
    let args = [
        "save",
        "--brief",
        &s(&brief),
        "--transcript",
        &s(&transcript),
        "--attach",
        &s(&attach),
    ];
    let before = snapshot_files(&env.store());
    let mut block = args.to_vec();
    block.extend(["--secrets", "block"]);
    let out = baton_in(&env, &ws, &block);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("anthropic_api_key: 2, github_token: 2"),
        "{}",
        stderr(&out)
    );
    assert_eq!(snapshot_files(&env.store()), before, "block wrote");

    let saved = json_in(&env, &ws, &args);
    assert_eq!(
        saved["secrets"],
        json!({ "anthropic_api_key": 2, "github_token": 2 })
    );
    let back = cat(&env, "current:transcript.jsonl");
    let lines: Vec<Value> = back
        .lines()
        .map(|l| serde_json::from_str(l).expect("transcript line is still JSON"))
        .collect();
    assert_eq!(lines[1]["content"], "GH_TOKEN is [REDACTED:github_token]\n");
    assert_eq!(
        lines[2]["content"],
        "key [REDACTED:anthropic_api_key] \u{1f600}"
    );
    let json_back: Value =
        serde_json::from_str(&cat(&env, "current:attachments/creds.json")).expect("still JSON");
    assert_eq!(json_back["a"], "[REDACTED:github_token]");
    for (where_, content) in all_objects(&env.store())
        .iter()
        .chain(plain_files(&env.store()).iter())
    {
        for piece in pieces {
            assert!(
                !contains(content, piece.as_bytes()),
                "{piece} is in {where_}"
            );
        }
    }
}

#[test]
fn secrets_in_manifest_fields_are_redacted_too() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let token = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8";
    let out = baton_in(
        &env,
        &ws,
        &[
            "save",
            "--brief",
            &s(&brief),
            "--summary",
            &format!("rotate {token}"),
            "--note",
            "DB_PASSWORD=Corr3ct-H0rse-Battery",
            "--meta",
            &format!("ci={token}"),
        ],
    );
    ok(out, "save");
    for (where_, content) in all_objects(&env.store())
        .iter()
        .chain(plain_files(&env.store()).iter())
    {
        for value in [token, "Corr3ct-H0rse-Battery"] {
            assert!(
                !contains(content, value.as_bytes()),
                "{value} is in {where_}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// 4. Invalid briefings, --no-brief, non-git workspaces
// ---------------------------------------------------------------------------------------

/// The skeleton follows the error line, each heading on a line of its own.
fn assert_skeleton(err: &str) {
    let lines: Vec<&str> = err.lines().collect();
    for heading in SKELETON_LINES {
        assert!(
            lines[1..].contains(&heading),
            "skeleton line {heading:?} missing:\n{err}"
        );
    }
}

#[test]
fn invalid_briefings_are_refused_and_write_nothing() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    // A bundle already there, so "nothing written" covers refs and the log.
    let brief = env.path().join("good.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    ok(
        baton_in(&env, &ws, &["save", "--brief", &s(&brief)]),
        "save",
    );
    let all = "## Objective, ## Current State, ## Next Steps";
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "no headings",
            b"Objective: ship it. State: half done. Next: finish.\n".to_vec(),
            format!("error: briefing is missing sections: {all}; "),
        ),
        (
            "missing one section",
            b"# Handoff\n\n## Objective\n\nShip.\n\n## Current State\n\nHalf.\n".to_vec(),
            "error: briefing is missing sections: ## Next Steps; ".to_string(),
        ),
        (
            "empty section",
            b"# Handoff\n\n## Objective\n\nShip.\n\n## Current State\n\n## Next Steps\n\n1. Go.\n"
                .to_vec(),
            "error: briefing is missing sections: ## Current State (empty); ".to_string(),
        ),
        (
            "only preamble",
            b"Sure! Here is the handoff you asked for:\n\n".to_vec(),
            format!("error: briefing is missing sections: {all}; "),
        ),
        (
            "empty file",
            Vec::new(),
            format!("error: briefing is empty; it needs sections: {all}; "),
        ),
    ];
    for (what, bytes, first_line) in &cases {
        let path = env.path().join("bad.md");
        fs::write(&path, bytes).expect("write");
        let before = snapshot_files(&env.store());
        let out = baton_in(&env, &ws, &["save", "--brief", &s(&path)]);
        assert_eq!(code(&out), 2, "{what}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{what}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(err.starts_with(first_line.as_str()), "{what}:\n{err}");
        assert_skeleton(&err);
        assert_eq!(
            snapshot_files(&env.store()),
            before,
            "{what}: store changed"
        );
        // The same from stdin, and with --json: one document, the skeleton in the hint.
        let out = baton_stdin(&env, &ws, &["--json", "save", "--brief", "-"], bytes);
        assert_eq!(code(&out), 2, "{what} (stdin)");
        let d = doc(&out);
        assert_eq!(d["error"]["code"], "usage");
        assert!(
            d["error"]["hint"]
                .as_str()
                .unwrap_or_default()
                .contains("## Next Steps\n"),
            "{d}"
        );
        assert_eq!(
            snapshot_files(&env.store()),
            before,
            "{what}: store changed"
        );
    }

    // Not UTF-8 (a UTF-16 file, as some shells write): refused, nothing written.
    let path = env.path().join("utf16.md");
    let utf16: Vec<u8> = [0xff, 0xfe]
        .into_iter()
        .chain(VALID_BRIEF.encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    fs::write(&path, &utf16).expect("write");
    let before = snapshot_files(&env.store());
    let out = baton_in(&env, &ws, &["save", "--brief", &s(&path)]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).starts_with("error: the briefing is not UTF-8 text"));
    assert_eq!(snapshot_files(&env.store()), before);

    // Neither --brief nor --no-brief, and no DIR: a usage error naming both.
    let out = baton_in(&env, &ws, &["save"]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("--brief") && err.contains("--no-brief"),
        "{err}"
    );
    // Both at once: clap refuses.
    let out = baton_in(&env, &ws, &["save", "--brief", &s(&brief), "--no-brief"]);
    assert_eq!(code(&out), 2);
    // A missing briefing file: not found, named.
    let out = baton_in(&env, &ws, &["save", "--brief", "no-such-brief.md"]);
    assert_ne!(code(&out), 0);
    assert!(
        stderr(&out).contains("no-such-brief.md"),
        "{}",
        stderr(&out)
    );
    assert_eq!(snapshot_files(&env.store()), before);
}

#[test]
fn non_utf8_briefing_also_offers_the_skeleton() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let path = env.path().join("latin1.md");
    fs::write(&path, b"# Handoff\n\n## Objective\n\nCaf\xe9\n").expect("write");
    let out = baton_in(&env, &ws, &["save", "--brief", &s(&path)]);
    assert_eq!(code(&out), 2);
    assert_skeleton(&stderr(&out));
}

#[test]
fn no_brief_and_non_git_workspaces() {
    let env = Env::new();
    env.init();
    // --no-brief in a git repository: evidence, no handoff.md.
    let repo = git_init(&env.path().join("repo"));
    commit(&repo, "f.txt", "f\n", "one");
    fs::write(repo.join("f.txt"), "changed\n").expect("write");
    let saved = json_in(&env, &repo, &["save", "--no-brief", "--from", "ci"]);
    let files = bundle_files(&env, "current");
    assert!(!files.contains_key("handoff.md"), "{files:?}");
    for path in [
        "context.md",
        "evidence/evidence.json",
        "evidence/unstaged.patch",
    ] {
        assert!(files.contains_key(path), "{path} missing: {files:?}");
    }
    assert!(
        !files.contains_key("evidence/staged.patch"),
        "empty patch stored"
    );
    let evidence: Value =
        serde_json::from_str(&cat(&env, "current:evidence/evidence.json")).expect("json");
    assert_eq!(
        evidence["git"]["unstaged"],
        json!([{ "path": "f.txt", "status": "modified" }])
    );
    assert_eq!(evidence["partial"], json!(["no upstream"]));
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["summary"], "", "no briefing, no --summary: no summary");
    assert_eq!(show["metadata"]["kind"], "handoff");
    assert_eq!(show["metadata"]["evidence.partial"], "no upstream");
    assert_eq!(saved["partial"], json!(["no upstream"]));
    // The kickoff of a handoff without briefing says so, and still compares.
    let kickoff = ok(baton_in(&env, &repo, &["resume"]), "resume");
    assert!(
        kickoff.contains("## Next Steps\n(not in this handoff)"),
        "{kickoff}"
    );
    assert!(kickoff.contains("- HEAD: same"), "{kickoff}");

    // A directory that is not a git repository, named as DIR: an explicitly partial
    // capture, and the save succeeds.
    let plain = env.write_tree("plain", &[("notes.txt", b"n\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let out = baton_in(
        &env,
        env.path(),
        &["save", "--brief", &s(&brief), &s(&plain)],
    );
    let id = ok(out.clone(), "save").trim().to_string();
    assert_eq!(id.len(), 64);
    assert!(
        stderr(&out).contains("note: partial workspace evidence: not a git repository"),
        "{}",
        stderr(&out)
    );
    let evidence: Value =
        serde_json::from_str(&cat(&env, "current:evidence/evidence.json")).expect("json");
    assert_eq!(evidence["partial"], json!(["not a git repository"]));
    assert_eq!(evidence["git"], Value::Null);
    assert_eq!(evidence["workspace"], canonical(&plain).as_str());
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["metadata"]["evidence.partial"], "not a git repository");
    assert_eq!(show["summary"], "Ship the thing.");
    let files = bundle_files(&env, "current");
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["context.md", "evidence/evidence.json", "handoff.md"]
    );
    let context = cat(&env, "current:context.md");
    assert!(
        context.contains("**Partial capture:** not a git repository."),
        "{context}"
    );
    assert!(
        context.contains("No git repository was captured."),
        "{context}"
    );
}

// ---------------------------------------------------------------------------------------
// 5. Kickoff budget degradation snapshots
// ---------------------------------------------------------------------------------------

const BUDGETS: [usize; 4] = [150, 300, 600, 2000];

/// A briefing with long sections; every line is distinct so that cuts are visible.
fn long_briefing() -> String {
    let mut text = String::from("# Handoff: streaming CSV export\n\n## Objective\n\n");
    for i in 1..=6 {
        text.push_str(&format!(
            "Objective line {i}: export monthly reports as CSV without loading every row into memory.\n"
        ));
    }
    text.push_str("\n## Current State\n\n");
    for i in 1..=12 {
        text.push_str(&format!(
            "- State {i}: the endpoint streams rows in pages of 500; page {i} was checked by hand.\n"
        ));
    }
    text.push_str("\n## Next Steps\n\n");
    for i in 1..=10 {
        text.push_str(&format!(
            "{i}. Step {i}: emit the columns in on-screen order and re-run the export test suite.\n"
        ));
    }
    text.push_str("\n## Open Questions\n\nShould empty reports produce a header row?\n");
    text
}

/// The long attachment path inside the bundle.
const LONG_DIR: &str =
    "a-rather-long-directory-name-for-generated-reports/and-another-deeply-nested-level";

/// Save the budget fixture: a fixed non-git workspace, fixed --from/--to/--summary, the
/// long briefing and an attachment with a path over 72 characters. Returns (env, ws, id).
fn budget_fixture() -> (Env, PathBuf, String) {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("README.txt", b"not a git repository\n")]);
    let attach = env.write_tree(
        "reports",
        &[(
            &format!("{LONG_DIR}/monthly-export-notes.txt"),
            b"Notes on the export format.\n",
        )],
    );
    let brief = env.path().join("brief.md");
    fs::write(&brief, long_briefing()).expect("write");
    let out = baton_in(
        &env,
        &ws,
        &[
            "save",
            "--brief",
            &s(&brief),
            "--from",
            "planner",
            "--to",
            "implementer",
            "--summary",
            "Stream the CSV export and fix the column order",
            "--attach",
            &s(&attach),
        ],
    );
    let id = ok(out, "save").trim().to_string();
    (env, ws, id)
}

/// The kickoff as text, rebuilt from `resume --json`.
fn kickoff_text(resume: &Value) -> String {
    let k = &resume["kickoff"];
    let mut text = k["header"]["text"].as_str().expect("header").to_string();
    for section in k["sections"].as_array().expect("sections") {
        text.push_str(&format!(
            "\n## {}\n{}",
            section["title"].as_str().expect("title"),
            section["text"].as_str().expect("text")
        ));
    }
    text
}

/// Replace what differs from run to run: the bundle id, the save time, and the sizes of
/// the two files that hold the (temporary) workspace path.
fn normalize_kickoff(text: &str, id: &str, created: &str) -> String {
    let mut text = text
        .replace(id, "<BUNDLE>")
        .replace(&id[..12], "<ID>")
        .replace(created, "<TIME>");
    for marker in ["context.md (", "evidence/evidence.json ("] {
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find(marker) {
            out.push_str(&rest[..i + marker.len()]);
            rest = &rest[i + marker.len()..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 {
                out.push_str("<N>");
            }
            rest = &rest[digits..];
        }
        out.push_str(rest);
        text = out;
    }
    text
}

fn snapshot_path(budget: usize) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("resume_budget_{budget}.txt"))
}

#[test]
fn kickoff_degrades_by_budget_like_the_snapshots() {
    let (env, ws, id) = budget_fixture();
    let created = json_ok(&env, &["show", &id])["created"]
        .as_str()
        .expect("created")
        .to_string();
    let update = std::env::var_os("BATON_UPDATE_SNAPSHOTS").is_some_and(|v| v == "1");
    let order = [
        "Next Steps",
        "Risks / Watch Out",
        "Open Questions",
        "Suggested Prompt For Next Agent",
        "Recent turns",
        "Current State",
        "Objective",
        "Workspace",
        "Files",
        "Left out to fit the budget",
    ];
    let ws_arg = s(&ws);
    let mut previous_tokens = 0;
    for budget in BUDGETS {
        let b = budget.to_string();
        let args = ["resume", "--budget", &b, "--workspace", &ws_arg];
        let resume = json_ok(&env, &args);
        // The same run twice gives the same output, in JSON and as text.
        assert_eq!(
            resume,
            json_ok(&env, &args),
            "budget {budget}: not deterministic"
        );
        let human = ok(baton_in(&env, env.path(), &args), "resume");
        assert_eq!(human, ok(baton_in(&env, env.path(), &args), "resume"));
        let text = kickoff_text(&resume);
        assert_eq!(human.trim_end(), text.trim_end(), "text and JSON differ");

        let k = &resume["kickoff"];
        let tokens = k["tokens"].as_u64().expect("tokens") as usize;
        assert_eq!(k["budget"], budget);
        assert!(tokens <= budget, "budget {budget}: {tokens} tokens");
        assert!(tokens >= previous_tokens, "a bigger budget gave less");
        previous_tokens = tokens;
        let header_tokens = k["header"]["tokens"].as_u64().expect("tokens") as usize;
        assert!(
            header_tokens <= budget / 4,
            "budget {budget}: header {header_tokens}"
        );
        let estimate = text.chars().count().div_ceil(4);
        assert!(
            estimate <= tokens,
            "budget {budget}: the text is {estimate} tokens"
        );
        let sections = k["sections"].as_array().expect("sections");
        let titles: Vec<&str> = sections
            .iter()
            .map(|s| s["title"].as_str().unwrap())
            .collect();
        // Sections keep their page order; Next Steps is always there.
        let positions: Vec<usize> = titles
            .iter()
            .map(|t| order.iter().position(|o| o == t).expect("known title"))
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{titles:?}");
        assert_eq!(titles.first(), Some(&"Next Steps"), "budget {budget}");
        // Sections are dropped whole from the bottom of the page before Next Steps is cut:
        // at most one section is cut, the last one kept, and Next Steps only when it is
        // the only one left. What was dropped is named, with a pointer, in "Left out".
        let truncated: Vec<bool> = sections
            .iter()
            .map(|s| s["truncated"].as_bool().expect("truncated"))
            .collect();
        let content = titles
            .iter()
            .filter(|t| **t != "Left out to fit the budget")
            .count();
        if let Some(first_cut) = truncated.iter().position(|t| *t) {
            assert_eq!(
                first_cut,
                content - 1,
                "budget {budget}: {titles:?} {truncated:?}"
            );
        }
        if truncated[0] {
            assert_eq!(
                content, 1,
                "budget {budget}: Next Steps cut before {titles:?}"
            );
        }
        // This briefing has no Risks, Suggested Prompt or transcript: the sections it
        // has are dropped from the end of the page first.
        let present: Vec<&str> = order
            .iter()
            .copied()
            .filter(|t| {
                !matches!(
                    *t,
                    "Risks / Watch Out"
                        | "Suggested Prompt For Next Agent"
                        | "Recent turns"
                        | "Left out to fit the budget"
                )
            })
            .collect();
        assert!(
            titles[..content] == present[..content],
            "sections are dropped from the end first: {titles:?}"
        );
        if content < present.len() {
            assert_eq!(titles.last(), Some(&"Left out to fit the budget"));
            let left = sections.last().unwrap()["text"].as_str().unwrap();
            for t in &present[content..] {
                assert!(
                    left.contains(t),
                    "budget {budget}: {t} not named in {left:?}"
                );
            }
        } else {
            assert_eq!(titles.len(), content, "nothing left out at {budget}");
        }
        // Every cut ends in a pointer to the full text, and every pointer resolves.
        for s in sections {
            let t = s["text"].as_str().unwrap();
            if s["truncated"] == true {
                assert!(
                    t.trim_end().ends_with(']'),
                    "a cut ends in a pointer: {t:?}"
                );
                assert!(t.contains("full text: baton "), "{t:?}");
            }
        }
        if k["header"]["truncated"] == true {
            let h = k["header"]["text"].as_str().unwrap();
            assert!(h.contains("full text: baton show "), "{h:?}");
        }
        for rev in text
            .split("baton cat ")
            .skip(1)
            .chain(text.split("baton show ").skip(1))
            .chain(text.split("baton search ").skip(1))
            .map(|rest| rest.split([':', ' ', ']', '\n']).next().unwrap_or(""))
        {
            assert!(rev.len() >= 8, "a pointer's REV is short: {rev:?}");
            ok(baton_in(&env, env.path(), &["show", rev]), rev);
        }
        match budget {
            2000 => {
                assert!(
                    truncated.iter().all(|t| !t),
                    "all fits in 2000: {truncated:?}"
                );
                assert_eq!(titles, present);
            }
            600 => {
                assert!(!truncated[0], "Next Steps is whole at 600");
                assert!(
                    titles.last() == Some(&"Left out to fit the budget"),
                    "{titles:?}"
                );
            }
            _ => {}
        }

        // The long attachment path is cut in the middle, keeping both ends.
        if budget == 2000 {
            let files = sections.iter().find(|s| s["title"] == "Files").unwrap();
            let files = files["text"].as_str().unwrap();
            let line = files
                .lines()
                .find(|l| l.contains("monthly-export-notes.txt"))
                .expect("the attachment is listed");
            assert!(
                line.starts_with("- attachments/reports/a-rather-long"),
                "{line}"
            );
            assert!(line.contains('…'), "{line}");
            let listed = line.split(" (").next().expect("listed path");
            assert!(!listed.contains(LONG_DIR), "{line}");
            let shown = line
                .trim_start_matches("- ")
                .split(" (")
                .next()
                .expect("path");
            assert_eq!(shown.chars().count(), 72, "{shown}");
            // Every pointer to a path that was not cut works as printed.
            for l in files.lines().filter(|l| !l.contains('…')) {
                let spec = l.rsplit(": baton cat ").next().expect("pointer");
                cat(&env, spec);
            }
        }

        let normalized = normalize_kickoff(&text, &id, &created);
        let path = snapshot_path(budget);
        if update {
            fs::create_dir_all(path.parent().unwrap()).expect("mkdir");
            fs::write(&path, &normalized).expect("write snapshot");
        } else {
            let expected = fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; run with BATON_UPDATE_SNAPSHOTS=1 to create it",
                    path.display()
                )
            });
            assert_eq!(
                normalized,
                expected,
                "kickoff at budget {budget} differs from {}",
                path.display()
            );
        }
    }
}

#[test]
fn every_kickoff_pointer_can_be_run_as_printed() {
    let (env, ws, _) = budget_fixture();
    let resume = json_ok(&env, &["resume", "--workspace", &s(&ws)]);
    let files = resume["kickoff"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["title"] == "Files")
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    for line in files.lines() {
        let spec = line.rsplit(": baton cat ").next().expect("pointer");
        let out = baton_in(&env, env.path(), &["cat", spec]);
        assert!(out.status.success(), "{line}: {}", stderr(&out));
    }
}

// ---------------------------------------------------------------------------------------
// 6. Transcript search
// ---------------------------------------------------------------------------------------

#[test]
fn transcript_search_pages_follow_the_cursor() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    // 130 matching events between non-matching ones, and a blank line.
    let mut transcript = String::new();
    let mut matching_lines = Vec::new();
    let mut line = 0;
    for i in 0..130 {
        if i % 3 == 0 {
            transcript.push_str(
                &json!({ "role": "assistant", "content": format!("nothing to see {i}") })
                    .to_string(),
            );
            transcript.push('\n');
            line += 1;
        }
        if i == 64 {
            transcript.push('\n');
            line += 1;
        }
        let event = json!({
            "role": "tool",
            "tool": "cargo",
            "content": format!("cargo test: Needle failure number {i} in parser::tests"),
        });
        transcript.push_str(&event.to_string());
        transcript.push('\n');
        line += 1;
        matching_lines.push(line);
    }
    let path = env.path().join("t.jsonl");
    fs::write(&path, &transcript).expect("write");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let with = ok(
        baton_in(
            &env,
            &ws,
            &["save", "--brief", &s(&brief), "--transcript", &s(&path)],
        ),
        "save",
    )
    .trim()
    .to_string();

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut sizes = Vec::new();
    loop {
        let mut args = vec!["search", with.as_str(), "needle PARSER"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let page = json_ok(&env, &args);
        assert_eq!(page["total_matches"], 130);
        assert_eq!(page["truncated_events"], 0);
        let hits = page["hits"].as_array().expect("hits");
        sizes.push(hits.len());
        for hit in hits {
            let content = hit["event"]["content"].as_str().expect("content");
            assert!(content.contains("Needle failure number"), "{hit}");
            seen.push(hit["line"].as_u64().expect("line") as usize);
        }
        let tokens: u64 = hits.iter().map(|h| h["tokens"].as_u64().unwrap()).sum();
        assert!(tokens <= 8000);
        // The same cursor gives the same page, and the text output names the cursor.
        assert_eq!(page, json_ok(&env, &args));
        let human = env.ok(&args);
        match page["next_cursor"].as_str() {
            Some(next) => {
                assert!(
                    human.contains(&format!("more with --cursor {next}")),
                    "{human}"
                );
                cursor = Some(next.to_string());
            }
            None => {
                assert!(!human.contains("--cursor"), "{human}");
                break;
            }
        }
        assert!(sizes.len() < 10, "the cursor does not advance");
    }
    assert_eq!(sizes, [50, 50, 30]);
    assert_eq!(seen, matching_lines, "every match once, in order");

    // Malformed cursors: usage errors.
    for bad in ["garbage", "c1.", "c1.0", "c1.-5", "c2.10", "c1.12x"] {
        let out = baton_in(
            &env,
            env.path(),
            &["search", &with, "needle", "--cursor", bad],
        );
        assert_eq!(code(&out), 2, "cursor {bad:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("malformed cursor"),
            "{}",
            stderr(&out)
        );
    }
    // A handoff without transcript: not found.
    ok(baton_in(&env, &ws, &["save", "--no-brief"]), "save");
    let out = baton_in(&env, env.path(), &["search", "current", "needle"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("has no transcript"),
        "{}",
        stderr(&out)
    );
    // The older handoff still answers by its id; an unknown revision is not found.
    assert_eq!(
        json_ok(&env, &["search", &with, "needle"])["total_matches"],
        130
    );
    let out = baton_in(&env, env.path(), &["search", &"ab".repeat(32), "needle"]);
    assert_eq!(code(&out), 3);
}

#[test]
fn invalid_transcripts_are_refused_before_anything_is_written() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let before = snapshot_files(&env.store());
    for (bad, line) in [
        ("{\"a\":1}\n[1,2]\n", 2),
        ("{\"a\":1}\n\n{not json\n", 3),
        ("\"just a string\"\n", 1),
    ] {
        let path = env.path().join("t.jsonl");
        fs::write(&path, bad).expect("write");
        let out = baton_in(
            &env,
            &ws,
            &["save", "--brief", &s(&brief), "--transcript", &s(&path)],
        );
        assert_eq!(code(&out), 2, "{bad:?}");
        assert!(
            stderr(&out).contains(&format!("transcript.jsonl line {line}:")),
            "{}",
            stderr(&out)
        );
        assert_eq!(snapshot_files(&env.store()), before);
    }
}

// ---------------------------------------------------------------------------------------
// 7. import-handoff
// ---------------------------------------------------------------------------------------

fn fixture(rel: &str) -> String {
    s(&Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/import")
        .join(rel))
}

/// A bundle of the history: its id, its parents and its `show --json` document.
type LogEntry = (String, Vec<String>, Value);

/// Import `rel` into a fresh store; returns the env, the import document and the log
/// (oldest first) as (id, parents, show document).
fn import_fixture(rel: &str) -> (Env, Value, Vec<LogEntry>) {
    let env = Env::new();
    env.init();
    let imported = json_ok(&env, &["import-handoff", &fixture(rel)]);
    let log = json_ok(&env, &["log"]);
    let mut bundles: Vec<LogEntry> = log["bundles"]
        .as_array()
        .expect("bundles")
        .iter()
        .map(|b| {
            let id = b["id"].as_str().expect("id").to_string();
            let show = json_ok(&env, &["show", &id]);
            let parents: Vec<String> = show["parents"]
                .as_array()
                .expect("parents")
                .iter()
                .map(|p| p.as_str().expect("parent").to_string())
                .collect();
            assert_eq!(b["parents"], show["parents"], "log and show agree");
            (id, parents, show)
        })
        .collect();
    bundles.reverse();
    (env, imported, bundles)
}

fn field<'a>(show: &'a Value, key: &str) -> &'a str {
    show[key].as_str().unwrap_or_default()
}

fn meta<'a>(show: &'a Value, key: &str) -> &'a str {
    show["metadata"][key].as_str().unwrap_or_default()
}

#[test]
fn import_prowl() {
    let (env, imported, bundles) = import_fixture("prowl");
    assert_eq!(imported["format"], "prowl");
    assert_eq!(imported["bundles"].as_array().map(Vec::len), Some(3));
    assert_eq!(bundles.len(), 3);
    // A chain: each bundle's parent is the one before it.
    assert!(bundles[0].1.is_empty());
    assert_eq!(bundles[1].1, [bundles[0].0.clone()]);
    assert_eq!(bundles[2].1, [bundles[1].0.clone()]);
    let who: Vec<(&str, &str)> = bundles
        .iter()
        .map(|(_, _, s)| (field(s, "from"), field(s, "to")))
        .collect();
    // current.md's from/to are the last transition of log.md.
    assert_eq!(
        who,
        [
            ("claude", "codex"),
            ("codex", "claude"),
            ("claude", "codex")
        ]
    );
    assert_eq!(
        field(&bundles[0].2, "summary"),
        "Add idempotency keys to the `POST /transfers` endpoint."
    );
    assert_eq!(
        field(&bundles[1].2, "summary"),
        "Finish replay handling for idempotent transfers and cover it with tests."
    );
    assert_eq!(field(&bundles[0].2, "created"), "2024-05-01T09:15:00Z");
    assert_eq!(field(&bundles[1].2, "created"), "2024-05-02T14:30:00Z");
    for (_, _, show) in &bundles {
        assert_eq!(meta(show, "import.format"), "prowl");
        assert!(!meta(show, "import.source").is_empty(), "{show}");
    }
    assert_eq!(
        meta(&bundles[0].2, "import.source"),
        "archive/2024-05-01T09-15-00-claude-to-codex.md"
    );
    // The last bundle carries the context and log too; the session excerpt goes to the
    // transition whose window it falls in (14:25 is before the 14:30 handoff).
    let last = files_of(&bundles[2].2);
    for path in ["handoff.md", "context.md", "log.md"] {
        assert!(last.contains_key(path), "{path}: {last:?}");
    }
    assert!(files_of(&bundles[1].2).contains_key("sessions/2024-05-02T14-25-10-pane-2.md"));
    assert_eq!(
        cat(&env, "current:handoff.md").as_bytes(),
        fs::read(fixture("prowl/.prowl/handoff/current.md")).expect("read")
    );
    assert_eq!(
        json_ok(&env, &["show", "current"])["id"],
        bundles[2].0.as_str()
    );
}

#[test]
fn import_frontmatter() {
    let (env, imported, bundles) = import_fixture("frontmatter");
    assert_eq!(imported["format"], "frontmatter");
    assert_eq!(bundles.len(), 4);
    let by_key: BTreeMap<&str, &LogEntry> = bundles
        .iter()
        .map(|b| (meta(&b.2, "frontmatter.id"), b))
        .collect();
    let keys: Vec<&str> = by_key.keys().copied().collect();
    assert_eq!(keys, ["api-2", "plan-1", "review-4", "ui-3"]);
    let id = |k: &str| by_key[k].0.clone();
    assert!(by_key["plan-1"].1.is_empty());
    assert_eq!(by_key["api-2"].1, [id("plan-1")]);
    assert_eq!(by_key["ui-3"].1, [id("plan-1")]);
    // Converging work: two parents, in the order the frontmatter lists them.
    assert_eq!(by_key["review-4"].1, [id("ui-3"), id("api-2")]);
    let review = &by_key["review-4"].2;
    assert_eq!(field(review, "from"), "reviewer");
    assert_eq!(field(review, "to"), "backend");
    assert_eq!(
        field(review, "summary"),
        "Export works end to end; blocked on the column-order mismatch"
    );
    assert_eq!(
        field(review, "note"),
        "Emit columns in the on-screen order (date, account, memo, debit, credit)"
    );
    assert_eq!(field(review, "created"), "2024-06-03T15:10:00Z");
    assert_eq!(meta(review, "frontmatter.status"), "blocked");
    assert_eq!(meta(review, "frontmatter.parent"), "ui-3,api-2");
    for (_, _, show) in &bundles {
        assert_eq!(meta(show, "import.format"), "frontmatter");
    }
    assert_eq!(
        json_ok(&env, &["show", "current"])["id"],
        id("review-4").as_str()
    );
    assert_eq!(
        cat(&env, &format!("{}:handoff.md", id("plan-1"))).as_bytes(),
        fs::read(fixture("frontmatter/2024-06-03T09-00-00-planner.md")).expect("read")
    );
}

#[test]
fn import_agent_bundles() {
    let (env, imported, bundles) = import_fixture("agent-bundle");
    assert_eq!(imported["format"], "agent-bundle");
    assert_eq!(bundles.len(), 1);
    let (_, parents, show) = &bundles[0];
    assert!(parents.is_empty());
    assert_eq!(field(show, "from"), "claude-code");
    assert_eq!(field(show, "to"), "codex");
    assert_eq!(
        field(show, "summary"),
        "Config loader parses TOML and env overrides; wiring into main is left"
    );
    assert_eq!(field(show, "created"), "2024-07-10T09:30:12Z");
    assert_eq!(meta(show, "import.format"), "agent-bundle");
    assert_eq!(meta(show, "manifest.id"), "ah-20240710-0930-k2");
    let files: Vec<String> = files_of(show).into_keys().collect();
    assert_eq!(
        files,
        [
            "artifacts/test-output.txt",
            "handoff.md",
            "manifest.json",
            "state.json",
            "transcript.jsonl"
        ]
    );
    // The imported transcript is searchable.
    let found = json_ok(&env, &["search", "current", ""]);
    assert!(found["total_matches"].as_u64().unwrap_or(0) > 0, "{found}");

    let (_, imported, bundles) = import_fixture("agent-bundles");
    assert_eq!(imported["format"], "agent-bundle");
    assert_eq!(bundles.len(), 2);
    assert_eq!(meta(&bundles[0].2, "manifest.id"), "ah-7f3a");
    assert_eq!(meta(&bundles[1].2, "manifest.id"), "ah-1c9e");
    assert!(bundles[0].1.is_empty());
    assert_eq!(bundles[1].1, [bundles[0].0.clone()]);
    assert_eq!(field(&bundles[0].2, "from"), "codex");
    assert_eq!(field(&bundles[0].2, "to"), "claude-code");
    assert_eq!(
        field(&bundles[1].2, "summary"),
        "Invoice totals now sum then round; ready for review"
    );
    for (_, _, show) in &bundles {
        assert_eq!(meta(show, "import.format"), "agent-bundle");
    }
}

#[test]
fn import_hangs_under_the_existing_current() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let before = ok(baton_in(&env, &ws, &["save", "--no-brief"]), "save")
        .trim()
        .to_string();
    let imported = json_ok(&env, &["import-handoff", &fixture("agent-bundles")]);
    let first = &imported["bundles"][0];
    assert_eq!(first["parents"], json!([before]));
    let current = imported["bundles"][1]["bundle"].as_str().expect("id");
    // Importing the same input again gives the same bundles on top of the new current;
    // the text output names the format as the metadata does.
    let human = env.ok(&["import-handoff", &fixture("agent-bundle")]);
    assert!(
        human.starts_with("Imported 1 handoff (agent-bundle); current is "),
        "{human}"
    );
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(show["parents"], json!([current]));
    let history = json_ok(&env, &["log"])["bundles"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert_eq!(history, 4);
    let audit = json_ok(&env, &["log", "--audit"]);
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["action"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        actions,
        ["save", "import-handoff", "import-handoff", "import-handoff"]
    );
}

#[test]
fn bad_imports_name_the_file_and_line_and_write_nothing() {
    let env = Env::new();
    env.init();
    json_ok(&env, &["import-handoff", &fixture("agent-bundle")]);
    // (fixture, the `path:line:` or path the message must name, words it must hold)
    let cases: [(&str, &str, &str); 11] = [
        (
            "frontmatter-cycle",
            "2024-05-01T10-00-00-claude.md:3:",
            "cycle",
        ),
        (
            "frontmatter-duplicate-id",
            "2024-05-01T11-00-00-codex.md:3:",
            "duplicate id `h1`",
        ),
        (
            "frontmatter-missing-id",
            "2024-05-01T10-00-00-claude.md:1:",
            "no `id`",
        ),
        (
            "frontmatter-parent-type",
            "2024-05-01T10-00-00-claude.md:3:",
            "`parent` must be",
        ),
        (
            "frontmatter-unknown-parent",
            "2024-05-01T11-00-00-codex.md:4:",
            "`h9`",
        ),
        (
            "frontmatter-unterminated",
            "2024-05-01T10-00-00-claude.md:1:",
            "never closed",
        ),
        (
            "frontmatter-yaml-syntax",
            "2024-05-01T10-00-00-claude.md:4:",
            "invalid YAML",
        ),
        ("manifest-invalid-json", "manifest.json:5:", "invalid JSON"),
        // The fault is the file's name, not a line in it.
        (
            "prowl-archive-name",
            "archive/yesterday-claude-to-codex.md:",
            "no parsable timestamp",
        ),
        (
            "transcript-not-object",
            "transcript.jsonl:3:",
            "not a JSON object",
        ),
        // No file at all: the directory is named, with the layouts understood.
        (
            "unrecognized-layout",
            "unrecognized-layout:",
            "recognised layouts",
        ),
    ];
    let listed: BTreeSet<String> = fs::read_dir(fixture("bad"))
        .expect("bad fixtures")
        .map(|e| e.expect("entry").file_name().into_string().expect("name"))
        .collect();
    let covered: BTreeSet<String> = cases.iter().map(|c| c.0.to_string()).collect();
    assert_eq!(listed, covered, "every bad fixture has a case");

    let before = snapshot_files(&env.store());
    for (name, location, words) in cases {
        let path = fixture(&format!("bad/{name}"));
        let out = baton_in(&env, env.path(), &["import-handoff", &path]);
        assert_eq!(code(&out), 2, "{name}: {}", stderr(&out));
        let err = stderr(&out);
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("error: {path}/"))
                || first.starts_with(&format!("error: {path}:")),
            "{name}: {first}"
        );
        assert!(first.contains(&format!("/{location}")), "{name}: {first}");
        assert!(first.contains(words), "{name}: {first}");
        assert_eq!(
            snapshot_files(&env.store()),
            before,
            "{name}: store changed"
        );
        let out = baton_in(&env, env.path(), &["--json", "import-handoff", &path]);
        assert_eq!(code(&out), 2);
        assert_eq!(doc(&out)["error"]["code"], "usage");
        assert_eq!(
            snapshot_files(&env.store()),
            before,
            "{name}: store changed"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Audit follow-ups: escapes, imports and flags
// ---------------------------------------------------------------------------------------

#[test]
fn tokens_after_json_escapes_and_in_from_to_are_redacted() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let transcript = env.path().join("t.jsonl");
    let openai = "sk-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6Kl9No2Qr5T";
    let npm = "npm_UniqueNpmToken0123456789abcdefghijkl";
    fs::write(
        &transcript,
        format!("{{\"out\":\"x\\n{openai}\\t{npm}\"}}\n"),
    )
    .expect("write");
    let aws = "AKIAQ7RZ3K5M2N8P4T6W";
    let out = baton_in(
        &env,
        &ws,
        &[
            "save",
            "--no-brief",
            "--transcript",
            &s(&transcript),
            "--from",
            aws,
            "--secrets",
            "block",
        ],
    );
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    ok(
        baton_in(
            &env,
            &ws,
            &[
                "save",
                "--no-brief",
                "--transcript",
                &s(&transcript),
                "--from",
                aws,
            ],
        ),
        "save",
    );
    for (where_, content) in all_objects(&env.store())
        .iter()
        .chain(plain_files(&env.store()).iter())
    {
        for value in [openai, npm, aws] {
            assert!(!contains(content, value.as_bytes()), "{value} in {where_}");
        }
    }
}

#[test]
fn imported_material_is_scanned_for_secrets() {
    let env = Env::new();
    env.init();
    let dir = env.path().join("fm");
    fs::create_dir_all(&dir).expect("mkdir");
    let token = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8";
    fs::write(
        dir.join("2024-05-01T10-00-00-claude.md"),
        format!(
            "---\nid: a1\nparent: null\nagent: claude\nstatus: completed\nsummary: rotate {token}\nnext_agent: codex\nnext_task: deploy\n---\n\n## Context\npassword=Hunter2Hunter2\n\n## Output\ndone\n"
        ),
    )
    .expect("write");
    let before = snapshot_files(&env.store());
    let out = baton_in(
        &env,
        env.path(),
        &["import-handoff", &s(&dir), "--secrets", "block"],
    );
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert_eq!(snapshot_files(&env.store()), before, "block writes nothing");
    let doc = json_in(&env, env.path(), &["import-handoff", &s(&dir)]);
    assert_eq!(doc["ok"], true, "{doc}");
    assert!(
        doc["secrets"]["github_token"].as_u64().unwrap_or(0) >= 1,
        "{doc}"
    );
    for (where_, content) in all_objects(&env.store())
        .iter()
        .chain(plain_files(&env.store()).iter())
    {
        for value in [token, "Hunter2Hunter2"] {
            assert!(!contains(content, value.as_bytes()), "{value} in {where_}");
        }
    }
}

#[test]
fn handoff_options_without_a_handoff_are_refused() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("f.txt", b"x\n")]);
    let before = snapshot_files(&env.store());
    for extra in [
        vec!["--transcript", "t.jsonl"],
        vec!["--attach", "f.txt"],
        // --secrets now applies to plain snapshots too; --no-ignore is a snapshot's only.
        vec!["--no-brief", "--no-ignore"],
    ] {
        let mut args = vec!["save", "."];
        args.extend(extra);
        let out = baton_in(&env, &ws, &args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
    }
    assert_eq!(snapshot_files(&env.store()), before);
}

// ---------------------------------------------------------------------------------------
// Terminal control sequences in stored text
// ---------------------------------------------------------------------------------------

/// Every string value in a JSON document.
fn json_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| json_strings(x, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            out.push(k.clone());
            json_strings(x, out)
        }),
        _ => {}
    }
}

/// A summary, agent names, a file name and a briefing holding an OSC title change
/// (ESC ] 0; ... BEL), a screen clear (ESC [2J) and a CSI (U+009B): `log`, `show` and
/// `resume` print them as visible escapes (they reached the terminal raw before), errors
/// too, while `--json` keeps the exact strings.
#[test]
fn control_sequences_never_reach_the_terminal_raw() {
    let env = Env::new();
    env.init();
    let osc = "\u{1b}]0;owned\u{7}";
    let clear = "\u{1b}[2J";
    let name = format!("notes{osc}.txt");
    let ws = env.write_tree("ws", &[(name.as_str(), b"x\n")]);
    let brief = env.path().join("brief.md");
    fs::write(
        &brief,
        format!(
            "# Handoff\n\n## Objective\n\nShip {clear}it{osc} now.\n\n## Current State\n\n\
             Half done\u{9b}31m.\n\n## Next Steps\n\n1. Finish {osc}.\n"
        ),
    )
    .expect("write");
    let from = format!("alice{osc}");
    let to = format!("bob{clear}");
    let summary = format!("fix{osc}{clear}\r\u{7f}");
    ok(
        baton_in(
            &env,
            &ws,
            &[
                "save",
                "--brief",
                &s(&brief),
                "--from",
                &from,
                "--to",
                &to,
                "--summary",
                &summary,
                "--attach",
                &s(&ws.join(&name)),
            ],
        ),
        "save",
    );
    let raw = |bytes: &[u8]| {
        bytes.iter().any(|b| matches!(b, 0x1b | 0x07 | 0x0d | 0x7f))
            || String::from_utf8_lossy(bytes).contains('\u{9b}')
    };
    for args in [
        &["log"][..],
        &["show", "current"],
        &["resume", "current"],
        &["log", "--audit"],
    ] {
        let out = baton_in(&env, &ws, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(
            !raw(&out.stdout),
            "{args:?} printed raw: {:?}",
            stdout(&out)
        );
        assert!(!raw(&out.stderr), "{args:?} stderr raw: {:?}", stderr(&out));
        let text = stdout(&out);
        if args[0] != "log" || args.len() == 1 {
            assert!(text.contains("\\x1b]0;owned\\x07"), "{args:?}: {text}");
        }
    }
    let out = baton_in(&env, &ws, &["show", "current"]);
    assert!(stdout(&out).contains("notes\\x1b]0;owned\\x07.txt"));
    // An error quoting the input escapes it too.
    let out = baton_in(&env, &ws, &["cat", &format!("current:{name}x")]);
    assert_ne!(code(&out), 0);
    assert!(!raw(&out.stderr), "error printed raw: {:?}", stderr(&out));

    // --json is exact.
    for args in [&["log"][..], &["show", "current"], &["resume", "current"]] {
        let mut strings = Vec::new();
        json_strings(&json_in(&env, &ws, args), &mut strings);
        for exact in [&from, &to, &summary] {
            assert!(
                strings.iter().any(|s| s.contains(exact.as_str())),
                "{args:?} lacks {exact:?}: {strings:?}"
            );
        }
        if args[0] == "show" {
            assert!(
                strings.iter().any(|s| s.ends_with(&name)),
                "{args:?} lacks the file name"
            );
        }
        if args[0] == "resume" {
            assert!(
                strings
                    .iter()
                    .any(|s| s.contains(&format!("Ship {clear}it{osc}"))),
                "resume --json lacks the exact briefing"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// baton skill: the skill file in a harness's configuration
// ---------------------------------------------------------------------------------------

#[test]
fn skill_install_is_idempotent_and_never_overwrites_an_edit_without_force() {
    let env = Env::new();
    let claude = env.path().join("claude-config");
    let run = |args: &[&str]| {
        let out = env
            .cmd()
            .env("CLAUDE_CONFIG_DIR", &claude)
            .args(args)
            .output()
            .expect("run baton");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code(), doc)
    };
    let skill = claude.join("skills/baton/SKILL.md");
    let (code, doc) = run(&["--json", "skill", "install", "--harness", "claude-code"]);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(doc["changes"][0]["action"], "installed", "{doc}");
    let text = fs::read_to_string(&skill).expect("SKILL.md written under CLAUDE_CONFIG_DIR");
    assert!(
        text.starts_with("---\nname: baton\ndescription: "),
        "{text}"
    );
    assert!(text.contains("--transcript claude-code:latest"), "{text}");
    assert!(text.contains("baton resume"), "{text}");
    let mode = fs::metadata(&skill).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let (code, doc) = run(&["--json", "skill", "install", "--harness", "claude-code"]);
    assert_eq!(
        (code, &doc["changes"][0]["action"]),
        (Some(0), &json!("unchanged"))
    );
    let (_, doc) = run(&["--json", "skill", "status", "--harness", "claude-code"]);
    assert_eq!(doc["skills"][0]["state"], "current", "{doc}");
    assert_eq!(doc["skills"][1]["state"], "absent", "{doc}");

    let edited = format!("{text}\nMy own note.\n");
    fs::write(&skill, &edited).unwrap();
    let (_, doc) = run(&[
        "--json",
        "skill",
        "status",
        "--harness",
        "claude-code",
        "--scope",
        "user",
    ]);
    assert_eq!(doc["skills"][0]["state"], "modified", "{doc}");
    for args in [
        &["--json", "skill", "install", "--harness", "claude-code"][..],
        &["--json", "skill", "remove", "--harness", "claude-code"][..],
    ] {
        let (code, doc) = run(args);
        assert_eq!(code, Some(5), "{args:?}: {doc}");
        assert!(
            doc["error"]["hint"].as_str().unwrap().contains("--force"),
            "{doc}"
        );
        assert_eq!(
            fs::read_to_string(&skill).unwrap(),
            edited,
            "{args:?} touched the edit"
        );
    }
    let (code, doc) = run(&[
        "--json",
        "skill",
        "install",
        "--harness",
        "claude-code",
        "--force",
    ]);
    assert_eq!(
        (code, &doc["changes"][0]["action"]),
        (Some(0), &json!("updated"))
    );
    assert_eq!(fs::read_to_string(&skill).unwrap(), text);

    let (code, doc) = run(&["--json", "skill", "remove", "--harness", "claude-code"]);
    assert_eq!(
        (code, &doc["changes"][0]["action"]),
        (Some(0), &json!("removed"))
    );
    assert!(
        !claude.join("skills/baton").exists(),
        "the skill directory stays behind"
    );
}

#[test]
fn codex_skill_and_agents_md_section_install_into_the_project_and_come_out_cleanly() {
    let env = Env::new();
    let project = git_init(&env.path().join("proj"));
    let sub = project.join("src/deep");
    fs::create_dir_all(&sub).unwrap();
    let agents = project.join("AGENTS.md");
    let rules = "# Project rules\n\nRun the tests before you commit.\n";
    fs::write(&agents, rules).unwrap();
    let run = |args: &[&str]| {
        let out = env
            .cmd()
            .current_dir(&sub)
            .args(args)
            .output()
            .expect("run baton");
        assert!(
            out.status.success(),
            "baton {args:?}: {}",
            common::text(&out)
        );
    };
    // From a subdirectory: the project is the top of the work tree.
    run(&[
        "skill",
        "install",
        "--harness",
        "codex",
        "--scope",
        "project",
        "--agents-md",
    ]);
    let skill = fs::read_to_string(project.join(".agents/skills/baton/SKILL.md")).unwrap();
    assert!(skill.contains("--transcript codex:latest"), "{skill}");
    let with_section = fs::read_to_string(&agents).unwrap();
    assert!(with_section.starts_with(rules), "{with_section}");
    assert!(with_section.contains("baton resume"), "{with_section}");
    run(&[
        "skill",
        "install",
        "--harness",
        "codex",
        "--scope",
        "project",
        "--agents-md",
    ]);
    assert_eq!(
        fs::read_to_string(&agents).unwrap(),
        with_section,
        "not idempotent"
    );

    run(&[
        "skill",
        "remove",
        "--harness",
        "codex",
        "--scope",
        "project",
    ]);
    assert_eq!(fs::read_to_string(&agents).unwrap(), rules);
    assert!(!project.join(".agents/skills/baton").exists());
    // Nothing went to the user's own Codex home.
    assert!(!env.path().join(".codex").exists());
}

// ---------------------------------------------------------------------------------------
// Native transcripts: Claude Code and Codex sessions found and normalised
// ---------------------------------------------------------------------------------------

/// Claude Code's project directory name for a workspace.
fn claude_project_dir(workspace: &Path) -> String {
    s(workspace)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Copy a fixture session to `dest`, naming the workspaces, with the given age in hours.
fn plant_session(fixture: &str, dest: &Path, workspace: &Path, other: &Path, hours_old: u64) {
    let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture))
        .expect("fixture")
        .replace("{{WORKSPACE}}", &s(workspace))
        .replace("{{OTHER}}", &s(other));
    fs::create_dir_all(dest.parent().unwrap()).unwrap();
    fs::write(dest, text).unwrap();
    let when = SystemTime::now() - std::time::Duration::from_secs(hours_old * 3600);
    fs::File::options()
        .write(true)
        .open(dest)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

#[test]
fn native_sessions_are_found_normalised_paired_and_scrubbed() {
    let env = Env::new();
    let ws = git_init(&env.path().join("ws"));
    let ws = fs::canonicalize(&ws).unwrap();
    let other = env.path().join("other");
    fs::create_dir_all(&other).unwrap();
    let projects = env.path().join(".claude/projects");
    let here = projects.join(claude_project_dir(&ws));
    plant_session(
        "fixtures/transcripts/claude-code/main.jsonl",
        &here.join("5e551011-aaaa-4bbb-8ccc-000000000001.jsonl"),
        &ws,
        &other,
        2,
    );
    plant_session(
        "fixtures/transcripts/claude-code/older.jsonl",
        &here.join("01de0000-aaaa-4bbb-8ccc-000000000002.jsonl"),
        &ws,
        &other,
        48,
    );
    plant_session(
        "fixtures/transcripts/claude-code/other.jsonl",
        &projects
            .join(claude_project_dir(&other))
            .join("07e40000-aaaa-4bbb-8ccc-000000000003.jsonl"),
        &ws,
        &other,
        1,
    );
    plant_session(
        "fixtures/transcripts/codex/rollout-main.jsonl",
        &env.path()
            .join(".codex/sessions/2026/11/30/rollout-2026-11-30T13-00-00-019a2d7a.jsonl"),
        &ws,
        &other,
        3,
    );
    let in_ws = |args: &[&str]| {
        let out = env
            .cmd()
            .current_dir(&ws)
            .args(args)
            .output()
            .expect("run baton");
        (out.status.code(), common::text(&out), out.stdout)
    };
    let store = s(&ws.join(".baton"));
    let (code, text, _) = in_ws(&["init"]);
    assert_eq!(code, Some(0), "{text}");

    // Sources: this workspace's sessions only, newest first per harness.
    let (code, _, stdout) = in_ws(&["--json", "transcript", "sources"]);
    assert_eq!(code, Some(0));
    let doc: Value = serde_json::from_slice(&stdout).unwrap();
    let listed: Vec<(&str, &str)> = doc["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["harness"].as_str().unwrap(),
                s["session"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            ("claude-code", "5e551011-aaaa-4bbb-8ccc-000000000001"),
            ("claude-code", "01de0000-aaaa-4bbb-8ccc-000000000002"),
            ("codex", "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"),
        ]
    );

    // latest: the newest session of this workspace (not the newer one elsewhere).
    let (code, text, _) = in_ws(&["save", "--no-brief", "--transcript", "claude-code:latest"]);
    assert_eq!(code, Some(0), "{text}");
    let shown = env.ok(&["--store", &store, "show", "current"]);
    assert!(
        shown.contains("claude-code:5e551011-aaaa-4bbb-8ccc-000000000001"),
        "{shown}"
    );
    assert!(
        shown.contains("attachments/transcript/claude-code-5e551011"),
        "{shown}"
    );
    let env_ws = |args: &[&str]| {
        let mut full = vec!["--store", store.as_str()];
        full.extend_from_slice(args);
        env.ok(&full)
    };
    let events: Vec<Value> = env_ws(&["cat", "current:transcript.jsonl"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shape: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e["role"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shape,
        vec![
            ("system", "system"),
            ("user", "message"),
            ("assistant", "reasoning"),
            ("assistant", "tool_call"),
            ("tool", "tool_result"),
            ("assistant", "message"),
            ("assistant", "message"),
            ("user", "message"),
        ]
    );
    assert_eq!(
        events[4]["tool"], "Bash",
        "the result is paired with its call"
    );
    assert_eq!(events[4]["call_id"], events[3]["call_id"]);
    assert_eq!(
        events[5]["source"]["agent"], "a1b2c3d4",
        "sidechain work is marked"
    );
    assert!(
        events
            .iter()
            .all(|e| e["v"] == 1 && e["source"]["harness"] == "claude-code")
    );
    let secret = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa";
    assert!(
        events[4]["text"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:anthropic_api_key]")
    );
    for (where_, bytes) in all_objects(&ws.join(".baton")) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "the secret is stored in {where_}"
        );
    }

    // Search matches what was said, never ids; filters narrow by kind and tool.
    let page = json_ok(&env, &["--store", &store, "search", "current", "5e551011"]);
    assert_eq!(page["total_matches"], 0, "{page}");
    let page = json_ok(
        &env,
        &[
            "--store",
            &store,
            "search",
            "current",
            "golden",
            "--kind",
            "tool_result",
            "--tool",
            "bash",
        ],
    );
    assert_eq!(page["total_matches"], 1, "{page}");
    assert_eq!(page["hits"][0]["event"]["kind"], "tool_result");

    // A session by id prefix; Codex rollouts without their preambles and duplicates.
    let (code, text, _) = in_ws(&["save", "--no-brief", "--transcript", "claude-code:01de0000"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(transcript_events_in(&env, &ws).len(), 1);
    let (code, text, _) = in_ws(&["save", "--no-brief", "--transcript", "codex:latest"]);
    assert_eq!(code, Some(0), "{text}");
    let events = transcript_events_in(&env, &ws);
    let texts: Vec<&str> = events.iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(
        texts[0],
        "Regenerate the golden file and rerun the parser tests."
    );
    assert_eq!(events.len(), 5, "{texts:?}");
    assert_eq!(events[3]["tool"], "shell");
    assert!(
        texts
            .iter()
            .all(|t| !t.contains("environment_context") && !t.contains("opaque"))
    );

    // An unknown schema is refused with file and line; the store does not change.
    let before = env_ws(&["log", "--json"]);
    let unknown = here.join("0dd00000-aaaa-4bbb-8ccc-000000000004.jsonl");
    plant_session(
        "fixtures/transcripts/claude-code/unknown.jsonl",
        &unknown,
        &ws,
        &other,
        0,
    );
    let (code, text, _) = in_ws(&["save", "--no-brief", "--transcript", "claude-code:latest"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(&format!("{} line 2", unknown.display())),
        "{text}"
    );
    assert!(text.contains("'hologram'"), "{text}");
    assert_eq!(env_ws(&["log", "--json"]), before);

    // A file being appended to: the incomplete last line is left out.
    let growing = env.path().join("growing.jsonl");
    let mut bytes = fs::read(here.join("01de0000-aaaa-4bbb-8ccc-000000000002.jsonl")).unwrap();
    bytes
        .extend_from_slice(b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"half");
    fs::write(&growing, bytes).unwrap();
    let (code, text, _) = in_ws(&["save", "--no-brief", "--transcript", &s(&growing)]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(transcript_events_in(&env, &ws).len(), 1);
}

fn transcript_events_in(env: &Env, ws: &Path) -> Vec<Value> {
    env.ok(&[
        "--store",
        &s(&ws.join(".baton")),
        "cat",
        "current:transcript.jsonl",
    ])
    .lines()
    .map(|l| serde_json::from_str(l).expect("event"))
    .collect()
}

// ---------------------------------------------------------------------------------------
// baton mcp: driven by the official Python MCP SDK's stdio client
// ---------------------------------------------------------------------------------------

#[test]
fn mcp_server_serves_a_real_client_save_resume_search_and_tool_errors() {
    let has_sdk = std::process::Command::new("python3")
        .args(["-c", "import mcp.client.stdio"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "needs python3 with the MCP SDK: pip install mcp==2.3.0 (.ci/run installs it)"
    );
    let env = Env::new();
    let ws = git_init(&env.path().join("ws"));
    let ws = fs::canonicalize(&ws).unwrap();
    fs::write(ws.join("notes.txt"), "notes\n").unwrap();
    fs::write(env.path().join("outside.txt"), "not yours\n").unwrap();
    plant_session(
        "fixtures/transcripts/claude-code/main.jsonl",
        &env.path()
            .join(".claude/projects")
            .join(claude_project_dir(&ws))
            .join("5e551011-aaaa-4bbb-8ccc-000000000001.jsonl"),
        &ws,
        &ws,
        1,
    );
    assert!(
        env.cmd()
            .current_dir(&ws)
            .arg("init")
            .status()
            .unwrap()
            .success()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_baton"))
        .arg(&ws)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", env.path())
        .current_dir(&ws)
        .output()
        .expect("run the MCP client");
    assert!(
        out.status.success(),
        "MCP client failed: {}",
        common::text(&out)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["server"], "baton");
    assert_eq!(
        doc["tools"],
        json!([
            "log",
            "pull",
            "push",
            "resume",
            "save_handoff",
            "search",
            "show"
        ])
    );
    let save = &doc["save"];
    assert_eq!(save["error"], false, "{save}");
    let bundle = save["structured"]["bundle"].as_str().unwrap();
    let files = save["structured"]["files"].to_string();
    assert!(
        files.contains("attachments/notes.txt") && files.contains("transcript.jsonl"),
        "{files}"
    );

    let resume = &doc["resume"];
    assert_eq!(resume["error"], false, "{resume}");
    assert_eq!(resume["structured"]["bundle"], bundle);
    assert!(resume["structured"]["kickoff"]["tokens"].as_u64().unwrap() <= 1500);
    let text = resume["text"].as_str().unwrap();
    assert!(
        text.contains("## Next Steps") && text.contains("## Risks / Watch Out"),
        "{text}"
    );
    assert!(text.contains("## Recent turns"), "{text}");
    assert!(
        resume["structured"]["workspace"].is_object(),
        "the comparison is structured"
    );

    let search = &doc["search"]["structured"];
    assert_eq!(search["total_matches"], 1, "{search}");
    assert_eq!(search["hits"][0]["event"]["kind"], "tool_result");
    assert_eq!(doc["log"]["structured"]["bundles"][0]["id"], bundle);

    // Errors come back as tool errors carrying baton's stable codes.
    for (call, code, exit) in [
        ("bad_rev", "not_found", 3),
        ("outside", "security", 6),
        ("bad_kind", "usage", 2),
    ] {
        let r = &doc[call];
        assert_eq!(r["error"], true, "{call}: {r}");
        assert_eq!(r["structured"]["error"]["code"], code, "{call}: {r}");
        assert_eq!(r["structured"]["error"]["exit_code"], exit, "{call}: {r}");
    }
    // The refused save wrote nothing: one bundle in the log.
    let log = json_ok(&env, &["--store", &s(&ws.join(".baton")), "log"]);
    assert_eq!(log["bundles"].as_array().unwrap().len(), 1, "{log}");
}

// ---------------------------------------------------------------------------------------
// Issue 12: a kickoff that keeps its promises
// ---------------------------------------------------------------------------------------

#[test]
fn the_note_is_shown_by_log_and_resume() {
    let env = Env::new();
    env.init();
    let ws = env.write_tree("ws", &[("a.txt", b"a\n")]);
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let note = "ran the suite twice; second run flaky";
    ok(
        baton_in(
            &env,
            &ws,
            &["save", "--brief", &s(&brief), "--note", note, &s(&ws)],
        ),
        "save",
    );
    let log = ok(baton_in(&env, env.path(), &["log"]), "log");
    assert!(log.contains(&format!("Note: {note}")), "{log}");
    let log = json_ok(&env, &["log"]);
    assert_eq!(log["bundles"][0]["note"], note, "{log}");
    let kickoff = ok(baton_in(&env, &ws, &["resume"]), "resume");
    let header = kickoff.split("\n## ").next().unwrap_or("");
    assert!(header.contains(&format!("Note: {note}")), "{kickoff}");
    let resume = json_ok(&env, &["resume"]);
    let header = resume["kickoff"]["header"]["text"]
        .as_str()
        .expect("header");
    assert!(header.contains(note), "{resume}");
}

#[test]
fn a_budget_below_the_floor_is_refused() {
    let (env, ws, _) = budget_fixture();
    let before = snapshot_files(&env.store());
    for budget in ["0", "10", "99"] {
        let out = baton_in(&env, &ws, &["resume", "--budget", budget]);
        assert_eq!(code(&out), 2, "budget {budget}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("below the floor of 100"), "{err}");
        assert!(stdout(&out).is_empty(), "nothing printed: {}", stdout(&out));
    }
    let err = common::json_err(&env, &["resume", "--budget", "50"], 2);
    assert_eq!(err["code"], "usage", "{err}");
    assert_eq!(
        snapshot_files(&env.store()),
        before,
        "the store is unchanged"
    );
    // The floor itself renders the header and a Next Steps line ending in its pointer.
    let k = json_in(&env, &ws, &["resume", "--budget", "100"]);
    assert!(k["kickoff"]["tokens"].as_u64().unwrap() <= 100, "{k}");
    let text = kickoff_text(&k);
    assert!(text.starts_with("# Handoff "), "{text}");
    assert!(text.contains("## Next Steps\n1. Step 1"), "{text}");
    assert!(text.contains("full text: baton cat "), "{text}");
}

#[test]
fn a_no_brief_kickoff_points_at_the_last_briefing() {
    let env = Env::new();
    env.init();
    let repo = git_init(&env.path().join("repo"));
    commit(&repo, "f.txt", "f\n", "one");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let first = ok(
        baton_in(&env, &repo, &["save", "--brief", &s(&brief)]),
        "save",
    )
    .trim()
    .to_string();
    ok(baton_in(&env, &repo, &["save", "--no-brief"]), "save");
    ok(baton_in(&env, &repo, &["save", "--no-brief"]), "save");
    let kickoff = ok(baton_in(&env, &repo, &["resume"]), "resume");
    let rev = &first[..12];
    let expected = format!(
        "## Next Steps\n(no briefing in this handoff; the last one is in {rev}: baton cat {rev}:handoff.md)\nFrom {rev}:\n1. Finish it.\n"
    );
    assert!(kickoff.contains(&expected), "{kickoff}");
    assert!(!kickoff.contains("(not in this handoff)"), "{kickoff}");
    assert!(
        kickoff.contains(&format!("## Current State\nFrom {rev}:\nHalf done.")),
        "{kickoff}"
    );
    // The pointer can be run as printed.
    assert_eq!(cat(&env, &format!("{rev}:handoff.md")), VALID_BRIEF);
}

#[test]
fn importing_the_same_directory_twice_adds_nothing() {
    for rel in ["prowl", "frontmatter", "agent-bundles"] {
        let env = Env::new();
        env.init();
        let first = json_ok(&env, &["import-handoff", &fixture(rel)]);
        let count = first["bundles"].as_array().map(Vec::len);
        let head = json_ok(&env, &["show", "current"])["id"].clone();
        let log = json_ok(&env, &["log"])["bundles"].as_array().map(Vec::len);
        let out = baton_in(&env, env.path(), &["import-handoff", &fixture(rel)]);
        let text = ok(out, "second import");
        assert!(
            text.starts_with("0 handoffs imported (already imported: "),
            "{rel}: {text}"
        );
        let again = json_ok(&env, &["import-handoff", &fixture(rel)]);
        assert_eq!(again["bundles"].as_array().map(Vec::len), Some(0), "{rel}");
        assert_eq!(
            again["already_imported"].as_array().map(Vec::len),
            count,
            "{rel}"
        );
        assert_eq!(json_ok(&env, &["show", "current"])["id"], head, "{rel}");
        assert_eq!(
            json_ok(&env, &["log"])["bundles"].as_array().map(Vec::len),
            log,
            "{rel}"
        );
    }
}

#[test]
fn a_replaced_prowl_briefing_is_not_an_agent() {
    let env = Env::new();
    env.init();
    let dir = env.path().join("proj/.prowl/handoff");
    fs::create_dir_all(dir.join("archive")).expect("mkdir");
    fs::write(
        dir.join("log.md"),
        "2024-05-01T09:00:00Z handoff ann -> bob (current.md)\n\
         2024-05-01T12:00:00Z handoff bob -> cy (current.md)\n",
    )
    .expect("write");
    fs::write(
        dir.join("archive/2024-05-01T12-00-00Z-replaced-current.md"),
        "## Objective\nold\n",
    )
    .expect("write");
    fs::write(dir.join("current.md"), "## Objective\nnew\n").expect("write");
    json_ok(&env, &["import-handoff", &s(&env.path().join("proj"))]);
    let old = json_ok(&env, &["show", "current~1"]);
    assert_eq!((field(&old, "from"), field(&old, "to")), ("ann", "bob"));
    let new = json_ok(&env, &["show", "current"]);
    assert_eq!((field(&new, "from"), field(&new, "to")), ("bob", "cy"));
    assert_eq!(field(&new, "created"), "2024-05-01T12:00:00Z");
}

#[test]
fn frontmatter_status_and_next_task_lead_the_kickoff() {
    let (env, _, _) = import_fixture("frontmatter");
    // review-4: `status: blocked`, a `## Blockers` section, a `next_task`.
    let text = ok(baton_in(&env, env.path(), &["resume"]), "resume");
    assert!(text.contains("\nStatus: blocked\n"), "{text}");
    let blockers = text.find("## Blockers\n- The CSV puts `memo` last");
    let next = text.find(
        "## Next Steps\nEmit columns in the on-screen order (date, account, memo, debit, credit)\n",
    );
    assert!(blockers.is_some() && next.is_some(), "{text}");
    assert!(blockers < next, "Blockers first: {text}");
    assert!(text.find("\n## ") == blockers.map(|b| b - 1), "{text}");
    assert!(!text.contains("(no briefing in this handoff"), "{text}");
    assert!(!text.contains("Note: Emit columns"), "said once: {text}");
    let log = ok(baton_in(&env, env.path(), &["log"]), "log");
    assert!(log.contains("Status:  blocked"), "{log}");
    let json = json_ok(&env, &["log"]);
    assert_eq!(json["bundles"][0]["status"], "blocked");

    // needs_discussion: the open question comes first.
    let env = Env::new();
    env.init();
    let dir = env.path().join("handoffs");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(
        dir.join("2024-06-03T09-00-00-planner.md"),
        "---\nid: q1\nstatus: needs_discussion\nquestion: Keep the v1 API or break it?\n\
         next_task: Decide with the team\n---\n\n## Context\nTwo options.\n",
    )
    .expect("write");
    json_ok(&env, &["import-handoff", &s(&dir)]);
    let text = ok(baton_in(&env, env.path(), &["resume"]), "resume");
    assert!(text.contains("\nStatus: needs_discussion\n"), "{text}");
    let question = text.find("## Open Questions\nKeep the v1 API or break it?\n");
    let next = text.find("## Next Steps\nDecide with the team\n");
    assert!(question.is_some() && next.is_some(), "{text}");
    assert!(question < next, "question first: {text}");
}

#[test]
fn a_nested_agent_bundle_manifest_maps_to_the_bundle_and_its_state_to_evidence() {
    let env = Env::new();
    env.init();
    let dir = env.path().join("bundle");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(
        dir.join("manifest.json"),
        r#"{"handoff_id": "h-42", "source": {"harness": "claude-code"},
            "target_harness": "codex", "capture": {"status": "partial"},
            "created_at": "2024-07-10T09:30:12Z"}"#,
    )
    .expect("write");
    fs::write(
        dir.join("handoff.md"),
        "# Handoff\n\n## Objective\nShip the exporter.\n\n## Next Steps\n1. Test it.\n",
    )
    .expect("write");
    fs::write(
        dir.join("state.json"),
        r#"{"git": {"branch": "feat/export", "head": "abc1234", "dirty": ["src/a.rs"]}}"#,
    )
    .expect("write");
    json_ok(&env, &["import-handoff", &s(&dir)]);
    let show = json_ok(&env, &["show", "current"]);
    assert_eq!(
        (field(&show, "from"), field(&show, "to")),
        ("claude-code", "codex")
    );
    assert_eq!(
        field(&show, "summary"),
        "Ship the exporter.",
        "the Objective"
    );
    assert_eq!(meta(&show, "handoff.status"), "partial");
    assert_eq!(meta(&show, "handoff.partial"), "true");
    assert_eq!(meta(&show, "manifest.handoff_id"), "h-42");

    let repo = git_init(&env.path().join("repo"));
    commit(&repo, "f.txt", "f\n", "one");
    let resume = json_in(&env, &repo, &["resume"]);
    let ws = &resume["workspace"];
    assert_eq!(ws["captured_branch"], "feat/export", "{ws}");
    assert_eq!(ws["captured_uncommitted"], true, "{ws}");
    let text = kickoff_text(&resume);
    assert!(text.contains("Status: partial"), "{text}");
    // The imported briefing's sections are read even though it lacks baton's required ones.
    assert!(text.contains("## Next Steps\n1. Test it.\n"), "{text}");
    assert!(
        !text.contains("no workspace evidence in this handoff"),
        "{text}"
    );

    // `partial: true` beside a status: both shown, and a blocked status still leads.
    fs::write(
        dir.join("manifest.json"),
        r#"{"id": "h-43", "status": "blocked", "partial": true}"#,
    )
    .expect("write");
    fs::write(
        dir.join("handoff.md"),
        "## Objective\nShip it.\n\n## Blockers\nNo credentials.\n",
    )
    .expect("write");
    json_ok(&env, &["import-handoff", &s(&dir)]);
    let text = kickoff_text(&json_in(&env, &repo, &["resume"]));
    assert!(
        text.contains("Status: blocked (partial capture)\n"),
        "{text}"
    );
    assert!(text.contains("## Blockers\nNo credentials.\n"), "{text}");
}

/// (from, to, status, created, handoff.md body without any frontmatter) of each bundle of
/// a store's first-parent history, oldest first.
fn chain_summary(env: &Env) -> Vec<(String, String, String, String, String)> {
    let mut out = Vec::new();
    let mut rev = json_ok(env, &["show", "current"])["id"]
        .as_str()
        .map(str::to_string);
    while let Some(id) = rev {
        let show = json_ok(env, &["show", &id]);
        let text = cat(env, &format!("{id}:handoff.md"));
        let body = match text
            .strip_prefix("---\n")
            .and_then(|t| t.split_once("\n---\n"))
        {
            Some((_, rest)) => rest.trim_start_matches('\n').to_string(),
            None => text,
        };
        out.push((
            field(&show, "from").to_string(),
            field(&show, "to").to_string(),
            meta(&show, "handoff.status").to_string(),
            field(&show, "created").to_string(),
            body,
        ));
        rev = show["parents"][0].as_str().map(str::to_string);
    }
    out.reverse();
    out
}

#[test]
fn export_handoff_round_trips_through_import() {
    for (rel, format, length) in [("prowl", "prowl", 3), ("frontmatter", "frontmatter", 3)] {
        let (env, _, _) = import_fixture(rel);
        let before = chain_summary(&env);
        assert_eq!(before.len(), length, "{rel}");
        let dir = env.path().join(format!("out-{format}"));
        let out = json_ok(
            &env,
            &[
                "export-handoff",
                "current",
                "--format",
                format,
                &s(&dir),
                "--history",
            ],
        );
        assert_eq!(
            out["bundles"].as_array().map(Vec::len),
            Some(length),
            "{out}"
        );
        let fresh = Env::new();
        fresh.init();
        json_ok(&fresh, &["import-handoff", &s(&dir)]);
        assert_eq!(chain_summary(&fresh), before, "{rel} as {format}");

        // Without --history: the one bundle.
        let one = env.path().join(format!("one-{format}"));
        let out = json_ok(
            &env,
            &["export-handoff", "current", "--format", format, &s(&one)],
        );
        assert_eq!(out["bundles"].as_array().map(Vec::len), Some(1), "{out}");
        // A non-empty directory is refused, and left as it was.
        let again = baton_in(
            &env,
            env.path(),
            &["export-handoff", "current", "--format", format, &s(&one)],
        );
        assert_eq!(code(&again), 2, "{}", stderr(&again));
        assert!(
            stderr(&again).contains("directory is not empty"),
            "{}",
            stderr(&again)
        );
    }
    // The blocked status survives the frontmatter round trip.
    let (env, _, _) = import_fixture("frontmatter");
    assert_eq!(
        chain_summary(&env).last().map(|c| c.2.as_str()),
        Some("blocked")
    );
}
