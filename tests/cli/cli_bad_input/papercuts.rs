//! Bad input a new user met first (issue 33): each refusal names the problem and the fix.

use super::*;

/// `populated`, with a target `devbox` (a local path that does not exist yet).
fn with_devbox() -> Env {
    let env = populated();
    let remote = env.path().join("remote-store");
    env.ok(&["target", "add", "devbox", remote.to_str().unwrap()]);
    env
}

#[test]
fn handoff_to_a_mistyped_target_saves_nothing_and_suggests_the_name() {
    let env = with_devbox();
    env.write_tree("ws", &[("brief.md", b"# Objective\nShip it\n")]);
    let before = env.ok(&["log"]);
    refuse(
        &env,
        &[
            "handoff",
            "--to",
            "codex",
            "--brief",
            "ws/brief.md",
            "--workspace",
            "ws",
            "--push",
            "devbx",
        ],
        3,
        "not_found",
        "no target named 'devbx'",
    );
    assert_eq!(env.ok(&["log"]), before, "nothing was saved");
    let (_, doc) = env.json(&[
        "handoff",
        "--to",
        "codex",
        "--no-brief",
        "--workspace",
        "ws",
        "--push",
        "devbx",
    ]);
    let hint = doc["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("did you mean 'devbox'?"), "{doc}");
    // A name nothing is close to gets no guess.
    let (_, doc) = env.json(&["push", "elsewhere"]);
    let hint = doc["error"]["hint"].as_str().unwrap();
    assert!(!hint.contains("did you mean"), "{doc}");
}

#[test]
fn resume_and_push_of_a_name_that_is_neither_target_nor_bundle_say_the_same() {
    let env = with_devbox();
    for command in ["resume", "push"] {
        refuse(
            &env,
            &[command, "nosuch"],
            3,
            "not_found",
            "no target or bundle named 'nosuch'",
        );
        let (_, doc) = env.json(&[command, "devbx"]);
        assert!(
            doc["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("did you mean 'devbox'?"),
            "{command}: {doc}"
        );
    }
    // What is not a name keeps its own, more precise, refusal.
    refuse(&env, &["resume", "current~9"], 3, "not_found", "goes past");
    refuse(&env, &["push", "current~9"], 3, "not_found", "goes past");
}

#[test]
fn a_missing_argument_is_named_in_the_json_message() {
    let env = populated();
    let (code, doc) = env.json(&["diff", "current"]);
    assert_eq!(code, 2, "{doc}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("not provided") && message.contains("<NEW>"),
        "{doc}"
    );
    assert!(!message.contains('\n'), "{doc}");
}

#[test]
fn a_brief_that_is_a_directory_is_a_usage_error_with_the_file_meant() {
    let env = populated();
    fs::create_dir_all(env.path().join("notes")).unwrap();
    refuse(
        &env,
        &["save", "d", "--brief", "notes"],
        2,
        "usage",
        "--brief notes is a directory",
    );
    let (_, doc) = env.json(&["save", "d", "--brief", "notes"]);
    let hint = doc["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("notes/handoff.md"), "{doc}");
}

#[test]
fn init_in_an_existing_store_says_so_even_with_encrypt() {
    let env = populated();
    refuse(&env, &["init"], 2, "usage", "already a baton store");
    refuse(
        &env,
        &["init", "--encrypt"],
        2,
        "usage",
        "already a baton store",
    );
}

#[test]
fn a_target_ref_of_no_configured_target_says_there_is_none() {
    let env = with_devbox();
    refuse(
        &env,
        &["reset", "targets/nosuch"],
        3,
        "not_found",
        "no target 'nosuch' is configured",
    );
    let (_, doc) = env.json(&["reset", "targets/nosuch"]);
    let hint = doc["error"]["hint"].as_str().unwrap();
    assert!(!hint.contains("push to"), "{doc}");
    // A configured target never synced yet: push or pull it first.
    let (_, doc) = env.json(&["reset", "targets/devbox"]);
    let hint = doc["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("baton pull devbox"), "{doc}");
}

#[test]
fn cat_of_a_path_not_in_the_bundle_says_how_to_list_it() {
    let env = populated();
    let (code, doc) = env.json(&["cat", "current:nope"]);
    assert_eq!(code, 3, "{doc}");
    let hint = doc["error"]["hint"].as_str().unwrap_or("");
    assert!(hint.contains("baton show current"), "{doc}");
}

#[test]
fn json_with_format_prompt_is_refused_not_ignored() {
    let env = populated();
    let before = state(&env.store());
    let (code, doc) = env.json(&["resume", "--format", "prompt"]);
    assert_eq!(code, 2, "{doc}");
    assert_eq!(doc["error"]["code"], "usage", "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--json and --format prompt"),
        "{doc}"
    );
    assert!(state(&env.store()) == before);
    // Without --json the prompt is printed, as asked.
    env.ok(&["resume", "--format", "prompt"]);
}

/// The commands `baton --help` lists, with their summaries.
fn commands(env: &Env) -> Vec<(String, String)> {
    let help = env.ok(&["--help"]);
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let (name, about) = l.trim().split_once(' ')?;
            Some((name.to_string(), about.trim().to_string()))
        })
        .filter(|(name, _)| name != "help")
        .collect()
}

#[test]
fn help_summaries_are_whole_and_show_no_empty_defaults() {
    let env = Env::new();
    let listed = commands(&env);
    assert!(listed.len() > 20, "{listed:?}");
    let merge = listed.iter().find(|(n, _)| n == "merge").expect("merge");
    assert!(!merge.1.ends_with("both"), "cut off: {merge:?}");
    for (name, about) in &listed {
        let help = env.ok(&["help", name]);
        // The summary is the whole first paragraph, not the start of a sentence.
        assert_eq!(help.lines().next(), Some(about.as_str()), "{name}");
        let last = about.rsplit(' ').next().unwrap_or("");
        assert!(
            !["a", "an", "the", "of", "and", "or", "both", "with", "to"].contains(&last)
                && !about.ends_with([':', ',']),
            "{name}: summary cut off: {about:?}"
        );
        assert!(!help.contains("[default: \"\"]"), "{name}:\n{help}");
    }
    // Every positional argument of these says what it is, on its line or (long help)
    // on the next.
    for name in ["diff", "verify", "search", "merge", "checkout"] {
        let help = env.ok(&["help", name]);
        let section: Vec<&str> = help
            .lines()
            .skip_while(|l| !l.starts_with("Arguments:"))
            .skip(1)
            .take_while(|l| !l.starts_with("Options:"))
            .collect();
        for (i, line) in section.iter().enumerate() {
            let Some(arg) = line
                .strip_prefix("  ")
                .filter(|a| a.starts_with(['<', '[']))
            else {
                continue;
            };
            let inline = arg
                .split_once(' ')
                .is_some_and(|(_, d)| !d.trim().is_empty());
            let below = section
                .get(i + 1)
                .is_some_and(|next| next.starts_with("    ") && !next.trim().is_empty());
            assert!(inline || below, "{name}: no description: {line:?}\n{help}");
        }
    }
}

#[test]
fn one_file_is_one_file() {
    let env = Env::new();
    env.init();
    env.write_tree("one", &[("handoff.md", b"# Objective\nShip it\n")]);
    env.save("one", &[]);
    let out = env.ok(&["checkout", "current", "co"]);
    assert!(out.contains("(1 file,"), "{out}");
    let out = env.ok(&["export-handoff", "current", "--format", "frontmatter", "ex"]);
    assert!(out.contains("Exported 1 handoff as"), "{out}");
    assert!(
        !out.contains(" 1 files") && !out.contains(" 1 handoffs"),
        "{out}"
    );
}

#[test]
fn skill_remove_of_an_edited_skill_says_force_removes_and_the_skill_advises_merge() {
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
    let (code, doc) = run(&["--json", "skill", "install", "--harness", "claude-code"]);
    assert_eq!(code, Some(0), "{doc}");
    let skill = claude.join("skills/baton/SKILL.md");
    let text = fs::read_to_string(&skill).unwrap();
    // The conflict advice is the README's: merge first, reset only to take theirs; and
    // S3 targets are among the places a handoff can go.
    let merge = text
        .find("baton merge targets/TARGET")
        .expect("merge advised");
    let reset = text
        .find("baton reset targets/TARGET")
        .expect("reset offered");
    assert!(merge < reset, "{text}");
    assert!(text.contains("s3://"), "{text}");
    fs::write(&skill, format!("{text}\nMy own note.\n")).unwrap();
    let (code, doc) = run(&["--json", "skill", "remove", "--harness", "claude-code"]);
    assert_eq!(code, Some(5), "{doc}");
    let hint = doc["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("--force to remove"), "{doc}");
    assert!(!hint.contains("replace"), "{doc}");
}

/// The first `sh` block of the README after `heading`.
fn readme_block(heading: &str) -> String {
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    readme
        .split(heading)
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .unwrap_or_else(|| panic!("the sh block after {heading}"))
        .to_string()
}

#[test]
fn the_readme_completions_step_works_in_a_fresh_home() {
    let install = readme_block("## Install");
    // The lines after `cargo install`, up to and with the completions one, as written.
    let steps: Vec<&str> = install
        .lines()
        .skip_while(|l| !l.starts_with("cargo install"))
        .skip(1)
        .take_while(|l| !l.starts_with("baton man"))
        .collect();
    assert!(
        steps
            .iter()
            .any(|l| l.starts_with("baton completions bash")),
        "{install}"
    );
    let home = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_baton")).parent().unwrap();
    let out = Command::new("sh")
        .args(["-ec", &steps.join("\n")])
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = home
        .path()
        .join(".local/share/bash-completion/completions/baton");
    assert!(fs::read_to_string(script).unwrap().contains("baton"));
}

#[test]
fn the_readme_encrypted_store_steps_save_a_workspace() {
    let block = readme_block("## Encrypted stores");
    // The key file the block writes, and its public key where the block says `age1...`.
    let key = block
        .split_whitespace()
        .skip_while(|w| *w != "age-keygen")
        .nth(2)
        .expect("age-keygen -o FILE");
    let script = block.replace(
        "--recipient age1...",
        &format!("--recipient \"$(age-keygen -y {key})\""),
    );
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    fs::create_dir(&ws).unwrap();
    fs::write(ws.join("notes.md"), "work in progress\n").unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_baton")).parent().unwrap();
    let out = Command::new("sh")
        .args(["-ec", &script])
        .current_dir(&ws)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .expect("run sh");
    // Was: age-keygen -o key.txt in the workspace, and the save refused it (exit 6).
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
