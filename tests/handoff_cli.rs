//! Handoffs through the real binary: `save --brief` against real git repositories
//! (staged, unstaged, untracked and conflicted files; a workspace that must not change),
//! a save/push/clone/resume round trip across two stores with every HEAD relation,
//! secrets that must never reach the store, invalid briefings, kickoff budget snapshots,
//! transcript search pages, and `import-handoff` of every fixture format.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::SystemTime;

use baton::handoff::secrets::KINDS;
use common::{Env, snapshot_files};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Helpers: git
// ---------------------------------------------------------------------------------------

/// A git command for test setup, isolated from the user's and the system's configuration.
fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args([
        "-c",
        "user.name=Test Author",
        "-c",
        "user.email=test@example.com",
        "-c",
        "init.defaultBranch=main",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "tag.gpgsign=false",
        "-c",
        "advice.detachedHead=false",
        "-c",
        "core.autocrlf=false",
        "-c",
        "protocol.file.allow=always",
        "-c",
        "merge.conflictStyle=merge",
    ]);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_COMMON_DIR",
    ] {
        cmd.env_remove(var);
    }
    cmd.args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C");
    cmd
}

/// Run git and require success; returns trimmed stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir, args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

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
        assert!(
            after[path] == *state,
            "{what}: {} changed",
            path.display()
        );
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
        if bytes == b"<dir>" && fs::symlink_metadata(store.join(&rel)).expect("meta").is_dir() {
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

const SKELETON_LINES: [&str; 4] = ["# Handoff", "## Objective", "## Current State", "## Next Steps"];

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
    assert_eq!(fs::read(&index).expect("index"), index_before, ".git/index");
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
    assert_eq!(cat(&env, "current:handoff.md"), normalized_briefing(objective));
    assert_eq!(cat(&env, "current:attachments/notes.md"), "attached notes\n");

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
    assert_eq!((g["ahead"].clone(), g["behind"].clone()), (json!(1), json!(1)));
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
    assert!(staged.contains("diff --git a/staged.txt b/staged.txt"), "{staged}");
    assert!(staged.contains("+staged content"), "{staged}");
    assert!(staged.contains("+clean"), "{staged}");
    assert!(!staged.contains("tracked changed"), "{staged}");
    assert!(unstaged.contains("diff --git a/tracked.txt b/tracked.txt"), "{unstaged}");
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
        assert!(context.contains(&line), "context.md lacks {line:?}:\n{context}");
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
    assert_eq!(fs::read(&index).expect("index"), index_before, ".git/index");
    assert_same_dir_state(&before, &dir_state(&work), "after resume");
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
    assert!(files.contains_key("attachments/patches/staged.patch"), "{files:?}");
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
        baton_in(&a, &w, &["save", "--brief", &s(&brief), "--from", "a", "--to", "b"]),
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
    ok(baton_in(&b, b.path(), &["clone", &s(&remote), &s(&store_b)]), "clone");
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
        (v["workspace"]["commits_ahead"].clone(), v["workspace"]["commits_behind"].clone()),
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
        (v["workspace"]["commits_ahead"].clone(), v["workspace"]["commits_behind"].clone()),
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
