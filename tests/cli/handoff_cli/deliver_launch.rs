//! Handoff CLI: `baton resume --launch claude|codex` with a stand-in harness (a shell
//! script that records its working directory and arguments, and exits 7): the prompt as
//! one argument, the workspace as its directory, its exit status as baton's, the program
//! from PATH or the override, and every refusal before anything starts.

use super::*;

/// A stand-in harness `name` in a new directory of `env`: it writes its directory, its
/// argument count and its first argument beside itself, then exits 7.
fn standin(env: &Env, dir: &str, name: &str) -> PathBuf {
    let bin = env.path().join(dir);
    fs::create_dir_all(&bin).expect("mkdir");
    let script = format!(
        "#!/bin/sh\nd='{}'\npwd -P > \"$d/cwd\"\necho $# > \"$d/argc\"\nprintf %s \"$1\" > \"$d/arg1\"\nexit 7\n",
        s(&bin)
    );
    let path = bin.join(name);
    fs::write(&path, script).expect("write stand-in");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    bin
}

fn with_path(bin: &Path) -> String {
    format!("{}:{}", s(bin), std::env::var("PATH").unwrap_or_default())
}

/// A workspace (a git repository) with a saved handoff; its id.
fn handoff(env: &Env) -> (PathBuf, String) {
    env.init();
    let ws = git_init(&env.path().join("ws"));
    commit(&ws, "a.txt", "a\n", "one");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let id = ok(baton_in(env, &ws, &["save", "--brief", &s(&brief)]), "save")
        .trim()
        .to_string();
    (ws, id)
}

#[test]
fn launch_runs_the_harness_in_the_workspace_with_the_prompt_as_argv() {
    let env = Env::new();
    let (ws, id) = handoff(&env);
    let prompt = json_in(&env, &ws, &["resume"])["prompt"]
        .as_str()
        .expect("prompt")
        .to_string();
    let bin = standin(&env, "bin", "claude");
    // Run from elsewhere, naming the workspace: the harness starts there.
    let run = env
        .cmd()
        .current_dir(env.path())
        .env("PATH", with_path(&bin))
        .args(["resume", "--workspace", &s(&ws), "--launch", "claude"])
        .output()
        .expect("run baton");
    assert_eq!(code(&run), 7, "the harness's exit status: {}", stderr(&run));
    assert_eq!(stdout(&run), "", "the harness owns stdout");
    assert!(
        stderr(&run).ends_with(&format!(
            "launching claude in {} with the kickoff of {}\n",
            canonical(&ws),
            &id[..12]
        )),
        "{}",
        stderr(&run)
    );
    let read = |f: &str| fs::read_to_string(bin.join(f)).expect("stand-in output");
    assert_eq!(read("cwd").trim_end(), canonical(&ws));
    assert_eq!(
        read("argc").trim_end(),
        "1",
        "one argument, never split by a shell"
    );
    assert_eq!(read("arg1"), prompt);

    // BATON_CODEX_BIN names the program; -q keeps stderr quiet.
    let other = standin(&env, "elsewhere", "my-codex");
    let run = env
        .cmd()
        .current_dir(&ws)
        .env("BATON_CODEX_BIN", other.join("my-codex"))
        .args(["-q", "resume", "--launch", "codex"])
        .output()
        .expect("run baton");
    assert_eq!(code(&run), 7, "{}", stderr(&run));
    assert_eq!(stderr(&run), "");
    assert_eq!(fs::read_to_string(other.join("arg1")).expect("ran"), prompt);
}

#[test]
fn launch_refusals_come_before_anything_starts() {
    let env = Env::new();
    let (ws, _) = handoff(&env);
    // Not on PATH: not found, naming the override.
    let empty = env.path().join("empty-bin");
    fs::create_dir_all(&empty).expect("mkdir");
    let run = env
        .cmd()
        .current_dir(&ws)
        .env("PATH", s(&empty))
        .args(["resume", "--launch", "claude"])
        .output()
        .expect("run baton");
    assert_eq!(code(&run), 3, "{}", stderr(&run));
    assert_eq!(
        stderr(&run),
        "error: claude is not on PATH: --launch claude runs it; install claude, or set \
         BATON_CLAUDE_BIN to the program to run\n"
    );
    // An override that names nothing.
    let run = env
        .cmd()
        .current_dir(&ws)
        .env("BATON_CODEX_BIN", "/no/such/codex")
        .args(["resume", "--launch", "codex"])
        .output()
        .expect("run baton");
    assert_eq!(code(&run), 3, "{}", stderr(&run));
    assert!(
        stderr(&run).starts_with("error: BATON_CODEX_BIN names /no/such/codex, which is not"),
        "{}",
        stderr(&run)
    );
    // --json: refused (the harness would own stdout), as one JSON document.
    let bin = standin(&env, "bin", "claude");
    let path = with_path(&bin);
    let run = env
        .cmd()
        .current_dir(&ws)
        .env("PATH", &path)
        .args(["resume", "--json", "--launch", "claude"])
        .output()
        .expect("run baton");
    assert_eq!(code(&run), 2);
    assert_eq!(doc(&run)["error"]["code"], "usage");
    // --launch and --deliver together, or --harness without --deliver: clap refuses.
    for args in [
        &["resume", "--launch", "claude", "--deliver", "tmux:%1"][..],
        &["resume", "--harness", "claude"][..],
    ] {
        let run = baton_in(&env, &ws, args);
        assert_eq!(code(&run), 2, "{args:?}: {}", stderr(&run));
    }
    // --require-same-repo in an unrelated repository: refused before the launch.
    let other = git_init(&env.path().join("other"));
    commit(&other, "x.txt", "x\n", "unrelated");
    let run = env
        .cmd()
        .current_dir(&other)
        .env("PATH", &path)
        .args(["resume", "--require-same-repo", "--launch", "claude"])
        .output()
        .expect("run baton");
    assert_eq!(code(&run), 5, "{}", stderr(&run));
    assert!(!bin.join("arg1").exists(), "the harness never ran");
}

#[test]
fn launch_after_a_pull_resumes_a_clone() {
    let a = Env::new();
    let (ws, id) = handoff(&a);
    let remote = a.path().join("remote-store");
    a.ok(&["target", "add", "r", &s(&remote)]);
    json_ok(&a, &["push"]);
    let b = Env::new();
    ok(baton_in(&b, b.path(), &["clone", &s(&remote)]), "clone");
    let bin = standin(&b, "bin", "claude");
    let run = b
        .cmd()
        .env("PATH", with_path(&bin))
        .args([
            "resume",
            "origin",
            "--workspace",
            &s(&ws),
            "--launch",
            "claude",
        ])
        .output()
        .expect("run baton");
    assert_eq!(code(&run), 7, "{}", stderr(&run));
    let arg = fs::read_to_string(bin.join("arg1")).expect("ran");
    assert!(arg.contains(&format!("# Handoff {}", &id[..12])), "{arg}");
    assert!(
        arg.contains(&format!("Open workspace {}", canonical(&ws))),
        "{arg}"
    );
}
